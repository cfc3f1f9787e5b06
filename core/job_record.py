"""A job's status and its record as the job store holds it (a Redis hash, a JSON value a field).

The record is a :class:`~typing.TypedDict`: one description of the fields that the API writes on
accepting a job, the worker adds, and :mod:`core.records` renders, while at run time it stays the
plain dict that the hash is read into.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NotRequired, TypedDict


# A StrEnum: a member is its value in JSON, in f-strings and in comparisons with a plain string,
# so the record and the API spell each status as its value. Its docstring is the API document's.
class JobStatus(StrEnum):
    """Where a job is: queued, running, then succeeded, failed or canceled."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


# Queued or running: the job holds a slot in its tenant's active set and may still change.
ACTIVE_STATUSES = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
FINAL_STATUSES = frozenset(JobStatus) - ACTIVE_STATUSES


class JobProgress(TypedDict):
    """The last progress report of the fit (``updated_at`` in epoch seconds)."""

    step: int
    objective: float | None
    message: str
    updated_at: float | None


class JobError(TypedDict):
    type: str
    message: str


class JobTiming(TypedDict):
    """Seconds the worker spent loading the data, fitting, and storing the model and result."""

    load_seconds: float
    fit_seconds: float
    store_seconds: float


class JobWorker(TypedDict):
    """The worker process that runs the job (its work horse's ``pid``, the worker's ``ppid``)."""

    host: str
    pid: int
    ppid: int


class JobRecord(TypedDict):
    """A job record: the fields the API writes when it accepts the job, then those the worker
    and the failure handlers add (``NotRequired``). Times are epoch seconds."""

    id: str
    owner: str
    status: JobStatus
    algorithm: str
    params: dict[str, Any]
    queue: str
    n_samples: int
    n_features: int | None
    dataset_id: str | None
    timeout_seconds: int
    queued_at: float
    progress: JobProgress
    attempt: int
    rq_job_id: str
    callback_url: str | None
    started_at: NotRequired[float | None]
    worker: NotRequired[JobWorker]
    runs: NotRequired[int]
    finished_at: NotRequired[float]
    fit_seconds: NotRequired[float]
    timing: NotRequired[JobTiming]
    model_id: NotRequired[str]
    error: NotRequired[JobError]


class JobUpdate(TypedDict, total=False):
    """The fields a status transition of the store may set (``JobStore.transition``)."""

    status: JobStatus
    attempt: int
    rq_job_id: str
    progress: JobProgress
    started_at: float | None
    worker: JobWorker
    finished_at: float
    fit_seconds: float
    timing: JobTiming
    model_id: str
    error: JobError


def job_record(fields: dict[str, Any]) -> JobRecord:
    """The record of decoded hash ``fields``, its status as a :class:`JobStatus` (a hash that
    lost its status, a partial write of an expiring key, is returned as it is)."""
    record: Any = dict(fields)
    if "status" in record:
        record["status"] = JobStatus(record["status"])
    return record
