"""Admission limits of one API process: concurrent requests and request-body bytes in flight.

uvicorn has no memory budget: a few parallel 60 MiB uploads, each parsed into a matrix, can
exhaust an API container. Here every request holds a slot (``MMC_MAX_CONCURRENT_REQUESTS``) and
reserves its declared ``Content-Length`` (or what it has streamed so far) against
``MMC_MAX_BODY_BYTES_IN_FLIGHT``; a request that does not fit is answered at once with 503 and
Retry-After, before its body is read.
Health probes and metrics are exempt, so an overloaded process still reports its state, and so
are long polls, which hold no body and wait on Redis.
"""

from __future__ import annotations

from service.problems import send_problem

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _is_long_poll(scope) -> bool:
    """A ``GET`` with ``wait`` (``/v1/jobs/{id}?wait=S``): it has no body and idles on a Redis
    subscription for up to a minute. Counted, 64 waiting callers (console tabs poll this way)
    took every slot and refused submits, cancels and predicts with 503."""
    return scope["method"] == "GET" and any(
        part.split(b"=", 1)[0] == b"wait" for part in scope["query_string"].split(b"&"))


class AdmissionLimitMiddleware:
    def __init__(self, app, max_requests: int, max_body_bytes: int, retry_after: int):
        self.app = app
        self.max_requests = max_requests
        self.max_body_bytes = max_body_bytes
        self.retry_after = retry_after
        self.requests = 0
        self.body_bytes = 0  # reserved by requests in flight (single event loop: no lock needed)

    async def _refuse(self, scope, send, detail: str) -> None:
        await send_problem(scope, send, 503, detail, [
            (b"retry-after", str(self.retry_after).encode()), (b"connection", b"close")])

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS or _is_long_poll(scope):
            return await self.app(scope, receive, send)
        if self.requests >= self.max_requests:
            return await self._refuse(scope, send, f"this API process is serving "
                                      f"{self.max_requests} requests (MMC_MAX_CONCURRENT_REQUESTS);"
                                      " retry later")
        length = dict(scope["headers"]).get(b"content-length", b"")
        declared = int(length) if length.isdigit() else 0
        if declared and self.body_bytes + declared > self.max_body_bytes:
            return await self._refuse(scope, send, f"request bodies in flight would exceed "
                                      f"{self.max_body_bytes} bytes (MMC_MAX_BODY_BYTES_IN_FLIGHT);"
                                      " retry later")
        reserved = declared
        self.requests += 1
        self.body_bytes += reserved

        async def counted_receive():
            nonlocal reserved
            message = await receive()
            if not declared and message["type"] == "http.request":
                chunk = len(message.get("body", b""))  # chunked upload: count as it streams
                reserved += chunk
                self.body_bytes += chunk
            return message

        try:
            return await self.app(scope, counted_receive, send)
        finally:
            self.requests -= 1
            self.body_bytes -= reserved
