"""A tenant owns its data: deleting datasets and models (scoped to the tenant, idempotent, seen by
every API process's predict cache), importing a model exported by another deployment, and
filtering the job list. Over HTTP against real Redis, RQ workers and uvicorn processes."""

from __future__ import annotations

import base64
import io
import time
import zipfile

import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from algorithms.m3n import sample_switching_hmm
from core.keys import Keys
from service.model_import import DECODED_BYTES_PER_BODY_BYTE
from tests.conftest import TENANT_KEYS, TEST_MAX_BODY_BYTES
from tests.hardening import Deployment, SharedApi
from tests.helpers import run_job, wait_for_job

ACME = {"X-API-Key": TENANT_KEYS["acme"]}
GLOBEX = {"X-API-Key": TENANT_KEYS["globex"]}
X_TRAIN, Y_TRAIN = make_blobs(40, centers=[[0, 0], [4, 4]], cluster_std=0.8, random_state=0)


def call(method: str, url: str, headers: dict | None = None, **kwargs) -> httpx.Response:
    return httpx.request(method, url, headers=headers, timeout=60.0, **kwargs)


def tenant_job(url: str, headers: dict, seed: int = 0) -> dict:
    """A finished iterSVR job of the tenant, with its result."""
    X, _ = make_blobs(30, centers=2, random_state=seed)
    response = call("POST", f"{url}/v1/jobs", headers, json={
        "algorithm": {"name": "itersvr", "params": {"random_state": 0}},
        "data": {"X": X.tolist()}})
    assert response.status_code == 202, response.text
    job = wait_for_job(url, response.json()["id"], headers=headers)
    assert job["status"] == "succeeded", job
    return call("GET", f"{url}/v1/jobs/{job['id']}/result", headers).json()


# -- deleting datasets and models ----------------------------------------------------------------


def test_dataset_delete_is_the_owners_alone_and_removes_its_bytes(keyed_service_url, redis_url):
    url = keyed_service_url
    X, _ = make_blobs(25, centers=2, random_state=11)
    dataset_id = call("POST", f"{url}/v1/datasets", ACME, json={"X": X.tolist()}).json()["id"]
    # Another tenant's delete finds nothing and deletes nothing.
    assert call("DELETE", f"{url}/v1/datasets/{dataset_id}", GLOBEX).status_code == 404
    assert call("GET", f"{url}/v1/datasets/{dataset_id}", ACME).status_code == 200

    deleted = call("DELETE", f"{url}/v1/datasets/{dataset_id}", ACME)
    assert deleted.status_code == 204 and deleted.content == b""
    assert not Redis.from_url(redis_url).exists(Keys.dataset(dataset_id))
    assert call("GET", f"{url}/v1/datasets/{dataset_id}", ACME).status_code == 404
    again = call("DELETE", f"{url}/v1/datasets/{dataset_id}", ACME)
    assert again.status_code == 404 and dataset_id in again.json()["detail"]
    # A job can no longer be submitted on it.
    refused = call("POST", f"{url}/v1/jobs", ACME, json={
        "algorithm": {"name": "itersvr", "params": {}}, "data": {"dataset_id": dataset_id}})
    assert refused.status_code == 404, refused.text


def test_model_delete_is_seen_by_every_api_process_predict_cache(
        keyed_service_url, service_env, service_workers, tmp_path):
    other = SharedApi(tmp_path, service_env, service_workers,
                      {"MMC_API_KEYS": ",".join(f"{t}:{k}" for t, k in TENANT_KEYS.items())})
    try:
        model_id = tenant_job(keyed_service_url, ACME)["model_id"]
        points = {"X": X_TRAIN[:5].tolist()}
        for url in (keyed_service_url, other.url):  # both processes cache the model
            predicted = call("POST", f"{url}/v1/models/{model_id}/predict", ACME, json=points)
            assert predicted.status_code == 200, predicted.text
        assert call("DELETE", f"{keyed_service_url}/v1/models/{model_id}", GLOBEX
                    ).status_code == 404
        assert call("POST", f"{other.url}/v1/models/{model_id}/predict", ACME,
                    json=points).status_code == 200

        assert call("DELETE", f"{keyed_service_url}/v1/models/{model_id}", ACME
                    ).status_code == 204
        for url in (other.url, keyed_service_url):
            gone = call("POST", f"{url}/v1/models/{model_id}/predict", ACME, json=points)
            assert gone.status_code == 404, gone.text
            assert call("GET", f"{url}/v1/models/{model_id}", ACME).status_code == 404
            assert call("GET", f"{url}/v1/models/{model_id}/export", ACME).status_code == 404
        assert call("DELETE", f"{other.url}/v1/models/{model_id}", ACME).status_code == 404
    finally:
        other.close()


def test_deletes_are_counted_in_metrics_and_written_to_the_audit_log(keyed_service_url):
    def counted() -> float:
        text = call("GET", f"{keyed_service_url}/metrics").text
        line = [row for row in text.splitlines() if row.startswith(
            'mmc_lifecycle_total{action="deleted",kind="dataset"}')]
        return float(line[0].split()[-1]) if line else 0.0

    before = counted()
    X, _ = make_blobs(20, centers=2, random_state=12)
    dataset_id = call("POST", f"{keyed_service_url}/v1/datasets", GLOBEX,
                      json={"X": X.tolist()}).json()["id"]
    assert call("DELETE", f"{keyed_service_url}/v1/datasets/{dataset_id}", GLOBEX
                ).status_code == 204
    assert counted() == before + 1


# -- importing a model ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def second_deployment(tmp_path_factory):
    """Another deployment with its own Redis and an API, and no worker until a test adds one."""
    deployment = Deployment(tmp_path_factory.mktemp("second"), {}, workers=0)
    yield deployment
    deployment.close()


def _training_jobs() -> dict[str, dict]:
    sequences, _ = sample_switching_hmm(0.9, n_sequences=6, length=8, random_state=0)
    points = {"X": X_TRAIN.tolist()}
    two = {"n_clusters": 2, "random_state": 0}
    return {
        "itersvr": {"params": two, "data": points},
        "cpm3c": {"params": two, "data": points},
        "svc": {"params": {"n_clusters": 2}, "data": points},
        "gmmc": {"params": two, "data": points},
        "sdp_mmc": {"params": two, "data": points},
        "robust_svm": {"params": {"method": "ramp", "C": 1.0},
                       "data": {**points, "y": Y_TRAIN.tolist()}},
        "m3n": {"params": {"n_states": 2, "random_state": 0},
                "data": {"sequences": [s.tolist() for s in sequences]}},
    }


def _new_points(name: str) -> dict:
    """1,000 points (positions for m3n) the models have not seen."""
    rng = np.random.default_rng(7)
    if name == "m3n":
        return {"sequences": rng.integers(0, 2, size=(100, 10)).tolist()}
    return {"X": rng.uniform(-3, 7, size=(1000, 2)).tolist()}


@pytest.mark.parametrize("name", list(_training_jobs()))
def test_an_export_imported_into_another_deployment_predicts_the_same(
        service_url, second_deployment, name):
    job = _training_jobs()[name]
    result = run_job(service_url, {"algorithm": {"name": name, "params": job["params"]},
                                   "data": job["data"]}, timeout=300)
    exported = call("GET", f"{service_url}/v1/models/{result['model_id']}/export")
    assert exported.status_code == 200, exported.text

    imported = call("POST", f"{second_deployment.url}/v1/models", json=exported.json())
    assert imported.status_code == 201, imported.text
    model = imported.json()
    assert model["id"] != result["model_id"] and model["algorithm"] == name
    assert model["imported"] is True and model["job_id"] is None
    assert imported.headers["location"] == f"/v1/models/{model['id']}"

    points = _new_points(name)
    original = call("POST", f"{service_url}/v1/models/{result['model_id']}/predict", json=points)
    copy = call("POST", f"{second_deployment.url}/v1/models/{model['id']}/predict", json=points)
    assert original.status_code == copy.status_code == 200, (original.text, copy.text)
    assert copy.json()["labels"] == original.json()["labels"]
    assert copy.json()["decision_values"] == original.json()["decision_values"]
    if name != "m3n":  # a constant labelling would make the comparison empty
        assert len(set(np.asarray(original.json()["labels"]).ravel())) >= 2


@pytest.fixture(scope="module")
def export(service_url) -> dict:
    result = run_job(service_url, {"algorithm": {"name": "itersvr", "params": {
        "random_state": 0}}, "data": {"X": X_TRAIN.tolist()}})
    return call("GET", f"{service_url}/v1/models/{result['model_id']}/export").json()


def _npz_base64(**arrays) -> str:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return base64.b64encode(buffer.getvalue()).decode()


def _bomb() -> str:
    """A small archive whose one member unpacks past the bound of the test deployment
    (4 x its MMC_MAX_BODY_BYTES)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("X.npy", b"\0" * (DECODED_BYTES_PER_BODY_BYTE * TEST_MAX_BODY_BYTES
                                          + (1 << 20)))
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize("change, field, says", [
    (lambda e: {**e, "npz_base64": "not base64!"}, "body.npz_base64", "base64"),
    (lambda e: {**e, "npz_base64": base64.b64encode(b"plain bytes").decode()},
     "body.npz_base64", "not an .npz"),
    (lambda e: {**e, "npz_base64": _npz_base64(x=np.array([object()], dtype=object))},
     "body.npz_base64", "pickles"),
    (lambda e: {**e, "npz_base64": _npz_base64(x=np.array(["text"]))}, "body.npz_base64",
     "dtype"),
    (lambda e: {**e, "npz_base64": _npz_base64(x=np.array([np.nan]))}, "body.npz_base64",
     "NaN"),
    (lambda e: {**e, "meta": {**e["meta"], "estimator": "Pickle"}}, "body.meta.estimator",
     "is not one of"),
    (lambda e: {**e, "meta": {**e["meta"], "state": {}}}, "body.meta", "not a working itersvr"),
    (lambda e: {**e, "format": "other/1"}, "body.format", "differs"),
    (lambda e: {**e, "ttl_seconds": 10**9}, "body.ttl_seconds", "MMC_MODEL_TTL_SECONDS"),
    (lambda e: {**e, "extra": 1}, "body.extra", ""),
])
def test_an_import_that_is_not_a_working_model_is_a_422_naming_the_field(
        service_url, export, change, field, says):
    response = call("POST", f"{service_url}/v1/models", json=change(export))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert any(error["field"] == field for error in problem["errors"]), problem
    assert says in problem["detail"], problem


def test_an_archive_that_unpacks_past_its_bound_is_refused_unread(service_url, export):
    response = call("POST", f"{service_url}/v1/models", json={**export, "npz_base64": _bomb()})
    assert response.status_code == 422 and "decode to" in response.text, response.text


def test_an_import_belongs_to_its_importer_and_may_live_shorter(keyed_service_url, export):
    imported = call("POST", f"{keyed_service_url}/v1/models", ACME,
                    json={**export, "ttl_seconds": 600})
    assert imported.status_code == 201, imported.text
    model_id = imported.json()["id"]
    assert 590 <= imported.json()["expires_in_seconds"] <= 600
    assert call("GET", f"{keyed_service_url}/v1/models/{model_id}", GLOBEX).status_code == 404
    points = {"X": X_TRAIN[:3].tolist()}
    assert call("POST", f"{keyed_service_url}/v1/models/{model_id}/predict", GLOBEX,
                json=points).status_code == 404
    assert call("POST", f"{keyed_service_url}/v1/models/{model_id}/predict", ACME,
                json=points).status_code == 200


# -- a queued job whose dataset is deleted -------------------------------------------------------


def test_a_queued_job_whose_dataset_was_deleted_fails_saying_so(second_deployment):
    url = second_deployment.url
    X, _ = make_blobs(30, centers=2, random_state=13)
    dataset_id = call("POST", f"{url}/v1/datasets", json={"X": X.tolist()}).json()["id"]
    job = call("POST", f"{url}/v1/jobs", json={
        "algorithm": {"name": "itersvr", "params": {}}, "data": {"dataset_id": dataset_id}})
    assert job.status_code == 202, job.text
    assert call("DELETE", f"{url}/v1/datasets/{dataset_id}").status_code == 204
    assert call("GET", f"{url}/v1/jobs/{job.json()['id']}").json()["status"] == "queued"

    second_deployment.add_worker()  # nobody served this deployment's queues until now
    final = wait_for_job(url, job.json()["id"], timeout=180)
    assert final["status"] == "failed", final
    assert f"dataset {dataset_id} was deleted" in final["error"]["message"], final


# -- filtering the job list ----------------------------------------------------------------------


def test_job_list_filters_by_status_algorithm_and_creation_time(keyed_service_url):
    url = keyed_service_url
    headers = {"X-API-Key": TENANT_KEYS["globex"]}
    started = time.time()
    done = tenant_job(url, headers, seed=3)["job_id"]
    response = call("POST", f"{url}/v1/jobs", headers, json={
        "algorithm": {"name": "cpm3c", "params": {"n_clusters": 2}},
        "data": {"X": make_blobs(30, centers=2, random_state=4)[0].tolist()}})
    other = response.json()["id"]
    wait_for_job(url, other, headers=headers)

    def listed(**query) -> tuple[list[str], int]:
        page = call("GET", f"{url}/v1/jobs", headers, params=query)
        assert page.status_code == 200, page.text
        return [item["id"] for item in page.json()["items"]], page.json()["total"]

    ids, total = listed(algorithm="itersvr", limit=1000)
    assert done in ids and other not in ids and total == len(ids)
    ids, _ = listed(algorithm="cpm3c", status="succeeded,failed", limit=1000)
    assert other in ids and done not in ids
    ids, _ = listed(status=["queued", "running"], algorithm="itersvr")
    assert done not in ids
    ids, _ = listed(created_after=time.strftime("%Y-%m-%dT%H:%M:%S",
                                                time.gmtime(started - 1)), limit=1000)
    assert {done, other} <= set(ids)
    ids, total = listed(created_before=time.strftime("%Y-%m-%dT%H:%M:%S",
                                                     time.gmtime(started - 3600)))
    assert done not in ids and other not in ids
    # Pages of a filtered list: one item each, newest first, together the whole list.
    first, total = listed(status="succeeded", limit=1, offset=0)
    second, _ = listed(status="succeeded", limit=1, offset=1)
    assert total >= 2 and len(first) == len(second) == 1 and first != second

    for query, field in (({"status": "done"}, "query.status"),
                         ({"algorithm": "kmeans"}, "query.algorithm"),
                         ({"created_after": "yesterday"}, "created_after")):
        refused = call("GET", f"{url}/v1/jobs", headers, params=query)
        assert refused.status_code == 422, refused.text
        assert field in refused.text
