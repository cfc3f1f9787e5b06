"""A worker counts as listening (``/readyz``) as soon as it has started, before its warm-up:
it registers with RQ before the numerics load, warms up while no job waits, and a job that
arrives meanwhile is taken after the step under way. Only the workers of the running
``mmc serve`` count: those an earlier run left registered in its Redis are forgotten."""

from __future__ import annotations

import uuid

from redis import Redis
from rq import Queue

from core.queues import SERIALIZER, get_queue
from mmc import processes
from mmc.serve import redis_child
from tests.conftest import ROOT
from tests.helpers import worker_at_registration
from worker.main import Worker
from worker.warmup import WarmUp


def test_a_worker_registers_before_it_imports_the_numerics(redis_url, tmp_path):
    report = worker_at_registration(redis_url, {"MMC_BLOB_URL": str(tmp_path)}, ROOT)
    assert report["loaded"] == []


def test_the_warm_up_gives_way_to_a_waiting_job_and_goes_on_once_none_waits(redis_url):
    connection = Redis.from_url(redis_url)
    queue = Queue(f"warm-up-{uuid.uuid4().hex}", connection=connection, serializer=SERIALIZER)
    worker = Worker([queue], connection=connection, serializer=SERIALIZER)
    ran: list[str] = []

    def job_arrives() -> None:
        ran.append("import")
        queue.enqueue("os.getpid")

    worker.warm_up = WarmUp(iter([job_arrives, lambda: ran.append("kernel")]))
    worker.continue_warm_up()
    assert ran == ["import"] and not worker.warm_up.done
    queue.empty()
    worker.continue_warm_up()
    assert ran == ["import", "kernel"] and worker.warm_up.done


def registered(port: int, queue: str) -> int:
    return Worker.count(queue=get_queue(queue, Redis(port=port)))


def register(port: int, name: str) -> None:
    Worker([get_queue("fast", Redis(port=port))], connection=Redis(port=port),
           name=name).register_birth()


def test_the_embedded_redis_forgets_the_workers_of_an_earlier_run_not_those_of_this_one(
        tmp_path):
    port = processes.free_port()
    earlier = processes.start_redis(port, tmp_path)
    register(port, "killed-with-its-run")
    processes.stop(earlier)  # its registration is in the append-only file
    redis = redis_child(port, tmp_path, processes.find_redis_server(), "everysec")
    redis.launch()
    try:
        assert registered(port, "fast") == 0
        register(port, "of-this-run")
        processes.stop(redis.process)
        redis.launch()  # the supervisor restarting it
        assert registered(port, "fast") == 1
    finally:
        processes.stop(redis.process)
