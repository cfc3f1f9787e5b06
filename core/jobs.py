"""Job records on their queues, shared by the API and the workers: enqueue an attempt, and
settle a job whose worker was lost (re-queue it, or fail it and schedule its webhook)."""

from __future__ import annotations

import time

from redis import Redis
from rq.job import Callback

from algorithms.registry import get_spec
from core import metrics
from core.job_record import ACTIVE_STATUSES, JobRecord, JobStatus
from core.queues import IN_PROCESS, IN_PROCESS_VALUES_PER_POINT, ON_JOB_FAILURE, RUN_JOB, get_queue
from core.settings import Settings
from core.stores import Stores
from core.webhooks import schedule


def enqueue(redis: Redis, settings: Settings, record: JobRecord, pipeline=None) -> None:
    """Put the job's current attempt (RQ job ``rq_job_id``) on its queue: on the caller's
    transaction ``pipeline`` (executed by the caller) when given, else in one transaction of
    its own (one round trip, where RQ alone makes two)."""
    if pipeline is None:
        with redis.pipeline() as own:
            enqueue(redis, settings, record, own)
            own.execute()
        return
    get_queue(record["queue"], redis).enqueue_call(
        RUN_JOB, args=(record["id"],), job_id=record["rq_job_id"],
        timeout=record["timeout_seconds"], result_ttl=600, failure_ttl=settings.job_ttl_seconds,
        on_failure=Callback(ON_JOB_FAILURE), pipeline=pipeline,
        meta={IN_PROCESS: True} if runs_in_process(record, settings) else None,
    )


def runs_in_process(record: JobRecord, settings: Settings) -> bool:
    """Whether a job is small enough to run in its worker without a forked work horse: a
    fast-queue job on points (not sequences) with at most ``MMC_IN_PROCESS_MAX_SAMPLES`` of
    them. Its fit takes milliseconds to a second and a few MB, where the fork, the horse's
    Redis connection and its exit cost tens of milliseconds; a horse's memory cap and kill on
    cancel protect larger jobs, which keep it (worker.main.Worker)."""
    n_samples, n_features = record.get("n_samples"), record.get("n_features")
    limit = settings.in_process_max_samples
    return (record.get("queue") == "fast" and n_features is not None and n_samples is not None
            and n_samples <= limit
            and n_samples * n_features <= limit * IN_PROCESS_VALUES_PER_POINT)


def record_id(rq_job_id: str) -> str:
    """The service's job id of an RQ job id (a retry's RQ id is ``<job id>-<attempt>``)."""
    base, sep, tail = rq_job_id.rpartition("-")
    return base if sep and tail.isdigit() and len(base) == 32 else rq_job_id


def lost_job(redis: Redis, settings: Settings, job_id: str, reason: str, *,
             error_type: str = "WorkerError", expected_rq_id: str | None = None
             ) -> JobStatus | None:
    """A running (or dequeued) job lost its worker: re-queue it as a new attempt when its
    algorithm is retry-safe and attempts remain (``MMC_RETRY_LOST_JOBS``), else fail it with
    ``reason``. Returns the new status, or ``None`` if the job had already moved on."""
    stores = Stores(redis, settings)
    record = stores.jobs.get(job_id)
    if record is None or record["status"] not in ACTIVE_STATUSES:
        return None
    rq_id = record.get("rq_job_id") or job_id
    if expected_rq_id is not None and expected_rq_id != rq_id:
        return None  # a report about an earlier attempt
    attempt = int(record.get("attempt") or 1)
    try:
        retry_safe = get_spec(record["algorithm"]).retry_safe
    except KeyError:
        retry_safe = False
    if retry_safe and attempt <= settings.retry_lost_jobs:
        new_rq_id = f"{job_id}-{attempt + 1}"
        moved = stores.jobs.transition(
            job_id, (record["status"],), fence=rq_id, status=JobStatus.QUEUED,
            attempt=attempt + 1,
            rq_job_id=new_rq_id, started_at=None,
            progress={"step": 0, "objective": None, "updated_at": time.time(),
                      "message": f"re-queued (attempt {attempt + 1}): {reason}"})
        if moved:
            enqueue(redis, settings, {**record, "rq_job_id": new_rq_id})
            metrics.record(redis, "mmc_jobs_lost_total",
                           algorithm=record.get("algorithm", "unknown"), action="requeued")
            return JobStatus.QUEUED
        return None
    moved = stores.jobs.transition(
        job_id, ACTIVE_STATUSES, fence=rq_id, status=JobStatus.FAILED, finished_at=time.time(),
        error={"type": error_type, "message": reason})
    if not moved:
        return None
    algorithm = record.get("algorithm", "unknown")
    metrics.record(redis, "mmc_jobs_lost_total", algorithm=algorithm, action="failed")
    metrics.job_finished(redis, algorithm, JobStatus.FAILED)
    schedule(redis, settings, stores.jobs.get(job_id))
    return JobStatus.FAILED


