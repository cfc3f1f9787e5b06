"""Request-scoped dependencies: the caller's tenant from its API key, and the app's objects
(settings, stores, the job service, ...) as typed parameters, so that a route's signature shows
what it uses. The objects are made once per app (:class:`AppObjects`); :func:`app_objects` is the
one reader of ``app.state``.

Keys are held only as SHA-256 digests and a presented key's digest is compared with every one of
them in constant time (no early exit), so neither the keys nor their count leak through timing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from anyio import CapacityLimiter
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPBearer
from redis import Redis

from core.settings import Settings, parse_pairs
from core.stores import Stores
from service.jobs import JobService
from service.longpoll import JobEvents
from service.metrics import Metrics
from service.model_cache import ModelCache
from service.problems import ProblemError
from service.submits import SubmitBatcher

T = TypeVar("T")

OPEN_TENANT = "anonymous"
SUBMIT_THREADS = 4

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False,
                              description="Needed only when MMC_API_KEYS is set.")
bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <key>`; needed only "
                                                  "when MMC_API_KEYS is set.")


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def hashed_keys(api_keys: str) -> list[tuple[bytes, str]]:
    """``(sha256(key), tenant)`` for every configured key; the keys themselves are dropped."""
    return [(key_digest(key), tenant) for tenant, key in parse_pairs(api_keys).items()]


def tenant_for_key(given: str, keys: list[tuple[bytes, str]]) -> str | None:
    digest = key_digest(given)
    found = None
    for candidate, tenant in keys:
        if hmac.compare_digest(digest, candidate):
            found = tenant
    return found


@dataclass
class AppObjects:
    """The app's long-lived objects, made once by :func:`service.app.create_app` and held at
    ``app.state.objects``; the routes receive them as the ``App*`` parameters below."""

    settings: Settings
    redis: Redis
    api_keys: list[tuple[bytes, str]]  # (sha256 of the key, tenant)
    stores: Stores
    job_service: JobService
    submits: SubmitBatcher
    model_cache: ModelCache
    metrics: Metrics
    job_events: JobEvents
    # Made on first use, on the event loop: a limiter belongs to the running loop, which does
    # not exist yet when the app is made.
    submit_limiter: CapacityLimiter | None = None

    @classmethod
    def build(cls, settings: Settings, redis: Redis) -> AppObjects:
        stores = Stores(redis, settings)
        job_service = JobService(redis, settings)
        return cls(settings=settings, redis=redis, api_keys=hashed_keys(settings.api_keys),
                   stores=stores, job_service=job_service, submits=SubmitBatcher(job_service),
                   model_cache=ModelCache(stores.models, settings.model_cache_size),
                   metrics=Metrics(redis), job_events=JobEvents(settings))


async def app_objects(request: Request) -> AppObjects:
    """The app's objects (async: an attribute read, which a worker thread would cost more
    than)."""
    return request.app.state.objects


Objects = Annotated[AppObjects, Depends(app_objects)]


def _part(read: Callable[[AppObjects], T]) -> Any:
    """The dependency on one of the app's objects."""
    async def dependency(objects: Objects) -> T:
        return read(objects)

    return Depends(dependency)


async def submit_limiter(objects: Objects) -> CapacityLimiter:
    """The threads that store jobs on large bodies or stored datasets: a few, not the 40 of the
    shared pool, which would contend for the GIL and Redis's connection pool (small jobs go
    through :mod:`service.submits` instead)."""
    if objects.submit_limiter is None:
        objects.submit_limiter = CapacityLimiter(SUBMIT_THREADS)
    return objects.submit_limiter


AppApiKeys = Annotated[list[tuple[bytes, str]], _part(lambda objects: objects.api_keys)]
AppSettings = Annotated[Settings, _part(lambda objects: objects.settings)]
AppRedis = Annotated[Redis, _part(lambda objects: objects.redis)]
AppStores = Annotated[Stores, _part(lambda objects: objects.stores)]
AppJobService = Annotated[JobService, _part(lambda objects: objects.job_service)]
AppSubmits = Annotated[SubmitBatcher, _part(lambda objects: objects.submits)]
AppModelCache = Annotated[ModelCache, _part(lambda objects: objects.model_cache)]
AppMetrics = Annotated[Metrics, _part(lambda objects: objects.metrics)]
AppJobEvents = Annotated[JobEvents, _part(lambda objects: objects.job_events)]
AppSubmitLimiter = Annotated[CapacityLimiter, Depends(submit_limiter)]


async def owner(request: Request, keys: AppApiKeys) -> str:
    """The caller's tenant, or ``anonymous`` when authentication is off (async: a hash and a
    few comparisons, not worth a worker thread)."""
    if not keys:
        return OPEN_TENANT
    given = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if given is None and auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    tenant = tenant_for_key(given, keys) if given else None
    if tenant is None:
        raise ProblemError(401, "send a valid API key as 'Authorization: Bearer <key>' "
                                "(or in the X-API-Key header)",
                           headers={"WWW-Authenticate": "Bearer"})
    return tenant


Caller = Annotated[str, Depends(owner)]
