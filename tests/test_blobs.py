"""The blob store and the records over it, on a local directory and on a real S3 server
(SeaweedFS, tests/s3.py): bytes in the blob store, metadata in Redis, deletes and expiry on both.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import pytest
from redis import Redis

from core.blobs import (
    BlobStoreFullError,
    BlobUnavailableError,
    LocalBlobStore,
    blob_store,
    read,
)
from core.job_record import JobStatus
from core.keys import BlobKeys, Keys
from core.settings import Settings
from core.stores import Stores, UploadError


@pytest.fixture(params=["local", "s3"])
def blobs(request, tmp_path):
    """Each test on both stores; the S3 one under a prefix of its own in the session's bucket."""
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    return request.getfixturevalue("weed").store(prefix=f"t{time.monotonic_ns()}")


@pytest.fixture
def owner() -> str:
    """A tenant of each test's own, so the two stores' runs share no content id."""
    return f"tenant-{time.monotonic_ns()}"


@pytest.fixture
def stores(redis_url, blobs):
    redis = Redis.from_url(redis_url)
    return Stores(redis, Settings(redis_url=redis_url, inline_input_max_bytes=1024), blobs)


# -- the store itself ------------------------------------------------------------------------


def test_a_blob_reads_back_as_written_from_bytes_or_chunks(blobs):
    assert blobs.put("a/one", b"hello") == 5
    assert blobs.put("a/two", [b"he", memoryview(b"llo"), bytearray(b"!")]) == 6
    assert read(blobs, "a/one") == b"hello" and read(blobs, "a/two") == b"hello!"
    assert blobs.exists("a/one") and sorted(blobs.keys("a/")) == ["a/one", "a/two"]
    blobs.put("a/one", b"replaced")
    assert read(blobs, "a/one") == b"replaced"


def test_a_missing_blob_is_none_and_deleting_it_is_harmless(blobs):
    assert blobs.open("nothing/here") is None and not blobs.exists("nothing/here")
    blobs.put("x", b"1")
    blobs.delete("x")
    blobs.delete("x")
    assert read(blobs, "x") is None and list(blobs.keys()) == []


def test_a_local_write_leaves_no_temporary_file_and_no_key_leaves_the_directory(tmp_path):
    store = LocalBlobStore(tmp_path)
    store.put("d/k", b"data")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["k"]
    with pytest.raises(ValueError, match="leaves the store"):
        store.put("../outside", b"x")


def test_the_first_write_to_a_missing_bucket_makes_it(weed):
    store = weed.store(bucket=f"fresh-{time.monotonic_ns()}")
    store.put("k", b"v")
    assert read(store, "k") == b"v"


def test_blob_url_names_the_store(tmp_path):
    assert isinstance(blob_store(Settings(blob_url=str(tmp_path))), LocalBlobStore)
    assert isinstance(blob_store(Settings(blob_url=f"file://{tmp_path}")), LocalBlobStore)
    s3 = blob_store(Settings(blob_url="s3://bucket/some/prefix", s3_endpoint="http://x:1"))
    assert (s3.bucket, s3.prefix) == ("bucket", "some/prefix/")
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        blob_store(Settings(blob_url="ftp://host/dir"))


def test_the_workers_blob_retry_waits_are_a_comma_separated_setting(monkeypatch):
    monkeypatch.delenv("MMC_BLOB_RETRY_SECONDS", raising=False)
    assert Settings().blob_retry_seconds == (1.0, 2.0, 4.0, 8.0, 8.0, 8.0)
    monkeypatch.setenv("MMC_BLOB_RETRY_SECONDS", "0.25, 0.5,1")
    assert Settings().blob_retry_seconds == (0.25, 0.5, 1.0)
    monkeypatch.setenv("MMC_BLOB_RETRY_SECONDS", "")
    assert Settings().blob_retry_seconds == ()  # no retry
    monkeypatch.setenv("MMC_BLOB_RETRY_SECONDS", "1,-1")
    with pytest.raises(ValueError, match="negative"):
        Settings()


def test_tenant_segments_are_safe_and_distinct():
    assert BlobKeys.tenant("tenant-a") == "tenant-a"
    unsafe = [BlobKeys.tenant(owner) for owner in ("../x", "a/b", "", "..")]
    assert all(key.startswith("t-") and "/" not in key for key in unsafe)
    assert len(set(unsafe)) == len(unsafe)


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (needs root, as CI is); skipped where mounting is not allowed."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_write_to_a_full_disk_is_a_store_full_error_and_leaves_nothing(small_disk):
    store = LocalBlobStore(small_disk)
    store.put("d/small", b"x" * 1000)
    with pytest.raises(BlobStoreFullError, match="full"):
        store.put("d/large", [b"y" * 65536] * 4)
    assert list(store.keys()) == ["d/small"] and sorted(os.listdir(small_disk / "d")) == ["small"]


# -- records over the store ------------------------------------------------------------------


def test_a_dataset_is_a_blob_and_a_small_record(stores, owner):
    X = np.arange(20_000 * 8, dtype=np.float64).reshape(20_000, 8)
    description, created = stores.datasets.put(X, owner=owner)
    assert created and description["stored_bytes"] >= X.nbytes
    key = Keys.dataset(description["id"])
    assert stores.redis.memory_usage(key) < 1024  # the 1.28 MB are in the blob store
    assert stores.blobs.exists(BlobKeys.dataset(owner, description["id"]))
    np.testing.assert_array_equal(stores.datasets.load(description["id"], owner), X)
    assert stores.datasets.load(description["id"], "another-tenant") is None
    assert stores.datasets.put(X, owner=owner)[1] is False  # same content: renewed, not new


def test_deleting_a_dataset_removes_its_blob_and_is_the_owners_alone(stores, owner):
    X = np.eye(4)
    dataset_id = stores.datasets.put(X, owner=owner)[0]["id"]
    assert stores.datasets.delete(dataset_id, "another-tenant") is None
    assert stores.datasets.delete(dataset_id, owner) >= X.nbytes
    assert not stores.blobs.exists(BlobKeys.dataset(owner, dataset_id))
    assert stores.datasets.delete(dataset_id, owner) is None


def test_an_upload_keeps_its_parts_in_the_store_until_completed(stores, owner):
    upload = stores.uploads.open(owner)
    for index, rows in enumerate((np.ones((3, 2)), np.zeros((2, 2)))):
        stores.uploads.put_part(upload["id"], owner, index, rows, 10_000)
    parts = [BlobKeys.upload_part(owner, upload["id"], index) for index in range(2)]
    assert all(stores.blobs.exists(part) for part in parts)
    dataset, _ = stores.uploads.complete(upload["id"], owner)
    np.testing.assert_array_equal(stores.datasets.load(dataset["id"], owner),
                                  np.vstack([np.ones((3, 2)), np.zeros((2, 2))]))
    assert not any(stores.blobs.exists(part) for part in parts)
    assert stores.uploads.complete(upload["id"], owner)[0]["id"] == dataset["id"]


def test_an_abandoned_upload_takes_its_parts_with_it(stores, owner):
    upload = stores.uploads.open(owner)
    stores.uploads.put_part(upload["id"], owner, 1, np.ones((2, 2)), 10_000)
    assert stores.uploads.delete(upload["id"], owner)
    assert not stores.blobs.exists(BlobKeys.upload_part(owner, upload["id"], 1))
    assert stores.uploads.put_part(upload["id"], owner, 0, np.ones((2, 2)), 100) is None


def test_a_part_refused_leaves_no_blob(stores, owner):
    upload = stores.uploads.open(owner)
    with pytest.raises(UploadError, match="exceed"):
        stores.uploads.put_part(upload["id"], owner, 0, np.ones((2, 2)), 1)  # 4 values > 1
    assert not stores.blobs.exists(BlobKeys.upload_part(owner, upload["id"], 0))


def test_a_model_is_a_blob_loaded_without_pickles_and_deleted_with_its_record(stores, owner):
    arrays = {"w": np.arange(6.0).reshape(2, 3)}
    model_id = stores.models.put({"estimator": "X"}, arrays, {"owner": owner})
    meta, payload = stores.models.load(model_id, owner)
    with np.load(__import__("io").BytesIO(payload), allow_pickle=False) as archive:
        np.testing.assert_array_equal(archive["w"], arrays["w"])
    assert meta == {"estimator": "X"} and stores.models.load(model_id, "another") is None
    assert stores.models.delete_owned(model_id, owner) == len(payload)
    assert not stores.blobs.exists(BlobKeys.model(owner, model_id))


def test_a_large_job_input_is_a_blob_that_the_record_names(stores, owner):
    """The job record and its input are created by the Lua step; an input over
    MMC_INLINE_INPUT_MAX_BYTES (1 KiB here) goes to the store first."""
    job_id = f"job{time.monotonic_ns()}"
    sequences = [[i % 3 for i in range(50)] for _ in range(20)]
    record = {"id": job_id, "owner": owner, "status": "queued", "queued_at": time.time()}
    assert stores.jobs.create_admitted(record, {"dataset_id": None, "sequences": sequences},
                                       cap=10)[0] == "created"
    assert set(json.loads(stores.redis.get(Keys.job_input(job_id)))) == {"blob"}
    assert stores.jobs.load_input(job_id)["sequences"] == sequences
    stores.jobs.delete(job_id, owner)
    assert not stores.blobs.exists(BlobKeys.job_input(owner, job_id))


def test_a_results_labels_are_a_blob_written_before_the_record(stores, owner):
    job_id = f"job{time.monotonic_ns()}"
    stores.redis.hset(Keys.job(job_id), mapping={"status": json.dumps("running")})
    labels = list(range(1000))
    stored = stores.jobs.store_result_bulk(job_id, owner, {"labels": labels, "model_id": "m",
                                                           "decision_values": None})
    assert "labels" not in stored and stores.blobs.exists(stored["blob"])
    assert stores.jobs.transition(job_id, (JobStatus.RUNNING,), result=stored,
                                  status=JobStatus.SUCCEEDED)
    assert stores.redis.memory_usage(Keys.result(job_id)) < 1024
    assert stores.jobs.get_result(job_id) == {"labels": labels, "decision_values": None,
                                              "model_id": "m"}


def _stored_result(stores, owner, labels, decision_values):
    job_id = f"job{time.monotonic_ns()}"
    stores.redis.hset(Keys.job(job_id), mapping={"status": json.dumps("running")})
    stored = stores.jobs.store_result_bulk(job_id, owner, {
        "labels": labels, "decision_values": decision_values, "model_id": "m"})
    assert stores.jobs.transition(job_id, (JobStatus.RUNNING,), result=stored,
                                  status=JobStatus.SUCCEEDED)
    return job_id, stored["blob"]


@pytest.mark.parametrize("decision_values", [
    None, np.array([-1.5, 0.25, 2.0 / 3.0]), np.array([[0.5, -0.5], [1e-300, 3.0], [-2.0, 1.0]]),
], ids=["no decision values", "one column", "two columns"])
def test_a_results_arrays_are_stored_as_npy_and_read_back_as_the_json_lists(
        stores, owner, decision_values):
    """Labels and decision values go to the blob as ``.npy`` (no Python lists in the worker),
    and the result reads back as the same JSON values the JSON blob gave."""
    labels = np.array([1, 0, 1])
    job_id, blob = _stored_result(stores, owner, labels, decision_values)
    assert read(stores.blobs, blob).startswith(np.lib.format.MAGIC_PREFIX)
    expected = json.loads(json.dumps({
        "labels": labels.tolist(), "model_id": "m",
        "decision_values": None if decision_values is None else decision_values.tolist()}))
    assert stores.jobs.get_result(job_id) == expected


def test_a_result_stored_as_json_before_the_npy_format_still_reads(stores, owner):
    """A blob written by the previous release (JSON) stays readable until it expires; label
    sequences (sequence input) are still written so."""
    job_id, blob = _stored_result(stores, owner, [0, 1], None)
    stores.blobs.put(blob, json.dumps({"labels": [1, 0], "decision_values": [[0.5], [-0.5]]
                                       }).encode())
    assert stores.jobs.get_result(job_id) == {"labels": [1, 0], "decision_values": [[0.5], [-0.5]],
                                              "model_id": "m"}
    sequences, _ = _stored_result(stores, owner, [np.array([0, 1, 1]), np.array([2])], None)
    assert stores.jobs.get_result(sequences)["labels"] == [[0, 1, 1], [2]]


def test_a_refused_attempt_discards_its_own_labels_not_the_kept_attempts(stores, owner):
    job_id = f"job{time.monotonic_ns()}"
    stores.redis.hset(Keys.job(job_id), mapping={"status": json.dumps("running")})
    kept = stores.jobs.store_result_bulk(job_id, owner, {"labels": [1, 2], "model_id": "m2",
                                                         "decision_values": None},
                                         attempt=f"{job_id}-2")
    assert stores.jobs.transition(job_id, (JobStatus.RUNNING,), result=kept,
                                  status=JobStatus.SUCCEEDED)
    stale = stores.jobs.store_result_bulk(job_id, owner, {"labels": [0, 0], "model_id": "m1",
                                                          "decision_values": None},
                                          attempt=job_id)
    stores.jobs.discard_result_bulk(job_id, stale)  # its fenced step was refused
    assert not stores.blobs.exists(stale["blob"]) and stores.blobs.exists(kept["blob"])
    assert stores.jobs.get_result(job_id)["labels"] == [1, 2]


def test_the_sweep_deletes_the_blobs_of_expired_records_and_keeps_renewed_ones(stores, owner):
    gone = stores.datasets.put(np.ones((2, 2)), owner=owner)[0]["id"]
    kept = stores.datasets.put(np.zeros((2, 2)), owner=owner)[0]["id"]
    stores.redis.delete(Keys.dataset(gone))  # as its TTL would
    later = time.time() + stores.datasets.ttl + 1  # both entries are due by then
    stores.lifetimes.sweep(later)
    assert not stores.blobs.exists(BlobKeys.dataset(owner, gone))
    assert stores.blobs.exists(BlobKeys.dataset(owner, kept))  # its record lives: moved on
    np.testing.assert_array_equal(stores.datasets.load(kept, owner), np.zeros((2, 2)))
    stores.datasets.delete(kept, owner)


def test_a_blob_is_due_for_the_sweep_before_it_is_written(redis_url, tmp_path, owner):
    """A model and a large job input whose writes fail, as when the writer dies between a write
    and its record, or the store keeps a write whose answer is lost: no record names them, yet
    each is in the expiring set, so the sweep deletes the blob if it landed after all."""
    root = tmp_path / "blobs"
    root.write_bytes(b"")  # a file where the store's directory should be: every write fails
    redis = Redis.from_url(redis_url.rsplit("/", 1)[0] + "/13")  # a database of its own
    redis.flushdb()
    stores = Stores(redis, Settings(redis_url=redis_url, inline_input_max_bytes=0),
                    LocalBlobStore(root))
    with pytest.raises(BlobUnavailableError):
        stores.models.put_payload({}, b"arrays", {"owner": owner})
    job_id = f"job{time.monotonic_ns()}"
    record = {"id": job_id, "owner": owner, "status": "queued", "queued_at": time.time()}
    with pytest.raises(BlobUnavailableError):
        stores.jobs.create_admitted(record, {"dataset_id": "d", "y": None, "sequences": None},
                                    cap=10)
    assert redis.keys("mmc:model:*") == [] and not stores.jobs.exists(job_id)
    tracked = [member.decode().partition("|")[2]
               for member in redis.zrange(Keys.expiring_blobs(), 0, -1)]
    assert sorted(key.partition("/")[0] for key in tracked) == ["inputs", "models"]
    assert BlobKeys.job_input(owner, job_id) in tracked

    root.unlink()
    root.mkdir()
    for key in tracked:  # the writes the store took without answering
        stores.blobs.put(key, b"landed")
    stores.lifetimes.sweep(time.time() + stores.models.ttl + 1)
    assert list(stores.blobs.keys()) == [] and redis.zcard(Keys.expiring_blobs()) == 0


def test_records_stored_before_the_blob_store_stay_readable(stores, owner):
    """A dataset and a model whose bytes sit in their Redis hash (field ``npz``) load as before
    and are deleted by the same call, until they expire."""
    from algorithms.inputs import arrays_to_npz_bytes

    X = np.arange(6.0).reshape(3, 2)
    legacy = f"legacy{time.monotonic_ns()}"
    stores.redis.hset(Keys.dataset(legacy), mapping={
        "npz": arrays_to_npz_bytes({"X": X}), "owner": owner, "n_samples": 3, "n_features": 2,
        "created_at": time.time()})
    np.testing.assert_array_equal(stores.datasets.load(legacy, owner), X)
    assert stores.datasets.describe(legacy, owner)["stored_bytes"] > 0
    assert stores.datasets.delete(legacy, owner) > 0
    payload = arrays_to_npz_bytes({"w": np.ones(2)})
    stores.redis.hset(Keys.model(legacy), mapping={
        "meta": "{}", "npz": payload, "info": json.dumps({"owner": owner})})
    assert stores.models.load(legacy, owner) == ({}, payload)
