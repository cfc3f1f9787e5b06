"""Job lifecycle on the API side: create (with idempotency), read (reconciled with RQ), cancel."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Callback, Job, JobStatus
from rq.registry import StartedJobRegistry

from algorithms.registry import get_spec
from core.queues import RUN_JOB, SERIALIZER, get_queue
from service import metrics
from service.inputs import prepare_job_input
from service.problems import ProblemError, field_error
from service.settings import Settings
from service.stores import FINAL_STATUSES, Keys, Stores, new_id
from service.webhooks import schedule, tenant_secret, url_problem


def iso_time(timestamp: float | None) -> str | None:
    """Epoch seconds as the API writes every time: ISO 8601 UTC with a ``Z``."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def request_hash(request: Any) -> str:
    """Digest of a job request: its fields as canonical JSON and the matrix ``data.X`` (a float64
    array from service.json_body) as bytes, so a large X is hashed without a JSON copy."""
    fields = request.model_dump(mode="json", exclude={"data": {"X"}})
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    X = request.data.X
    if X is not None:
        array = np.ascontiguousarray(X, dtype=np.float64)
        digest.update(f"X{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class JobService:
    def __init__(self, redis: Redis, settings: Settings):
        self.redis = redis
        self.settings = settings
        self.stores = Stores(redis, settings)

    # -- create -----------------------------------------------------------------------------------
    def create(self, request: Any, owner: str, idempotency_key: str | None
               ) -> tuple[dict[str, Any], bool]:
        """Validate and enqueue; returns ``(record, replayed)``."""
        spec = get_spec(request.algorithm.name)
        params = request.algorithm.params
        prepared = prepare_job_input(spec, params, request.data,
                                     lambda some_id: self.stores.datasets.load(some_id, owner))
        cells = prepared.n_samples * (prepared.n_features or 1)
        if cells > self.settings.max_points_x_features:
            raise field_error(422, "body.data",
                              f"{prepared.n_samples} points x {prepared.n_features} features "
                              f"= {cells} values exceed MMC_MAX_POINTS_X_FEATURES="
                              f"{self.settings.max_points_x_features}", "too_many_values")
        callback_url = getattr(request, "callback_url", None)
        if callback_url is not None:
            if tenant_secret(self.settings, owner) is None:
                raise field_error(422, "body.callback_url", "no webhook secret is configured for "
                                  "this tenant (MMC_WEBHOOK_SECRETS); callbacks are unavailable")
            problem = url_problem(callback_url, self.settings.webhook_allow_private)
            if problem is not None:
                raise field_error(422, "body.callback_url", problem)

        job_id = new_id()
        body_hash = None
        if idempotency_key is not None:
            body_hash = request_hash(request)
            earlier = self.stores.idempotency.earlier(owner, idempotency_key)
            if earlier is not None:  # the common replay: no dataset write, no new record
                return self._replay(earlier, body_hash, owner), True
        dataset_id = prepared.dataset_id
        if prepared.X is not None and dataset_id is None:
            # Content-addressed: storing it before the claim is harmless if this is a replay.
            dataset_id = self.stores.datasets.put(prepared.X, owner=owner,
                                                  describe=False)[0]["id"]
        queue = spec.queue_for(params)
        timeout = min(spec.timeout_seconds, self.settings.job_timeout_cap_seconds)
        record = {
            "id": job_id, "owner": owner, "status": "queued", "algorithm": spec.name,
            "params": params.model_dump(mode="json"), "queue": queue,
            "n_samples": prepared.n_samples, "n_features": prepared.n_features,
            "dataset_id": dataset_id, "timeout_seconds": timeout, "queued_at": time.time(),
            "progress": {"step": 0, "objective": None, "message": "queued", "updated_at": None},
            "attempt": 1, "rq_job_id": job_id, "callback_url": callback_url,
        }
        job_input = {"dataset_id": dataset_id, "y": prepared.y, "sequences": prepared.sequences}
        claim = None
        if idempotency_key is not None:
            claim = self.stores.idempotency.claim_for(owner, idempotency_key, body_hash, job_id)
        try:
            outcome, earlier = self.stores.jobs.create_admitted(
                record, job_input, self.settings.max_active_jobs_per_tenant, claim)
            if outcome == "created":
                enqueue(self.redis, self.settings, record)
        except BaseException:
            # Best effort (Redis may be the reason): leave no record, active slot or key behind.
            with contextlib.suppress(Exception):
                self.stores.jobs.release(owner, job_id)
                self.stores.jobs.delete(job_id, owner)
                if idempotency_key is not None:
                    self.stores.idempotency.release(owner, idempotency_key, job_id)
            raise
        if outcome == "replay":  # a concurrent request with this key won the race
            return self._replay(earlier, body_hash, owner), True
        if outcome == "full":
            raise ProblemError(
                429, f"this tenant already has {self.settings.max_active_jobs_per_tenant} queued "
                     "or running jobs (MMC_MAX_ACTIVE_JOBS_PER_TENANT); retry when some finish",
                headers={"Retry-After": str(self.settings.retry_after_seconds)})
        return record, False

    def _replay(self, earlier: dict[str, str], body_hash: str | None, owner: str
                ) -> dict[str, Any]:
        if earlier["body_hash"] != body_hash:
            raise ProblemError(409, "this Idempotency-Key was used with a different request "
                                    "body; use a new key for a new job")
        return self.get(earlier["job_id"], owner)

    # -- read -------------------------------------------------------------------------------------
    def get(self, job_id: str, owner: str) -> dict[str, Any]:
        record = self.stores.jobs.get(job_id)
        if record is None or record.get("owner") != owner:
            raise ProblemError(404, f"job {job_id} does not exist or has expired")
        if record["status"] in ("queued", "running"):
            record = self._reconcile(record)
        return record

    def _reconcile(self, record: dict[str, Any]) -> dict[str, Any]:
        """A job whose work horse or worker died must end ``failed`` (or be re-queued once when
        its algorithm is retry-safe), not stay ``running``.

        RQ reports a killed work horse through the failure callback; a job whose whole worker
        died is found here by its missing heartbeat (``MMC_WORKER_HEARTBEAT_SECONDS``), or by
        RQ's own abandoned-job cleanup of the started-job registry.
        """
        job_id = record["id"]
        rq_id = record.get("rq_job_id") or job_id
        if record["status"] == "running":
            StartedJobRegistry(record["queue"], connection=self.redis,
                               serializer=SERIALIZER).cleanup()
            heartbeat = self.settings.worker_heartbeat_seconds
            started = record.get("started_at") or 0
            if (time.time() - started > heartbeat
                    and not self.redis.exists(Keys.job_alive(job_id))):
                lost_job(self.redis, self.settings, job_id,
                         f"the job's worker stopped sending heartbeats for {heartbeat} s "
                         "(killed or disconnected)")
                return self.stores.jobs.get(job_id) or record
        try:
            rq_job = Job.fetch(rq_id, connection=self.redis, serializer=SERIALIZER)
            status = rq_job.get_status()
        except NoSuchJobError:
            rq_job, status = None, None
        if status in (JobStatus.FAILED, JobStatus.STOPPED) or (
            status is None and record["status"] == "running"
        ):
            reason = "the job's worker stopped before it finished"
            if rq_job is not None:
                latest = rq_job.latest_result()
                if latest is not None and latest.exc_string:
                    reason = f"{reason}: {latest.exc_string.strip().splitlines()[-1]}"
            lost_job(self.redis, self.settings, job_id, reason,
                     expected_rq_id=rq_id)
            record = self.stores.jobs.get(job_id) or record
        return record

    def list(self, owner: str, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        return self.stores.jobs.list(owner, offset, limit)

    # -- cancel -----------------------------------------------------------------------------------
    def cancel(self, job_id: str, owner: str) -> dict[str, Any]:
        record = self.get(job_id, owner)
        if record["status"] in FINAL_STATUSES:
            raise ProblemError(409, f"job {job_id} is already {record['status']}")
        now = time.time()
        rq_id = record.get("rq_job_id") or job_id
        if self.stores.jobs.transition(job_id, ("queued",), status="canceled", finished_at=now):
            # If a worker dequeued it meanwhile, its move to running fails and it skips the job.
            with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
                Job.fetch(rq_id, connection=self.redis, serializer=SERIALIZER).cancel()
        elif self.stores.jobs.transition(job_id, ("running",), status="canceled", finished_at=now):
            # If it finished meanwhile there is nothing to stop; a fit that misses the command
            # stops at its next progress report, which sees the canceled record.
            with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
                send_stop_job_command(self.redis, rq_id, serializer=SERIALIZER)
        else:
            return self.get(job_id, owner)
        metrics.job_finished(self.redis, record["algorithm"], "canceled")
        final = self.get(job_id, owner)
        schedule(self.redis, self.settings, final)
        return final


def enqueue(redis: Redis, settings: Settings, record: dict[str, Any], pipeline=None) -> None:
    """Put the job's current attempt (RQ job ``rq_job_id``) on its queue; on the caller's
    transaction ``pipeline`` (executed by the caller) when given."""
    get_queue(record["queue"], redis).enqueue_call(
        RUN_JOB, args=(record["id"],), job_id=record["rq_job_id"],
        timeout=record["timeout_seconds"], result_ttl=600, failure_ttl=settings.job_ttl_seconds,
        on_failure=Callback("worker.tasks.on_failure"), pipeline=pipeline,
    )


def record_id(rq_job_id: str) -> str:
    """The service's job id of an RQ job id (a retry's RQ id is ``<job id>-<attempt>``)."""
    base, sep, tail = rq_job_id.rpartition("-")
    return base if sep and tail.isdigit() and len(base) == 32 else rq_job_id


def lost_job(redis: Redis, settings: Settings, job_id: str, reason: str, *,
             error_type: str = "WorkerError", expected_rq_id: str | None = None) -> str | None:
    """A running (or dequeued) job lost its worker: re-queue it as a new attempt when its
    algorithm is retry-safe and attempts remain (``MMC_RETRY_LOST_JOBS``), else fail it with
    ``reason``. Returns the new status, or ``None`` if the job had already moved on."""
    stores = Stores(redis, settings)
    record = stores.jobs.get(job_id)
    if record is None or record["status"] not in ("queued", "running"):
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
            job_id, (record["status"],), fence=rq_id, status="queued", attempt=attempt + 1,
            rq_job_id=new_rq_id, started_at=None,
            progress={"step": 0, "objective": None, "updated_at": time.time(),
                      "message": f"re-queued (attempt {attempt + 1}): {reason}"})
        if moved:
            enqueue(redis, settings, {**record, "rq_job_id": new_rq_id})
            metrics.record(redis, "mmc_jobs_lost_total",
                           algorithm=record.get("algorithm", "unknown"), action="requeued")
            return "queued"
        return None
    moved = stores.jobs.transition(
        job_id, ("queued", "running"), fence=rq_id, status="failed", finished_at=time.time(),
        error={"type": error_type, "message": reason})
    if not moved:
        return None
    algorithm = record.get("algorithm", "unknown")
    metrics.record(redis, "mmc_jobs_lost_total", algorithm=algorithm, action="failed")
    metrics.job_finished(redis, algorithm, "failed")
    schedule(redis, settings, stores.jobs.get(job_id))
    return "failed"


def render_job(record: dict[str, Any]) -> dict[str, Any]:
    job_id = record["id"]
    timing = dict(record.get("timing") or {})
    links = {"self": f"/v1/jobs/{job_id}", "result": f"/v1/jobs/{job_id}/result"}
    if record.get("model_id"):
        links["model"] = f"/v1/models/{record['model_id']}"
    if record["status"] == "succeeded":
        links["plot"] = f"/v1/jobs/{job_id}/plot"
        links["labels"] = f"/v1/jobs/{job_id}/labels.csv"
    return {
        "id": job_id,
        "status": record["status"],
        "algorithm": {"name": record["algorithm"], "params": record["params"]},
        "queue": record["queue"],
        "n_samples": record["n_samples"],
        "n_features": record.get("n_features"),
        "progress": {**(record.get("progress") or {}),
                     "updated_at": iso_time((record.get("progress") or {}).get("updated_at"))},
        "timing": {
            "queued_at": iso_time(record.get("queued_at")),
            "started_at": iso_time(record.get("started_at")),
            "finished_at": iso_time(record.get("finished_at")),
            "fit_seconds": record.get("fit_seconds"),
            "load_seconds": timing.get("load_seconds"),
            "store_seconds": timing.get("store_seconds"),
            "plot_seconds": timing.get("plot_seconds"),
        },
        "error": record.get("error"),
        "model_id": record.get("model_id"),
        "links": links,
    }
