"""Faults survived, on a private deployment with short windows (heartbeat 2 s, job timeout cap
4 s): a job over its timeout, a killed work horse and a killed worker (retried once, then failed
with a reason), Redis down (503 with Retry-After, then recovery) and Redis restarted from its
append-only file with finished and queued jobs (nothing lost)."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from tests.hardening import Deployment

HEARTBEAT = 2
TIMEOUT_CAP = 4
FINAL = ("succeeded", "failed", "canceled")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    deployment = Deployment(tmp_path_factory.mktemp("faults"), {
        "MMC_WORKER_HEARTBEAT_SECONDS": str(HEARTBEAT),
        "MMC_JOB_TIMEOUT_CAP_SECONDS": str(TIMEOUT_CAP),
        "MMC_RETRY_LOST_JOBS": "1",
        "MMC_RETRY_AFTER_SECONDS": "2",
    })
    yield deployment
    deployment.close()


def tiny(seed: int) -> dict:
    X, _ = make_blobs(n_samples=30, centers=2, random_state=seed)
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
            "data": {"X": X.tolist()}}


def long_running(seed: int) -> dict:
    X = np.random.default_rng(seed).normal(size=(1500, 5))
    return {"algorithm": {"name": "itersvr",
                          "params": {"n_init": 100, "max_alternations": 1000,
                                     "random_state": seed}},
            "data": {"X": X.tolist()}}


def submit(url: str, payload: dict) -> str:
    response = httpx.post(f"{url}/v1/jobs", json=payload, timeout=30)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def get(url: str, job_id: str) -> dict:
    return httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10).json()


def wait_for(url: str, job_id: str, statuses, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = get(url, job_id)
        if job["status"] in statuses:
            return job
        assert time.monotonic() < deadline, f"still {job['status']}: {job}"
        time.sleep(0.05)


def running_attempt(deployment: Deployment, job_id: str, attempt: int) -> dict:
    """Wait until attempt ``attempt`` of the job runs; returns the raw record (with the pid)."""
    redis = Redis.from_url(deployment.redis_url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        raw = redis.hgetall(f"mmc:job:{job_id}")
        record = {k.decode(): json.loads(v) for k, v in raw.items()}
        if record["status"] == "running" and record.get("attempt") == attempt:
            return record
        time.sleep(0.02)
    raise AssertionError(f"attempt {attempt} of {job_id} never ran: {record}")


def test_job_over_its_timeout_ends_failed_timed_out(deployment):
    job_id = submit(deployment.url, long_running(1))
    final = wait_for(deployment.url, job_id, FINAL, timeout=TIMEOUT_CAP + 30)
    assert final["status"] == "failed", final
    assert "timed out" in final["error"]["message"]


def test_killed_work_horse_is_retried_once_then_fails_with_a_reason(deployment):
    job_id = submit(deployment.url, long_running(2))
    os.kill(running_attempt(deployment, job_id, 1)["worker"]["pid"], signal.SIGKILL)
    os.kill(running_attempt(deployment, job_id, 2)["worker"]["pid"], signal.SIGKILL)
    final = wait_for(deployment.url, job_id, FINAL)
    assert final["status"] == "failed", final
    assert "killed (signal 9)" in final["error"]["message"]
    # The same worker serves the next job.
    assert wait_for(deployment.url, submit(deployment.url, tiny(3)), FINAL)["status"] == \
        "succeeded"


def test_killed_worker_fails_its_job_within_the_heartbeat_window(deployment):
    job_id = submit(deployment.url, long_running(4))
    horse = running_attempt(deployment, job_id, 1)["worker"]["pid"]
    for worker in list(deployment.workers):
        deployment.kill_worker(worker, horse)  # kill -9 of the worker and its work horse
    requeued = wait_for(deployment.url, job_id, ("queued",), timeout=HEARTBEAT + 10)
    assert "heartbeats" in requeued["progress"]["message"]
    deployment.add_worker()
    horse = running_attempt(deployment, job_id, 2)["worker"]["pid"]
    deployment.kill_worker(deployment.workers[-1], horse)
    killed_at = time.monotonic()
    final = wait_for(deployment.url, job_id, FINAL, timeout=HEARTBEAT + 10)
    detected_after = time.monotonic() - killed_at
    assert final["status"] == "failed", final
    assert "heartbeats" in final["error"]["message"]
    assert detected_after < HEARTBEAT + 5
    # A new worker serves the next job.
    deployment.add_worker()
    assert wait_for(deployment.url, submit(deployment.url, tiny(5)), FINAL)["status"] == \
        "succeeded"


def test_redis_down_is_503_with_retry_after_and_recovers(deployment):
    job_id = submit(deployment.url, tiny(6))
    wait_for(deployment.url, job_id, FINAL)
    deployment.stop_redis()
    try:
        for method, path, body in [("GET", f"/v1/jobs/{job_id}", None),
                                   ("POST", "/v1/jobs", tiny(7)), ("GET", "/v1/jobs", None),
                                   ("GET", "/readyz", None)]:
            response = httpx.request(method, f"{deployment.url}{path}", json=body, timeout=30)
            assert response.status_code == 503, (path, response.text)
            assert response.headers["retry-after"] == "2"
            assert response.headers["content-type"].startswith("application/problem+json")
    finally:
        deployment.start_redis()
    deadline = time.monotonic() + 15
    while httpx.get(f"{deployment.url}/v1/jobs/{job_id}").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert get(deployment.url, job_id)["status"] == "succeeded"
    # Workers reconnect too (or a replacement is started if one gave up).
    if all(worker.poll() is not None for worker in deployment.workers):
        deployment.add_worker()
    assert wait_for(deployment.url, submit(deployment.url, tiny(8)), FINAL)["status"] == \
        "succeeded"


def test_redis_restart_keeps_finished_and_queued_jobs(deployment):
    finished = [submit(deployment.url, tiny(seed)) for seed in range(10, 13)]
    for job_id in finished:
        assert wait_for(deployment.url, job_id, FINAL)["status"] == "succeeded"
    for worker in list(deployment.workers):
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(30)
    queued = [submit(deployment.url, tiny(seed)) for seed in range(20, 23)]
    assert all(get(deployment.url, job_id)["status"] == "queued" for job_id in queued)

    deployment.stop_redis()
    deployment.start_redis()  # replays the append-only file
    for job_id in finished:
        response = httpx.get(f"{deployment.url}/v1/jobs/{job_id}/result", timeout=30)
        assert response.status_code == 200, response.text
        assert len(response.json()["labels"]) == 30
    assert all(get(deployment.url, job_id)["status"] == "queued" for job_id in queued)
    deployment.add_worker()
    for job_id in queued:
        assert wait_for(deployment.url, job_id, FINAL)["status"] == "succeeded"
