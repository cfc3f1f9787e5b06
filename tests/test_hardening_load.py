"""Load: N tiny jobs from 20 concurrent clients on 2 workers; every job reaches a final state
exactly once (one run each, none lost, none duplicated). N defaults to 200 so the suite stays
within CI time on 2 cores; ``MMC_LOAD_TEST_JOBS=1000`` runs the full count."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from tests.hardening import Deployment

JOBS = int(os.environ.get("MMC_LOAD_TEST_JOBS", "200"))
CLIENTS = 20
FINAL = ("succeeded", "failed", "canceled")


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    deployment = Deployment(tmp_path_factory.mktemp("load"),
                            {"MMC_MAX_ACTIVE_JOBS_PER_TENANT": str(JOBS + 10)}, workers=2)
    yield deployment
    deployment.close()


def client_run(url: str, seeds: list[int]) -> list[tuple[str, str]]:
    """Submit this client's jobs, then poll them until final; returns ``(id, status)``."""
    with httpx.Client(base_url=url, timeout=60) as client:
        ids = []
        for seed in seeds:
            X, _ = make_blobs(n_samples=12, centers=2, random_state=seed)
            response = client.post("/v1/jobs", json={
                "algorithm": {"name": "itersvr", "params": {"random_state": 0, "n_init": 1}},
                "data": {"X": X.tolist()}})
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
        # The queues are FIFO, so jobs end about in submission order: each client polls its
        # oldest job that is not final (one read per 0.2 s while it waits, every later job read
        # as soon as the one before it is final), instead of all of its pending jobs each round,
        # whose reads took the workers' CPU on 2 cores.
        done: dict[str, str] = {}
        deadline = time.monotonic() + 600
        for job_id in ids:
            while (status := client.get(f"/v1/jobs/{job_id}").json()["status"]) not in FINAL:
                assert time.monotonic() < deadline, f"{len(ids) - len(done)} jobs not final"
                time.sleep(0.2)
            done[job_id] = status
        return [(job_id, done[job_id]) for job_id in ids]


def test_every_job_is_final_exactly_once_under_concurrent_clients(two_workers):
    seeds = [list(range(c, JOBS, CLIENTS)) for c in range(CLIENTS)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        outcomes = [o for chunk in pool.map(lambda s: client_run(two_workers.url, s), seeds)
                    for o in chunk]
    ids = [job_id for job_id, _ in outcomes]
    assert len(ids) == JOBS and len(set(ids)) == JOBS
    assert {status for _, status in outcomes} == {"succeeded"}

    redis = Redis.from_url(two_workers.redis_url)
    runs = [json.loads(redis.hget(f"mmc:job:{job_id}", "runs") or "0") for job_id in ids]
    assert runs == [1] * JOBS  # each job ran once: none lost, none run twice
    listed = httpx.get(f"{two_workers.url}/v1/jobs", params={"limit": 1}).json()
    assert listed["total"] == JOBS
    assert redis.scard("mmc:active:anonymous") == 0  # every job left the tenant's active set
    results = [redis.exists(f"mmc:result:{job_id}") for job_id in ids]
    assert sum(results) == JOBS
