"""Job callbacks: Standard Webhooks headers and signature with the tenant's secret, retries with
backoff until the receiver answers 2xx, and the SSRF guard (loopback, link-local and private
addresses refused unless MMC_WEBHOOK_ALLOW_PRIVATE; the live test allows loopback to reach a
receiver on this machine)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq.job import Job
from sklearn.datasets import make_blobs

from core import webhooks
from core.queues import SERIALIZER, WEBHOOK_QUEUE, get_queue
from core.settings import Settings
from service.app import create_app
from tests.hardening import WEBHOOK_KEY as KEY
from tests.hardening import WEBHOOK_SECRET as SECRET


class Receiver(ThreadingHTTPServer):
    """Answers 503 to the first ``fail_first`` deliveries, then 204; keeps every request."""

    def __init__(self, fail_first: int):
        self.fail_first = fail_first
        self.requests: list[tuple[float, dict[str, str], bytes]] = []
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler):  # noqa: N805
                body = handler.rfile.read(int(handler.headers["content-length"]))
                with self.lock:
                    self.requests.append((time.monotonic(), dict(handler.headers.items()), body))
                    status = 503 if len(self.requests) <= self.fail_first else 204
                handler.send_response(status)
                handler.send_header("content-length", "0")
                handler.end_headers()

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


@pytest.fixture(scope="module")
def hooked(healing_deployment, receiver_outage):
    """The session's ``healing_deployment`` (tests/hardening.py: HEALING_ENV: webhooks signed
    with SECRET, retried after 1, 1, 2, ... s). Its ``receiver_outage`` of
    tests/test_self_healing_jobs.py starts here, so the outage passes while the modules between
    run."""
    return healing_deployment


def payload(callback_url: str | None, seed: int = 0) -> dict:
    X, _ = make_blobs(n_samples=30, centers=2, random_state=seed)
    body = {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
            "data": {"X": X.tolist()}}
    if callback_url is not None:
        body["callback_url"] = callback_url
    return body


def expected_signature(headers: dict[str, str], body: bytes) -> str:
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(KEY, content, hashlib.sha256).digest()).decode()


def test_callback_is_signed_and_retried_with_backoff_until_accepted(hooked):
    receiver = Receiver(fail_first=2)
    try:
        created = httpx.post(f"{hooked.url}/v1/jobs", json=payload(receiver.url))
        assert created.status_code == 202, created.text
        deadline = time.monotonic() + 60
        while len(receiver.requests) < 3:
            assert time.monotonic() < deadline, receiver.requests
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        receiver.shutdown()
    assert len(receiver.requests) == 3  # two 503s, then accepted: no further deliveries
    ids = {headers["webhook-id"] for _, headers, _ in receiver.requests}
    assert ids == {f"{created.json()['id']}.succeeded"}  # one event id across retries
    for _, headers, body in receiver.requests:
        assert abs(int(headers["webhook-timestamp"]) - time.time()) < 120
        assert headers["webhook-signature"] == expected_signature(headers, body)
    event = json.loads(receiver.requests[-1][2])
    assert event["type"] == "job.succeeded"
    assert event["data"]["id"] == created.json()["id"] and event["data"]["model_id"]
    gaps = [b[0] - a[0] for a, b in zip(receiver.requests, receiver.requests[1:], strict=False)]
    # Backoff from 0.5 s: RQ's scheduler retries after ceil(0.5 * 2**i) = 1, 1, 2, ... s. It stores
    # the due time in whole seconds, so one retry may come almost at once (a failure at x.99 s is
    # due at x+1); the next is then due a whole second later. Two gaps together bound the
    # backoff; retries without it would come within tens of milliseconds.
    assert gaps[0] + gaps[1] >= 0.9, gaps


def test_a_delivery_queued_again_after_the_event_was_accepted_posts_nothing(hooked):
    """RQ's scheduler and a sweeper can both queue a due retry; the copy may run after another
    run got the 2xx. Here the accepted delivery's RQ job is queued once more, as that race does:
    it must finish without posting the event again."""
    receiver = Receiver(fail_first=0)
    try:
        created = httpx.post(f"{hooked.url}/v1/jobs", json=payload(receiver.url, seed=1))
        assert created.status_code == 202, created.text
        deadline = time.monotonic() + 60
        while not receiver.requests:
            assert time.monotonic() < deadline, "the event was never delivered"
            time.sleep(0.05)
        redis = Redis.from_url(hooked.redis_url)
        job_id = f"webhook-{created.json()['id']}-succeeded"
        job = Job.fetch(job_id, connection=redis, serializer=SERIALIZER)
        while job.get_status(refresh=True) != "finished":
            assert time.monotonic() < deadline, job.get_status()
            time.sleep(0.05)
        get_queue(WEBHOOK_QUEUE, redis).enqueue_job(job)
        while job.get_status(refresh=True) != "finished":
            assert time.monotonic() < deadline, job.get_status()
            time.sleep(0.05)
        assert job.return_value(refresh=True) == "already_delivered"
        time.sleep(0.3)
    finally:
        receiver.shutdown()
    assert len(receiver.requests) == 1


def test_a_tampered_body_fails_verification():
    headers = {"webhook-id": "j.succeeded", "webhook-timestamp": "1700000000"}
    signature = webhooks.sign(SECRET, headers["webhook-id"], 1700000000, b'{"a":1}')
    assert signature == expected_signature(headers, b'{"a":1}')
    assert signature != expected_signature(headers, b'{"a":2}')


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/x", "http://localhost/x", "http://10.1.2.3/x", "http://192.168.0.7/x",
    "http://172.16.5.5/x", "http://169.254.169.254/latest/meta-data", "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x", "http://0.0.0.0/x", "ftp://example.com/x", "file:///etc/passwd",
    "http://user:pw@example.com/x",
    # Shared address space (cloud metadata at 100.100.100.200), benchmarking, IETF protocol
    # assignments, reserved, documentation, multicast, and IPv6 forms that embed or route to
    # internal addresses: site-local, 6to4 of 127.0.0.1, NAT64 of 10.0.0.1, local-use NAT64.
    "http://100.100.100.200/latest/meta-data", "http://100.64.0.1/x", "http://198.18.0.1/x",
    "http://192.0.0.170/x", "http://240.0.0.1/x", "http://[2001:db8::1]/x", "http://[ff0e::1]/x",
    "http://[fec0::1]/x", "http://[2002:7f00:1::]/x", "http://[64:ff9b::a00:1]/x",
    "http://[64:ff9b:1::1]/x", "http://[fd00:ec2::254]/x",
])
def test_ssrf_guard_refuses_internal_and_non_http_targets(url):
    assert webhooks.url_problem(url, allow_private=False) is not None
    if url.startswith("http://") and "@" not in url:
        assert webhooks.url_problem(url, allow_private=True) is None


def test_public_address_is_allowed():
    assert webhooks.url_problem("http://93.184.216.34/hook", allow_private=False) is None
    assert webhooks.url_problem("http://[64:ff9b::5db8:d822]/hook", allow_private=False) is None


def test_a_name_with_any_internal_address_is_refused():
    def resolver(host, port):
        return ["93.184.216.34", "10.0.0.7"]

    target, problem = webhooks.check_url("http://hook.example/x", False, resolver)
    assert target is None and "10.0.0.7" in problem


def test_delivery_connects_to_the_address_it_checked():
    """DNS rebinding: the name answers a good address for the check and another one for any
    later lookup; the delivery must go to the checked address, with the name as Host."""
    receiver = Receiver(fail_first=0)
    port = receiver.server_address[1]
    answers = iter([["127.0.0.1"]])
    lookups: list[str] = []

    def rebinding(host, port_):
        lookups.append(host)
        return next(answers, ["10.255.255.1"])

    settings = Settings(webhook_secrets=f"t:{SECRET}", webhook_allow_private=True,
                        webhook_max_attempts=1)
    record = {"id": "j2", "owner": "t", "status": "succeeded", "algorithm": "itersvr",
              "params": {}, "queue": "fast", "n_samples": 3,
              "callback_url": f"http://hook.rebind.test:{port}/hook"}
    before = len(receiver.requests)
    assert webhooks.deliver(settings, record, sleep=lambda _: None, resolver=rebinding)
    assert lookups == ["hook.rebind.test"]  # one lookup, and the connection used its answer
    _, headers, body = receiver.requests[before]
    assert {k.lower(): v for k, v in headers.items()}["host"] == f"hook.rebind.test:{port}"
    assert json.loads(body)["data"]["id"] == "j2"
    receiver.shutdown()


def test_https_delivery_is_pinned_with_the_name_for_sni():
    target, problem = webhooks.check_url("https://hook.example:8443/a?b=1", True,
                                         lambda host, port: ["2606:4700::1111", "1.1.1.1"])
    assert problem is None
    url, headers, extensions = target.request_args()
    assert url == "https://[2606:4700::1111]:8443/a?b=1"
    assert headers == {"host": "hook.example:8443"}
    assert extensions == {"sni_hostname": "hook.example"}


def test_job_with_internal_callback_or_without_secret_is_422(redis_url):
    guarded = create_app(Settings(redis_url=redis_url, webhook_secrets=f"anonymous:{SECRET}"),
                         redis=Redis.from_url(redis_url))
    with TestClient(guarded) as client:
        for url in ("http://127.0.0.1:9/x", "http://169.254.169.254/", "http://10.0.0.1/"):
            response = client.post("/v1/jobs", json=payload(url))
            assert response.status_code == 422, response.text
            assert response.json()["errors"][0]["field"] == "body.callback_url"
            assert "MMC_WEBHOOK_ALLOW_PRIVATE" in response.json()["detail"]
    secretless = create_app(Settings(redis_url=redis_url), redis=Redis.from_url(redis_url))
    with TestClient(secretless) as client:
        response = client.post("/v1/jobs", json=payload("http://93.184.216.34/hook"))
        assert response.status_code == 422 and "secret" in response.json()["detail"]


def test_delivery_rechecks_the_address_and_gives_up_after_max_attempts(monkeypatch):
    settings = Settings(webhook_secrets=f"t:{SECRET}", webhook_max_attempts=3,
                        webhook_backoff_seconds=0.1)
    record = {"id": "j1", "owner": "t", "status": "failed", "algorithm": "itersvr", "params": {},
              "queue": "fast", "n_samples": 3, "callback_url": "http://127.0.0.1:9/x"}
    sleeps: list[float] = []
    assert webhooks.deliver(settings, record, sleep=sleeps.append) is False
    assert sleeps == []  # refused before any request: loopback is not allowed here
    allowed = settings.model_copy(update={"webhook_allow_private": True})
    assert webhooks.deliver(allowed, record, sleep=sleeps.append) is False  # nothing listens
    assert sleeps == [0.1, 0.2]


def test_event_bodies_are_strict_json_even_with_a_diverged_objective():
    record = {"id": "j3", "owner": "t", "status": "failed", "algorithm": "itersvr",
              "params": {"C": 1.0}, "queue": "fast", "n_samples": 3,
              "progress": {"step": 3, "objective": float("inf"), "message": "x"}}
    _, body = webhooks.event(record)

    def refuse(token):
        raise AssertionError(f"{token} in {body!r}")

    assert json.loads(body, parse_constant=refuse)["data"]["progress"]["objective"] is None
