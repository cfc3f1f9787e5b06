"""Supervision of ``mmc serve``'s children, the way supervisord or systemd would do it.

A child (embedded Redis, a worker, the API) that exits while the service is meant to run is
restarted after a backoff that doubles with each quick crash; a child that keeps dying within
``quick_seconds`` of its start is given up on after ``max_quick_crashes`` tries, with a message
naming it. Each restart is printed and counted in Redis (``/metrics`` shows
``mmc_process_restarts``). Shutdown goes in order: the API stops taking requests, the workers
finish their job within a grace period (then stop it), jobs still marked running on them are
failed or re-queued, and Redis, last, flushes its append-only file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from redis import Redis
from redis.exceptions import RedisError

from core.keys import Keys
from mmc.processes import remove_metrics_directory

# Hash of restart counts by child name; read by GET /metrics.
RESTARTS_KEY = Keys.process_restarts()


class GaveUpError(Exception):
    """A child crashed at start too many times in a row."""


@dataclass
class Child:
    name: str
    start: Callable[[], subprocess.Popen]
    kind: str = "worker"  # "redis", "worker" or "api": the order of start-up and shutdown
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_crashes: int = 0
    restarts: int = 0
    restart_at: float | None = None
    last_status: int | None = None
    pids: list[int] = field(default_factory=list)
    on_exit: Callable[[Child], None] | None = None  # e.g. forget a dead worker's registration

    def launch(self) -> None:
        self.process = self.start()
        self.started_at = time.monotonic()
        self.pids.append(self.process.pid)


def say(message: str) -> None:
    print(f"mmc: {message}", file=sys.stderr, flush=True)


def exit_description(status: int) -> str:
    if status < 0:
        try:
            return f"signal {signal.Signals(-status).name}"
        except ValueError:
            return f"signal {-status}"
    return f"status {status}"


def kill_group(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the child's whole process group (its session), e.g. uvicorn's own children."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


class Supervisor:
    def __init__(self, children: list[Child], redis_url: str, *, quick_seconds: float = 10.0,
                 max_quick_crashes: int = 5, backoff_seconds: float = 0.5,
                 max_backoff_seconds: float = 10.0, poll_seconds: float = 0.2):
        self.children = children
        self.redis = Redis.from_url(redis_url, socket_connect_timeout=0.5, socket_timeout=2)
        self.quick_seconds = quick_seconds
        self.max_quick_crashes = max_quick_crashes
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.poll_seconds = poll_seconds
        self._unrecorded: dict[str, int] = {}
        self._redis_restarted_at = 0.0

    # -- running ----------------------------------------------------------------------------------
    def start_all(self) -> None:
        for kind in ("redis", "worker", "api"):
            for child in self.children:
                if child.kind == kind:
                    child.launch()

    def run(self, should_stop: Callable[[], bool]) -> None:
        """Watch the children until ``should_stop()``; raises :class:`GaveUpError`."""
        while not should_stop():
            self.check()
            time.sleep(self.poll_seconds)

    def check(self) -> None:
        now = time.monotonic()
        redis_down = any(c.kind == "redis" and c.restart_at is not None for c in self.children)
        for child in self.children:
            if child.restart_at is not None:
                # Workers and the API need Redis: start them after it is back.
                if now >= child.restart_at and not (redis_down and child.kind != "redis"):
                    self._restart(child)
                continue
            status = child.process.poll() if child.process else None
            if status is not None:
                self._schedule_restart(child, status, now)
        self._record_restarts()

    def _schedule_restart(self, child: Child, status: int, now: float) -> None:
        kill_group(child.process)  # orphans of the dead child (uvicorn's processes) go with it
        if child.on_exit is not None:
            with contextlib.suppress(RedisError):
                child.on_exit(child)
        uptime = now - child.started_at
        # A child that died because Redis went away is not crashing at start.
        caused_by_redis = child.kind != "redis" and now - self._redis_restarted_at < \
            self.quick_seconds
        if uptime >= self.quick_seconds:
            child.quick_crashes = 1
        elif not caused_by_redis:
            child.quick_crashes += 1
        child.last_status = status
        if child.quick_crashes > self.max_quick_crashes:
            raise GaveUpError(
                f"{child.name} exited within {self.quick_seconds:g} s of starting "
                f"{child.quick_crashes} times in a row (last: {exit_description(status)}); "
                "giving up and stopping everything. Its output is above; fix the cause and start "
                "mmc serve again.")
        delay = min(self.backoff_seconds * 2 ** max(child.quick_crashes - 1, 0),
                    self.max_backoff_seconds)
        child.restart_at = now + delay
        say(f"{child.name} (pid {child.process.pid}) exited with {exit_description(status)} "
            f"after {uptime:.1f} s; restarting it in {delay:.1f} s "
            f"(restart {child.restarts + 1}, quick crash {child.quick_crashes} of "
            f"{self.max_quick_crashes})")

    def _restart(self, child: Child) -> None:
        if child.process is not None:  # the ended process's metrics go with it
            remove_metrics_directory(child.process)
        child.restart_at = None
        child.restarts += 1
        started = time.monotonic()
        try:
            child.launch()
        except Exception as exc:  # e.g. redis-server refusing to start: count it as a crash
            say(f"{child.name} did not start: {exc}")
            child.process = None
            child.started_at = started
            self._schedule_failed_start(child, started)
            return
        if child.kind == "redis":
            self._redis_restarted_at = time.monotonic()
        self._unrecorded[child.name] = self._unrecorded.get(child.name, 0) + 1
        say(f"{child.name} restarted (pid {child.process.pid}, restart {child.restarts}, "
            f"{time.monotonic() - started:.2f} s to start)")

    def _schedule_failed_start(self, child: Child, now: float) -> None:
        child.quick_crashes += 1
        if child.quick_crashes > self.max_quick_crashes:
            raise GaveUpError(f"{child.name} failed to start {child.quick_crashes} times in a row; "
                         "giving up and stopping everything.")
        delay = min(self.backoff_seconds * 2 ** (child.quick_crashes - 1),
                    self.max_backoff_seconds)
        child.restart_at = now + delay

    def _record_restarts(self) -> None:
        """Add the restarts not yet counted to Redis (which may itself be restarting)."""
        if not self._unrecorded:
            return
        try:
            with self.redis.pipeline() as pipe:
                for name, count in self._unrecorded.items():
                    pipe.hincrby(RESTARTS_KEY, name, count)
                pipe.execute()
            self._unrecorded.clear()
        except RedisError:
            pass

    # -- stopping ---------------------------------------------------------------------------------
    def stop_all(self, grace_seconds: float,
                 on_workers_stopped: Callable[[list[int]], None] | None = None) -> None:
        """API first, then the workers (a running job gets ``grace_seconds`` to finish), then
        ``on_workers_stopped(worker pids)``, then Redis."""
        api = [c for c in self.children if c.kind == "api" and c.process]
        workers = [c for c in self.children if c.kind == "worker" and c.process]
        redis = [c for c in self.children if c.kind == "redis" and c.process]
        self._terminate(api, 10.0)
        # First SIGTERM: RQ's warm shutdown (finish the current job); second: cold (kill it).
        self._terminate(workers, grace_seconds, second_signal_wait=5.0)
        if on_workers_stopped is not None:
            pids = [pid for c in workers for pid in c.pids]
            try:
                on_workers_stopped(pids)
            except RedisError as exc:
                say(f"could not settle the jobs of the stopped workers: {exc}")
        self._terminate(redis, 10.0)

    @staticmethod
    def _terminate(children: list[Child], wait: float, second_signal_wait: float = 0.0) -> None:
        live = [c.process for c in children if c.process.poll() is None]
        for process in live:
            kill_group(process, signal.SIGTERM)
        deadline = time.monotonic() + wait
        live = _wait_all(live, deadline)
        if live and second_signal_wait:
            say(f"{len(live)} worker(s) still busy after the {wait:g} s grace period; stopping "
                "their jobs")
            for process in live:
                kill_group(process, signal.SIGTERM)
            live = _wait_all(live, time.monotonic() + second_signal_wait)
        for process in live:
            kill_group(process, signal.SIGKILL)
            process.wait()
        for child in children:
            kill_group(child.process)  # leftovers in the child's session
            remove_metrics_directory(child.process)


def _wait_all(processes: list[subprocess.Popen], deadline: float) -> list[subprocess.Popen]:
    while processes and time.monotonic() < deadline:
        processes = [p for p in processes if p.poll() is None]
        time.sleep(0.1)
    return [p for p in processes if p.poll() is None]
