"""Helpers shared by the end-to-end tests of every algorithm and of the worker process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from core.job_record import FINAL_STATUSES, JobStatus


def wait_for_job(base_url: str, job_id: str, timeout: float = 120.0,
                 poll: float = 0.05, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """Poll ``GET /v1/jobs/{id}`` (as the tenant of ``headers``) until a final status; returns
    the job resource."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(f"{base_url}/v1/jobs/{job_id}", timeout=10.0, headers=headers)
        assert response.status_code == 200, response.text
        job = response.json()
        if job["status"] in FINAL_STATUSES:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s: {job}")
        time.sleep(poll)


def submit_job(base_url: str, payload: dict[str, Any], **kwargs) -> dict[str, Any]:
    response = httpx.post(f"{base_url}/v1/jobs", json=payload, timeout=60.0, **kwargs)
    assert response.status_code == 202, f"{response.status_code}: {response.text}"
    return response.json()


def run_job(base_url: str, payload: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
    """POST a job, wait for it, assert it succeeded and return ``GET /v1/jobs/{id}/result``."""
    job = submit_job(base_url, payload)
    final = wait_for_job(base_url, job["id"], timeout=timeout)
    assert final["status"] == JobStatus.SUCCEEDED, \
        f"job {job['id']} {final['status']}: {final['error']}"
    response = httpx.get(f"{base_url}/v1/jobs/{job['id']}/result", timeout=30.0)
    assert response.status_code == 200, response.text
    return response.json()


def run_async(coroutine: Any) -> Any:
    """``asyncio.run`` on a thread of its own: a browser test earlier in the same test process
    may leave an event loop running on its main thread (Playwright's sync API does)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


# Imported by a fit, not by a worker before it has registered (numpy is: the job records use it).
NUMERICS = ("scipy", "sklearn", "numba", "cvxpy", "algorithms.base")

_AT_REGISTRATION = """
import json, os, sys
{affinity}
import worker.main
from threadpoolctl import threadpool_info
from worker.warmup import limit_loaded_threads

def work(self, **kwargs):
    loaded = [name for name in {numerics!r} if name in sys.modules]
    import numpy, sklearn.cluster  # what a job forked now loads
    sizes = lambda: sorted({{pool["num_threads"] for pool in threadpool_info()}})
    pools = sizes()
    threads = worker.main.job_threads(worker.main.get_settings())
    limit_loaded_threads(threads)
    print(json.dumps({{"loaded": loaded, "omp": os.environ["OMP_NUM_THREADS"], "threads": threads,
                      "pools": pools, "warm_pools": sizes()}}))
    return False

worker.main.Worker.work = work  # where RQ registers the worker and starts taking jobs
worker.main.run_worker(["fast", "slow"], {redis_url!r}, burst=True)
"""


def worker_at_registration(redis_url: str, env: dict[str, str], root: Path,
                           affinity: set[int] | None = None) -> dict[str, Any]:
    """What a worker process (``env`` over this one's, without its ``MMC_`` and thread
    settings) has done when RQ registers it: the ``loaded`` modules of :data:`NUMERICS`, its
    job ``threads`` and ``omp``, and the BLAS/OpenMP ``pools``' sizes of a job it would fork
    then, which loads numpy and scikit-learn itself; ``warm_pools``: their sizes once the
    warm-up has limited them."""
    code = _AT_REGISTRATION.format(
        affinity="" if affinity is None else f"os.sched_setaffinity(0, {sorted(affinity)!r})",
        numerics=NUMERICS, redis_url=redis_url)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MMC_") and not k.endswith("_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=root,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])
