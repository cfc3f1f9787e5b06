"""``mmc serve``: an embedded Redis, workers on every queue and the API, supervised as child
processes of this one (:mod:`mmc.supervisor`).

RQ and the settings are imported where they are used (the first start of Redis, a child's death,
the shutdown), not before the supervisor starts Redis: every start would wait for them."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from redis import Redis

from core.queues import QUEUE_NAMES
from mmc import processes
from mmc.supervisor import Child, GaveUpError, Supervisor, say


def serve(host: str, port: int, data_dir: str, workers_per_queue: int, api_workers: int = 1,
          *, grace_seconds: float = 30.0, max_quick_crashes: int = 5) -> int:
    """Start everything and supervise it: a child that dies is restarted (see
    :mod:`mmc.supervisor`); Ctrl-C or SIGTERM stops everything in order."""
    env = dict(os.environ)
    children: list[Child] = []
    if "MMC_REDIS_URL" not in os.environ:
        binary = processes.find_redis_server()
        redis_port = processes.free_port()
        redis_dir = Path(data_dir).resolve() / "redis"
        fsync = os.environ.get("MMC_REDIS_APPENDFSYNC", "everysec")
        children.append(redis_child(redis_port, redis_dir, binary, fsync))
        env["MMC_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
        say(f"embedded Redis {binary} on port {redis_port}, data in {redis_dir} "
            f"(appendfsync {fsync})")
    else:
        say(f"using Redis at {os.environ['MMC_REDIS_URL']}")
    # Datasets, models and results: a directory beside Redis's, unless MMC_BLOB_URL names one.
    env.setdefault("MMC_BLOB_URL", str(Path(data_dir).resolve() / "blobs"))
    n_workers = workers_per_queue * len(QUEUE_NAMES)
    env.setdefault("MMC_LOCAL_WORKERS", str(n_workers))  # the default per-job memory cap
    for queue in QUEUE_NAMES:
        for index in range(workers_per_queue):
            children.append(worker_child(queue, index + 1, env))
    children.append(Child("api", lambda: processes.start_api(
        host, port, env, log_file=sys.stderr, workers=api_workers), kind="api"))

    stop_requested = False

    def request_stop(*_):
        nonlocal stop_requested
        stop_requested = True

    # Explicit handlers: a shell may start us with SIGINT ignored (background jobs).
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    supervisor = Supervisor(children, env["MMC_REDIS_URL"], max_quick_crashes=max_quick_crashes)
    code = 0
    try:
        supervisor.start_all()
        say(f"API on http://{host}:{port} (console at /, docs at /docs); Ctrl-C stops everything")
        supervisor.run(lambda: stop_requested or make_was_interrupted())
        say(f"stopping (running jobs get {grace_seconds:g} s to finish)")
    except GaveUpError as exc:
        say(str(exc))
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        supervisor.stop_all(grace_seconds, lambda pids: settle_stopped_jobs(env, pids))
    return code


MAKE_NAMES = ("make", "gmake")


def make_was_interrupted() -> bool:
    """Whether GNU make, running us as a recipe (``make serve``), got a SIGINT.

    A Ctrl-C in the terminal reaches make and us alike; a SIGINT sent to make alone does not
    reach us, and make, which forwards only SIGTERM to its recipes, would wait for us forever.
    While make handles a fatal signal it blocks that signal and has reset its handler to the
    default (``fatal_error_signal`` in make's ``commands.c``): the ``SigBlk`` and ``SigCgt``
    masks of its ``/proc/<pid>/status`` show both. False outside make and where ``/proc`` is
    not."""
    if "MAKELEVEL" not in os.environ:
        return False
    pid = os.getppid()
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() not in MAKE_NAMES:
            return False
        masks = dict(line.split(":\t", 1) for line in
                     Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
        sigint = 1 << (signal.SIGINT - 1)
        return bool(int(masks["SigBlk"], 16) & sigint) and not int(masks["SigCgt"], 16) & sigint
    except (OSError, KeyError, ValueError):
        return False


def redis_child(port: int, directory: Path, binary: str, appendfsync: str) -> Child:
    """The supervised embedded Redis. At its first start it forgets the workers that an earlier
    ``mmc serve`` on the same data directory left registered (killed before they could
    unregister): none of them runs, and ``/readyz`` would count them until their keys expire.
    On a restart the registered workers are this run's own, and stay."""

    def start():
        process = processes.start_redis(port, directory, binary=binary, appendfsync=appendfsync)
        if not child.pids:  # its first start in this run: no worker of this run is registered
            forget_registered_workers(Redis(port=port, socket_connect_timeout=1, socket_timeout=5))
        return process

    child = Child("redis", start, kind="redis")
    return child


def forget_registered_workers(redis: Redis) -> None:
    """Unregister every worker registered in ``redis`` on one of the service's queues, and the
    names left of those whose keys have expired."""
    from rq import Worker
    from rq.worker_registration import clean_worker_registry

    from core.queues import SERIALIZER, WEBHOOK_QUEUE, get_queue

    for name in (*QUEUE_NAMES, WEBHOOK_QUEUE):
        queue = get_queue(name, redis)
        for worker in Worker.all(queue=queue, serializer=SERIALIZER):
            worker.register_death()
        clean_worker_registry(queue)


def worker_child(queue: str, index: int, env: dict[str, str]):
    """A supervised worker whose RQ registration is removed when it dies, so ``/readyz`` counts
    only live workers (RQ would keep a SIGKILLed one listed until its key expires)."""
    name = f"worker-{queue}-{index}"

    def rq_name(child: Child) -> str:
        return f"{name}.{os.getpid()}.{len(child.pids)}"

    def start():
        return processes.start_worker([queue], env, log_file=sys.stderr,
                                      name=f"{name}.{os.getpid()}.{len(child.pids) + 1}")

    def forget(dead: Child) -> None:
        from rq import Worker

        from core.queues import SERIALIZER

        redis = Redis.from_url(env["MMC_REDIS_URL"], socket_connect_timeout=0.5, socket_timeout=2)
        worker = Worker.find_by_key(f"{Worker.redis_worker_namespace_prefix}{rq_name(dead)}",
                                    connection=redis, serializer=SERIALIZER)
        if worker is not None:
            worker.register_death()

    child = Child(name, start, on_exit=forget)
    return child


def settle_stopped_jobs(env: dict[str, str], worker_pids: list[int]) -> None:
    """Jobs that were still running on the stopped workers end failed or are re-queued (a
    retry-safe one runs again at the next start) instead of waiting for the sweeper."""
    from core.settings import Settings
    from worker.sweeper import settle_jobs_of_workers

    settings = Settings(redis_url=env["MMC_REDIS_URL"])
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=1, socket_timeout=5)
    for job_id, status in settle_jobs_of_workers(redis, settings, set(worker_pids)):
        print(f"mmc: job {job_id} was running at shutdown: now {status}", file=sys.stderr,
              flush=True)
