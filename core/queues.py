"""RQ queues of the service: names from the registry, JSON serialization everywhere."""

from __future__ import annotations

from typing import get_args

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

from algorithms.registry import QueueName

QUEUE_NAMES: tuple[str, ...] = get_args(QueueName)
SERIALIZER = JSONSerializer
RUN_JOB = "worker.tasks.run_job"
# Webhook deliveries: served by every worker after its job queues (see worker.main).
WEBHOOK_QUEUE = "webhooks"
DELIVER_EVENT = "service.webhooks.deliver_event"


def get_queue(name: str, connection: Redis) -> Queue:
    return Queue(name, connection=connection, serializer=SERIALIZER)
