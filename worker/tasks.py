"""The RQ task: load a job's data, run its estimator, store the result and the model.

The progress callback writes the job record; it is also where a cancel is noticed, so a job
canceled while running stops at its next iteration even if the stop command is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from typing import Any

import numpy as np
from redis import Redis
from redis.exceptions import RedisError
from rq import get_current_job
from rq.timeouts import JobTimeoutException

from algorithms.registry import get_spec
from service.jobs import lost_job, record_id
from service.metrics import job_finished
from service.settings import get_settings
from service.stores import Keys, Stores
from service.webhooks import deliver

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_SECONDS = 0.05


class JobCanceledError(Exception):
    """Raised inside ``fit`` (via the progress callback) when the record says ``canceled``."""


def _connection() -> Redis:
    job = get_current_job()
    return job.connection if job is not None else Redis.from_url(get_settings().redis_url)


def _as_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_as_json(v) for v in value]
    return value


def run_job(job_id: str) -> str:
    """Run job ``job_id`` end to end; returns its final status."""
    stores = Stores(_connection(), get_settings())
    jobs = stores.jobs
    record = jobs.get(job_id)
    if record is None:
        return "expired"
    started_at = time.time()
    worker = {"host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid()}
    settings = get_settings()
    heartbeat = Heartbeat(stores.redis, job_id, settings.worker_heartbeat_seconds)
    heartbeat.beat()
    if not jobs.transition(job_id, ("queued",), status="running", started_at=started_at,
                           worker=worker):
        heartbeat.stop()
        return str(record.get("status"))  # canceled before it started
    stores.redis.hincrby(Keys.job(job_id), "runs", 1)
    heartbeat.start()
    try:
        status = _run(stores, job_id, record)
    finally:
        heartbeat.stop()
    final = jobs.get(job_id) or {}
    job_finished(stores.redis, record.get("algorithm", "unknown"), status,
                 final.get("fit_seconds"))
    if status in ("succeeded", "failed"):
        deliver(settings, final)
    return status


class Heartbeat(threading.Thread):
    """Keeps ``mmc:job:<id>:alive`` set while the job runs; the API takes its absence for longer
    than the heartbeat window as the death of the worker (``kill -9``, lost machine)."""

    def __init__(self, redis: Redis, job_id: str, seconds: int):
        super().__init__(daemon=True, name=f"heartbeat-{job_id}")
        self.redis, self.key, self.seconds = redis, Keys.job_alive(job_id), seconds
        self._stopped = threading.Event()

    def beat(self) -> None:
        self.redis.set(self.key, "1", ex=self.seconds)

    def run(self) -> None:
        while not self._stopped.wait(self.seconds / 3):
            try:
                self.beat()
            except RedisError:
                log.warning("heartbeat of %s not written", self.key)

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(RedisError):
            self.redis.delete(self.key)


def _run(stores: Stores, job_id: str, record: dict[str, Any]) -> str:
    jobs = stores.jobs

    last_write = 0.0

    def progress(step: int, objective: float | None, message: str) -> None:
        nonlocal last_write
        now = time.time()
        if step > 1 and now - last_write < PROGRESS_INTERVAL_SECONDS:
            return
        last_write = now
        update = {"step": int(step), "objective": objective, "message": str(message)[:500],
                  "updated_at": now}
        if not jobs.transition(job_id, ("running",), progress=update):
            raise JobCanceledError(job_id)

    try:
        spec = get_spec(record["algorithm"])
        params = spec.parse_params(record["params"])
        job_input = jobs.load_input(job_id)
        if job_input is None:
            raise ValueError("the job's input expired before it ran")
        load_started = time.perf_counter()
        if spec.input_kind == "sequences":
            X: Any = [np.asarray(s, dtype=np.int64) for s in job_input["sequences"]]
        else:
            X = stores.datasets.load(job_input["dataset_id"])
            if X is None:
                raise ValueError(f"dataset {job_input['dataset_id']} expired before the job ran")
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
            decision = _as_json(estimator.decision_function(X))
        meta, arrays = estimator.to_model()
        model_id = stores.models.put(meta, arrays, {
            "algorithm": spec.name, "estimator": type(estimator).__name__, "job_id": job_id,
            "input_kind": spec.input_kind, "n_features_in": meta.get("n_features_in"),
            "params": params.model_dump(mode="json"), "owner": record.get("owner", "anonymous"),
        })
        extras = estimator.result_extras()
        timing = {"load_seconds": load_seconds, "fit_seconds": fit_seconds}
        jobs.put_result(job_id, {
            "job_id": job_id,
            "algorithm": spec.name,
            "labels": _as_json(estimator.labels_),
            "decision_values": decision,
            "extras": extras,
            "warnings": list(extras.get("warnings") or []),
            "model_id": model_id,
            "n_samples": len(X) if spec.input_kind == "sequences" else int(X.shape[0]),
        })
        timing["store_seconds"] = time.perf_counter() - store_started
        done = jobs.transition(job_id, ("running",), status="succeeded", finished_at=time.time(),
                               fit_seconds=fit_seconds, timing=timing, model_id=model_id)
        return "succeeded" if done else "canceled"
    except JobCanceledError:
        return "canceled"
    except JobTimeoutException as exc:
        message = f"timed out after {record.get('timeout_seconds')} s: {exc}"
        jobs.transition(job_id, ("queued", "running"), status="failed", finished_at=time.time(),
                        error={"type": type(exc).__name__, "message": message})
        return "failed"
    except Exception as exc:
        log.exception("job %s failed", job_id)
        jobs.transition(job_id, ("queued", "running"), status="failed", finished_at=time.time(),
                        error={"type": type(exc).__name__, "message": str(exc)})
        return "failed"


def on_failure(job, connection, exc_type=None, exc_value=None, traceback=None) -> None:
    """RQ failure callback (timeouts, killed work horses, abandoned jobs): the record must not
    stay ``running``. A timeout fails the job; a lost worker re-queues a retry-safe job once."""
    settings = get_settings()
    stores = Stores(connection, settings)
    job_id = record_id(job.id)
    record = stores.jobs.get(job_id)
    if record is None or record["status"] not in ("queued", "running"):
        return
    name = getattr(exc_type, "__name__", "WorkerError")
    detail = str(exc_value) if exc_value is not None and str(exc_value) else ""
    if "Timeout" in name:
        timeout = record.get("timeout_seconds") or getattr(job, "timeout", None)
        message = "timed out" + (f" after {timeout} s" if timeout else "")
        if detail:
            message += f": {detail}"
        if stores.jobs.transition(job_id, ("queued", "running"), status="failed",
                                  finished_at=time.time(),
                                  error={"type": name, "message": message}):
            job_finished(connection, record.get("algorithm", "unknown"), "failed")
            deliver(settings, stores.jobs.get(job_id) or {})
        return
    reason = detail or "the worker running this job stopped before it finished"
    lost_job(connection, settings, job_id, reason, error_type=name,
             expected_rq_id=getattr(job, "id", None))
