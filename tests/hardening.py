"""A private deployment per hardening test module: its own redis-server (append-only file in a
temp dir), RQ workers and uvicorn, with settings chosen by the test, so faults injected here
(killed workers, a restarted or stopped Redis) never touch the shared ``service_url``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import numpy as np

from mmc import processes
from tests.conftest import ROOT


class Deployment:
    def __init__(self, tmp: Path, env: dict[str, str], *, workers: int = 1,
                 queues: tuple[str, ...] = ("fast", "slow")):
        self.tmp = tmp
        self.redis_port = processes.free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.env = dict(os.environ)
        self.env.update({
            "MMC_REDIS_URL": self.redis_url, "MMC_API_KEYS": "",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        })
        self.env.update(env)
        self.queues = queues
        self.redis = processes.start_redis(self.redis_port, tmp / "redis", appendonly=True)
        self.workers: list[subprocess.Popen] = []
        for _ in range(workers):
            self.add_worker()
        self.port = processes.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_log = tmp / "api.log"
        self.api = processes.start_api("127.0.0.1", self.port, self.env,
                                       log_file=open(self.api_log, "wb"))  # noqa: SIM115
        processes.wait_ready(self.url, timeout=60, processes=[self.api, *self.workers])

    def add_worker(self) -> subprocess.Popen:
        log = open(self.tmp / f"worker-{len(self.workers)}.log", "wb")  # noqa: SIM115
        # Its own process group, so a test can kill -9 the worker together with its work horse.
        command = [processes.sys.executable, "-m", "worker"]
        for queue in self.queues:
            command += ["--queue", queue]
        worker = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        self.workers.append(worker)
        return worker

    def kill_worker(self, worker: subprocess.Popen, *horses: int) -> None:
        """``kill -9`` of a worker and of its work horses (RQ puts a horse in its own group)."""
        for pid in horses:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    def stop_redis(self) -> None:
        processes.stop(self.redis)  # SIGTERM: Redis flushes its append-only file

    def start_redis(self) -> None:
        self.redis = processes.start_redis(self.redis_port, self.tmp / "redis", appendonly=True)

    def close(self) -> None:
        processes.stop(self.api)
        for worker in self.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
        processes.stop(self.redis)


def several_seconds(seed: int, n_init: int = 16, callback_url: str | None = None) -> dict:
    """A job body: iterSVR with the seed's width and starts on 1,500 noise points, reporting
    progress every fraction of a second. Each k-means start on noise is a labeling of its own,
    and C = 2,000 (the seed's 500 x 4) makes each SVR solve long: n_init=16 runs about 4.5 s on
    an idle machine, 40 about 10 s (at C = 500, since iterSVR warm-starts its SVR solves, 40
    starts took 2.8 s, inside the 3 s grace of a shutdown)."""
    X = np.random.default_rng(seed).normal(size=(1500, 5))
    body = {"algorithm": {"name": "itersvr",
                          "params": {"n_init": n_init, "max_iter": 100, "random_state": seed,
                                     "C": 2000.0,
                                     "gamma": "paper", "init": "k-means"}},
            "data": {"X": X.tolist()}}
    if callback_url:
        body["callback_url"] = callback_url
    return body
