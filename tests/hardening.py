"""Deployments of the hardening tests. ``Deployment``: a private redis-server (append-only file
in a temp dir), RQ workers and uvicorn, for a module whose workers need settings of their own or
that injects faults (killed workers, a restarted or stopped Redis) that must never touch the
shared ``service_url``. ``SharedApi``: an API process with settings of its own (keys, body and
request limits, Retry-After: read by the API alone) on the session's Redis and workers."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import make_blobs

from core.settings import Settings
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
            "MMC_BLOB_URL": str(tmp / "blobs"),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        })
        self.env.update(env)
        self.settings = Settings(redis_url=self.redis_url, blob_url=self.env["MMC_BLOB_URL"])
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
        # Guards against a hang, not a speed check: at the start of a run several deployments'
        # processes import the numerics at once on two cores.
        try:
            if workers:
                processes.wait_ready(self.url, timeout=120, processes=[self.api, *self.workers])
            else:  # /readyz wants a worker on every queue: wait for the API alone
                wait_healthy(self.url, timeout=120, process=self.api)
        except BaseException:
            self.close()  # a deployment that never came up leaves no process behind
            raise

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


def wait_healthy(url: str, timeout: float, process: subprocess.Popen) -> None:
    """Poll ``/healthz`` until it answers 200."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"the API exited with {process.returncode}"
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        assert time.monotonic() < deadline, f"{url} not healthy after {timeout} s"
        time.sleep(0.05)


class SharedApi:
    """uvicorn with ``env`` over ``service_env`` (tests/conftest.py), on the session's Redis and
    its ``service_workers``: none is started for it. Its tests keep to tenants, idempotency keys
    and ids of their own, since other modules' jobs share the store."""

    def __init__(self, tmp: Path, service_env: dict[str, str], service_workers: dict,
                 env: dict[str, str]):
        # The API's own default body limit, as a private deployment had, unless ``env`` sets one.
        self.env = {k: v for k, v in service_env.items() if k != "MMC_MAX_BODY_BYTES"}
        self.env.update(env)
        self.redis_url = self.env["MMC_REDIS_URL"]
        self.port = processes.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_log = tmp / "api.log"
        self.api = processes.start_api("127.0.0.1", self.port, self.env,
                                       log_file=open(self.api_log, "wb"))  # noqa: SIM115
        # The session's workers may still be importing: a guard against hanging, not a speed check.
        processes.wait_ready(self.url, timeout=120,
                             processes=[self.api, *service_workers.values()])

    def close(self) -> None:
        processes.stop(self.api)


WEBHOOK_KEY = b"0123456789abcdef0123456789abcdef"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(WEBHOOK_KEY).decode()
HEARTBEAT = 2
MEMORY_MB = 50

# The settings of ``healing_deployment`` (tests/conftest.py), shared by the webhook and
# self-healing modules: a 2 s heartbeat window, lost jobs retried once, a 50 MB cap per job, and
# webhooks signed with WEBHOOK_SECRET, retried by RQ's scheduler after 1, 1, 2, 4, ..., 128 s
# (the last attempt 256 s after the first; the default, 10 attempts from 1 s, spans 511 s).
HEALING_ENV = {
    "MMC_WORKER_HEARTBEAT_SECONDS": str(HEARTBEAT),
    "MMC_JOB_TIMEOUT_CAP_SECONDS": "120",
    "MMC_RETRY_LOST_JOBS": "1",
    "MMC_JOB_MEMORY_MB": str(MEMORY_MB),
    "MMC_WEBHOOK_SECRETS": f"anonymous:{WEBHOOK_SECRET}",
    "MMC_WEBHOOK_ALLOW_PRIVATE": "true",
    "MMC_WEBHOOK_MAX_ATTEMPTS": "10",
    "MMC_WEBHOOK_BACKOFF_SECONDS": "0.5",
}


class Receiver(ThreadingHTTPServer):
    """Answers 500 to the first ``fail_first`` deliveries, then 204; keeps every delivery."""

    def __init__(self, fail_first: int = 0, port: int = 0):
        self.bodies: list[dict] = []
        self.ids: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler):  # noqa: N805
                body = handler.rfile.read(int(handler.headers["content-length"]))
                self.bodies.append(json.loads(body))
                self.ids.append(handler.headers["webhook-id"])
                handler.send_response(500 if len(self.bodies) <= fail_first else 204)
                handler.send_header("content-length", "0")
                handler.end_headers()

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", port), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count:
            assert time.monotonic() < deadline, f"{len(self.bodies)} deliveries: {self.ids}"
            time.sleep(0.05)


class ReceiverOutage:
    """A job whose callback receiver is down for ``seconds`` from the moment the job ends, then
    up (a timer brings a :class:`Receiver` up on the refused port), while other tests run."""

    def __init__(self, deployment: Deployment, seconds: float):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        X, _ = make_blobs(n_samples=40, centers=2, random_state=7)
        response = httpx.post(f"{deployment.url}/v1/jobs", timeout=30, json={
            "algorithm": {"name": "itersvr", "params": {"random_state": 0}},
            "data": {"X": X.tolist()}, "callback_url": f"http://127.0.0.1:{self.port}/hook"})
        assert response.status_code == 202, response.text
        self.job_id = response.json()["id"]
        deadline = time.monotonic() + 60
        while (status := httpx.get(f"{deployment.url}/v1/jobs/{self.job_id}",
                                   timeout=10).json()["status"]) in ("queued", "running"):
            assert time.monotonic() < deadline, f"job {self.job_id} still {status}"
            time.sleep(0.05)
        assert status == "succeeded", status
        self.ended = time.monotonic()
        self.seconds = seconds
        self.receiver: Receiver | None = None
        self._up = threading.Event()
        self._timer = threading.Timer(seconds, self._bring_up)
        self._timer.start()

    def _bring_up(self) -> None:
        self.receiver = Receiver(port=self.port)
        self.up_at = time.monotonic()
        self._up.set()

    def wait_up(self) -> Receiver:
        assert self._up.wait(self.seconds + 60), "the receiver never came up"
        return self.receiver

    def close(self) -> None:
        self._timer.cancel()
        if self.receiver is not None:
            self.receiver.shutdown()


def several_seconds(seed: int, n_init: int = 16, callback_url: str | None = None) -> dict:
    """A job body: iterSVR with the paper's width and starts on 1,500 noise points, reporting
    progress every fraction of a second. Each k-means start on noise is a labeling of its own,
    and C = 2,000 (the paper's 500 x 4) makes each SVR solve long: n_init=16 runs about 4.5 s on
    an idle machine, 40 about 10 s (at C = 500, since iterSVR warm-starts its SVR solves, 40
    starts took 2.8 s, inside the 3 s grace of a shutdown)."""
    X = np.random.default_rng(seed).normal(size=(1500, 5))
    body = {"algorithm": {"name": "itersvr",
                          "params": {"n_init": n_init, "max_alternations": 100,
                                     "random_state": seed, "C": 2000.0,
                                     "gamma": "paper", "init": "k-means",
                                     # iterSVR's own fit, as in the paper: the job's time and
                                     # memory (under its 50 MB cap) are the method's alone
                                     "portfolio": False}},
            "data": {"X": X.tolist()}}
    if callback_url:
        body["callback_url"] = callback_url
    return body
