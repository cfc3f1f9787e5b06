"""Request-scoped dependencies: the caller's tenant from its API key, and the app's objects
(settings, stores, the job service, ...) as typed parameters, so that a route's signature shows
what it uses.

Keys are held only as SHA-256 digests and a presented key's digest is compared with every one of
them in constant time (no early exit), so neither the keys nor their count leak through timing.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from anyio import CapacityLimiter
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPBearer
from redis import Redis

from core.settings import Settings, parse_pairs
from core.stores import Stores
from service.jobs import JobService
from service.metrics import Metrics
from service.model_cache import ModelCache
from service.problems import ProblemError
from service.submits import SubmitBatcher

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


async def owner(request: Request) -> str:
    """The caller's tenant, or ``anonymous`` when authentication is off (async: a hash and a
    few comparisons, not worth a worker thread)."""
    keys = request.app.state.api_keys
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


# The app's objects, made once by service.app.create_app, as typed parameters of the routes.
def _app_state(name: str):
    """The dependency that reads ``app.state.<name>`` (async: an attribute read, which a worker
    thread would cost more than)."""
    async def dependency(request: Request):
        return getattr(request.app.state, name)

    dependency.__name__ = f"app_{name}"
    return Depends(dependency)


async def submit_limiter(request: Request) -> CapacityLimiter:
    """The threads that store jobs on large bodies or stored datasets: a few, not the 40 of the
    shared pool, which would contend for the GIL and Redis's connection pool (small jobs go
    through :mod:`service.submits` instead). Made on first use, on the event loop: a limiter
    belongs to the running loop, which does not exist yet when the app is made."""
    state = request.app.state
    limiter = getattr(state, "submit_limiter", None)
    if limiter is None:
        limiter = state.submit_limiter = CapacityLimiter(SUBMIT_THREADS)
    return limiter


AppApiKeys = Annotated[list[tuple[bytes, str]], _app_state("api_keys")]  # (digest, tenant)
AppSettings = Annotated[Settings, _app_state("settings")]
AppRedis = Annotated[Redis, _app_state("redis")]
AppStores = Annotated[Stores, _app_state("stores")]
AppJobService = Annotated[JobService, _app_state("job_service")]
AppSubmits = Annotated[SubmitBatcher, _app_state("submits")]
AppModelCache = Annotated[ModelCache, _app_state("model_cache")]
AppMetrics = Annotated[Metrics, _app_state("metrics")]
AppSubmitLimiter = Annotated[CapacityLimiter, Depends(submit_limiter)]
Caller = Annotated[str, Depends(owner)]
