"""A dataset by URL through the service (reported; the aims are issue 69's): an ``n x 8`` float32
Parquet file put into SeaweedFS, registered by URL and clustered by itersvr and cpm3c
(defaults, ``random_state=0``) on ``mmc serve``; the job's time (load, fit, store), the peak RSS
of the API process and of the work horse that ran the fit, and whether the labels equal a library
fit on the same float32 array read back from the file.

    python -m benchmarks.url_dataset [--n-rows 10000000] [--write-docs]

The aims: the API never holds the data (its peak RSS under 300 MB) and the work horse's peak RSS
is at most 2.5 times the array's size. The work horse's peak is its ``VmHWM``, read from
``/proc`` until it exits; the run says so when the last read came before the job's end. Needs
``redis-server`` and the ``weed`` binary (the dev extra); they run on free ports.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from redis import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import docs_pages  # noqa: E402
from benchmarks.service_load import mmc_serve  # noqa: E402
from mmc import processes  # noqa: E402
from tests.s3 import BUCKET, CREDENTIALS, start_weed  # noqa: E402

N_FEATURES = 8
ALGORITHMS = ("itersvr", "cpm3c")
PARAMS = {"random_state": 0}
KEY = "url-data/points.parquet"
API_AIM_MB = 300
WORKER_AIM = 2.5
MB = 10**6


def points(n_rows: int) -> np.ndarray:
    """Two Gaussian blobs in 8-D, 4 standard deviations apart along every axis, as float32."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, N_FEATURES), dtype=np.float32)
    X[: n_rows // 2] += 4.0
    return X


def write_parquet(X: np.ndarray, path: Path) -> None:
    pq.write_table(pa.table({f"x{j}": X[:, j] for j in range(X.shape[1])}), path)


def read_parquet(path: Path) -> np.ndarray:
    """The file's columns as one float32 matrix, as a library user would read it."""
    table = pq.read_table(path)
    return np.column_stack([table.column(j).to_numpy() for j in range(table.num_columns)])


def peak_mb(pid: int) -> float | None:
    """``VmHWM`` (the process's peak resident set) in MB; ``None`` once the process has exited
    (a zombie has no memory left to report)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / MB
    return None


def api_pid(port: int) -> int:
    """The uvicorn process that serves ``port``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            args = (entry / "cmdline").read_bytes().split(b"\0")
            if b"service.app:create_app" in args and str(port).encode() in args:
                return int(entry.name)
    raise RuntimeError(f"no API process serves port {port}")


@dataclass
class HorsePeak:
    """The work horse's last ``VmHWM`` and when it was read (``time.time()``)."""

    mb: float = 0.0
    read_at: float = 0.0


def watch(pid: int, peak: HorsePeak, stop: threading.Event) -> None:
    """Read ``pid``'s ``VmHWM`` every 5 ms until it exits (it only grows)."""
    while not stop.is_set():
        mb = peak_mb(pid)
        if mb is None:
            return
        peak.mb, peak.read_at = mb, time.time()
        time.sleep(0.005)


@dataclass
class Run:
    algorithm: str
    job_id: str
    status: str
    timing: dict
    seconds: float
    horse_mb: float
    read_after_end: bool
    error: str = ""


def run_job(client: httpx.Client, jobs, algorithm: str, dataset_id: str) -> Run:
    """Submit the job, watch its work horse's peak RSS (its pid and the timing are in the job's
    record, ``jobs``: a :class:`core.stores.JobStore`) and wait for its end."""
    answer = client.post("/v1/jobs", json={"algorithm": {"name": algorithm, "params": PARAMS},
                                           "data": {"dataset_id": dataset_id}})
    if answer.status_code != 202:
        return Run(algorithm, "", "refused", {}, 0.0, 0.0, False,
                   f"{answer.status_code}: {answer.json().get('detail')}")
    job_id = answer.json()["id"]
    peak, stop, watcher = HorsePeak(), threading.Event(), None
    try:
        while True:
            job = jobs.get(job_id)
            if watcher is None and (job.get("worker") or {}).get("pid"):
                watcher = threading.Thread(target=watch, args=(job["worker"]["pid"], peak, stop))
                watcher.start()
            if job["status"] in ("succeeded", "failed", "canceled"):
                break
            time.sleep(0.1)
        if watcher is not None:
            watcher.join(60)  # until the work horse exits
    finally:
        stop.set()
    error = (job.get("error") or {}).get("message", "")
    return Run(algorithm, job_id, job["status"], job.get("timing") or {},
               (job.get("finished_at") or 0) - (job.get("started_at") or 0), peak.mb,
               peak.read_at >= (job.get("finished_at") or float("inf")), error)


@contextlib.contextmanager
def services(tmp: Path, n_values: int) -> Iterator[tuple[str, dict[str, str], object]]:
    """redis-server, SeaweedFS and ``mmc serve`` on free ports: the API's URL, the service's
    environment and the S3 store of the bucket."""
    redis_port = processes.free_port()
    redis_process = processes.start_redis(redis_port, tmp / "redis", appendonly=False)
    os.environ.update(CREDENTIALS)
    weed = start_weed(tmp / "weed")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MMC_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
               MMC_BLOB_URL=f"s3://{BUCKET}/service", MMC_S3_ENDPOINT=weed.endpoint,
               MMC_DATA_URL_ALLOW=f"s3://{BUCKET}/url-data",
               MMC_MAX_POINTS_X_FEATURES=str(max(n_values, 20_000_000)))
    try:
        with mmc_serve(tmp, env) as (base_url, _):
            yield base_url, env, weed.store()
    finally:
        weed.stop()
        processes.stop(redis_process)


def job_store(env: dict[str, str]):
    """The service's job records and results, read as the API reads them."""
    from core.settings import Settings
    from core.stores import Stores

    settings = Settings(redis_url=env["MMC_REDIS_URL"], blob_url=env["MMC_BLOB_URL"],
                        s3_endpoint=env["MMC_S3_ENDPOINT"])
    return Stores(Redis.from_url(settings.redis_url), settings).jobs


def library_labels(algorithm: str, X: np.ndarray) -> np.ndarray:
    from algorithms.registry import get_spec

    spec = get_spec(algorithm)
    return spec.build(spec.parse_params(PARAMS)).fit(X).labels_


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=10_000_000)
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        path = tmp / "points.parquet"
        write_parquet(points(args.n_rows), path)
        file_mb = path.stat().st_size / MB
        with services(tmp, args.n_rows * N_FEATURES) as (base_url, env, store), \
                httpx.Client(base_url=base_url, timeout=120) as client:
            store.client.upload_file(str(path), BUCKET, KEY)
            started = time.perf_counter()
            answer = client.post("/v1/datasets", json={"url": f"s3://{BUCKET}/{KEY}"})
            answer.raise_for_status()
            register_seconds = time.perf_counter() - started
            jobs = job_store(env)
            runs = [run_job(client, jobs, name, answer.json()["id"]) for name in ALGORITHMS]
            api_mb = peak_mb(api_pid(int(base_url.rsplit(":", 1)[1])))
            labels = {run.algorithm: np.asarray(jobs.get_result(run.job_id)["labels"])
                      for run in runs if run.status == "succeeded"}
        X = read_parquet(path)  # the service is stopped: one heavy process at a time
        array_mb = X.nbytes / MB
        equal = {name: bool(np.array_equal(stored, library_labels(name, X)))
                 for name, stored in labels.items()}
    with docs_pages.record(args.write_docs, docs_pages.DOCS / "storage.md", "url-dataset",
                           "benchmarks.url_dataset"):
        print(f"A {args.n_rows:,} x {N_FEATURES} float32 array ({array_mb:.0f} MB; Parquet file "
              f"{file_mb:.0f} MB) in SeaweedFS, registered by URL in {register_seconds:.2f} s "
              f"and clustered on `mmc serve` (defaults, random_state 0). The API's peak RSS "
              f"after both jobs: {api_mb:.0f} MB (aim < {API_AIM_MB} MB).\n")
        print("| algorithm | status | job s | load s | fit s | store s | work horse peak RSS "
              "MB | x array | aim | labels equal to the library's |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
        for run in runs:
            if run.status != "succeeded":
                print(f"| {run.algorithm} | {run.status}: {run.error} | | | | | | | "
                      f"<= {WORKER_AIM}x | |")
                continue
            timing = run.timing
            late = "" if run.read_after_end else " (last read before the job's end)"
            print(f"| {run.algorithm} | {run.status} | {run.seconds:.1f} | "
                  f"{timing['load_seconds']:.1f} | {timing['fit_seconds']:.1f} | "
                  f"{timing['store_seconds']:.1f} | {run.horse_mb:.0f}{late} | "
                  f"{run.horse_mb / array_mb:.2f}x | <= {WORKER_AIM}x | "
                  f"{'yes' if equal[run.algorithm] else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
