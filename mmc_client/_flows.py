"""What the clients do, written once without I/O.

Each operation is a generator that yields :class:`Call` (an HTTP request) or :class:`Sleep` and
is sent back the ``httpx.Response`` (or thrown the ``httpx.TransportError``); :class:`Client`
drives it with blocking I/O, :class:`AsyncClient` with asyncio. Retries, back-off, long polling,
timeouts and error mapping therefore behave the same in both.
"""

from __future__ import annotations

import contextlib
import io
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from mmc_client.errors import JobFailedError, JobTimeoutError, MMCError
from mmc_client.statuses import FINAL_STATUSES, JobStatus

# Matrices with more values than this go up once as .npy (POST /v1/datasets) instead of JSON.
INLINE_MAX_VALUES = 50_000
# Matrices larger than this go up in parts of about this size (POST /v1/datasets/uploads).
PART_BYTES = 32 * 2**20
PART_TIMEOUT = 120.0  # seconds for one part, or for joining the parts, to be answered
LONG_POLL_SECONDS = 30.0  # the service accepts up to 60
RETRIES = 4  # per request, on a lost connection, 429, 502, 503 and 504
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None  # seconds to wait for the answer; None: the client's default
    ok: tuple[int, ...] = (200, 201, 202)


@dataclass(frozen=True)
class Sleep:
    seconds: float


Flow = Generator[Call | Sleep, Any, Any]


@dataclass(frozen=True)
class Result:
    """A finished job: labels (an array; a list of arrays for sequences), the model id that
    ``predict`` takes, timing from the job resource, and the algorithm's extras."""

    job_id: str
    algorithm: str
    labels: Any
    model_id: str
    timing: dict[str, Any]
    extras: dict[str, Any]
    warnings: list[str]
    decision_values: Any
    job: dict[str, Any]


# -- requests with retries -------------------------------------------------------------------


def request(call: Call, *, retries: int = RETRIES, deadline: float | None = None) -> Flow:
    """Send ``call``; retry a lost connection and 429/502/503/504 with exponential back-off
    (honouring ``Retry-After``) until ``retries`` or ``deadline`` run out; a non-``ok``
    answer raises :class:`MMCError` with the service's problem fields."""
    delay = BACKOFF_FIRST
    for attempt in range(retries + 1):
        last = attempt == retries or (deadline is not None and time.monotonic() + delay > deadline)
        try:
            response = yield call
        except httpx.TransportError as exc:
            if last:
                raise MMCError(f"cannot reach the service: {exc!r}", title="Service unreachable"
                               ) from exc
            yield Sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)
            continue
        if response.status_code in call.ok:
            return response
        if response.status_code in RETRYABLE_STATUSES and not last:
            yield Sleep(max(delay, _retry_after(response)))
            delay = min(delay * 2, BACKOFF_MAX)
            continue
        raise error_from(response)
    raise AssertionError("unreachable")


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(float(response.headers.get("retry-after", 0)), BACKOFF_MAX * 6)
    except ValueError:
        return 0.0


def error_from(response: httpx.Response) -> MMCError:
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    return MMCError.from_problem(response.status_code, problem, response.text[:500])


# -- payloads ---------------------------------------------------------------------------------


def as_matrix(X: Any) -> np.ndarray:
    matrix = np.asarray(X, dtype=float)
    if matrix.ndim != 2:
        raise MMCError(f"X must be a 2-D matrix of points x features, got shape {matrix.shape}",
                       title="Invalid input")
    return matrix


def npy_bytes(X: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, as_matrix(X), allow_pickle=False)
    return buffer.getvalue()


def upload(X: Any) -> Flow:
    """``POST /v1/datasets`` as ``.npy``; returns the dataset id. A matrix of more than
    ``PART_BYTES`` goes up in parts of about that size (``POST /v1/datasets/uploads``), each
    below the service's default request body limit (64 MiB)."""
    matrix = as_matrix(X)
    npy = {"Content-Type": "application/x-npy"}
    if matrix.nbytes <= PART_BYTES:
        response = yield from request(Call("POST", "/v1/datasets", content=npy_bytes(matrix),
                                           headers=npy))
        return response.json()["id"]
    response = yield from request(Call("POST", "/v1/datasets/uploads"))
    path = f"/v1/datasets/uploads/{response.json()['id']}"
    rows = max(1, PART_BYTES // max(matrix.shape[1] * 8, 1))
    for index, start in enumerate(range(0, matrix.shape[0], rows)):
        # PUT of one index is idempotent: a retried part replaces itself
        yield from request(Call("PUT", f"{path}/parts/{index}",
                                content=npy_bytes(matrix[start:start + rows]), headers=npy,
                                timeout=PART_TIMEOUT))
    response = yield from request(Call("POST", f"{path}/complete", timeout=PART_TIMEOUT))
    return response.json()["id"]


def input_kind(algorithm: str, cache: dict[str, str]) -> Flow:
    """``vectors`` or ``sequences``, from ``GET /v1/algorithms`` (read once per client)."""
    if not cache:
        response = yield from request(Call("GET", "/v1/algorithms"))
        cache.update({item["name"]: item["input_kind"] for item in response.json()})
    return cache.get(algorithm, "vectors")  # an unknown name: the service says so on submit


def job_data(X: Any, kind: str, y: Any, dataset_id: str | None) -> Flow:
    """The ``data`` member of a job request; a large matrix is uploaded first."""
    data: dict[str, Any] = {}
    if dataset_id is not None:
        data["dataset_id"] = dataset_id
    elif kind == "sequences":
        data["sequences"] = [np.asarray(s, dtype=np.int64).tolist() for s in X]
    else:
        matrix = as_matrix(X)
        if matrix.size > INLINE_MAX_VALUES:
            data["dataset_id"] = yield from upload(matrix)
        else:
            data["X"] = matrix.tolist()
    if y is not None:
        data["y"] = np.asarray(y, dtype=np.int64).ravel().tolist()
    return data


def submit(X: Any, algorithm: str, params: dict[str, Any], *, y: Any = None,
           dataset_id: str | None = None, idempotency_key: str | None = None,
           callback_url: str | None = None, kinds: dict[str, str]) -> Flow:
    """``POST /v1/jobs``; returns the job resource. An ``Idempotency-Key`` (a fresh one unless
    given) makes the retry of a lost answer return the same job instead of a second one."""
    kind = "vectors"
    if dataset_id is None:
        kind = yield from input_kind(algorithm, kinds)
    body: dict[str, Any] = {"algorithm": {"name": algorithm, "params": params},
                            "data": (yield from job_data(X, kind, y, dataset_id))}
    if callback_url is not None:
        body["callback_url"] = callback_url
    key = idempotency_key or f"mmc-client-{uuid.uuid4().hex}"
    response = yield from request(Call("POST", "/v1/jobs", json=body,
                                       headers={"Idempotency-Key": key}))
    return response.json()


# -- waiting ----------------------------------------------------------------------------------


def wait(job_id: str, timeout: float | None, request_timeout: float) -> Flow:
    """The job resource once the job has ended, by long polls of ``GET /v1/jobs/{id}?wait=S``.

    A poll that comes back early with the same status (a service without long polling) is
    followed by a back-off pause, so the loop never spins. Raises :class:`JobTimeoutError`
    after ``timeout`` seconds (``None``: no limit).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = BACKOFF_FIRST
    job: dict[str, Any] | None = None
    while True:
        remaining = LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            status = job["status"] if job else "unknown"
            raise JobTimeoutError(f"job {job_id} is still {status} after {timeout} s",
                                  title="Job timeout", job_id=job_id)
        seconds = round(min(remaining, LONG_POLL_SECONDS), 3) or 0.001
        asked = time.monotonic()
        response = yield from request(
            Call("GET", f"/v1/jobs/{job_id}", params={"wait": seconds},
                 timeout=seconds + request_timeout), deadline=deadline)
        previous, job = job, response.json()
        if job["status"] in FINAL_STATUSES:
            return job
        unchanged = previous is not None and previous["status"] == job["status"]
        if unchanged and time.monotonic() - asked < seconds / 2:
            pause = delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0))
            yield Sleep(pause)
            delay = min(delay * 2, BACKOFF_MAX)
        else:
            delay = BACKOFF_FIRST


def result(job_id: str, job: dict[str, Any] | None = None) -> Flow:
    """:class:`Result` of a succeeded job (``job`` is its resource when already read)."""
    if job is None:
        job = (yield from request(Call("GET", f"/v1/jobs/{job_id}"))).json()
    if job["status"] != JobStatus.SUCCEEDED:
        error = job.get("error") or {}
        raise JobFailedError(
            error.get("message") or f"job {job_id} is {job['status']}",
            title=f"Job {job['status']}", type=error.get("type", "about:blank"), job_id=job_id)
    body = (yield from request(Call("GET", f"/v1/jobs/{job_id}/result"))).json()
    return Result(
        job_id=job_id, algorithm=body["algorithm"], labels=labels_of(body["labels"]),
        model_id=body["model_id"], timing=job["timing"], extras=body.get("extras") or {},
        warnings=list(body.get("warnings") or []),
        decision_values=None if body.get("decision_values") is None
        else np.asarray(body["decision_values"]),
        job=job,
    )


def labels_of(labels: list[Any]) -> Any:
    """An int array, or a list of int arrays for sequences."""
    if labels and isinstance(labels[0], list):
        return [np.asarray(row, dtype=np.int64) for row in labels]
    return np.asarray(labels, dtype=np.int64)


def cancel(job_id: str) -> Flow:
    response = yield from request(Call("DELETE", f"/v1/jobs/{job_id}"))
    return response.json()


def cluster(X: Any, algorithm: str, params: dict[str, Any], *, y: Any, timeout: float | None,
            request_timeout: float, kinds: dict[str, str]) -> Flow:
    """Submit, wait and fetch the result; a job still running at ``timeout`` is canceled
    (the caller gave up on it) before :class:`JobTimeoutError` is raised."""
    job = yield from submit(X, algorithm, params, y=y, kinds=kinds)
    try:
        final = yield from wait(job["id"], timeout, request_timeout)
    except JobTimeoutError:
        # The timeout is what the caller needs to hear about, not a failed cancel.
        with contextlib.suppress(MMCError):
            yield from request(Call("DELETE", f"/v1/jobs/{job['id']}", ok=(200, 409)), retries=1)
        raise
    return (yield from result(job["id"], final))


def predict(model_id: str, X: Any = None, sequences: Any = None) -> Flow:
    """Labels of new points (or, for an m3n model, of ``sequences``), synchronously."""
    if (X is None) == (sequences is None):
        raise MMCError("give X (points) or sequences, not both", title="Invalid input")
    if sequences is not None:
        body: dict[str, Any] = {"sequences": [np.asarray(s, dtype=np.int64).tolist()
                                              for s in sequences]}
    else:
        body = {"X": as_matrix(X).tolist()}
    response = yield from request(Call("POST", f"/v1/models/{model_id}/predict", json=body))
    return labels_of(response.json()["labels"])


def export_model(model_id: str) -> Flow:
    """``(meta, arrays)`` of a trained model, as ``GET /v1/models/{id}/export`` gives them."""
    import base64

    body = (yield from request(Call("GET", f"/v1/models/{model_id}/export"))).json()
    with np.load(io.BytesIO(base64.b64decode(body["npz_base64"])), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    return body["meta"], arrays


def import_model(meta: dict[str, Any], arrays: dict[str, Any], ttl_seconds: int | None) -> Flow:
    """``POST /v1/models`` with the export document rebuilt from ``(meta, arrays)``."""
    import base64

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{name: np.asarray(value) for name, value in arrays.items()})
    body: dict[str, Any] = {"format": meta.get("format", ""), "meta": meta,
                            "npz_base64": base64.b64encode(buffer.getvalue()).decode()}
    if ttl_seconds is not None:
        body["ttl_seconds"] = ttl_seconds
    return (yield from request(Call("POST", "/v1/models", json=body))).json()
