"""FastAPI app factory: ``uvicorn --factory service.app:create_app``."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time

from fastapi import FastAPI
from fastapi.routing import APIRoute
from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from starlette.exceptions import HTTPException as StarletteHTTPException

from algorithms.registry import REGISTRY
from core.dataset_urls import allowed_prefixes
from core.deadlines import bound_redis, request_deadline
from core.settings import Settings, get_settings
from core.version import service_version
from service.deps import AppObjects
from service.json_body import add_component_schemas
from service.limits import AdmissionLimitMiddleware
from service.methods import MethodsMiddleware
from service.metrics import MULTIPROCESS_DIRECTORY, Metrics
from service.problems import (
    Problem,
    body_too_large_detail,
    install_problem_handlers,
    send_problem,
)
from service.reference import mount_reference
from service.routes import algorithms, console, datasets, health, job_outputs, jobs, models
from service.schemas import ModelImport, PredictRequest, build_job_request_model

DESCRIPTION = """Maximum margin clustering as a service.

POST data and an algorithm to `/v1/jobs`, poll the job, read labels from its result and label new
points with `/v1/models/{id}/predict`. Every error is an RFC 9457 `application/problem+json`
document. The algorithms and their parameters come from the registry: see `/v1/algorithms`.
"""

log = logging.getLogger("service")


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int):
        super().__init__(413, body_too_large_detail(limit))


class BodyReadTimeout(StarletteHTTPException):
    def __init__(self, seconds: float):
        super().__init__(408, f"no request body bytes arrived for {seconds:g} s "
                              "(MMC_BODY_READ_TIMEOUT_SECONDS); send the whole body promptly")


class BodyLimitMiddleware:
    """Refuse bodies over ``limit`` bytes (by Content-Length at once, else while streaming), and
    bodies that stall: no bytes for ``read_timeout`` seconds between two reads is a 408 (nginx's
    ``client_body_timeout``). A stalled upload would otherwise keep its declared bytes reserved
    against ``MMC_MAX_BODY_BYTES_IN_FLIGHT`` for as long as its client keeps the connection."""

    def __init__(self, app, limit: int, read_timeout: float):
        self.app = app
        self.limit = limit
        self.read_timeout = read_timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await send_problem(scope, send, 413, BodyTooLarge(self.limit).detail,
                               [(b"connection", b"close")])
            return None
        received = 0
        body_done = False

        async def limited_receive():
            nonlocal received, body_done
            if body_done:  # later receives wait for a disconnect (long polls): no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.read_timeout)
            except TimeoutError:
                raise BodyReadTimeout(self.read_timeout) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
                body_done = not message.get("more_body", False)
            return message

        return await self.app(scope, limited_receive, send)


class DeadlineMiddleware:
    """Each request runs under one deadline for all of its calls to Redis and the blob store
    (:mod:`core.deadlines`), started by the first of them."""

    def __init__(self, app, seconds: float):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        with request_deadline(self.seconds):
            return await self.app(scope, receive, send)


class MetricsMiddleware:
    def __init__(self, app, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe_request(scope["method"], route, status,
                                         time.perf_counter() - started)


def operation_id(route: APIRoute) -> str:
    return route.name


def api_redis(settings: Settings) -> Redis:
    """The API's Redis client: the configured timeouts and two quick retries."""
    return Redis.from_url(
        settings.redis_url, health_check_interval=30,
        socket_connect_timeout=settings.redis_timeout_seconds,
        socket_timeout=settings.redis_timeout_seconds,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2))


def create_app(settings: Settings | None = None, redis: Redis | None = None) -> FastAPI:
    settings = settings or get_settings()
    allowed_prefixes(settings.data_url_allow)  # a malformed allow-list stops the start here
    app = FastAPI(
        title="mmc-service",
        version=service_version(),
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url=None,  # served from the package by mount_reference, not from a CDN
        redoc_url=None,
        # operationIds are the handlers' names (create_job, predict, ...), which generated
        # clients use as function names, instead of name + path + method.
        generate_unique_id_function=operation_id,
    )
    objects = AppObjects.build(settings, bound_redis(redis or api_redis(settings)))
    app.state.objects = objects
    if not objects.api_keys:
        log.warning("MMC_API_KEYS is empty: the API is OPEN (no authentication, one shared "
                    "tenant); set tenant:key pairs before exposing it")
    if os.environ.get(MULTIPROCESS_DIRECTORY):  # the pod's processes write their metrics here
        os.makedirs(os.environ[MULTIPROCESS_DIRECTORY], exist_ok=True)

    # The objects of the imported libraries live as long as the process: keep them out of the
    # cyclic collector's full passes, which otherwise stall the event loop ~100 ms while a large
    # body is parsed in a worker thread (measured with a 62 MiB upload).
    gc.freeze()
    install_problem_handlers(app, settings.retry_after_seconds)
    app.include_router(algorithms.router)
    app.include_router(datasets.router)
    job_request = build_job_request_model(REGISTRY)
    app.include_router(jobs.build_router(job_request))
    app.include_router(job_outputs.router)
    app.include_router(models.router)
    app.include_router(health.router)
    app.include_router(console.router)
    console.mount_static(app)
    mount_reference(app)
    # Bodies the routes parse themselves, and the problem document.
    add_component_schemas(app, job_request, PredictRequest, ModelImport, Problem)
    app.add_middleware(MethodsMiddleware, router=app.router)
    app.add_middleware(AdmissionLimitMiddleware, max_requests=settings.max_concurrent_requests,
                       max_body_bytes=settings.max_body_bytes_in_flight,
                       retry_after=settings.retry_after_seconds)
    app.add_middleware(DeadlineMiddleware, seconds=settings.request_deadline_seconds)
    app.add_middleware(MetricsMiddleware, metrics=objects.metrics)
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes,
                       read_timeout=settings.body_read_timeout_seconds)
    return app
