"""Long polling: ``GET /v1/jobs/{id}?wait=S`` answers when the job's status changes, or after S.

A two-class SDP MMC job on 300 points with ``solver="scs"`` (one SCS solve of a 300 x 300 SDP,
about 30 s on the test machine; the default low-rank solver takes about 1 s) runs long enough to
watch it queued, running, and canceled from another request while a long poll waits. How quickly
the answer follows the change is measured by ``benchmarks/long_poll.py`` (tests assert no wall
times); here the answer must come before the wait runs out, which only a notified poll can do.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from sklearn.datasets import make_blobs

from tests.helpers import run_job, submit_job

LONG_JOB = {"algorithm": {"name": "sdp_mmc", "params": {"solver": "scs"}},
            "data": {"X": make_blobs(n_samples=300, centers=2, random_state=0)[0].tolist()}}


def poll(base_url: str, job_id: str, wait: float, until: str = "change") -> tuple[dict, float]:
    started = time.monotonic()
    response = httpx.get(f"{base_url}/v1/jobs/{job_id}", params={"wait": wait, "until": until},
                         timeout=wait + 30)
    assert response.status_code == 200, response.text
    return response.json(), time.monotonic() - started


def test_long_poll_answers_when_the_job_changes_state_not_when_the_wait_ends(service_url):
    job = submit_job(service_url, LONG_JOB)
    try:
        # Short waits until it runs: a poll compares with the status the job had when the
        # request arrived, which may already be running.
        current = job
        deadline = time.monotonic() + 120
        while current["status"] == "queued" and time.monotonic() < deadline:
            current, _ = poll(service_url, job["id"], 1)
        assert current["status"] == "running", current

        # No change: the poll holds for its whole wait and answers with the same status.
        unchanged, held = poll(service_url, job["id"], 1)
        assert unchanged["status"] == "running"
        assert held >= 1.0

        # A change made by another request 1 s into a 10 s wait ends the wait.
        canceler = threading.Timer(1.0, lambda: httpx.delete(
            f"{service_url}/v1/jobs/{job['id']}", timeout=30))
        canceler.start()
        changed, elapsed = poll(service_url, job["id"], 10)
        canceler.join()
        assert changed["status"] == "canceled"
        assert 1.0 <= elapsed < 10.0, f"answered after {elapsed:.2f} s of a 10 s wait"
    finally:
        httpx.delete(f"{service_url}/v1/jobs/{job['id']}", timeout=30)


def wait_for_status(base_url: str, job_id: str, status: str) -> None:
    deadline = time.monotonic() + 120
    current = {"status": None}
    while current["status"] != status and time.monotonic() < deadline:
        current, _ = poll(base_url, job_id, 1)
    assert current["status"] == status, current


def test_long_poll_until_finished_holds_through_running_and_answers_at_the_end(service_url):
    # The second job waits in the slow queue behind the first, so the poll starts while it is
    # queued, and goes on waiting when it starts running.
    first, second = submit_job(service_url, LONG_JOB), submit_job(service_url, LONG_JOB)
    try:
        wait_for_status(service_url, first["id"], "running")
        answers: list[dict] = []
        poller = threading.Thread(target=lambda: answers.append(
            poll(service_url, second["id"], 60, until="finished")[0]))
        poller.start()
        httpx.delete(f"{service_url}/v1/jobs/{first['id']}", timeout=30)
        wait_for_status(service_url, second["id"], "running")
        poller.join(1.0)
        assert poller.is_alive() and not answers, answers
        httpx.delete(f"{service_url}/v1/jobs/{second['id']}", timeout=30)
        poller.join(30)
        assert [answer["status"] for answer in answers] == ["canceled"]
    finally:
        for job in (first, second):
            httpx.delete(f"{service_url}/v1/jobs/{job['id']}", timeout=30)


def test_long_poll_until_anything_else_is_a_422_naming_the_parameter(service_url):
    response = httpx.get(f"{service_url}/v1/jobs/{'0' * 32}", params={"wait": 1, "until": "x"})
    assert response.status_code == 422 and "until" in response.json()["detail"]


def test_long_poll_on_a_finished_job_answers_at_once(service_url):
    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    result = run_job(service_url, {"algorithm": {"name": "itersvr", "params": {}},
                                   "data": {"X": X.tolist()}})
    job, elapsed = poll(service_url, result["job_id"], 60)
    assert job["status"] == "succeeded"
    assert elapsed < 60.0


@pytest.mark.parametrize("wait", ["0", "-1", "61", "soon"])
def test_wait_outside_0_to_60_seconds_is_a_422_naming_the_parameter(service_url, wait):
    response = httpx.get(f"{service_url}/v1/jobs/{'0' * 32}", params={"wait": wait},
                         timeout=30)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == "query.wait"


def test_long_poll_on_an_unknown_job_is_a_404(service_url):
    response = httpx.get(f"{service_url}/v1/jobs/{'0' * 32}", params={"wait": 5}, timeout=30)
    assert response.status_code == 404
