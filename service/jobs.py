"""Job lifecycle on the API side: create (with idempotency), read (reconciled with RQ), cancel."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from datetime import UTC, datetime
from typing import Any

from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Callback, Job, JobStatus
from rq.registry import StartedJobRegistry

from algorithms.registry import get_spec
from service.inputs import prepare_job_input
from service.problems import ProblemError
from service.settings import Settings
from service.stores import FINAL_STATUSES, Stores, new_id
from worker.queues import RUN_JOB, SERIALIZER, get_queue


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def request_hash(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


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
        prepared = prepare_job_input(spec, params, request.data, self.stores.datasets.load)

        job_id = new_id()
        if idempotency_key is not None:
            body_hash = request_hash(request.model_dump(mode="json"))
            earlier = self.stores.idempotency.claim(owner, idempotency_key, body_hash, job_id)
            if earlier is not None:
                if earlier["body_hash"] != body_hash:
                    raise ProblemError(409, "this Idempotency-Key was used with a different "
                                            "request body; use a new key for a new job")
                record = self.get(earlier["job_id"], owner)
                return record, True

        dataset_id = prepared.dataset_id
        if prepared.X is not None and dataset_id is None:
            dataset_id = self.stores.datasets.put(prepared.X, describe=False)[0]["id"]
        queue = spec.queue_for(params)
        timeout = min(spec.timeout_seconds, self.settings.job_timeout_cap_seconds)
        record = {
            "id": job_id, "owner": owner, "status": "queued", "algorithm": spec.name,
            "params": params.model_dump(mode="json"), "queue": queue,
            "n_samples": prepared.n_samples, "n_features": prepared.n_features,
            "dataset_id": dataset_id, "timeout_seconds": timeout, "queued_at": time.time(),
            "progress": {"step": 0, "objective": None, "message": "queued", "updated_at": None},
        }
        job_input = {"dataset_id": dataset_id, "y": prepared.y, "sequences": prepared.sequences}
        try:
            self.stores.jobs.create(record, job_input)
            get_queue(queue, self.redis).enqueue(
                RUN_JOB, job_id, job_id=job_id, job_timeout=timeout,
                result_ttl=600, failure_ttl=self.settings.job_ttl_seconds,
                on_failure=Callback("worker.tasks.on_failure"),
            )
        except Exception:
            self.stores.jobs.delete(job_id, owner)
            if idempotency_key is not None:
                self.stores.idempotency.release(owner, idempotency_key)
            raise
        return record, False

    # -- read -------------------------------------------------------------------------------------
    def get(self, job_id: str, owner: str) -> dict[str, Any]:
        record = self.stores.jobs.get(job_id)
        if record is None or record.get("owner") != owner:
            raise ProblemError(404, f"job {job_id} does not exist or has expired")
        if record["status"] in ("queued", "running"):
            record = self._reconcile(record)
        return record

    def _reconcile(self, record: dict[str, Any]) -> dict[str, Any]:
        """A job whose work horse or worker died must end ``failed``, not stay ``running``.

        RQ marks a killed work horse's job failed at once, and an abandoned one (its worker gone,
        heartbeats expired) when its started-job registry is cleaned, which is done here.
        """
        job_id = record["id"]
        if record["status"] == "running":
            StartedJobRegistry(record["queue"], connection=self.redis,
                               serializer=SERIALIZER).cleanup()
        try:
            rq_job = Job.fetch(job_id, connection=self.redis, serializer=SERIALIZER)
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
            self.stores.jobs.transition(
                job_id, ("queued", "running"), status="failed", finished_at=time.time(),
                error={"type": "WorkerError", "message": reason},
            )
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
        if self.stores.jobs.transition(job_id, ("queued",), status="canceled", finished_at=now):
            # If a worker dequeued it meanwhile, its move to running fails and it skips the job.
            with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
                Job.fetch(job_id, connection=self.redis, serializer=SERIALIZER).cancel()
        elif self.stores.jobs.transition(job_id, ("running",), status="canceled", finished_at=now):
            # If it finished meanwhile there is nothing to stop; a fit that misses the command
            # stops at its next progress report, which sees the canceled record.
            with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
                send_stop_job_command(self.redis, job_id, serializer=SERIALIZER)
        return self.get(job_id, owner)


def render_job(record: dict[str, Any]) -> dict[str, Any]:
    job_id = record["id"]
    timing = dict(record.get("timing") or {})
    links = {"self": f"/v1/jobs/{job_id}", "result": f"/v1/jobs/{job_id}/result"}
    if record.get("model_id"):
        links["model"] = f"/v1/models/{record['model_id']}"
    return {
        "id": job_id,
        "status": record["status"],
        "algorithm": {"name": record["algorithm"], "params": record["params"]},
        "queue": record["queue"],
        "n_samples": record["n_samples"],
        "n_features": record.get("n_features"),
        "progress": record.get("progress") or {},
        "timing": {
            "queued_at": _iso(record.get("queued_at")),
            "started_at": _iso(record.get("started_at")),
            "finished_at": _iso(record.get("finished_at")),
            "fit_seconds": record.get("fit_seconds"),
            "load_seconds": timing.get("load_seconds"),
            "store_seconds": timing.get("store_seconds"),
        },
        "error": record.get("error"),
        "model_id": record.get("model_id"),
        "links": links,
    }
