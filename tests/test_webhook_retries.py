"""Due webhook retries go back on their queue once each, whichever sweeper takes them
(``worker.sweeper.promote_due_deliveries``)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from redis import Redis

from core.keys import Keys
from core.queues import DELIVER_EVENT, WEBHOOK_QUEUE, get_queue
from worker.sweeper import CLAIM_LEASE_SECONDS, promote_due_deliveries

# A database of the session's redis-server that no worker serves: the deliveries stay queued.
IDLE_DB = 7


@pytest.fixture
def redis(redis_url):
    client = Redis.from_url(redis_url.rpartition("/")[0] + f"/{IDLE_DB}")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def schedule_due(redis: Redis, count: int, batch: int = 0) -> list[str]:
    """``count`` delivery retries whose time came a minute ago, as RQ's Retry leaves them."""
    queue = get_queue(WEBHOOK_QUEUE, redis)
    past = datetime.now(UTC) - timedelta(minutes=1)
    return [queue.enqueue_at(past, DELIVER_EVENT, "tenant", "http://hook.example",
                             f"j{batch}x{i}.failed", "{}", job_id=f"webhook-j{batch}x{i}-failed").id
            for i in range(count)]


def queued_ids(redis: Redis) -> list[str]:
    return [job_id.decode() for job_id in redis.lrange(get_queue(WEBHOOK_QUEUE, redis).key, 0, -1)]


def test_two_sweepers_promoting_at_once_queue_each_due_retry_once(redis, redis_url):
    rounds, per_round = 20, 50
    promoted = [0, 0]
    barrier = threading.Barrier(3)  # the two sweepers and this test

    def promoter(index: int, client: Redis) -> None:
        for _ in range(rounds):
            barrier.wait()  # this round's retries are due: both promote at once
            promoted[index] += promote_due_deliveries(client)
            barrier.wait()

    clients = [Redis.from_url(redis_url.rpartition("/")[0] + f"/{IDLE_DB}") for _ in range(2)]
    threads = [threading.Thread(target=promoter, args=(i, c)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    scheduled = []
    for round_ in range(rounds):
        scheduled += schedule_due(redis, per_round, batch=round_)
        barrier.wait()
        barrier.wait()
    for thread in threads:
        thread.join(timeout=30)
    queued = queued_ids(redis)
    assert len(queued) == len(set(queued)), "a due retry was queued twice"
    assert sorted(queued) == sorted(scheduled)
    assert sum(promoted) == len(scheduled)
    assert redis.zcard(Keys.webhook_claims()) == 0


def test_a_retry_claimed_by_a_sweeper_that_died_is_queued_after_the_lease(redis):
    job_id = schedule_due(redis, 1)[0]
    registry = get_queue(WEBHOOK_QUEUE, redis).scheduled_job_registry
    # What a sweeper killed between its claim and its queueing leaves behind.
    redis.zrem(registry.key, job_id)
    redis.zadd(Keys.webhook_claims(), {job_id: time.time() - 1})
    assert promote_due_deliveries(redis) == 0  # claimed a second ago: its sweeper may still run
    redis.zadd(Keys.webhook_claims(), {job_id: time.time() - CLAIM_LEASE_SECONDS - 1})
    assert promote_due_deliveries(redis) == 1
    assert queued_ids(redis) == [job_id]
    assert redis.zcard(Keys.webhook_claims()) == 0
