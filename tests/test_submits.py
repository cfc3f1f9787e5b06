"""Jobs stored in batches (service.submits, JobService.create_many) on a real redis-server: each
request of a batch gets its own answer, as if it had been stored alone. The database is one no
worker serves, so the queued jobs stay where the tests read them."""

from __future__ import annotations

import asyncio
import json

import pytest
from redis import Redis

from algorithms.registry import REGISTRY
from core.keys import Keys
from core.queues import get_queue
from core.settings import Settings
from service.jobs import JobService
from service.json_body import parse_model
from service.problems import ProblemError
from service.schemas import build_job_request_model
from service.submits import SubmitBatcher
from tests.helpers import run_async

JOB = build_job_request_model(REGISTRY)
POINTS = [[0.0, 0.1], [0.2, 0.0], [5.0, 5.1], [5.2, 4.9]]


def job(X=POINTS, **params):
    body = {"algorithm": {"name": "itersvr", "params": params}, "data": {"X": X}}
    return parse_model(bytearray(json.dumps(body).encode()), JOB, (("data", "X"),))


@pytest.fixture
def service(redis_url):
    url = redis_url.rsplit("/", 1)[0] + "/14"
    redis = Redis.from_url(url)
    redis.flushdb()
    yield JobService(redis, Settings(redis_url=url, max_active_jobs_per_tenant=3))
    redis.flushdb()


def queued_ids(service: JobService) -> list[str]:
    return get_queue("fast", service.redis).job_ids


def test_each_job_of_a_batch_gets_its_own_answer(service):
    results = service.create_many([
        (job(), "tenant-a", None),
        (job(n_clusters=9), "tenant-a", None),  # more clusters than points: a 422
        (job(), "tenant-a", None),
    ])
    first, refused, second = results
    assert isinstance(refused, ProblemError) and refused.status == 422, refused
    assert first[1] is False and second[1] is False
    assert first[0]["id"] != second[0]["id"]
    # The same matrix of one tenant is one dataset, stored once for both jobs.
    assert first[0]["dataset_id"] == second[0]["dataset_id"]
    assert service.redis.exists(Keys.dataset(first[0]["dataset_id"]))
    assert queued_ids(service) == [first[0]["id"], second[0]["id"]]
    assert service.get(second[0]["id"], "tenant-a")["status"] == "queued"


def test_an_idempotency_key_used_twice_in_one_batch_creates_one_job(service):
    (record, replayed), (again, replayed_again), conflict = service.create_many([
        (job(), "tenant-a", "key-1"),
        (job(), "tenant-a", "key-1"),
        (job(X=[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]), "tenant-a", "key-1"),
    ])
    assert (replayed, replayed_again) == (False, True)
    assert again["id"] == record["id"]
    assert isinstance(conflict, ProblemError) and conflict.status == 409
    assert queued_ids(service) == [record["id"]]


def test_a_tenant_at_its_cap_is_refused_within_a_batch(service):
    results = service.create_many([(job(), "tenant-a", None) for _ in range(4)]
                                  + [(job(), "tenant-b", None)])
    refused = [r for r in results if isinstance(r, ProblemError)]
    assert len(refused) == 1 and refused[0].status == 429
    assert results[3] is refused[0]  # the fourth of tenant-a's: its cap is 3
    assert len(queued_ids(service)) == 4


def test_concurrent_submits_are_stored_in_fewer_batches_than_requests(service):
    calls = []
    create_many = service.create_many

    def counted(items):
        calls.append(len(items))
        return create_many(items)

    service.create_many = counted
    batcher = SubmitBatcher(service)

    async def submit_all():
        return await asyncio.gather(*(batcher.create(job(), f"tenant-{i % 3}", None)
                                      for i in range(9)))

    answers = run_async(submit_all())
    assert sum(calls) == 9 and len(calls) < 9, calls
    assert len({record["id"] for record, _ in answers}) == 9
    assert len(queued_ids(service)) == 9


def test_a_refused_request_raises_to_its_caller_alone(service):
    batcher = SubmitBatcher(service)

    async def submit_two():
        return await asyncio.gather(batcher.create(job(n_clusters=9), "tenant-a", None),
                                    batcher.create(job(), "tenant-a", None),
                                    return_exceptions=True)

    refused, (record, _) = run_async(submit_two())
    assert isinstance(refused, ProblemError) and refused.status == 422
    assert queued_ids(service) == [record["id"]]
