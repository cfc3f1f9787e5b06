"""RQ queues of the service: names, JSON serialization everywhere, tasks by dotted name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis import Redis
    from rq import Queue

# The values of algorithms.registry.QueueName, spelled out so that naming a queue imports no
# solver (a test checks that they agree); tasks are named, not imported, so that the API enqueues
# them without importing the worker.
QUEUE_NAMES: tuple[str, ...] = ("fast", "slow")
RUN_JOB = "worker.tasks.run_job"
ON_JOB_FAILURE = "worker.tasks.on_failure"
# Webhook deliveries: served by every worker after its job queues (see worker.main).
WEBHOOK_QUEUE = "webhooks"
DELIVER_EVENT = "worker.deliveries.deliver_event"
# RQ job meta flag: run this job in the worker itself, without forking a work horse.
IN_PROCESS = "in_process"
# A job in process holds at most this many values per point on average (with
# MMC_IN_PROCESS_MAX_SAMPLES points: 8x8 digit images), so its data and kernel stay within a few
# MB. A forked work horse's first fit is slower than the same fit in the warm worker, by as much
# as such a fit takes (docs/service_performance.md, busy-neighbour).
IN_PROCESS_VALUES_PER_POINT = 64


def __getattr__(name: str) -> Any:
    """``SERIALIZER``, RQ's JSON serializer, imported when first asked for: importing RQ (and
    redis-py with it) takes a few tenths of a second that naming a queue does not need."""
    if name == "SERIALIZER":
        from rq.serializers import JSONSerializer

        return JSONSerializer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_queue(name: str, connection: Redis) -> Queue:
    from rq import Queue

    return Queue(name, connection=connection, serializer=__getattr__("SERIALIZER"))
