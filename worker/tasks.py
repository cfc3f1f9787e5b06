"""The RQ task: load a job's data, run its estimator, store the result and the model.

The progress callback writes the job record; it is also where a cancel is noticed, so a job
canceled while running stops at its next iteration even if the stop command is lost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time

import numpy as np
from redis import Redis
from redis.exceptions import RedisError
from rq import get_current_job
from rq.timeouts import JobTimeoutException

from algorithms.registry import get_spec
from core.blobs import BlobUnavailableError
from core.job_record import (
    ACTIVE_STATUSES,
    JobProgress,
    JobRecord,
    JobStatus,
    JobTiming,
    JobWorker,
)
from core.jobs import lost_job, record_id
from core.keys import Keys
from core.metrics import job_finished
from core.queues import IN_PROCESS
from core.settings import get_settings
from core.stores import Stores
from core.webhooks import schedule
from worker import memory

log = logging.getLogger(__name__)

# A fit's progress reaches the job record at most this often (its first report, the step after
# the fit and the messages of retries are always written): each write is a round trip to Redis
# that the fit waits for, and beside other work each waits for Redis to be scheduled; four
# updates a second are as many as a reader of the job page follows.
PROGRESS_INTERVAL_SECONDS = 0.25
# After the fit: rows of decision values computed between two progress reports.
DECISION_BLOCK = 100_000
MAX_REPORTED_OBJECTIVES = 1000


class JobCanceledError(Exception):
    """Raised inside ``fit`` (via the progress callback) when the record says ``canceled``."""


def with_blob_retries(action, what: str, waiting=None):
    """``action()``, tried again after each wait of ``MMC_BLOB_RETRY_SECONDS`` (about half a
    minute in all by default) while the blob store is unavailable, telling ``waiting(message)``
    (the job's progress) each time; then a :class:`BlobUnavailableError` that says what could
    not be done."""
    waits = get_settings().blob_retry_seconds
    for wait in (*waits, None):
        try:
            return action()
        except BlobUnavailableError as exc:
            if wait is None:
                raise BlobUnavailableError(
                    f"{what}: the blob store stayed unavailable for "
                    f"{sum(waits):g} s ({exc})") from exc
            message = f"{what}: the blob store is unavailable; retrying in {wait:g} s"
            log.warning("%s (%s)", message, exc)
            if waiting is not None:
                waiting(message)
            time.sleep(wait)
    raise AssertionError("unreachable")


def _connection() -> Redis:
    job = get_current_job()
    return job.connection if job is not None else Redis.from_url(get_settings().redis_url)


def run_job(job_id: str) -> JobStatus | None:
    """Run job ``job_id`` end to end; returns its final status (``None``: the record had
    expired, so nothing ran)."""
    stores = Stores(_connection(), get_settings())
    jobs = stores.jobs
    record = jobs.get(job_id)
    if record is None:
        return None
    # The attempt's RQ job id fences every write: once the job is re-queued as a new attempt,
    # this one can no longer change its record or result.
    current = get_current_job()
    fence = current.id if current is not None else None
    started_at = time.time()
    worker: JobWorker = {"host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid()}
    settings = get_settings()
    heartbeat = Heartbeat(stores.redis, job_id, settings.worker_heartbeat_seconds, fence)
    heartbeat.beat()
    if not jobs.transition(job_id, (JobStatus.QUEUED,), fence=fence, status=JobStatus.RUNNING,
                           started_at=started_at, worker=worker):
        heartbeat.stop()
        return record.get("status")  # canceled before it started, or a stale attempt
    stores.redis.hincrby(Keys.job(job_id), "runs", 1)
    heartbeat.start()  # first: its thread's stack is the worker's, not the job's, memory
    # Only in a work horse: the cap must not outlive the job in a process that runs others.
    in_horse = current is not None and not current.meta.get(IN_PROCESS)
    cap = memory.apply_cap(job_memory_mb(settings)) if in_horse else None
    try:
        status = _run(stores, job_id, record, fence, cap)
    finally:
        heartbeat.stop()
    final = jobs.get(job_id) or {}
    job_finished(stores.redis, record.get("algorithm", "unknown"), status,
                 final.get("fit_seconds"))
    if status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        schedule(stores.redis, settings, final)
    return status


# The heartbeat is fenced like every other write: an attempt that is no longer the job's current
# one neither renews nor deletes the key that the current attempt keeps alive.
_BEAT = """
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'rq_job_id') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', tonumber(ARGV[3]))
return 1
"""
_UNBEAT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


class Heartbeat(threading.Thread):
    """Keeps ``mmc:job:<id>:alive`` set while the job runs; the API and the sweeper take its
    absence for longer than the heartbeat window as the death of the worker (``kill -9``, lost
    machine)."""

    def __init__(self, redis: Redis, job_id: str, seconds: int, fence: str | None = None):
        super().__init__(daemon=True, name=f"heartbeat-{job_id}")
        self.redis, self.seconds = redis, seconds
        self.keys = [Keys.job(job_id), Keys.job_alive(job_id)]
        self.fence = "" if fence is None else json.dumps(fence)
        self.value = fence or "1"
        self._beat = redis.register_script(_BEAT)
        self._unbeat = redis.register_script(_UNBEAT)
        self._stopped = threading.Event()

    def beat(self) -> None:
        self._beat(keys=self.keys, args=[self.fence, self.value, self.seconds])

    def run(self) -> None:
        while not self._stopped.wait(self.seconds / 3):
            try:
                self.beat()
            except RedisError:
                log.warning("heartbeat of %s not written", self.keys[1])

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(RedisError):
            self._unbeat(keys=self.keys[1:], args=[self.value])


def job_memory_mb(settings) -> int:
    return memory.default_cap_mb() if settings.job_memory_mb is None else settings.job_memory_mb


def _run(stores: Stores, job_id: str, record: JobRecord, fence: str | None,
         cap: memory.MemoryCap | None) -> JobStatus:
    jobs = stores.jobs

    last_write = -np.inf
    # Every objective the fit reports, for the job page's history where the estimator keeps none.
    reported: list[float] = []

    last_step = 0

    def progress(step: int, objective: float | None, message: str, *,
                 always: bool = False) -> None:
        """Record the fit's report: its objective always, and the report itself in the job
        record (a write that also finds a canceled job) when it is the first, ``always``, or
        ``PROGRESS_INTERVAL_SECONDS`` after the last write."""
        nonlocal last_write, last_step
        last_step = step
        if (objective is not None and np.isfinite(objective)
                and len(reported) < MAX_REPORTED_OBJECTIVES):
            reported.append(float(objective))
        now = time.time()
        if not always and now - last_write < PROGRESS_INTERVAL_SECONDS:
            return
        last_write = now
        update: JobProgress = {"step": int(step), "objective": objective,
                               "message": str(message)[:500], "updated_at": now}
        if not jobs.transition(job_id, (JobStatus.RUNNING,), fence=fence, progress=update):
            raise JobCanceledError(job_id)

    def waiting(message: str) -> None:
        progress(last_step, None, message, always=True)

    try:
        spec = get_spec(record["algorithm"])
        params = spec.parse_params(record["params"])
        job_input = with_blob_retries(lambda: jobs.load_input(job_id),
                                      "the job's input could not be read", waiting)
        if job_input is None:
            raise ValueError("the job's input expired before it ran")
        load_started = time.perf_counter()
        X = with_blob_retries(lambda: stores.job_data(job_input, spec.input_kind),
                              "the job's data could not be read", waiting)
        if X is None:
            raise ValueError(f"dataset {job_input['dataset_id']} was deleted or expired "
                             "before the job ran")
        y = None if job_input.get("y") is None else np.asarray(job_input["y"], dtype=np.int64)
        load_seconds = time.perf_counter() - load_started

        estimator = spec.build(params)
        fit_started = time.perf_counter()
        if spec.labels == "none":
            estimator.fit(X, progress=progress)
        else:
            estimator.fit(X, y, progress=progress)
        fit_seconds = time.perf_counter() - fit_started

        store_started = time.perf_counter()
        decision = None
        if spec.input_kind == "vectors" and hasattr(estimator, "decision_function"):
            decision = estimator.fit_decision_values(
                X, DECISION_BLOCK, lambda done, total: progress(
                    last_step, None, f"decision values of {done:,} of {total:,} points"))
        n_samples = len(X) if spec.input_kind == "sequences" else int(X.shape[0])
        del X  # the data is not needed past here: its memory goes before the result is built
        progress(last_step, None, "storing the model and the result", always=True)
        meta, arrays = estimator.to_model()
        owner = record.get("owner", "anonymous")
        model_id = with_blob_retries(lambda: stores.models.put(meta, arrays, {
            "algorithm": spec.name, "estimator": type(estimator).__name__, "job_id": job_id,
            "input_kind": spec.input_kind, "n_features_in": meta.get("n_features_in"),
            "params": params.model_dump(mode="json"), "owner": owner,
        }, provisional=True), "the model could not be stored", waiting)
        extras = estimator.result_extras()
        if reported and "objective_history" not in extras:
            extras["reported_objectives"] = reported
        timing: JobTiming = {"load_seconds": load_seconds, "fit_seconds": fit_seconds,
                             "store_seconds": time.perf_counter() - store_started}
        result = {
            "job_id": job_id,
            "algorithm": spec.name,
            # Arrays as they are: the store writes them without Python lists.
            "labels": estimator.labels_,
            "decision_values": decision,
            "extras": extras,
            "warnings": list(extras.get("warnings") or []),
            "model_id": model_id,
            "n_samples": n_samples,
        }
        # The labels are durable in the blob store before the record can say succeeded.
        stored = with_blob_retries(lambda: jobs.store_result_bulk(job_id, owner, result, fence),
                                   "the result could not be stored", waiting)
        # Result, status and model_id in one fenced step: they come from the same attempt.
        done = jobs.transition(job_id, (JobStatus.RUNNING,), fence=fence, result=stored,
                               keep_model=(model_id, stores.models.ttl),
                               status=JobStatus.SUCCEEDED, finished_at=time.time(),
                               fit_seconds=fit_seconds, timing=timing, model_id=model_id)
        if not done:
            stores.models.delete(model_id)
            jobs.discard_result_bulk(job_id, stored)
        return JobStatus.SUCCEEDED if done else JobStatus.CANCELED
    except JobCanceledError:
        return JobStatus.CANCELED
    except JobTimeoutException as exc:
        message = f"timed out after {record.get('timeout_seconds')} s: {exc}"
        return _fail(jobs, job_id, fence, type(exc).__name__, message)
    except MemoryError as exc:
        if cap is None:
            raise
        spec = get_spec(record["algorithm"])
        params = spec.parse_params(record["params"])
        advice = memory.hint(spec.name, spec.max_n_for(params), record.get("n_samples"))
        return _fail(jobs, job_id, fence, "OutOfMemory", cap.message(exc, advice))
    except Exception as exc:
        log.exception("job %s failed", job_id)
        return _fail(jobs, job_id, fence, type(exc).__name__, str(exc))


def _fail(jobs, job_id: str, fence: str | None, error_type: str, message: str) -> JobStatus:
    moved = jobs.transition(job_id, ACTIVE_STATUSES, fence=fence, status=JobStatus.FAILED,
                            finished_at=time.time(),
                            error={"type": error_type, "message": message})
    return JobStatus.FAILED if moved else JobStatus.CANCELED


def on_failure(job, connection, exc_type=None, exc_value=None, traceback=None) -> None:
    """RQ failure callback (timeouts, killed work horses, abandoned jobs): the record must not
    stay ``running``. A timeout fails the job; a lost worker re-queues a retry-safe job once."""
    settings = get_settings()
    stores = Stores(connection, settings)
    job_id = record_id(job.id)
    record = stores.jobs.get(job_id)
    if record is None or record["status"] not in ACTIVE_STATUSES:
        return
    name = getattr(exc_type, "__name__", "WorkerError")
    detail = str(exc_value) if exc_value is not None and str(exc_value) else ""
    if "Timeout" in name:
        timeout = record.get("timeout_seconds") or getattr(job, "timeout", None)
        message = "timed out" + (f" after {timeout} s" if timeout else "")
        if detail:
            message += f": {detail}"
        if stores.jobs.transition(job_id, ACTIVE_STATUSES, fence=job.id, status=JobStatus.FAILED,
                                  finished_at=time.time(),
                                  error={"type": name, "message": message}):
            job_finished(connection, record.get("algorithm", "unknown"), JobStatus.FAILED)
            schedule(connection, settings, stores.jobs.get(job_id))
        return
    reason = detail or "the worker running this job stopped before it finished"
    lost_job(connection, settings, job_id, reason, error_type=name,
             expected_rq_id=getattr(job, "id", None))
