"""Large bodies against a private deployment with API keys: a client without a valid key is refused
before its body is read, a 62 MiB body is parsed off the event loop (``/healthz`` keeps answering)
within a stated memory budget, and bodies in flight are bounded per API process."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import numpy as np
import psutil
import pytest

from tests.hardening import SharedApi

KEY = "s3cret-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BODY_LIMIT = 80 * 2**20
IN_FLIGHT = 100 * 2**20
READ_TIMEOUT = 5
MAX_REQUESTS = 3


@pytest.fixture(scope="module")
def deployment(service_env, service_workers, tmp_path_factory):
    # A tenant of its own: the session's store also holds other modules' jobs.
    deployment = SharedApi(tmp_path_factory.mktemp("bodies"), service_env, service_workers, {
        "MMC_API_KEYS": f"bodies:{KEY}", "MMC_MAX_BODY_BYTES": str(BODY_LIMIT),
        "MMC_MAX_BODY_BYTES_IN_FLIGHT": str(IN_FLIGHT), "MMC_RETRY_AFTER_SECONDS": "4",
        "MMC_BODY_READ_TIMEOUT_SECONDS": str(READ_TIMEOUT),
        "MMC_MAX_CONCURRENT_REQUESTS": str(MAX_REQUESTS)})
    yield deployment
    deployment.close()


def raw_request(url: str, path: str, headers: dict[str, str], body_prefix: bytes,
                declared: int) -> socket.socket:
    """Send the request line, headers declaring ``declared`` body bytes and only
    ``body_prefix`` of them; the socket stays open for the answer."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
            f"Content-Length: {declared}", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body_prefix)
    return sock


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed without an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    headers = {k.lower(): v for k, v in headers.items()}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(lines[0].split()[1]), headers, json.loads(rest[:length])


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/datasets", f"/v1/models/{'0' * 32}/predict"])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_a_client_without_a_valid_key_is_refused_before_its_body_is_read(deployment, path,
                                                                         headers):
    # 62 MiB declared, 64 KiB sent: an answer can only come if the key is checked first.
    sock = raw_request(deployment.url, path, headers, b"[" * 65536, 62 * 2**20)
    try:
        status, response_headers, problem = read_answer(sock)
    finally:
        sock.close()
    assert status == 401, problem
    assert response_headers["www-authenticate"] == "Bearer"
    assert "API key" in problem["detail"]


def test_bodies_in_flight_are_bounded_per_process(deployment):
    held = raw_request(deployment.url, "/v1/datasets", AUTH, b"[", 60 * 2**20)
    try:
        time.sleep(0.5)  # let the server admit the first request (no timing is asserted)
        refused = raw_request(deployment.url, "/v1/datasets", AUTH, b"", 50 * 2**20)
        status, headers, problem = read_answer(refused)
        refused.close()
        assert status == 503, problem
        assert headers["retry-after"] == "4"
        assert "MMC_MAX_BODY_BYTES_IN_FLIGHT" in problem["detail"]
        # Probes are exempt.
        assert httpx.get(f"{deployment.url}/healthz", timeout=10).status_code == 200
    finally:
        held.close()
    X = [[1.0, 2.0], [3.0, 4.0]]
    deadline = time.monotonic() + 30
    while True:  # the held request ends once the server sees its connection closed
        response = httpx.post(f"{deployment.url}/v1/datasets", json={"X": X}, headers=AUTH)
        if response.status_code != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert response.status_code in (200, 201), response.text


def test_a_stalled_body_is_answered_408_and_releases_its_reservation(deployment):
    # 60 MiB declared, one byte sent, then nothing: after READ_TIMEOUT seconds without bytes the
    # request ends with 408, and its reservation with it. Before, the declared bytes stayed
    # reserved while the client held the connection, and every other upload got 503.
    for _ in range(2):  # the second would be a 503 if the first had kept its reservation
        stalled = raw_request(deployment.url, "/v1/datasets", AUTH, b"[", 60 * 2**20)
        try:
            status, _, problem = read_answer(stalled)
        finally:
            stalled.close()
        assert status == 408 and problem["title"] == "Request timeout", problem
        assert "MMC_BODY_READ_TIMEOUT_SECONDS" in problem["detail"]
    response = httpx.post(f"{deployment.url}/v1/datasets", json={"X": [[1.0, 2.0], [3.0, 4.0]]},
                          headers=AUTH, timeout=30)
    assert response.status_code in (200, 201), response.text


def test_long_polls_do_not_hold_request_slots(deployment):
    # MAX_REQUESTS callers waiting on a running job: other requests are still served. Counted
    # against MMC_MAX_CONCURRENT_REQUESTS, the waiters made every other request a 503.
    X = np.random.default_rng(0).normal(size=(1500, 2))  # an SDP of seconds, on the slow queue
    job = httpx.post(f"{deployment.url}/v1/jobs", headers=AUTH, timeout=60, json={
        "algorithm": {"name": "sdp_mmc", "params": {"random_state": 0}},
        "data": {"X": X.tolist()}}).json()
    url = f"{deployment.url}/v1/jobs/{job['id']}"
    waiters = [threading.Thread(target=httpx.get, args=(f"{url}?wait=8",),
                                kwargs={"headers": AUTH, "timeout": 30})
               for _ in range(MAX_REQUESTS)]
    try:
        for waiter in waiters:
            waiter.start()
        time.sleep(1.0)  # the waiters are admitted and waiting (no timing is asserted)
        waiting = httpx.get(url, headers=AUTH, timeout=30).json()["status"]
        listed = httpx.get(f"{deployment.url}/v1/algorithms", headers=AUTH, timeout=30)
        assert listed.status_code == 200, listed.text
        assert waiting in ("queued", "running"), waiting  # the polls were still waiting
    finally:
        httpx.delete(url, headers=AUTH, timeout=30)
        for waiter in waiters:
            waiter.join()


def large_body(target_bytes: int) -> tuple[bytes, int]:
    """A JSON dataset of about ``target_bytes`` (20 features, full-precision floats)."""
    rows = target_bytes // (20 * 21)
    X = np.random.default_rng(0).normal(size=(rows, 20))
    body = json.dumps({"X": X.tolist()}).encode()
    return body, rows


def test_a_62_mib_body_is_parsed_off_the_event_loop_within_its_memory_budget(deployment):
    body, rows = large_body(62 * 2**20)
    api = psutil.Process(deployment.api.pid)
    baseline = api.memory_info().rss
    peak = baseline
    latencies: list[float] = []
    done = threading.Event()

    def watch():
        nonlocal peak
        with httpx.Client(base_url=deployment.url, timeout=30) as client:
            while not done.is_set():
                started = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - started)
                peak = max(peak, api.memory_info().rss)
                time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.perf_counter()
    try:
        response = httpx.post(f"{deployment.url}/v1/datasets", content=body, timeout=120,
                              headers={**AUTH, "content-type": "application/json"})
    finally:
        done.set()
        watcher.join()
    seconds = time.perf_counter() - started
    assert response.status_code in (200, 201), response.text
    assert response.json()["n_samples"] == rows
    growth = peak - baseline
    print(f"\n{len(body) / 2**20:.1f} MiB body in {seconds:.2f} s; /healthz answered "
          f"{len(latencies)} times, max {max(latencies) * 1000:.0f} ms, "
          f"p50 {np.median(latencies) * 1000:.1f} ms; API RSS {baseline / 2**20:.0f} -> "
          f"{peak / 2**20:.0f} MiB (+{growth / 2**20:.0f} MiB, {growth / len(body):.2f}x body)")
    assert len(latencies) >= 10
    # The old handler parsed on the event loop and stalled /healthz for 3.4 s.
    assert max(latencies) < 1.0, latencies
    assert growth <= 3 * len(body)
