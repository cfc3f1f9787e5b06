"""RFC 9457 problem details for every error the API returns."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.blobs import BlobStoreFullError, BlobUnavailableError
from core.deadlines import DeadlineExceededError

PROBLEM_MEDIA_TYPE = "application/problem+json"
log = logging.getLogger(__name__)

_TITLES = {
    400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
    405: "Method not allowed", 408: "Request timeout", 409: "Conflict", 413: "Content too large",
    415: "Unsupported media type", 422: "Invalid request", 429: "Too many requests",
    500: "Internal server error", 503: "Service unavailable", 507: "Insufficient storage",
}


class FieldError(BaseModel):
    field: str = Field(description="Dotted path of the offending value, e.g. body.data.X.3.")
    message: str
    type: str = "value_error"


class Problem(BaseModel):
    """``application/problem+json`` body (RFC 9457) with a list of field errors for 422s."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None


class ProblemError(Exception):
    """Raise anywhere in a handler to answer with a problem document."""

    def __init__(self, status: int, detail: str, *, errors: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None, title: str | None = None):
        super().__init__(detail)
        self.status, self.detail, self.errors, self.headers = status, detail, errors, headers
        self.title = title or _TITLES.get(status, "Error")


def field_error(status: int, field: str, message: str, type_: str = "value_error") -> ProblemError:
    return ProblemError(status, f"{field}: {message}",
                        errors=[{"field": field, "message": message, "type": type_}])


async def send_problem(scope, send, status: int, detail: str,
                       headers: list[tuple[bytes, bytes]] | tuple = ()) -> None:
    """A problem document sent straight to an ASGI ``send``: for middleware that answers
    before any route (and so before the exception handlers) runs."""
    body = json.dumps({"type": "about:blank", "title": _TITLES.get(status, "Error"),
                       "status": status, "detail": detail, "instance": scope["path"]}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def problem_response(request: Request, status: int, detail: str | None, *, title: str | None = None,
                     errors: list[dict[str, Any]] | None = None,
                     headers: dict[str, str] | None = None) -> JSONResponse:
    body = Problem(title=title or _TITLES.get(status, "Error"), status=status, detail=detail,
                   instance=request.url.path, errors=errors)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status,
                        media_type=PROBLEM_MEDIA_TYPE, headers=headers)


# Messages for the id patterns of path parameters (service.schemas), clearer than the regex.
ID_PATTERNS = {
    r"^[0-9a-f]{32}$": "must be 32 hexadecimal characters: the id of a job or model this API "
                       "returned",
    r"^[0-9a-f]{64}$": "must be 64 hexadecimal characters: the id of a dataset this API returned",
}


def validation_errors(items: Iterable[Mapping[str, Any]], prefix: Sequence[str] = ()
                      ) -> list[dict[str, Any]]:
    """pydantic's error items as the problem document's ``errors[]``: ``field`` the dotted
    location after ``prefix``, ``message`` what to fix."""
    errors = []
    for item in items:
        loc = [*prefix, *(str(part) for part in item.get("loc", ()))]
        message = item.get("msg", "invalid")
        if item.get("type") == "string_pattern_mismatch":
            message = ID_PATTERNS.get(str((item.get("ctx") or {}).get("pattern")), message)
        elif item.get("type") == "finite_number":
            message = ("must be a finite number (not NaN or infinity; 1e400 and beyond read "
                       "as infinity)")
        errors.append({"field": ".".join(loc), "message": message,
                       "type": item.get("type", "value_error")})
    return errors


def validation_detail(errors: Sequence[Mapping[str, Any]], shown: int = 5) -> str:
    """The one-line ``detail`` of a 422: ``field: message`` of the first ``shown`` errors."""
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:shown])
    if len(errors) > shown:
        detail += f"; and {len(errors) - shown} more"
    return detail


def install_problem_handlers(app: FastAPI, retry_after_seconds: int) -> None:
    """The exception handlers that answer with problem documents; a 503 or 507 tells the
    caller to retry after ``retry_after_seconds``."""
    retry_after = str(retry_after_seconds)

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError):
        return problem_response(request, exc.status, exc.detail, title=exc.title,
                                errors=exc.errors, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = validation_errors(exc.errors())
        return problem_response(request, 422, validation_detail(errors), errors=errors)

    # Every Redis error, not only a lost connection: OOM (maxmemory), READONLY (a failed-over
    # replica), LOADING and BUSY are all "the store cannot take this now", so retry later.
    @app.exception_handler(RedisError)
    async def _redis_down(request: Request, exc: Exception):
        log.warning("Redis unavailable on %s: %s: %s", request.url.path, type(exc).__name__, exc)
        return problem_response(request, 503, "the job store (Redis) is unavailable; retry later",
                                headers={"Retry-After": retry_after})

    # A call cut short by the request's deadline (core.deadlines): its class comes before
    # RedisError and BlobUnavailableError in the MRO of both of its kinds.
    @app.exception_handler(DeadlineExceededError)
    async def _deadline(request: Request, exc: DeadlineExceededError):
        log.warning("deadline passed on %s: %s", request.url.path, exc)
        return problem_response(request, 503, f"{exc}; retry later",
                                headers={"Retry-After": retry_after})

    @app.exception_handler(BlobUnavailableError)
    async def _blobs_down(request: Request, exc: BlobUnavailableError):
        log.warning("blob store unavailable on %s: %s", request.url.path, exc)
        if isinstance(exc, BlobStoreFullError):
            return problem_response(request, 507, f"{exc}; nothing was stored: retry once an "
                                    "operator has made room", headers={"Retry-After": retry_after})
        return problem_response(request, 503, "the blob store (datasets, models, results) is "
                                "unavailable; nothing was lost: retry later",
                                headers={"Retry-After": retry_after})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        return problem_response(request, exc.status_code, str(exc.detail),
                                headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception):
        log.exception("unhandled error on %s", request.url.path)
        return problem_response(request, 500, "unexpected server error; this is a bug")


_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                 "schema": {"type": "integer"}}}
_WHEN = {
    401: "A valid API key is missing (only when MMC_API_KEYS is set).",
    403: "The service may not read what the request names (outside MMC_DATA_URL_ALLOW).",
    404: "The resource does not exist for this tenant, or has expired.",
    409: "The resource is not in a state that allows this.",
    413: "The body exceeds MMC_MAX_BODY_BYTES.",
    415: "The body's content type is not one this route reads.",
    422: "A parameter or the body is invalid; errors[] names each field.",
    429: "The tenant has MMC_MAX_ACTIVE_JOBS_PER_TENANT queued or running jobs.",
    503: "Redis is unavailable, or this API process is at its request or body limit.",
}
def body_too_large_detail(limit: int) -> str:
    """The 413 detail: the limit, and the route that takes a matrix larger than one body."""
    return (f"request body exceeds the limit of {limit} bytes (MMC_MAX_BODY_BYTES); send large "
            "data in parts: POST /v1/datasets/uploads, then PUT each block of rows to "
            "/v1/datasets/uploads/{id}/parts/{index} and POST /v1/datasets/uploads/{id}/complete")


# One problem document per status, as the service writes it, for the API reference.
_EXAMPLE_DETAIL = {
    401: "send a valid API key as 'Authorization: Bearer <key>' (or in the X-API-Key header)",
    403: "s3://other/x.npy is outside the buckets and prefixes this service may read "
         "(MMC_DATA_URL_ALLOW: s3://datasets/team-a); put the object under one of them or ask "
         "the operator to allow its prefix",
    404: "job 5f0c2a9e4d7b4c1e9a3f6b2d8e1c7a40 does not exist or has expired",
    409: "job 5f0c2a9e4d7b4c1e9a3f6b2d8e1c7a40 is running; its outputs exist once it has "
         "succeeded",
    413: body_too_large_detail(8388608),
    415: "send the request as application/json, not text/plain",
    422: "body.algorithm.params.n_clusters: Input should be greater than or equal to 2",
    429: "this tenant already has 100 queued or running jobs (MMC_MAX_ACTIVE_JOBS_PER_TENANT); "
         "retry when some finish",
    503: "Redis is unreachable: Connection refused",
}
_EXAMPLE_ERRORS = {
    422: [{"field": "body.algorithm.params.n_clusters",
           "message": "Input should be greater than or equal to 2",
           "type": "greater_than_equal"}],
}


def problem_example(status: int) -> dict[str, Any]:
    """The problem document a route answers with ``status``, as an OpenAPI example."""
    example: dict[str, Any] = {"type": "about:blank", "title": _TITLES[status],
                               "status": status, "detail": _EXAMPLE_DETAIL[status]}
    if status in _EXAMPLE_ERRORS:
        example["errors"] = _EXAMPLE_ERRORS[status]
    return example


_HEADERS = {
    401: {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the problem statuses a route can answer, plus 401 and 503, which
    every ``/v1`` route can (authentication, Redis and the admission limits)."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in sorted({401, 503, *statuses}):
        response: dict[str, Any] = {
            "description": f"{_TITLES[status]}. {_WHEN[status]}",
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"},
                                             "example": problem_example(status)}},
        }
        if status in _HEADERS:
            response["headers"] = _HEADERS[status]
        responses[status] = response
    return responses


def links(parameter: str, source: str, *operation_ids: str) -> dict[str, Any]:
    """OpenAPI links: ``source`` (e.g. ``$response.body#/id``) fills ``parameter`` of each
    operation, so clients and stateful testers can follow a created resource."""
    return {operation_id: {"operationId": operation_id, "parameters": {parameter: source}}
            for operation_id in operation_ids}


def header(description: str, type_: str = "string") -> dict[str, Any]:
    return {"description": description, "schema": {"type": type_}}


# Every status, for routes that have not listed theirs.
PROBLEM_RESPONSES = problem_responses(404, 409, 413, 422, 429)
