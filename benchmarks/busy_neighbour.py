"""Jobs beside other work (reported, not asserted): the fit time of an svc and a cpm3c job on
digits 3 vs 8 through ``mmc serve --workers-per-queue 2`` while a CPU-bound numpy process runs
beside it, against the same fit in this process on one BLAS thread on an idle machine.

    python -m benchmarks.busy_neighbour [--runs 3] [--write-docs]

A worker sizes its jobs' BLAS and OpenMP threads to its share of the CPUs (``MMC_THREADS_PER_JOB``
otherwise): threads beyond the CPUs a job gets spin-wait on each other, and a fit beside one busy
process ran many times slower on two threads than on one. The aim: each job's fit within 1.5x
its one-thread library time, over every run.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import docs_pages  # noqa: E402
from benchmarks.service_load import mmc_serve  # noqa: E402

JOBS = {"svc": {"n_clusters": 2, "random_state": 0},
        "cpm3c": {"n_clusters": 2, "random_state": 0}}
AIM = 1.5


def digits_3_8() -> np.ndarray:
    X, y = load_digits(return_X_y=True)
    return X[(y == 3) | (y == 8)]


def library_seconds(name: str, X: np.ndarray, runs: int) -> float:
    """The median fit time of ``name`` in this process on one BLAS thread."""
    from algorithms.registry import get_spec

    times = []
    for _ in range(runs):
        estimator = get_spec(name).estimator(**JOBS[name])
        with threadpool_limits(1):
            started = time.perf_counter()
            estimator.fit(X)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def _spin() -> None:
    """A CPU-bound neighbour: numpy matrix products on its default BLAS threads."""
    a = np.random.default_rng(0).normal(size=(600, 600))
    while True:
        a = np.tanh(a @ a / 600.0)


@contextlib.contextmanager
def busy_neighbour() -> Iterator[None]:
    process = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    process.start()
    try:
        time.sleep(1.0)  # its BLAS threads are running
        yield
    finally:
        process.kill()
        process.join()


def service_fit_seconds(client: httpx.Client, name: str, X: np.ndarray) -> float:
    """The fit seconds a job of ``name`` on ``X`` reports."""
    answer = client.post("/v1/jobs", json={"algorithm": {"name": name, "params": JOBS[name]},
                                           "data": {"X": X.tolist()}})
    answer.raise_for_status()
    job_id = answer.json()["id"]
    # One long poll until the job finishes, as a caller waits: a polling loop would be a third
    # process competing for the CPUs.
    job = client.get(f"/v1/jobs/{job_id}", params={"wait": 60, "until": "finished"}).json()
    if job["status"] != "succeeded":
        raise RuntimeError(f"job {job_id} {job['status']}")
    return float(job["timing"]["fit_seconds"])


def _runs(seconds: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    X = digits_3_8()
    alone = {name: library_seconds(name, X, args.runs) for name in JOBS}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    beside: dict[str, list[float]] = {name: [] for name in JOBS}
    idle: dict[str, list[float]] = {name: [] for name in JOBS}
    with tempfile.TemporaryDirectory() as tmp, \
            mmc_serve(Path(tmp), env, "--workers-per-queue", "2") as (base_url, _), \
            httpx.Client(base_url=base_url, timeout=60) as client:
        for name in JOBS:  # a first job of each warms its worker's imports
            service_fit_seconds(client, name, X)
        for _ in range(args.runs):
            for name in JOBS:
                idle[name].append(service_fit_seconds(client, name, X))
        with busy_neighbour():
            for _ in range(args.runs):
                for name in JOBS:
                    beside[name].append(service_fit_seconds(client, name, X))
    with docs_pages.record(args.write_docs, docs_pages.DOCS / "service_performance.md",
                           "busy-neighbour", "benchmarks.busy_neighbour"):
        print(f"Digits 3 vs 8 ({X.shape[0]} points), {args.runs} runs; `mmc serve "
              "--workers-per-queue 2` beside one CPU-bound numpy process, against the library "
              "fit on one BLAS thread on an idle machine.\n")
        print("| job | library, 1 thread, idle (s) | service, idle, each run (s) | "
              "service beside a busy process, each run (s) | worst ratio to the library | aim |"
              "\n|---|---|---|---|---|---|")
        for name in JOBS:
            worst = max(beside[name]) / alone[name]
            print(f"| {name} | {alone[name]:.2f} | {_runs(idle[name])} | {_runs(beside[name])} "
                  f"| {worst:.2f}x | <= {AIM}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
