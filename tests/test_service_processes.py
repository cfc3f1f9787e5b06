"""Several API processes on one socket (``mmc serve --api-workers 2``, compose's default): every
piece of state lives in Redis, so whichever process answers, a client sees one service."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

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


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one series in Prometheus text, 0 when absent."""
    wanted = {f'{k}="{v}"' for k, v in labels.items()}
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series.split("{")[0] != name:
            continue
        present = set(series.partition("{")[2].rstrip("}").split(",")) if "{" in series else set()
        if wanted <= present:
            return float(value)
    return 0.0


def scrape(url: str) -> str:
    response = httpx.get(f"{url}/metrics", timeout=30)  # a new connection: either process
    assert response.status_code == 200
    return response.text


def test_metrics_from_either_api_process_report_the_same_counters(two_process_url):
    time.sleep(1.5)  # let both processes flush what earlier tests counted
    before = sample(scrape(two_process_url), "mmc_http_requests_total",
                    route="/v1/algorithms", status="200")
    for _ in range(40):
        assert httpx.get(f"{two_process_url}/v1/algorithms", timeout=30).status_code == 200
    expected = before + 40
    deadline = time.monotonic() + 30
    while sample(scrape(two_process_url), "mmc_http_requests_total", route="/v1/algorithms",
                 status="200") != expected:
        assert time.monotonic() < deadline, "the counters never added up across processes"
        time.sleep(0.2)
    counts = [sample(scrape(two_process_url), "mmc_http_requests_total",
                     route="/v1/algorithms", status="200") for _ in range(10)]
    assert counts == [expected] * 10


def test_workers_export_job_outcomes_and_fit_seconds(two_process_url):
    X, _ = make_blobs(30, centers=2, random_state=3)
    text = scrape(two_process_url)
    before = sample(text, "mmc_jobs_finished_total", algorithm="itersvr", outcome="succeeded")
    fits = sample(text, "mmc_job_fit_seconds_count", algorithm="itersvr")
    job = httpx.post(f"{two_process_url}/v1/jobs", timeout=30, json={
        "algorithm": {"name": "itersvr"}, "data": {"X": X.tolist()}}).json()
    assert wait_for_job(two_process_url, job["id"])["status"] == "succeeded"
    text = scrape(two_process_url)
    assert sample(text, "mmc_jobs_finished_total", algorithm="itersvr",
                  outcome="succeeded") == before + 1
    assert sample(text, "mmc_job_fit_seconds_count", algorithm="itersvr") == fits + 1
    assert sample(text, "mmc_job_fit_seconds_bucket", algorithm="itersvr", le="+Inf") == fits + 1
    assert "# TYPE mmc_queue_jobs gauge" in text


def test_a_worker_lowers_its_priority_by_the_configured_niceness(service_env, tmp_path):
    """On a machine shared with the API, fits take the CPU it leaves (MMC_WORKER_NICENESS)."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    env = {**service_env, "MMC_WORKER_NICENESS": "5"}
    with open(tmp_path / "worker.log", "wb") as log:  # in a session of its own, as mmc serve
        worker = subprocess.Popen([sys.executable, "-m", "worker", "--queue", "fast"], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while os.getpriority(os.PRIO_PROCESS, worker.pid) == base:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker never lowered its priority"
            time.sleep(0.1)
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == min(base + 5, 19)
        autogroup = Path(f"/proc/{worker.pid}/autogroup")
        if autogroup.exists():  # the session's share against the API's sessions, too
            assert autogroup.read_text().split()[-1] == "5", autogroup.read_text()
    finally:
        worker.terminate()
        worker.wait(30)
