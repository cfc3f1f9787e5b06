"""Request-scoped dependencies: the app's Redis, settings, stores and the caller's identity."""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request
from fastapi.security import APIKeyHeader

from service.problems import ProblemError

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False,
                              description="Needed only when MMC_API_KEYS is set.")


def owner(request: Request) -> str:
    """The caller: a hash of its API key, or ``anonymous`` when authentication is off."""
    keys = request.app.state.api_keys
    if not keys:
        return "anonymous"
    given = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if given is None and auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    if given is None or not any(hmac.compare_digest(given, key) for key in keys):
        raise ProblemError(401, "send a valid API key in the X-API-Key header",
                           headers={"WWW-Authenticate": "Bearer"})
    return hashlib.sha256(given.encode()).hexdigest()[:24]
