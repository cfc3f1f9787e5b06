"""Several API processes on one socket (``mmc serve --api-workers 2``, compose's default): every
piece of state lives in Redis, so whichever process answers, a client sees one service."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from tests.conftest import live_api
from tests.helpers import wait_for_job


@pytest.fixture(scope="module")
def two_process_url(service_env, service_workers, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("logs") / "api-2.log"
    with live_api(service_env, service_workers, log_path, workers=2, timeout=90) as url:
        yield url


def test_two_api_processes_serve_one_consistent_set_of_jobs_and_models(two_process_url):
    X, _ = make_blobs(60, centers=[[-3, 0], [3, 0]], random_state=0)
    payload = {"algorithm": {"name": "itersvr"}, "data": {"X": X.tolist()}}
    headers = {"Idempotency-Key": "two-processes-1"}
    # A fresh connection per request lets the kernel hand each one to either process.
    first = httpx.post(f"{two_process_url}/v1/jobs", json=payload, headers=headers, timeout=30)
    assert first.status_code == 202, first.text
    replays = [httpx.post(f"{two_process_url}/v1/jobs", json=payload, headers=headers, timeout=30)
               for _ in range(6)]
    assert {r.json()["id"] for r in replays} == {first.json()["id"]}

    job = wait_for_job(two_process_url, first.json()["id"])
    assert job["status"] == "succeeded"
    results = [httpx.get(f"{two_process_url}/v1/jobs/{job['id']}/result", timeout=30).json()
               for _ in range(6)]
    assert all(r == results[0] for r in results)
    labels = np.asarray(results[0]["labels"])

    model = f"{two_process_url}/v1/models/{results[0]['model_id']}/predict"
    predictions = [httpx.post(model, json={"X": X.tolist()}, timeout=30).json()["labels"]
                   for _ in range(6)]
    assert all(p == predictions[0] for p in predictions)
    assert np.mean(np.asarray(predictions[0]) == labels) >= 0.95
