"""Tenancy and limits over real HTTP: API keys bound to tenants, namespaced datasets, jobs and
models, per-tenant cap on active jobs, body size, points x features and per-algorithm max_n."""

from __future__ import annotations

import hmac
import logging
import time

import httpx
import numpy as np
import pytest
from pydantic import ValidationError
from redis import Redis
from sklearn.datasets import make_blobs

from core.settings import Settings
from service import deps
from service.app import create_app
from tests.hardening import SharedApi

KEYS = {"acme": "acme-secret-key-1", "globex": "globex-secret-key-2"}
CAP = 2
BODY_LIMIT = 200_000
CELLS = 5_000
FINAL = ("succeeded", "failed", "canceled")


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


@pytest.fixture(scope="module")
def tenants(service_env, service_workers, tmp_path_factory):
    # Tenants of their own (the console's acme and globex share the session's store).
    deployment = SharedApi(tmp_path_factory.mktemp("tenancy"), service_env, service_workers, {
        "MMC_API_KEYS": ",".join(f"tenancy-{t}:{k}" for t, k in KEYS.items()),
        "MMC_MAX_ACTIVE_JOBS_PER_TENANT": str(CAP),
        "MMC_MAX_BODY_BYTES": str(BODY_LIMIT),
        "MMC_MAX_POINTS_X_FEATURES": str(CELLS),
    })
    yield deployment
    deployment.close()


def blobs(n: int = 30, seed: int = 0) -> list[list[float]]:
    return make_blobs(n_samples=n, centers=2, random_state=seed)[0].tolist()


def job(X, **params) -> dict:
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0, **params}},
            "data": {"X": X}}


def submit(url: str, tenant: str, payload: dict) -> dict:
    response = httpx.post(f"{url}/v1/jobs", json=payload, headers=auth(tenant), timeout=30)
    assert response.status_code == 202, response.text
    return response.json()


def wait(url: str, tenant: str, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        record = httpx.get(f"{url}/v1/jobs/{job_id}", headers=auth(tenant)).json()
        if record["status"] in FINAL:
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.05)


def problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()


# -- authentication --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/algorithms", "/v1/jobs/abc",
                                  "/v1/models/abc", "/v1/datasets/abc"])
def test_missing_or_wrong_key_is_401_on_every_v1_route(tenants, path):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "acme"},
                    {"Authorization": f"Basic {KEYS['acme']}"}):
        response = httpx.get(f"{tenants.url}{path}", headers=headers)
        problem(response, 401)
        assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{tenants.url}/v1/algorithms", headers=auth("acme")).status_code == 200
    assert httpx.get(f"{tenants.url}/v1/algorithms",
                     headers={"X-API-Key": KEYS["globex"]}).status_code == 200


def test_keys_are_held_hashed_and_every_digest_is_compared(monkeypatch):
    configured = "a:first-key,b:second-key,c:third-key"
    held = deps.hashed_keys(configured)
    assert [tenant for _, tenant in held] == ["a", "b", "c"]
    assert all(isinstance(d, bytes) and len(d) == 32 for d, _ in held)
    assert not any(b"key" in d for d, _ in held)
    calls = []
    real = hmac.compare_digest

    def counting(a, b):
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(deps.hmac, "compare_digest", counting)
    assert deps.tenant_for_key("first-key", held) == "a"  # a match does not stop the loop
    assert len(calls) == 3
    assert deps.tenant_for_key("other", held) is None


def test_readiness_reports_authentication_mode(tenants, service_url):
    assert httpx.get(f"{tenants.url}/readyz").json()["auth"] == "api_keys"
    open_mode = httpx.get(f"{service_url}/readyz").json()
    assert open_mode["auth"] == "open" and "open" in " ".join(open_mode["warnings"])


def test_open_mode_is_logged_at_startup(caplog, redis_url):
    with caplog.at_level(logging.WARNING, logger="service"):
        create_app(Settings(redis_url=redis_url, api_keys=""), redis=Redis.from_url(redis_url))
    assert "OPEN" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="service"):
        create_app(Settings(redis_url=redis_url, api_keys="t:k"), redis=Redis.from_url(redis_url))
    assert "OPEN" not in caplog.text


# -- namespacing -----------------------------------------------------------------------------------


def test_another_tenants_job_model_and_dataset_answer_404(tenants):
    url = tenants.url
    X = blobs(seed=1)
    created = submit(url, "acme", job(X))
    final = wait(url, "acme", created["id"])
    assert final["status"] == "succeeded", final
    model_id = final["model_id"]
    dataset = httpx.post(f"{url}/v1/datasets", json={"X": X}, headers=auth("acme")).json()

    for method, path, body in [
        ("GET", f"/v1/jobs/{created['id']}", None),
        ("GET", f"/v1/jobs/{created['id']}/result", None),
        ("DELETE", f"/v1/jobs/{created['id']}", None),
        ("GET", f"/v1/models/{model_id}", None),
        ("GET", f"/v1/models/{model_id}/export", None),
        ("POST", f"/v1/models/{model_id}/predict", {"X": X[:3]}),
        ("GET", f"/v1/datasets/{dataset['id']}", None),
    ]:
        theirs = httpx.request(method, f"{url}{path}", json=body, headers=auth("globex"),
                               timeout=60)  # a first predict loads the estimator modules
        problem(theirs, 404)
        mine = httpx.request(method, f"{url}{path}", json=body, headers=auth("acme"))
        assert mine.status_code in (200, 409), (path, mine.text)  # 409: DELETE of a finished job

    using = httpx.post(f"{url}/v1/jobs", headers=auth("globex"), json={
        "algorithm": {"name": "itersvr"}, "data": {"dataset_id": dataset["id"]}})
    problem(using, 404)
    same_data = httpx.post(f"{url}/v1/datasets", json={"X": X}, headers=auth("globex")).json()
    assert same_data["id"] != dataset["id"]
    listed = httpx.get(f"{url}/v1/jobs", headers=auth("globex")).json()
    assert created["id"] not in {item["id"] for item in listed["items"]}
    assert created["id"] in {item["id"] for item in
                             httpx.get(f"{url}/v1/jobs", headers=auth("acme")).json()["items"]}


# -- limits ----------------------------------------------------------------------------------------


def long_job(seed: int) -> dict:
    # 900 x 5 = 4,500 values (under the cap of 5,000) and enough restarts to run for a while.
    X = np.random.default_rng(seed).normal(size=(900, 5)).tolist()
    return job(X, n_init=100, max_alternations=1000, random_state=seed)


def test_per_tenant_cap_on_active_jobs_is_429_with_retry_after(tenants):
    url = tenants.url
    active = [submit(url, "acme", long_job(seed)) for seed in range(CAP)]
    refused = httpx.post(f"{url}/v1/jobs", json=job(blobs(seed=2)), headers=auth("acme"))
    body = problem(refused, 429)
    assert int(refused.headers["retry-after"]) >= 1
    assert "MMC_MAX_ACTIVE_JOBS_PER_TENANT" in body["detail"]
    # Another tenant is not affected by acme's jobs.
    other = submit(url, "globex", job(blobs(seed=3)))
    for item in active:
        httpx.delete(f"{url}/v1/jobs/{item['id']}", headers=auth("acme"))
    # The canceled jobs left the count: acme may submit again.
    again = submit(url, "acme", job(blobs(seed=4)))
    assert wait(url, "acme", again["id"])["status"] == "succeeded"
    assert wait(url, "globex", other["id"])["status"] == "succeeded"


def test_body_over_the_limit_is_413(tenants):
    big = np.zeros((BODY_LIMIT // 8, 2)).tolist()
    response = httpx.post(f"{tenants.url}/v1/jobs", json=job(big), headers=auth("acme"))
    assert "MMC_MAX_BODY_BYTES" in problem(response, 413)["detail"]
    upload = httpx.post(f"{tenants.url}/v1/datasets", content=b"1,2\n" * (BODY_LIMIT // 4 + 1),
                        headers={**auth("acme"), "content-type": "text/csv"})
    problem(upload, 413)


def test_points_times_features_over_the_limit_is_422(tenants):
    X = np.random.default_rng(0).normal(size=(CELLS // 4 + 1, 4)).round(3).tolist()
    body = problem(httpx.post(f"{tenants.url}/v1/jobs", json=job(X), headers=auth("acme")), 422)
    assert body["errors"][0]["type"] == "too_many_values"
    assert "MMC_MAX_POINTS_X_FEATURES" in body["detail"]
    upload = httpx.post(f"{tenants.url}/v1/datasets", json={"X": X}, headers=auth("acme"))
    assert problem(upload, 422)["errors"][0]["type"] == "too_many_values"


def test_per_algorithm_max_n_is_422_naming_the_limit(tenants):
    from algorithms.registry import REGISTRY

    # The unsupervised vector algorithm with the smallest limit at its default parameters, or
    # fitting every point (exact_max_n=null, where a method samples above it), so the data stays
    # under the values cap whatever the registry says today.
    def limits():
        for spec in REGISTRY.values():
            if spec.input_kind != "vectors" or spec.labels == "required":
                continue
            for raw in ({}, {"exact_max_n": None}):
                try:
                    yield spec.max_n_for(spec.parse_params(raw)), spec.name, raw
                except ValidationError:  # no exact_max_n, or not nullable
                    continue

    limit, name, params = min(limits(), key=lambda case: case[:2])
    n = limit + 1
    assert n <= CELLS, "no algorithm has a max_n under the values cap of this deployment"
    X = (np.arange(n, dtype=float) % 7).reshape(-1, 1).tolist()
    payload = {"algorithm": {"name": name, "params": params}, "data": {"X": X}}
    body = problem(httpx.post(f"{tenants.url}/v1/jobs", json=payload, headers=auth("acme")), 422)
    assert body["errors"][0]["type"] == "too_many_points"
    assert f"max_n={limit}" in body["detail"]
