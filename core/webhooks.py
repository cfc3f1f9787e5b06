"""Job callbacks signed per the Standard Webhooks specification, with an SSRF guard.

Headers: ``webhook-id`` (stable across retries of one event: ``<job id>.<status>``),
``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` = ``v1,<base64 HMAC-SHA256 of
"<id>.<timestamp>.<body>">`` keyed with the tenant's secret (``whsec_<base64>`` in
``MMC_WEBHOOK_SECRETS``). A callback goes only to http(s) URLs whose host resolves to public
addresses, unless ``MMC_WEBHOOK_ALLOW_PRIVATE`` is set; the check is repeated at every delivery,
so a name re-pointed at an internal address after submission is refused too, and each delivery
connects to the very address it checked (no second lookup for DNS rebinding to answer).
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from redis import Redis
from rq import Retry

from core import metrics
from core.job_record import JobRecord
from core.queues import DELIVER_EVENT, WEBHOOK_QUEUE, get_queue
from core.records import render_job
from core.settings import Settings, parse_pairs

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


# Ranges ``ipaddress.is_global`` (Python 3.11) still calls global: deprecated site-local IPv6,
# 6to4 (it embeds any IPv4, 127.0.0.1 included) and NAT64's local-use prefix.
_NOT_GLOBAL = tuple(ipaddress.ip_network(net) for net in (
    "fec0::/10", "2002::/16", "64:ff9b:1::/48"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _forbidden(address: str) -> bool:
    """Whether a callback may not go to ``address``: anything but a globally routable unicast
    address (private, loopback, link-local, shared 100.64.0.0/10 with its cloud metadata
    addresses, documentation, reserved, multicast...)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:  # well-known NAT64 prefix: judge the IPv4 address it carries
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.is_multicast or not ip.is_global:
        return True
    return any(ip in net for net in _NOT_GLOBAL if net.version == ip.version)


Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (TCP), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(info[4][0] for info in infos))


@dataclass(frozen=True)
class Target:
    """A callback URL with the address it was checked against: the delivery connects to that
    address (pinned), so a name re-pointed after the check (DNS rebinding) cannot redirect it."""

    url: str
    host: str
    port: int
    address: str

    def request_args(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """``(url to connect to, extra headers, httpx extensions)``: the address literal in the
        URL, the name in ``Host`` and, for https, in SNI (the certificate is checked for it)."""
        parts = urlsplit(self.url)
        literal = f"[{self.address}]" if ":" in self.address else self.address
        netloc = f"{literal}:{parts.port}" if parts.port else literal
        host_header = parts.netloc.rpartition("@")[2]
        extensions = {"sni_hostname": self.host} if parts.scheme == "https" else {}
        return urlunsplit(parts._replace(netloc=netloc)), {"host": host_header}, extensions


def check_url(url: str, allow_private: bool, resolver: Resolver = resolve
              ) -> tuple[Target | None, str | None]:
    """``(target, None)`` when ``url`` may be called back, else ``(None, why not)``. The name is
    resolved once; every address must be global (unless ``allow_private``) and the first one is
    pinned."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return None, f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None, "must be an http or https URL with a host"
    if parts.username or parts.password:
        return None, "must not carry credentials"
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolver(parts.hostname, port)
    except (OSError, UnicodeError) as exc:
        return None, f"host {parts.hostname!r} does not resolve ({exc})"
    if not addresses:
        return None, f"host {parts.hostname!r} does not resolve"
    for address in addresses if not allow_private else ():
        if _forbidden(address):
            return None, (f"host {parts.hostname!r} resolves to {address}, which is not a "
                          "globally routable address (private, loopback, link-local, shared "
                          "or reserved: refused; MMC_WEBHOOK_ALLOW_PRIVATE allows it)")
    return Target(url, parts.hostname, port, addresses[0]), None


def url_problem(url: str, allow_private: bool) -> str | None:
    """Why ``url`` may not be called back, or ``None`` when it may."""
    return check_url(url, allow_private)[1]


def event(record: JobRecord) -> tuple[str, bytes]:
    """``(webhook id, body)`` of the final-status event of a job record."""
    body = {"type": f"job.{record['status']}",
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "data": render_job(record)}
    return f"{record['id']}.{record['status']}", json.dumps(
        _finite(body), sort_keys=True, allow_nan=False).encode()


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as ``null``: JSON has no such numbers, and a receiver's
    strict parser would reject ``Infinity`` (an objective can diverge)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def deliver(settings: Settings, record: JobRecord, *, sleep=time.sleep,
            resolver: Resolver = resolve) -> bool:
    """POST the event to the job's ``callback_url`` here and now, retrying with exponential
    backoff; returns whether a 2xx answer came back. The service itself uses :func:`schedule`
    (each attempt an RQ job); the outcome is counted in ``mmc_webhook_deliveries_total``."""
    url = record.get("callback_url")
    if not url:
        return False
    msg_id, body = event(record)
    delay = settings.webhook_backoff_seconds
    final = "failed"
    for attempt in range(1, settings.webhook_max_attempts + 1):
        outcome = post_once(settings, record.get("owner", ""), url, msg_id, body, resolver)
        if outcome in ("delivered", "refused", "no_secret"):
            final = outcome
            break
        log.warning("job %s: callback attempt %d failed (%s)", record["id"], attempt, outcome)
        if attempt < settings.webhook_max_attempts:
            sleep(delay)
            delay *= 2
    count(settings, final)
    return final == "delivered"


def count(settings: Settings, outcome: str) -> None:
    """Count a delivery's final ``outcome`` in ``mmc_webhook_deliveries_total``."""
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=2)
    try:
        metrics.record(redis, "mmc_webhook_deliveries_total", outcome=outcome)
    except Exception as exc:  # a metric must never fail a delivery
        log.warning("webhook delivery metric not recorded: %s", exc)
    finally:
        redis.close()


def post_once(settings: Settings, owner: str, url: str, msg_id: str, body: bytes,
              resolver: Resolver = resolve) -> str:
    """One signed delivery to the address checked just before it (pinned): ``"delivered"`` on a
    2xx answer, ``"refused"`` (SSRF guard) or ``"no_secret"`` when it must not be retried, else
    what went wrong."""
    secret = tenant_secret(settings, owner)
    if secret is None:
        log.warning("event %s: no webhook secret for its tenant; callback dropped", msg_id)
        return "no_secret"
    target, problem = check_url(url, settings.webhook_allow_private, resolver)
    if target is None:
        log.warning("event %s: callback URL refused: %s", msg_id, problem)
        return "refused"
    connect_url, pinned_headers, extensions = target.request_args()
    timestamp = int(time.time())
    headers = {"content-type": "application/json", "webhook-id": msg_id,
               "webhook-timestamp": str(timestamp),
               "webhook-signature": sign(secret, msg_id, timestamp, body), **pinned_headers}
    try:
        with httpx.Client(timeout=settings.webhook_timeout_seconds,
                          follow_redirects=False) as client:
            response = client.send(client.build_request(
                "POST", connect_url, content=body, headers=headers, extensions=extensions))
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "delivered" if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"


def schedule(redis: Redis, settings: Settings, record: JobRecord | None) -> None:
    """Queue the final-status event of a job for delivery, off the job's worker: the event is
    an RQ job on the ``webhooks`` queue (persisted in Redis, served by every worker after its job
    queues) and each failed attempt is retried by RQ's scheduler after a doubling interval, so a
    dead work horse or a receiver that is down for minutes loses no event and a slow or failing
    receiver never holds a job's worker between attempts."""
    if not record or not record.get("callback_url"):
        return
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

