"""Request-scoped dependencies: the caller's tenant from its API key.

Keys are held only as SHA-256 digests and a presented key's digest is compared with every one of
them in constant time (no early exit), so neither the keys nor their count leak through timing.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request
from fastapi.security import APIKeyHeader, HTTPBearer

from core.settings import parse_pairs
from service.problems import ProblemError

OPEN_TENANT = "anonymous"

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
