"""The RQ task of one webhook delivery attempt (queued by :func:`core.webhooks.schedule`)."""

from __future__ import annotations

import logging

from redis import Redis
from rq import get_current_job

from core.keys import Keys
from core.settings import Settings, get_settings
from core.webhooks import count, post_once

log = logging.getLogger(__name__)


class DeliveryError(Exception):
    """A delivery attempt failed; RQ schedules the next one (``Retry``)."""


def deliver_event(owner: str, url: str, msg_id: str, body: str) -> str:
    """One signed POST of the event; raises to have RQ retry it.

    A due retry can be queued twice, by RQ's scheduler and by a sweeper
    (:func:`worker.sweeper.promote_due_deliveries`), and the copy can run after another run of
    the job was answered 2xx, even after a retry of the failed run: once an event is delivered
    its mark (``Keys.webhook_delivered``) makes every later run a no-op, so a receiver that
    accepted an event gets no further delivery of it."""
    settings = get_settings()
    redis = _connection(settings)
    delivered = Keys.webhook_delivered(msg_id)
    if redis.exists(delivered):
        return "already_delivered"
    outcome = post_once(settings, owner, url, msg_id, body.encode())
    if outcome in ("delivered", "refused", "no_secret"):
        if outcome == "delivered":
            redis.set(delivered, 1, ex=settings.job_ttl_seconds)
        count(settings, outcome)
        return outcome
    log.warning("event %s: delivery failed (%s)", msg_id, outcome)
    if job_is_last_attempt():
        count(settings, "failed")
    raise DeliveryError(f"{msg_id}: {outcome}")


def _connection(settings: Settings) -> Redis:
    """The current RQ job's Redis (the settings' outside a job)."""
    job = get_current_job()
    return job.connection if job is not None else Redis.from_url(settings.redis_url)


def job_is_last_attempt() -> bool:
    """Whether the current RQ job has no retry left (its failure is final)."""
    job = get_current_job()
    return job is None or not job.retries_left
