"""The sweeper: finds lost jobs even when no one reads them, so a caller waiting on a webhook is
told. It runs as a thread in every worker process (not in the work horses); a short Redis lock
lets one of them sweep per interval.

A sweep looks at every queued or running job (the tenants' active sets):

- running, its heartbeat silent for ``MMC_WORKER_HEARTBEAT_SECONDS`` (worker killed with its
  horse, machine lost): failed with the reason, or re-queued once if retry-safe;
- queued, its RQ job missing (the API died between creating the record and enqueueing it), or
  taken from its queue by a worker that died before starting it, for longer than the window:
  enqueued again as a new attempt (it never ran, so any algorithm may be);
- queued, its RQ job failed or stopped without the record moving: as a lost job;
- queued or running: its dataset's TTL is renewed to cover the job, so a job waiting in the
  queue never finds its data expired;
- webhook retries that are due go back on their queue even while RQ's scheduler lock is held
  by a worker that was killed;
- blobs whose records have expired or were deleted are deleted from the blob store
  (:class:`core.stores.BlobLifetimes`).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from redis import Redis
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.job import JobStatus as RQJobStatus
from rq.utils import current_timestamp

from core.blobs import BlobUnavailableError
from core.job_record import ACTIVE_STATUSES, JobRecord, JobStatus
from core.jobs import enqueue, lost_job
from core.keys import Keys
from core.queues import SERIALIZER, WEBHOOK_QUEUE, get_queue
from core.settings import Settings
from core.stores import Stores

log = logging.getLogger(__name__)

LOCK_KEY = "mmc:sweeper:lock"


def active_jobs(redis: Redis, stores: Stores) -> Iterator[JobRecord]:
    """Records of the jobs in every tenant's active set (queued or running)."""
    for key in redis.scan_iter(match=f"{Keys.active_prefix()}*", count=500):
        for member in redis.smembers(key):
            record = stores.jobs.get(member.decode())
            if record is not None and record.get("status") in ACTIVE_STATUSES:
                yield record


def sweep(redis: Redis, settings: Settings, now: float | None = None) -> list[tuple[str, str]]:
    """One pass; returns ``(job id, what was done)`` for each job it changed."""
    now = time.time() if now is None else now
    stores = Stores(redis, settings)
    window = settings.worker_heartbeat_seconds
    done: list[tuple[str, str]] = []
    promoted = promote_due_deliveries(redis)
    if promoted:
        log.info("sweeper: %d webhook retries due, queued", promoted)
    for record in active_jobs(redis, stores):
        job_id = record["id"]
        _keep_dataset(redis, record, window)
        if record["status"] == JobStatus.RUNNING:
            started = record.get("started_at") or 0
            if now - started > window and not redis.exists(Keys.job_alive(job_id)):
                outcome = lost_job(
                    redis, settings, job_id,
                    f"the job's worker stopped sending heartbeats for {window} s (killed or "
                    "disconnected); found by the sweeper",
                    expected_rq_id=record.get("rq_job_id") or job_id)
                if outcome:
                    done.append((job_id, outcome))
            continue
        outcome = _check_queued(redis, settings, record, now)
        if outcome:
            done.append((job_id, outcome))
    _expire_blobs(stores, now)
    return done


def _expire_blobs(stores: Stores, now: float) -> None:
    """Delete the blobs of expired records; with the store down, the next pass tries again."""
    try:
        deleted = stores.lifetimes.sweep(now)
    except BlobUnavailableError as exc:
        log.warning("sweeper: blob store unavailable (%s); expired blobs kept for now", exc)
        return
    if deleted:
        log.info("sweeper: %d expired blobs deleted", deleted)


def _check_queued(redis: Redis, settings: Settings, record: JobRecord,
                  now: float) -> str | None:
    """A queued job that no queue holds and no worker runs goes back on its queue."""
    rq_id = record.get("rq_job_id") or record["id"]
    window = settings.worker_heartbeat_seconds
    try:
        rq_job = Job.fetch(rq_id, connection=redis, serializer=SERIALIZER)
        status = rq_job.get_status()
    except NoSuchJobError:
        rq_job, status = None, None
    if rq_job is None:
        # Grace of one window: the API creates the record just before it enqueues the job.
        if now - (record.get("queued_at") or now) > window:
            return _requeue(redis, settings, record, "its queue entry was missing")
        return None
    if status in (RQJobStatus.FAILED, RQJobStatus.STOPPED, RQJobStatus.CANCELED):
        return lost_job(redis, settings, record["id"],
                        f"the job's queue entry ended {status.value} before the job ran",
                        expected_rq_id=rq_id)
    if status == RQJobStatus.QUEUED and _age(rq_job.enqueued_at, now) > window \
            and redis.lpos(get_queue(record["queue"], redis).key, rq_id) is None:
        return _requeue(redis, settings, record, "a worker took it from the queue and died")
    if status == RQJobStatus.STARTED and _age(rq_job.started_at, now) > window:
        # Its horse marks it running first thing: the worker died before starting it.
        return _requeue(redis, settings, record, "the worker that took it died before starting it")
    return None


def _age(moment: datetime | None, now: float) -> float:
    if moment is None:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return now - moment.timestamp()


def _requeue(redis: Redis, settings: Settings, record: JobRecord, reason: str) -> str | None:
    """Enqueue a job that never ran as a new attempt: its new RQ id fences out the old queue
    entry, should a worker still hold it, so the job runs once."""
    attempt = int(record.get("attempt") or 1) + 1
    new_rq_id = f"{record['id']}-{attempt}"
    moved = Stores(redis, settings).jobs.transition(
        record["id"], (JobStatus.QUEUED,), fence=record.get("rq_job_id") or record["id"],
        attempt=attempt, rq_job_id=new_rq_id,
        progress={"step": 0, "objective": None, "updated_at": time.time(),
                  "message": f"queued again by the sweeper: {reason}"})
    if not moved:
        return None
    enqueue(redis, settings, {**record, "rq_job_id": new_rq_id})
    return f"queued again ({reason})"


# Take the due webhook retries (KEYS[1], RQ's scheduled registry, scored by due time) and the
# claims older than the lease (ARGV[2] seconds) that a sweeper took but never queued (it died
# in between), at most ARGV[3] of each: one step, so two sweepers never take the same one. The
# taken ids are scored in KEYS[2] with the time of the claim (ARGV[1]) until they are queued.
_CLAIM_DUE = """
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], 0, ARGV[1] - ARGV[2], 'LIMIT', 0, ARGV[3])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[1], 'LIMIT', 0, ARGV[3])
local taken, seen = {}, {}
for _, ids in ipairs({stale, due}) do
  for _, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZADD', KEYS[2], ARGV[1], id)
      table.insert(taken, id)
    end
  end
end
return taken
"""
CLAIM_LEASE_SECONDS = 60
CLAIM_BATCH = 1000


def promote_due_deliveries(redis: Redis) -> int:
    """Webhook retries whose time has come go back on the ``webhooks`` queue. RQ's scheduler
    does this every second, but its lock outlives a SIGKILLed worker by a minute; this keeps
    deliveries moving meanwhile. Claim first: each due retry is taken by one sweeper alone, so
    sweepers never queue one twice. RQ's scheduler, which does not claim, still may: a retry
    queued twice runs twice, and a run after the event was answered 2xx posts nothing
    (:func:`worker.deliveries.deliver_event`); two runs at once may both post, with one
    webhook-id, which at-least-once delivery allows."""
    queue = get_queue(WEBHOOK_QUEUE, redis)
    claims = Keys.webhook_claims()
    claim = redis.register_script(_CLAIM_DUE)
    job_ids = [job_id.decode() for job_id in claim(
        keys=[queue.scheduled_job_registry.key, claims],
        args=[current_timestamp(), CLAIM_LEASE_SECONDS, CLAIM_BATCH])]
    if not job_ids:
        return 0
    jobs = Job.fetch_many(job_ids, connection=redis, serializer=SERIALIZER)
    with redis.pipeline() as pipe:
        pipe.multi()
        for job_id, job in zip(job_ids, jobs, strict=True):
            if job is not None:
                queue.enqueue_job(job, pipeline=pipe)
            pipe.zrem(claims, job_id)
        pipe.execute()
    return sum(job is not None for job in jobs)


def _keep_dataset(redis: Redis, record: JobRecord, window: int) -> None:
    dataset_id = record.get("dataset_id")
    if not dataset_id:
        return
    key = Keys.dataset(dataset_id)
    # Enough for the job's whole run plus a few sweeps; never shortens a longer TTL.
    needed = int(record.get("timeout_seconds") or 0) + 4 * window
    if 0 <= redis.ttl(key) < needed:
        redis.expire(key, needed)


def settle_jobs_of_workers(redis: Redis, settings: Settings,
                           worker_pids: set[int]) -> list[tuple[str, str]]:
    """Jobs still running on these (stopped) workers of this machine: failed, or re-queued if
    retry-safe. Used by ``mmc serve`` at shutdown."""
    host = socket.gethostname()
    done = []
    for record in active_jobs(redis, Stores(redis, settings)):
        worker = record.get("worker") or {}
        if (record["status"] == JobStatus.RUNNING and worker.get("host") == host
                and worker.get("ppid") in worker_pids):
            outcome = lost_job(redis, settings, record["id"],
                               "mmc serve was stopped before the job finished",
                               expected_rq_id=record.get("rq_job_id") or record["id"])
            if outcome:
                done.append((record["id"], outcome))
    return done


class Sweeper(threading.Thread):
    """Sweeps every quarter heartbeat window. A killed job's heartbeat key expires at most one
    window after its last beat, so the job is found within 1.25 windows plus a pass: inside the
    two windows a caller is promised, with room for a loaded machine."""

    def __init__(self, redis_url: str, settings: Settings):
        super().__init__(daemon=True, name="mmc-sweeper")
        self.redis = Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=10)
        self.settings = settings
        self.interval = max(settings.worker_heartbeat_seconds / 4, 0.25)
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                if self.redis.set(LOCK_KEY, "1", nx=True, px=int(self.interval * 900)):
                    for job_id, outcome in sweep(self.redis, self.settings):
                        log.warning("sweeper: job %s %s", job_id, outcome)
            except RedisError as exc:
                log.warning("sweeper: Redis unavailable (%s)", exc)
            except Exception:  # a bad record must not end the sweeps
                log.exception("sweeper: pass failed")

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(RedisError):
            self.redis.close()
