"""``mmc serve``'s embedded Redis counts only the workers of the running ``mmc serve``: those an
earlier run left registered in its data directory (killed before they could unregister) are
forgotten at its first start, so ``/readyz`` cannot answer 200 before a worker of this run
listens; on a restart by the supervisor the registered workers are this run's own and stay."""

from __future__ import annotations

from redis import Redis
from rq import Worker

from core.queues import SERIALIZER, get_queue
from mmc import processes
from mmc.serve import redis_child


def registered(port: int, queue: str) -> int:
    return Worker.count(queue=get_queue(queue, Redis(port=port)))


def register(port: int, name: str) -> None:
    connection = Redis(port=port)
    Worker([get_queue("fast", connection)], connection=connection, name=name,
           serializer=SERIALIZER).register_birth()


def test_the_embedded_redis_forgets_the_workers_of_an_earlier_run_not_those_of_this_one(
        tmp_path):
    port = processes.free_port()
    earlier = processes.start_redis(port, tmp_path)
    register(port, "killed-with-its-run")
    assert registered(port, "fast") == 1
    processes.stop(earlier)  # its registration is kept in the append-only file
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
