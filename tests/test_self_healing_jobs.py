"""Jobs that survive their worker, on a private deployment with a 2 s heartbeat window and two
workers (``healing_deployment``, shared with the webhook tests alone): the sweeper finds a lost
job that nobody polls (and its webhook goes out), re-enqueues a job whose record was created but
never enqueued (its dataset kept alive meanwhile), a stale attempt frozen with SIGSTOP and
resumed after its job was re-queued changes nothing, and a job past the per-job memory cap fails
with a message while the worker serves the next job, and webhooks are delivered off the job's
work horse, retried by RQ's scheduler under one webhook-id, also to a receiver that was down for
two minutes (an outage that runs beside the other tests)."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import numpy as np
import pytest
from redis import Redis
from rq.job import Job
from sklearn.datasets import make_blobs

from core.job_record import ACTIVE_STATUSES, JobStatus
from core.keys import Keys
from core.queues import SERIALIZER
from core.stores import Stores, new_id
from tests.hardening import HEARTBEAT, MEMORY_MB, Receiver, several_seconds

FINAL = ("succeeded", "failed", "canceled")


@pytest.fixture(scope="module")
def deployment(healing_deployment, receiver_outage):
    """The session's ``healing_deployment`` (tests/hardening.py: HEALING_ENV), whose
    ``receiver_outage`` began with the first module that used it (or here)."""
    return healing_deployment


@pytest.fixture(scope="module")
def redis(deployment):
    return Redis.from_url(deployment.redis_url)


def record(redis: Redis, job_id: str) -> dict:
    return {k.decode(): json.loads(v) for k, v in redis.hgetall(Keys.job(job_id)).items()}


def wait_record(redis: Redis, job_id: str, done, timeout: float = 60) -> dict:
    """Poll the record in Redis (not the API, whose reads reconcile lost jobs themselves)."""
    deadline = time.monotonic() + timeout
    while True:
        current = record(redis, job_id)
        if done(current):
            return current
        assert time.monotonic() < deadline, f"gave up waiting: {current}"
        time.sleep(0.05)


def running(attempt: int):
    return lambda r: r.get("status") == "running" and r.get("attempt") == attempt


def final(r: dict) -> bool:
    return r.get("status") in FINAL


def submit(url: str, payload: dict) -> str:
    response = httpx.post(f"{url}/v1/jobs", json=payload, timeout=30)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def tiny(seed: int, name: str = "itersvr") -> dict:
    X, _ = make_blobs(n_samples=40, centers=2, random_state=seed)
    return {"algorithm": {"name": name, "params": {"random_state": 0}}, "data": {"X": X.tolist()}}


def test_stale_attempt_resumed_after_its_job_was_requeued_changes_nothing(deployment, redis):
    job_id = submit(deployment.url, several_seconds(1))
    first = wait_record(redis, job_id, running(1))
    stale_horse = first["worker"]["pid"]
    os.kill(stale_horse, signal.SIGSTOP)  # frozen: no progress, no heartbeat
    try:
        # Nobody reads the job: the sweeper re-queues it and the other worker runs attempt 2.
        second = wait_record(redis, job_id, running(2), timeout=4 * HEARTBEAT + 30)
        assert second["worker"]["pid"] != stale_horse
        # Its progress is the sweeper's reason for the re-queue, or attempt 2's own report; never
        # the frozen first attempt's.
        progress = second["progress"]
        assert ("re-queued (attempt 2)" in progress["message"]
                and "heartbeats" in progress["message"]) \
            or progress["updated_at"] >= second["started_at"], progress

        # The first attempt (RQ id == job id) writing directly: every write is refused.
        jobs = Stores(redis, deployment.settings).jobs
        before = record(redis, job_id)
        assert not jobs.transition(job_id, (JobStatus.RUNNING,), fence=job_id, progress={
            "step": 999, "objective": None, "message": "stale", "updated_at": None})
        assert not jobs.transition(job_id, (JobStatus.RUNNING,), fence=job_id,
                                   status=JobStatus.SUCCEEDED, model_id="stale",
                                   result={"labels": []})
        assert not jobs.transition(job_id, ACTIVE_STATUSES, fence=job_id,
                                   status=JobStatus.FAILED,
                                   error={"type": "Stale", "message": "stale"})
        assert redis.get(Keys.result(job_id)) is None
        after = record(redis, job_id)
        assert after["status"] == "running" and after["attempt"] == 2
        assert after["progress"]["step"] != 999 and after.get("model_id") is None
        assert before["rq_job_id"] == after["rq_job_id"] == f"{job_id}-2"
    finally:
        os.kill(stale_horse, signal.SIGCONT)  # the real stale attempt resumes mid-fit

    done = wait_record(redis, job_id, final, timeout=120)
    assert done["status"] == "succeeded", done.get("error")
    assert done["attempt"] == 2 and done["worker"]["pid"] == second["worker"]["pid"]
    result = Stores(redis, deployment.settings).jobs.get_result(job_id)
    assert result["model_id"] == done["model_id"]
    # The resumed attempt stopped at its first refused progress write and stored no model.
    deadline = time.monotonic() + 30
    while _alive(stale_horse):
        assert time.monotonic() < deadline, "the stale attempt kept running"
        time.sleep(0.1)
    models = [key for key in redis.scan_iter(match="mmc:model:*")
              if json.loads(redis.hget(key, "info"))["job_id"] == job_id]
    assert models == [Keys.model(done["model_id"]).encode()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_lost_job_nobody_polls_is_failed_by_the_sweeper_and_its_webhook_delivered(
        deployment, redis):
    receiver = Receiver()
    try:
        job_id = submit(deployment.url, several_seconds(2, callback_url=receiver.url))
        # Kill -9 each attempt's worker with its horse (RQ gives the horse its own group).
        for attempt in (1, 2):
            running_record = wait_record(redis, job_id, running(attempt),
                                         timeout=4 * HEARTBEAT + 30)
            horse = running_record["worker"]["pid"]
            worker = next(w for w in deployment.workers
                          if w.pid == running_record["worker"]["ppid"])
            deployment.kill_worker(worker, horse)
            killed_at = time.monotonic()
            deployment.add_worker()  # its sweeper (and the surviving worker's) keeps sweeping
        done = wait_record(redis, job_id, final, timeout=4 * HEARTBEAT + 10)
        detected_after = time.monotonic() - killed_at
        assert done["status"] == "failed", done
        assert "heartbeats" in done["error"]["message"] and "sweeper" in done["error"]["message"]
        receiver.wait(1, timeout=20)
        event = receiver.bodies[-1]
        assert event["type"] == "job.failed" and event["data"]["id"] == job_id
        # Measured, not asserted (the wait above bounds it): about twice the heartbeat window
        # plus the sweep interval.
        print(f"lost job failed by the sweeper {detected_after:.1f} s after the kill "
              f"(heartbeat window {HEARTBEAT} s)")
    finally:
        receiver.shutdown()


def test_record_created_but_never_enqueued_runs_and_its_dataset_outlives_its_ttl(
        deployment, redis):
    """What the API leaves when it dies between creating the record and enqueueing the job."""
    settings = deployment.settings
    stores = Stores(redis, settings)
    X, _ = make_blobs(n_samples=40, centers=2, random_state=3)
    dataset_id = stores.datasets.put(X, owner="anonymous", describe=False)[0]["id"]
    redis.expire(Keys.dataset(dataset_id), 2)  # would expire long before the job runs
    job_id = new_id()
    params = {"n_clusters": 2, "random_state": 0}
    outcome, _ = stores.jobs.create_admitted({
        "id": job_id, "owner": "anonymous", "status": "queued", "algorithm": "itersvr",
        "params": params, "queue": "fast", "n_samples": 40, "n_features": 2,
        "dataset_id": dataset_id, "timeout_seconds": 60, "queued_at": time.time(),
        "progress": {"step": 0, "objective": None, "message": "queued", "updated_at": None},
        "attempt": 1, "rq_job_id": job_id, "callback_url": None,
    }, {"dataset_id": dataset_id, "y": None, "sequences": None}, cap=100)
    assert outcome == "created"
    time.sleep(3)  # past the dataset's own TTL
    assert redis.exists(Keys.dataset(dataset_id)), "the queued job's dataset expired"
    done = wait_record(redis, job_id, final, timeout=4 * HEARTBEAT + 30)
    assert done["status"] == "succeeded", done.get("error")
    assert len(stores.jobs.get_result(job_id)["labels"]) == 40


def test_job_past_the_memory_cap_fails_with_a_message_and_the_worker_serves_the_next(
        deployment, redis):
    # gmmc fitting all of 3000 points allocates a 3000 x 3000 kernel (69 MB) at once, past the
    # 50 MB cap.
    X = np.random.default_rng(4).normal(size=(3000, 2))
    job_id = submit(deployment.url, {"algorithm": {"name": "gmmc", "params": {"exact_max_n": None}},
                                     "data": {"X": X.tolist()}})
    done = wait_record(redis, job_id, final, timeout=120)
    assert done["status"] == "failed", done
    message = done["error"]["message"]
    assert message.startswith("out of memory: used "), message
    assert f" MB of {MEMORY_MB} MB" in message and "hint:" in message and "max_n" in message
    worker = next(w for w in deployment.workers if w.pid == done["worker"]["ppid"])
    assert worker.poll() is None  # only the work horse was limited
    following = submit(deployment.url, tiny(5, "gmmc"))
    assert wait_record(redis, following, final, timeout=120)["status"] == "succeeded"


def test_failing_receiver_does_not_hold_the_worker_and_every_attempt_has_one_webhook_id(
        deployment, redis):
    receiver = Receiver(fail_first=3)
    try:
        job_id = submit(deployment.url, {**tiny(6), "callback_url": receiver.url})
        done = wait_record(redis, job_id, final, timeout=60)
        assert done["status"] == "succeeded", done.get("error")
        # The work horse ends right after the job: deliveries are jobs of their own.
        rq_job = Job.fetch(job_id, connection=redis, serializer=SERIALIZER)
        deadline = time.monotonic() + 30
        while rq_job.ended_at is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
            rq_job.refresh()
        held = rq_job.ended_at.timestamp() - done["finished_at"]
        receiver.wait(4, timeout=60)  # three 500s, then accepted
        print(f"\nthe work horse ended {held:.2f} s after the job; the event was accepted at "
              f"attempt {len(receiver.ids)}")
        assert held < 1.0
        assert set(receiver.ids) == {f"{job_id}.succeeded"}
        time.sleep(1.5)
        assert len(receiver.bodies) == 4  # accepted: no further attempts
    finally:
        receiver.shutdown()


def test_receiver_down_for_two_minutes_gets_the_event_when_it_comes_back(receiver_outage):
    # Connection refused at every attempt for two minutes (workers were killed and added
    # meanwhile by the tests above), then the receiver answers: the next scheduled retry
    # delivers the event, under the webhook-id of the first attempt.
    receiver = receiver_outage.wait_up()
    assert receiver_outage.up_at - receiver_outage.ended >= receiver_outage.seconds
    receiver.wait(1, timeout=150)
    waited = time.monotonic() - receiver_outage.ended
    print(f"\nreceiver down {receiver_outage.seconds} s; event delivered {waited:.0f} s after the "
          "job")
    # At least once (worker.sweeper.promote_due_deliveries): RQ's scheduler and a sweeper may
    # both put one due retry back on the queue, and a receiver drops the copy by its webhook-id.
    assert receiver.ids and set(receiver.ids) == {f"{receiver_outage.job_id}.succeeded"}
    assert all(body["type"] == "job.succeeded" for body in receiver.bodies)


def test_a_model_lives_a_month_only_once_its_job_kept_it(deployment, redis):
    """What a work horse killed by a cancel between storing its model and its fenced step left:
    a model of a canceled job for 30 days (5 of 19 cancels in a fuzzing run). The model is
    stored provisionally, and the fenced step that records success gives it its lifetime."""
    from core.stores import PROVISIONAL_MODEL_SECONDS

    stores = Stores(redis, deployment.settings)
    job_id = new_id()
    redis.hset(Keys.job(job_id), mapping={
        "id": json.dumps(job_id), "owner": json.dumps("anonymous"),
        "status": json.dumps("running"), "rq_job_id": json.dumps(job_id)})
    model_id = stores.models.put({"estimator": "none"}, {"a": np.zeros(1)},
                                 {"job_id": job_id}, provisional=True)
    assert 0 < redis.ttl(Keys.model(model_id)) <= PROVISIONAL_MODEL_SECONDS
    keep = (model_id, stores.models.ttl)
    # A step that does not move the job (here: canceled meanwhile) keeps nothing.
    assert not stores.jobs.transition(job_id, (JobStatus.QUEUED,), keep_model=keep,
                                      status=JobStatus.SUCCEEDED)
    assert redis.ttl(Keys.model(model_id)) <= PROVISIONAL_MODEL_SECONDS
    assert stores.jobs.transition(job_id, (JobStatus.RUNNING,), fence=job_id, keep_model=keep,
                                  status=JobStatus.SUCCEEDED, model_id=model_id)
    assert redis.ttl(Keys.model(model_id)) > stores.models.ttl - 60
    redis.delete(Keys.job(job_id), Keys.model(model_id))
