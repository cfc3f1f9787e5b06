"""Job callbacks signed per the Standard Webhooks specification, with an SSRF guard.

Headers: ``webhook-id`` (stable across retries of one event: ``<job id>.<status>``),
``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` = ``v1,<base64 HMAC-SHA256 of
"<id>.<timestamp>.<body>">`` keyed with the tenant's secret (``whsec_<base64>`` in
``MMC_WEBHOOK_SECRETS``). A callback goes only to http(s) URLs whose host resolves to public
addresses, unless ``MMC_WEBHOOK_ALLOW_PRIVATE`` is set; the check is repeated at every delivery,
so a name re-pointed at an internal address after submission is refused too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from service.settings import Settings, parse_pairs

log = logging.getLogger(__name__)


def secret_bytes(secret: str) -> bytes:
    """The key of a ``whsec_<base64>`` secret (any other string is used as UTF-8 bytes)."""
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret[6:], validate=True)
        except ValueError:
            pass
    return secret.encode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_bytes(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def tenant_secret(settings: Settings, tenant: str) -> str | None:
    return parse_pairs(settings.webhook_secrets).get(tenant)


def _forbidden(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
            or ip.is_reserved or ip.is_unspecified)


def url_problem(url: str, allow_private: bool) -> str | None:
    """Why ``url`` may not be called back, or ``None`` when it may."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http or https URL with a host"
    if parts.username or parts.password:
        return "must not carry credentials"
    if allow_private:
        return None
    try:
        infos = socket.getaddrinfo(parts.hostname, port or 443, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        return f"host {parts.hostname!r} does not resolve ({exc})"
    for info in infos:
        if _forbidden(info[4][0]):
            return (f"host {parts.hostname!r} resolves to {info[4][0]}, a loopback, link-local "
                    "or private address (refused; MMC_WEBHOOK_ALLOW_PRIVATE allows it)")
    return None


def event(record: dict[str, Any]) -> tuple[str, bytes]:
    """``(webhook id, body)`` of the final-status event of a job record."""
    from service.jobs import render_job

    body = {"type": f"job.{record['status']}",
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "data": render_job(record)}
    return f"{record['id']}.{record['status']}", json.dumps(body, sort_keys=True).encode()


def deliver(settings: Settings, record: dict[str, Any], *, sleep=time.sleep) -> bool:
    """POST the event to the job's ``callback_url`` here and now, retrying with exponential
    backoff; returns whether a 2xx answer came back. The service itself uses :func:`schedule`."""
    url = record.get("callback_url")
    if not url:
        return False
    msg_id, body = event(record)
    delay = settings.webhook_backoff_seconds
    for attempt in range(1, settings.webhook_max_attempts + 1):
        outcome = post_once(settings, record.get("owner", ""), url, msg_id, body)
        if outcome is None:
            return True
        if outcome.startswith("refused"):
            return False
        log.warning("job %s: callback attempt %d failed (%s)", record["id"], attempt, outcome)
        if attempt < settings.webhook_max_attempts:
            sleep(delay)
            delay *= 2
    return False


def post_once(settings: Settings, owner: str, url: str, msg_id: str, body: bytes) -> str | None:
    """One signed delivery: ``None`` on a 2xx answer, else what went wrong (``refused: ...``
    when it must not be retried)."""
    secret = tenant_secret(settings, owner)
    if secret is None:
        log.warning("event %s: no webhook secret for its tenant; callback dropped", msg_id)
        return "refused: no webhook secret for the tenant"
    problem = url_problem(url, settings.webhook_allow_private)
    if problem is not None:
        log.warning("event %s: callback URL refused: %s", msg_id, problem)
        return f"refused: {problem}"
    timestamp = int(time.time())
    headers = {"content-type": "application/json", "webhook-id": msg_id,
               "webhook-timestamp": str(timestamp),
               "webhook-signature": sign(secret, msg_id, timestamp, body)}
    try:
        response = httpx.post(url, content=body, headers=headers, follow_redirects=False,
                              timeout=settings.webhook_timeout_seconds)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"


class DeliveryError(Exception):
    """A delivery attempt failed; RQ schedules the next one (``Retry``)."""


def schedule(redis, settings: Settings, record: dict[str, Any] | None) -> None:
    """Queue the final-status event of a job for delivery, off the job's worker: the event is
    an RQ job on the ``webhooks`` queue (persisted in Redis, served by every worker after its job
    queues) and each failed attempt is retried by RQ's scheduler after a doubling interval, so a
    dead work horse or a receiver that is down for minutes loses no event and a slow or failing
    receiver never holds a job's worker between attempts."""
    if not record or not record.get("callback_url"):
        return
    from rq import Retry

    from worker.queues import DELIVER_EVENT, WEBHOOK_QUEUE, get_queue

    msg_id, body = event(record)
    retries = settings.webhook_max_attempts - 1
    intervals = [math.ceil(min(settings.webhook_backoff_seconds * 2**i, 3600))
                 for i in range(retries)]
    get_queue(WEBHOOK_QUEUE, redis).enqueue(
        DELIVER_EVENT, record.get("owner", ""), record["callback_url"], msg_id, body.decode(),
        job_id=f"webhook-{msg_id.replace('.', '-')}", result_ttl=600,
        failure_ttl=settings.job_ttl_seconds,
        job_timeout=int(settings.webhook_timeout_seconds) + 30,
        retry=Retry(max=retries, interval=intervals) if retries else None)


def deliver_event(owner: str, url: str, msg_id: str, body: str) -> str:
    """The RQ task of one delivery attempt; raises to have RQ retry it."""
    from service.settings import get_settings

    outcome = post_once(get_settings(), owner, url, msg_id, body.encode())
    if outcome is None:
        return "delivered"
    if outcome.startswith("refused"):
        return outcome
    log.warning("event %s: delivery failed (%s)", msg_id, outcome)
    raise DeliveryError(f"{msg_id}: {outcome}")

