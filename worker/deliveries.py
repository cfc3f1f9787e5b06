"""The RQ task of one webhook delivery attempt (queued by :func:`core.webhooks.schedule`)."""

from __future__ import annotations

import logging

from rq import get_current_job

from core.settings import get_settings
from core.webhooks import count, post_once

log = logging.getLogger(__name__)


class DeliveryError(Exception):
    """A delivery attempt failed; RQ schedules the next one (``Retry``)."""


def deliver_event(owner: str, url: str, msg_id: str, body: str) -> str:
    """One signed POST of the event; raises to have RQ retry it."""
    settings = get_settings()
    outcome = post_once(settings, owner, url, msg_id, body.encode())
    if outcome in ("delivered", "refused", "no_secret"):
        count(settings, outcome)
        return outcome
    log.warning("event %s: delivery failed (%s)", msg_id, outcome)
    if job_is_last_attempt():
        count(settings, "failed")
    raise DeliveryError(f"{msg_id}: {outcome}")


def job_is_last_attempt() -> bool:
    """Whether the current RQ job has no retry left (its failure is final)."""
    job = get_current_job()
    return job is None or not job.retries_left
