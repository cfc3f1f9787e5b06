"""Helpers shared by the end-to-end tests of every algorithm."""

from __future__ import annotations

import asyncio
import io
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

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


def npy_bytes(X: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, X, allow_pickle=False)
    return buffer.getvalue()


def uploaded_in_parts(base_url: str, X: np.ndarray, part_bytes: int) -> str:
    """The dataset id of ``X`` sent through ``POST /v1/datasets/uploads`` as ``.npy`` parts of
    at most ``part_bytes`` of array each: a matrix larger than one request body (as large as an
    algorithm's ``max_n``), sent as a caller would."""
    opened = httpx.post(f"{base_url}/v1/datasets/uploads", timeout=30.0)
    assert opened.status_code == 201, opened.text
    url = f"{base_url}{opened.headers['location']}"
    rows = max(1, part_bytes // (X.itemsize * X.shape[1]))
    for index, start in enumerate(range(0, X.shape[0], rows)):
        part = httpx.put(f"{url}/parts/{index}", content=npy_bytes(X[start:start + rows]),
                         headers={"content-type": "application/x-npy"}, timeout=60.0)
        assert part.is_success, part.text
    completed = httpx.post(f"{url}/complete", timeout=120.0)
    assert completed.status_code in (200, 201), completed.text
    return completed.json()["id"]


def run_async(coroutine: Any) -> Any:
    """``asyncio.run`` on a thread of its own: a browser test earlier in the same test process
    may leave an event loop running on its main thread (Playwright's sync API does)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()
