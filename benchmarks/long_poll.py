"""Long polling latency (reported, not asserted): how soon ``GET /v1/jobs/{id}?wait=10`` answers
after the job it waits on finishes.

    python benchmarks/long_poll.py [--runs 5] [--points 50]

Starts its own deployment like ``mmc serve`` (redis-server on a free port, one RQ worker per
queue, uvicorn). Each run submits a two-class SDP MMC job (about 1 s on ``--points`` 50), waits
until it runs, then sends one ``wait=10`` request and records when the answer came, when the job
finished (its ``finished_at``), and the gap. The target: a ``wait=10`` request on a job that
finishes after 1 s answers within 1.5 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import make_blobs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import docs_pages  # noqa: E402
from mmc import processes  # noqa: E402


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def one_run(url: str, points: int, seed: int) -> tuple[float, float, float]:
    """``(answer after request, finish after request, answer after finish)`` in seconds."""
    X, _ = make_blobs(n_samples=points, centers=2, random_state=seed)
    job = httpx.post(f"{url}/v1/jobs", timeout=30, json={
        "algorithm": {"name": "sdp_mmc", "params": {}}, "data": {"X": X.tolist()}}).json()
    while job["status"] == "queued":
        job = httpx.get(f"{url}/v1/jobs/{job['id']}", timeout=30).json()
    asked = time.time()
    final = httpx.get(f"{url}/v1/jobs/{job['id']}", params={"wait": 10}, timeout=30).json()
    answered = time.time()
    if final["status"] != "succeeded":
        raise RuntimeError(f"job {job['id']} is {final['status']} after the long poll")
    finished = epoch(final["timing"]["finished_at"])
    return answered - asked, finished - asked, answered - finished


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--points", type=int, default=50)
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    with docs_pages.record(args.write_docs, docs_pages.DOCS / "service_performance.md",
                           "long-poll", "benchmarks.long_poll"):
        return run(args)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        redis_port = processes.free_port()
        redis = processes.start_redis(redis_port, Path(tmp) / "redis")
        env = dict(os.environ, MMC_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")])))
        workers = [processes.start_worker([queue], env) for queue in ("fast", "slow")]
        port = processes.free_port()
        api = processes.start_api("127.0.0.1", port, env)
        url = f"http://127.0.0.1:{port}"
        try:
            processes.wait_ready(url, timeout=120, processes=[api, *workers])
            rows = [one_run(url, args.points, seed) for seed in range(args.runs)]
        finally:
            for process in (api, *workers, redis):
                processes.stop(process)
    print("| run | job finished after request (s) | answer after request (s) "
          "| answer after finish (ms) |\n|---|---|---|---|")
    for i, (answer, finish, gap) in enumerate(rows, 1):
        print(f"| {i} | {finish:.2f} | {answer:.2f} | {gap * 1000:.0f} |")
    gaps = np.array([row[2] for row in rows]) * 1000
    print(f"\nanswer after finish: median {np.median(gaps):.0f} ms, max {gaps.max():.0f} ms "
          "(aim: a wait=10 request on a job finishing after 1 s answers within 1.5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
