"""Job lifecycle on the API side: create (with idempotency), read (reconciled with RQ), cancel."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.job import JobStatus as RQJobStatus
from rq.registry import StartedJobRegistry

from algorithms.registry import get_spec
from core import metrics
from core.job_record import ACTIVE_STATUSES, FINAL_STATUSES, JobRecord, JobStatus
from core.jobs import enqueue, lost_job
from core.keys import Keys
from core.queues import SERIALIZER
from core.settings import Settings
from core.stores import Stores, new_id
from core.webhooks import schedule, tenant_secret, url_problem
from service.inputs import prepare_job_input
from service.problems import ProblemError, field_error


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


@dataclass
class _Submission:
    """A checked job waiting to be stored: its record and input, the inline matrix to store as
    its dataset (None when the job names a stored one), and its Idempotency-Key's claim."""

    record: JobRecord
    job_input: dict[str, Any]
    new_matrix: np.ndarray | None
    idempotency_key: str | None
    body_hash: str | None
    claim: tuple[str, dict[str, str], int] | None


class JobService:
    def __init__(self, redis: Redis, settings: Settings):
        self.redis = redis
        self.settings = settings
        self.stores = Stores(redis, settings)

    # -- create -----------------------------------------------------------------------------------
    def create(self, request: Any, owner: str, idempotency_key: str | None
               ) -> tuple[JobRecord, bool]:
        """Validate and enqueue; returns ``(record, replayed)``."""
        result = self.create_many([(request, owner, idempotency_key)])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def create_many(self, items: list[tuple[Any, str, str | None]]
                    ) -> list[tuple[JobRecord, bool] | BaseException]:
        """:meth:`create` for each ``(request, owner, idempotency_key)``, in three Redis round
        trips for them all (renew the stored datasets; store the rest and the records; enqueue),
        not three each, besides one per new blob (its entry for the sweeper, before its write).
        Each item gets its own answer: its record or the error that refused it.
        """
        results: list[Any] = [None] * len(items)
        pending: list[tuple[int, _Submission]] = []
        for index, item in enumerate(items):
            try:
                prepared = self._prepare(*item)
            except Exception as exc:  # a 4xx (or Redis down) answers that request alone
                results[index] = exc
                continue
            if isinstance(prepared, _Submission):
                pending.append((index, prepared))
            else:
                results[index] = (prepared, True)
        if pending:
            for (index, _), result in zip(pending, self._store([s for _, s in pending]),
                                          strict=True):
                results[index] = result
        return results

    def _prepare(self, request: Any, owner: str, idempotency_key: str | None
                 ) -> _Submission | JobRecord:
        """The checked job, or the earlier job of a known Idempotency-Key (a replay)."""
        spec = get_spec(request.algorithm.name)
        params = request.algorithm.params
        datasets = self.stores.datasets
        prepared = prepare_job_input(spec, params, request.data, lambda some_id: (
            datasets.referenced_shape(some_id, owner) or datasets.load(some_id, owner)))
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
                return self._replay(earlier, body_hash, owner)
        dataset_id = prepared.dataset_id
        new_matrix = None
        if prepared.X is not None and dataset_id is None:
            # Content-addressed: storing it before the claim is harmless if this is a replay.
            dataset_id = self.stores.datasets.content_id(prepared.X, owner)
            new_matrix = prepared.X
        queue = spec.queue_for(params)
        timeout = min(spec.timeout_seconds, self.settings.job_timeout_cap_seconds)
        record: JobRecord = {
            "id": job_id, "owner": owner, "status": JobStatus.QUEUED, "algorithm": spec.name,
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
        return _Submission(record, job_input, new_matrix, idempotency_key, body_hash, claim)

    def _store(self, submissions: list[_Submission]) -> list[Any]:
        """Store the datasets and records of ``submissions`` and enqueue those admitted; a
        failure leaves no record, active slot or key behind and answers every one of them."""
        cap = self.settings.max_active_jobs_per_tenant
        try:
            outcomes = self._store_records(submissions, cap)
            with self.redis.pipeline() as pipe:
                for submission, (outcome, _) in zip(submissions, outcomes, strict=True):
                    if outcome == "created":
                        enqueue(self.redis, self.settings, submission.record, pipe)
                pipe.execute()
        except BaseException as exc:
            for submission in submissions:  # best effort (Redis may be the reason)
                with contextlib.suppress(Exception):
                    self._undo(submission)
            if not isinstance(exc, Exception):
                raise
            return [exc] * len(submissions)
        return [self._answer(submission, outcome, earlier)
                for submission, (outcome, earlier) in zip(submissions, outcomes, strict=True)]

    def _store_records(self, submissions: list[_Submission], cap: int
                       ) -> list[tuple[str, dict[str, str] | None]]:
        """Renew or store the new matrices, then create the records (two round trips); a tenant
        found full is pruned of finished jobs and tried again alone."""
        datasets = self.stores.datasets
        fresh = {s.record["dataset_id"]: s for s in submissions if s.new_matrix is not None}
        with self.redis.pipeline(transaction=False) as pipe:
            for dataset_id in fresh:
                pipe.expire(Keys.dataset(dataset_id), datasets.ttl)
            renewed = pipe.execute()
        with self.redis.pipeline(transaction=False) as pipe:
            for (dataset_id, submission), found in zip(fresh.items(), renewed, strict=True):
                if not found:
                    datasets.put_on(pipe, submission.new_matrix, dataset_id,
                                    submission.record["owner"])
            for submission in submissions:
                self.stores.jobs.create_on(pipe, submission.record, submission.job_input, cap,
                                           submission.claim)
            replies = pipe.execute()[-len(submissions):]
        outcomes = [self.stores.jobs.create_outcome(reply) for reply in replies]
        for index, (outcome, _) in enumerate(outcomes):
            if outcome == "full":
                submission = submissions[index]
                outcomes[index] = self.stores.jobs.create_admitted(
                    submission.record, submission.job_input, cap, submission.claim)
        return outcomes

    def _answer(self, submission: _Submission, outcome: str,
                earlier: dict[str, str] | None) -> Any:
        if outcome == "created":
            return submission.record, False
        if outcome == "replay":  # a concurrent request with this key won the race
            try:
                return self._replay(earlier, submission.body_hash,
                                    submission.record["owner"]), True
            except Exception as exc:
                return exc
        return ProblemError(
            429, f"this tenant already has {self.settings.max_active_jobs_per_tenant} queued "
                 "or running jobs (MMC_MAX_ACTIVE_JOBS_PER_TENANT); retry when some finish",
            headers={"Retry-After": str(self.settings.retry_after_seconds)})

    def _undo(self, submission: _Submission) -> None:
        owner, job_id = submission.record["owner"], submission.record["id"]
        self.stores.jobs.release(owner, job_id)
        self.stores.jobs.delete(job_id, owner)
        if submission.idempotency_key is not None:
            self.stores.idempotency.release(owner, submission.idempotency_key, job_id)

    def _replay(self, earlier: dict[str, str], body_hash: str | None, owner: str
                ) -> JobRecord:
        if earlier["body_hash"] != body_hash:
            raise ProblemError(409, "this Idempotency-Key was used with a different request "
                                    "body; use a new key for a new job")
        return self.get(earlier["job_id"], owner)

    # -- read -------------------------------------------------------------------------------------
    def get(self, job_id: str, owner: str) -> JobRecord:
        record = self.stores.jobs.get(job_id)
        if record is None or record.get("owner") != owner:
            raise ProblemError(404, f"job {job_id} does not exist or has expired")
        if record["status"] in ACTIVE_STATUSES:
            record = self._reconcile(record)
        return record

    def _reconcile(self, record: JobRecord) -> JobRecord:
        """A job whose work horse or worker died must end ``failed`` (or be re-queued once when
        its algorithm is retry-safe), not stay ``running``.

        RQ reports a killed work horse through the failure callback; a job whose whole worker
        died is found here by its missing heartbeat (``MMC_WORKER_HEARTBEAT_SECONDS``), or by
        RQ's own abandoned-job cleanup of the started-job registry.
        """
        job_id = record["id"]
        rq_id = record.get("rq_job_id") or job_id
        if record["status"] == JobStatus.RUNNING:
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
        if status in (RQJobStatus.FAILED, RQJobStatus.STOPPED) or (
            status is None and record["status"] == JobStatus.RUNNING
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

    def list(self, owner: str, offset: int, limit: int, **filters: Any
             ) -> tuple[list[JobRecord], int]:
        """A page of ``owner``'s jobs, newest first (filters: :meth:`JobStore.list`)."""
        return self.stores.jobs.list(owner, offset, limit, **filters)

    # -- cancel -----------------------------------------------------------------------------------
    def cancel(self, job_id: str, owner: str) -> JobRecord:
        record = self.get(job_id, owner)
        if record["status"] in FINAL_STATUSES:
            raise ProblemError(409, f"job {job_id} is already {record['status']}")
        now = time.time()
        rq_id = record.get("rq_job_id") or job_id
        if self.stores.jobs.transition(job_id, (JobStatus.QUEUED,), status=JobStatus.CANCELED,
                                       finished_at=now):
            # If a worker dequeued it meanwhile, its move to running fails and it skips the job.
            with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
                Job.fetch(rq_id, connection=self.redis, serializer=SERIALIZER).cancel()
        elif self.stores.jobs.transition(job_id, (JobStatus.RUNNING,), status=JobStatus.CANCELED,
                                         finished_at=now):
            # If it finished meanwhile there is nothing to stop; a fit that misses the command
            # stops at its next progress report, which sees the canceled record.
            with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
                send_stop_job_command(self.redis, rq_id, serializer=SERIALIZER)
        else:
            return self.get(job_id, owner)
        metrics.job_finished(self.redis, record["algorithm"], JobStatus.CANCELED)
        final = self.get(job_id, owner)
        schedule(self.redis, self.settings, final)
        return final
