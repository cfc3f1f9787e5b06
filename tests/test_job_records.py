"""Job statuses and records in the store: one enum of statuses, which the Lua steps receive as
arguments instead of spelling them, and records that read back as they were written."""

from __future__ import annotations

import json
import time

import pytest
from redis import Redis

from core import stores as stores_module
from core.job_record import ACTIVE_STATUSES, FINAL_STATUSES, JobRecord, JobStatus
from core.keys import Keys
from core.records import render_job
from core.settings import Settings, get_settings
from core.stores import Stores
from mmc_client import statuses as client_statuses
from worker import sweeper, tasks


@pytest.fixture
def stores(redis_url, tmp_path) -> Stores:
    redis = Redis.from_url(redis_url)
    return Stores(redis, Settings(redis_url=redis_url, blob_url=str(tmp_path)))


def new_record(job_id: str, owner: str) -> JobRecord:
    return {
        "id": job_id, "owner": owner, "status": JobStatus.QUEUED, "algorithm": "itersvr",
        "params": {"n_clusters": 2}, "queue": "fast", "n_samples": 6, "n_features": 2,
        "dataset_id": None, "timeout_seconds": 60, "queued_at": time.time(),
        "progress": {"step": 0, "objective": None, "message": "queued", "updated_at": None},
        "attempt": 1, "rq_job_id": job_id, "callback_url": None,
    }


def lua_sources() -> list[str]:
    """Every Lua script of the store and the worker (the module-level strings that call Redis)."""
    return [value for module in (stores_module, tasks, sweeper) for value in vars(module).values()
            if isinstance(value, str) and "redis.call" in value]


def test_the_statuses_are_the_five_of_the_api_split_into_active_and_final():
    assert [str(status) for status in JobStatus] == [
        "queued", "running", "succeeded", "failed", "canceled"]
    assert sorted(ACTIVE_STATUSES) == ["queued", "running"]
    assert sorted(FINAL_STATUSES) == ["canceled", "failed", "succeeded"]
    assert json.dumps(JobStatus.CANCELED) == '"canceled"' and f"{JobStatus.FAILED}" == "failed"


def test_the_clients_statuses_are_the_services():
    # mmc_client imports nothing of the server, so it spells the statuses itself.
    assert [status.value for status in client_statuses.JobStatus] == [
        status.value for status in JobStatus]
    assert client_statuses.FINAL_STATUSES == FINAL_STATUSES


def test_no_lua_script_spells_a_status():
    sources = lua_sources()
    # delete-owned, transition, create, release claim, heartbeat, claim of due webhook retries
    assert len(sources) >= 6
    for source in sources:
        for status in JobStatus:
            assert status.value not in source, (status, source)


@pytest.mark.parametrize("status", list(JobStatus))
def test_every_status_round_trips_through_the_store(stores, status):
    job_id, owner = f"job{time.monotonic_ns()}", f"tenant-{time.monotonic_ns()}"
    record = new_record(job_id, owner)
    assert stores.jobs.create_admitted(record, {"dataset_id": None}, cap=10)[0] == "created"
    assert stores.redis.hget(Keys.job(job_id), "status") == b'"queued"'  # the layout: JSON
    if status != JobStatus.QUEUED:
        assert stores.jobs.transition(job_id, (JobStatus.QUEUED,), status=status)
    stored = stores.jobs.get(job_id)
    assert stored is not None and stored["status"] is status
    assert stored == {**record, "status": status}
    assert render_job(stored)["status"] == status.value
    # Only an active status keeps the job in its tenant's active set.
    assert (job_id in stores.jobs.active(owner)) == (status in ACTIVE_STATUSES)
    listed, total = stores.jobs.list(owner, 0, 10, statuses=frozenset({status}))
    assert total == 1 and listed[0]["status"] is status
    stores.jobs.delete(job_id, owner)


def test_a_transition_from_a_status_the_job_is_not_in_changes_nothing(stores):
    job_id, owner = f"job{time.monotonic_ns()}", f"tenant-{time.monotonic_ns()}"
    stores.jobs.create_admitted(new_record(job_id, owner), {"dataset_id": None}, cap=10)
    assert not stores.jobs.transition(job_id, (JobStatus.RUNNING,), status=JobStatus.SUCCEEDED)
    assert stores.jobs.get(job_id)["status"] is JobStatus.QUEUED
    assert job_id in stores.jobs.active(owner)
    stores.jobs.delete(job_id, owner)


@pytest.fixture
def worker_env(redis_url, tmp_path, monkeypatch):
    """The settings a task run outside RQ reads from the environment."""
    monkeypatch.setenv("MMC_REDIS_URL", redis_url)
    monkeypatch.setenv("MMC_BLOB_URL", str(tmp_path))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_task_answers_with_a_status_of_the_enum_or_none_for_an_expired_record(
        stores, worker_env):
    assert tasks.run_job(f"gone{time.monotonic_ns()}") is None
    job_id, owner = f"job{time.monotonic_ns()}", f"tenant-{time.monotonic_ns()}"
    stores.jobs.create_admitted(new_record(job_id, owner), {"dataset_id": None}, cap=10)
    assert stores.jobs.transition(job_id, (JobStatus.QUEUED,), status=JobStatus.CANCELED)
    assert tasks.run_job(job_id) is JobStatus.CANCELED  # canceled before it started
    stores.jobs.delete(job_id, owner)
