"""Long polling of a job: ``GET /v1/jobs/{id}?wait=S`` answers when the status changes, or after S;
with ``until=finished``, when the job has finished (succeeded, failed or canceled).

Every status change of a job is published on its channel (``JobStore.transition``). A waiting
request subscribes, reads the record again (a change between the first read and the subscription
would otherwise be missed), then awaits a message on an asyncio Redis connection: no thread is
held while it waits, so many callers can wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
from fastapi import Request
from starlette.concurrency import run_in_threadpool

from core.job_record import FINAL_STATUSES, JobRecord
from core.keys import Keys
from core.settings import Settings
from service.jobs import JobService

MAX_WAIT_SECONDS = 60
# A waiting request looks up this often whether its caller is still there, so a closed
# connection frees its subscription before the wait is over.
CHECK_SECONDS = 1.0


class JobEvents:
    """The API process's asyncio Redis client for job events, made on first use (the app is
    built before an event loop exists, and an app that nobody long-polls needs none)."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._client: aioredis.Redis | None = None

    def client(self) -> aioredis.Redis:
        if self._client is None:
            self._client = aioredis.Redis.from_url(
                self._settings.redis_url,
                socket_connect_timeout=self._settings.redis_timeout_seconds)
        return self._client


async def wait_for_change(events: JobEvents, request: Request, job_id: str, seen: JobRecord,
                          seconds: float, read: Callable[[], Awaitable[JobRecord]], *,
                          until_finished: bool = False) -> JobRecord:
    """The job's record once its status differs from ``seen``'s (``until_finished``: once it
    is final), or after ``seconds``, or when the caller of ``request`` has gone."""
    if seen["status"] in FINAL_STATUSES:
        return seen

    def waiting(record: JobRecord) -> bool:
        if until_finished:
            return record["status"] not in FINAL_STATUSES
        return record["status"] == seen["status"]

    deadline = time.monotonic() + seconds
    pubsub = events.client().pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(Keys.job_events(job_id))
        record = await read()
        while waiting(record):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or await request.is_disconnected():
                break
            message = await pubsub.get_message(timeout=min(remaining, CHECK_SECONDS))
            if message is not None:
                record = await read()
        return record
    finally:
        # The reset must finish even when the request is cancelled mid-wait, or the pooled
        # connection would go back still subscribed.
        with contextlib.suppress(Exception):
            await asyncio.shield(pubsub.aclose())


async def read_job(job_service: JobService, job_id: str, caller: str) -> JobRecord:
    """The job's record through the job service (sync Redis, in a thread)."""
    return await run_in_threadpool(job_service.get, job_id, caller)
