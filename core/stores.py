"""Records in Redis, bytes in the blob store: datasets, jobs, results, models, idempotency keys.

One small class per kind of record, each with its TTL; every key name is in :mod:`core.keys`.
Redis holds JSON records and the small metadata of each dataset and model (owner, shape, blob
key); the bytes (``.npy`` matrices, ``.npz`` models loaded with ``allow_pickle=False``, results,
plots) are in :mod:`core.blobs`. Nothing read is unpickled. Imported by the API and by the
worker, so no web framework here.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
import uuid
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, Unpack

import numpy as np
from redis import Redis

from algorithms.inputs import arrays_to_npz_bytes, npz_bytes_to_arrays
from core.blobs import (
    BlobStore,
    BlobStoreFullError,
    BlobUnavailableError,
    Chunks,
    blob_store,
    read,
)
from core.job_record import ACTIVE_STATUSES, JobRecord, JobStatus, JobUpdate, job_record
from core.keys import BlobKeys, Keys
from core.settings import Settings

# Jobs read per round trip when a listing filters by status or algorithm.
LIST_BATCH = 500


def new_id() -> str:
    return uuid.uuid4().hex


# Delete a hash only if ARGV[1] owns it: the owner sits in field ARGV[2] as a plain string
# ("owner", datasets) or in the JSON of field "info" (models). Returns {the stored bytes, the blob
# key} of what was removed, or {-1} when the key is missing or another tenant's. A record stored
# before the blob store (its bytes in field "npz") has no blob key.
_DELETE_OWNED = """
local owner
if ARGV[2] == 'info' then
  local info = redis.call('HGET', KEYS[1], 'info')
  if not info then return {-1} end
  owner = cjson.decode(info)['owner'] or 'anonymous'
else
  owner = redis.call('HGET', KEYS[1], 'owner')
end
if owner ~= ARGV[1] then return {-1} end
local size = redis.call('HGET', KEYS[1], 'stored_bytes') or redis.call('HSTRLEN', KEYS[1], 'npz')
local blob = redis.call('HGET', KEYS[1], 'blob') or ''
redis.call('DEL', KEYS[1])
return {tonumber(size), blob}
"""


def npy_chunks(X: np.ndarray) -> list[bytes | memoryview]:
    """``X`` as the bytes of a ``.npy`` file: its header and its buffer, not a copy of it."""
    X = np.ascontiguousarray(X)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(X))
    return [header.getvalue(), memoryview(X).cast("B")]


def load_npy(blobs: BlobStore, key: str) -> np.ndarray | None:
    """The array of a ``.npy`` blob, read as a stream into one array (no second copy)."""
    stream = blobs.open(key)
    if stream is None:
        return None
    with contextlib.closing(stream):
        return np.lib.format.read_array(stream, allow_pickle=False)


class BlobLifetimes:
    """When each blob ends: the end of the Redis record that names it. A sorted set holds
    ``<record key>|<blob key>`` by the record's end as it was when the blob was written; the
    sweeper takes the entries that are due, deletes the blobs whose record is gone, and moves the
    others (a renewed dataset, a kept model) to their record's new end. Renewing a record thus
    needs no write here."""

    def __init__(self, redis: Redis, blobs: BlobStore):
        self.redis = redis
        self.blobs = blobs

    def add(self, record_key: str, blob_key: str, ttl: int) -> None:
        self.redis.zadd(Keys.expiring_blobs(), {f"{record_key}|{blob_key}": time.time() + ttl})

    def put(self, record_key: str, blob_key: str, data: Chunks, ttl: int) -> int:
        """Write a blob that ``record_key`` will name, after its entry here: a process that dies
        between the write and its record (or a write that the store took but never answered)
        leaves a blob the sweeper still finds and deletes. A store that refused the write for
        want of room stored nothing, and its entry goes. Returns the blob's size."""
        self.add(record_key, blob_key, ttl)
        try:
            return self.blobs.put(blob_key, data)
        except BlobStoreFullError:
            self.redis.zrem(Keys.expiring_blobs(), f"{record_key}|{blob_key}")
            raise

    def remove(self, record_key: str, blob_key: str) -> None:
        """Delete the blob now and forget it (its record was deleted). With the store down,
        the blob is left due at once, for the sweeper's next pass."""
        member = f"{record_key}|{blob_key}"
        try:
            self.blobs.delete(blob_key)
        except BlobUnavailableError:
            self.redis.zadd(Keys.expiring_blobs(), {member: 0})
            return
        self.redis.zrem(Keys.expiring_blobs(), member)

    def sweep(self, now: float | None = None, batch: int = 500) -> int:
        """Delete the due blobs whose records are gone; the number deleted."""
        now = time.time() if now is None else now
        deleted = 0
        due = self.redis.zrangebyscore(Keys.expiring_blobs(), "-inf", now, start=0, num=batch)
        for member in due:
            record_key, _, blob_key = member.decode().partition("|")
            ttl = int(self.redis.ttl(record_key))
            if ttl > 0:
                self.redis.zadd(Keys.expiring_blobs(), {member: now + ttl})
            elif ttl == -1:  # kept without an end (a kept model): its delete removes it
                self.redis.zrem(Keys.expiring_blobs(), member)
            else:
                self.blobs.delete(blob_key)
                self.redis.zrem(Keys.expiring_blobs(), member)
                deleted += 1
        return deleted


# ---------------------------------------------------------------------------------------------


class DatasetStore:
    """Matrices namespaced by tenant: the id is the SHA-256 of the owner, shape and float64 bytes,
    so the same upload deduplicates within a tenant and another tenant's id is simply unknown."""

    def __init__(self, redis: Redis, ttl_seconds: int, blobs: BlobStore,
                 settings: Settings | None = None):
        self.redis = redis
        self.ttl = ttl_seconds
        self.blobs = blobs
        self.settings = settings  # where datasets by URL are read (core.dataset_urls)
        self.lifetimes = BlobLifetimes(redis, blobs)
        self._delete_owned = redis.register_script(_DELETE_OWNED)

    @staticmethod
    def content_id(X: np.ndarray, owner: str = "") -> str:
        array = np.ascontiguousarray(X, dtype=np.float64)
        digest = hashlib.sha256(f"{owner}\0{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))  # no copy of a large matrix
        return digest.hexdigest()

    def put(self, X: np.ndarray, *, owner: str = "", describe: bool = True
            ) -> tuple[dict[str, Any], bool]:
        """Store ``X`` once for ``owner``; returns its description (only the id without
        ``describe``) and whether it was new."""
        dataset_id = self.content_id(X, owner)
        key = Keys.dataset(dataset_id)
        if self.redis.expire(key, self.ttl):  # already stored: one round trip renews it
            if not describe:
                return {"id": dataset_id}, False
            return self.describe(dataset_id, owner), False  # type: ignore[return-value]
        with self.redis.pipeline() as pipe:
            size, created_at = self.put_on(pipe, X, dataset_id, owner)
            pipe.execute()
        return {"id": dataset_id, "n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
                "stored_bytes": size, "created_at": created_at,
                "expires_in_seconds": self.ttl}, True

    def put_on(self, pipe, X: np.ndarray, dataset_id: str, owner: str) -> tuple[int, float]:
        """Write ``X``'s bytes to the blob store as ``dataset_id`` (its :meth:`content_id`) and
        queue its record on ``pipe``; returns the stored bytes and the creation time. The blob
        is durable before the record exists, so a record never names a missing blob."""
        key = Keys.dataset(dataset_id)
        blob = BlobKeys.dataset(owner, dataset_id)
        size = self.lifetimes.put(key, blob, npy_chunks(np.asarray(X, dtype=np.float64)),
                                  self.ttl)
        created_at = time.time()
        pipe.hset(key, mapping={"blob": blob, "stored_bytes": size, "n_samples": X.shape[0],
                                "owner": owner, "n_features": X.shape[1],
                                "created_at": created_at})
        pipe.expire(key, self.ttl)
        return size, created_at

    @staticmethod
    def reference_id(source: dict[str, Any], owner: str = "") -> str:
        """The id of a dataset by URL: the SHA-256 of the owner, the URL, the object's ETag and
        size and the columns read, so registering the same object again finds the same dataset
        and an object replaced under the same URL is a new one."""
        named = {name: source.get(name) for name in ("url", "etag", "object_bytes", "columns")}
        return hashlib.sha256(f"{owner}\0url\0{json.dumps(named, sort_keys=True)}"
                              .encode()).hexdigest()

    def put_reference(self, source: dict[str, Any], *, owner: str = ""
                      ) -> tuple[dict[str, Any], bool]:
        """Record the object that ``source`` describes (:func:`core.dataset_urls.describe_object`)
        as ``owner``'s dataset, as :meth:`put` records an upload; no bytes are stored, and a
        delete removes the record, never the caller's object."""
        dataset_id = self.reference_id(source, owner)
        key = Keys.dataset(dataset_id)
        if self.redis.expire(key, self.ttl):
            return self.describe(dataset_id, owner), False  # type: ignore[return-value]
        created_at = time.time()
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={"source": json.dumps(source), "url": source["url"],
                                    "stored_bytes": 0, "n_samples": source["n_samples"],
                                    "n_features": source["n_features"], "owner": owner,
                                    "created_at": created_at})
            pipe.expire(key, self.ttl)
            pipe.execute()
        return {"id": dataset_id, "n_samples": source["n_samples"],
                "n_features": source["n_features"], "stored_bytes": 0, "url": source["url"],
                "created_at": created_at, "expires_in_seconds": self.ttl}, True

    def describe(self, dataset_id: str, owner: str) -> dict[str, Any] | None:
        key = Keys.dataset(dataset_id)
        with self.redis.pipeline() as pipe:
            pipe.hmget(key, "n_samples", "n_features", "created_at", "owner", "stored_bytes",
                       "url")
            pipe.hstrlen(key, "npz")
            pipe.ttl(key)
            (n_samples, n_features, created_at, stored_owner, size, url), legacy_size, ttl = \
                pipe.execute()
        size = legacy_size if size is None else size
        if n_samples is None or (stored_owner or b"").decode() != owner:
            return None
        return {
            "id": dataset_id,
            "n_samples": int(n_samples),
            "n_features": int(n_features),
            "stored_bytes": int(size),
            "url": None if url is None else url.decode(),
            "created_at": float(created_at),
            "expires_in_seconds": int(ttl),
        }

    def referenced_shape(self, dataset_id: str, owner: str) -> tuple[int, int] | None:
        """``(n_samples, n_features)`` of ``owner``'s dataset by URL; ``None`` for an uploaded
        one (or none): the API checks a job on a dataset by URL by its shape alone, since it
        never reads that data."""
        url, n_samples, n_features, stored_owner = self.redis.hmget(
            Keys.dataset(dataset_id), "url", "n_samples", "n_features", "owner")
        if url is None or (stored_owner or b"").decode() != owner:
            return None
        return int(n_samples), int(n_features)

    def load(self, dataset_id: str, owner: str | None = None) -> np.ndarray | None:
        """The matrix; with ``owner``, only if that tenant stored it (the worker passes none:
        the job's input was checked when it was created)."""
        key = Keys.dataset(dataset_id)
        blob, stored_owner, source = self.redis.hmget(key, "blob", "owner", "source")
        if stored_owner is None:
            return None
        if owner is not None and stored_owner.decode() != owner:
            return None
        if source is not None:  # a dataset by URL: read from its object, as a stream
            from core.dataset_urls import read_matrix

            if self.settings is None:
                raise ValueError(f"dataset {dataset_id} is read by URL: give the store settings")
            return read_matrix(self.settings, json.loads(source))
        if blob is None:  # stored before the blob store: its bytes are in the record
            payload = self.redis.hget(key, "npz")
            return None if payload is None else npz_bytes_to_arrays(payload)["X"]
        return load_npy(self.blobs, blob.decode())

    def delete(self, dataset_id: str, owner: str) -> int | None:
        """Remove ``owner``'s dataset, its record and its blob; the number of bytes removed, or
        ``None`` when it does not exist, has expired or is another tenant's."""
        return _delete_owned(self._delete_owned, self.lifetimes, Keys.dataset(dataset_id),
                             owner, "owner")


def _delete_owned(script, lifetimes: BlobLifetimes, key: str, owner: str,
                  owner_field: str) -> int | None:
    """Delete ``owner``'s record ``key`` and then its blob (a blob left by a failed delete is
    the sweeper's: its record is gone); the bytes removed, or ``None`` when it is not there."""
    reply = script(keys=[key], args=[owner, owner_field])
    if int(reply[0]) < 0:
        return None
    if reply[1]:
        lifetimes.remove(key, reply[1].decode())
    return int(reply[0])


class UploadError(ValueError):
    """A part or completion of an upload that cannot be taken; ``code`` says which rule."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class UploadStore:
    """A dataset sent in parts, for matrices larger than one request body: each part is a block
    of rows stored under its index (sending an index again replaces it, so a retried request is
    harmless), and completing the upload joins parts ``0..k-1`` into one dataset of
    :class:`DatasetStore` and deletes the parts (a repeated completion answers with the same
    dataset). One hash per upload, with the upload's lifetime, naming each part's ``.npy`` blob."""

    MAX_PARTS = 10_000

    def __init__(self, redis: Redis, datasets: DatasetStore, ttl_seconds: int):
        self.redis = redis
        self.datasets = datasets
        self.ttl = ttl_seconds

    def open(self, owner: str) -> dict[str, Any]:
        upload_id = uuid.uuid4().hex
        created_at = time.time()
        key = Keys.upload(upload_id)
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={"owner": owner, "created_at": created_at})
            pipe.expire(key, self.ttl)
            pipe.execute()
        return self._description(upload_id, created_at, {}, None, self.ttl)

    def _fields(self, upload_id: str, owner: str) -> dict[bytes, bytes] | None:
        """The upload's row counts and settings (not its parts), or None when it is unknown,
        has expired or is another tenant's."""
        key = Keys.upload(upload_id)
        names = [name for name in self.redis.hkeys(key) if not name.startswith(b"part:")]
        values = dict(zip(names, self.redis.hmget(key, names), strict=True)) if names else {}
        if (values.get(b"owner") or b"\0").decode() != owner:
            return None
        return values

    @staticmethod
    def _rows(fields: dict[bytes, bytes]) -> dict[int, int]:
        return {int(name[5:]): int(value) for name, value in fields.items()
                if name.startswith(b"rows:")}

    def _description(self, upload_id: str, created_at: float, rows: dict[int, int],
                     n_features: int | None, ttl: int) -> dict[str, Any]:
        return {"id": upload_id, "parts": sorted(rows), "n_samples": sum(rows.values()),
                "n_features": n_features, "created_at": created_at, "expires_in_seconds": ttl}

    def describe(self, upload_id: str, owner: str) -> dict[str, Any] | None:
        fields = self._fields(upload_id, owner)
        if fields is None:
            return None
        n_features = fields.get(b"n_features")
        return self._description(upload_id, float(fields[b"created_at"]), self._rows(fields),
                                 None if n_features is None else int(n_features),
                                 int(self.redis.ttl(Keys.upload(upload_id))))

    def put_part(self, upload_id: str, owner: str, index: int, X: np.ndarray,
                 max_values: int) -> dict[str, Any] | None:
        """Store rows ``X`` as part ``index``; None when the upload is unknown. Raises
        :class:`UploadError` for a part whose columns differ from the first part's, or that
        would take the upload over ``max_values`` values."""
        fields = self._fields(upload_id, owner)
        if fields is None:
            return None
        if b"dataset_id" in fields:
            raise UploadError(f"upload {upload_id} is complete: open a new one to send more "
                              "rows", "completed")
        n_features = int(fields.get(b"n_features", X.shape[1]))
        if X.shape[1] != n_features:
            raise UploadError(f"part {index} has {X.shape[1]} columns; the upload's parts have "
                                f"{n_features}", "columns_differ")
        rows = self._rows(fields)
        rows[index] = X.shape[0]
        if sum(rows.values()) * n_features > max_values:
            raise UploadError(f"{sum(rows.values())} x {n_features} values would exceed "
                                f"MMC_MAX_POINTS_X_FEATURES={max_values}", "too_many_values")
        key = Keys.upload(upload_id)
        blob = BlobKeys.upload_part(owner, upload_id, index)
        self.datasets.lifetimes.put(key, blob, npy_chunks(np.asarray(X, dtype=np.float64)),
                                    self.ttl)
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={f"part:{index}": blob, f"rows:{index}": X.shape[0],
                                    "n_features": n_features})
            pipe.expire(key, self.ttl)
            pipe.execute()
        return self._description(upload_id, float(fields[b"created_at"]), rows, n_features,
                                 self.ttl)

    def complete(self, upload_id: str, owner: str) -> tuple[dict[str, Any], bool] | None:
        """Join the parts into a dataset (as :meth:`DatasetStore.put`) and delete the upload;
        None when it is unknown. Raises :class:`UploadError` when no part was sent or an
        index below the largest is missing."""
        fields = self._fields(upload_id, owner)
        if fields is None:
            return None
        if b"dataset_id" in fields:  # completed before: a retried request gets the same answer
            description = self.datasets.describe(fields[b"dataset_id"].decode(), owner)
            return None if description is None else (description, False)
        rows = self._rows(fields)
        if not rows:
            raise UploadError("the upload has no parts; send them before completing it",
                                "no_parts")
        missing = sorted(set(range(max(rows) + 1)) - set(rows))
        if missing:
            raise UploadError(f"parts {missing[:10]} are missing (parts are numbered from 0 "
                                "without gaps)", "parts_missing")
        key = Keys.upload(upload_id)
        parts = self._part_blobs(upload_id, len(rows))
        X = np.empty((sum(rows.values()), int(fields[b"n_features"])))
        start = 0
        for index, blob in enumerate(parts):  # one part in memory beside X, not all of them
            part = load_npy(self.datasets.blobs, blob)
            if part is None:
                raise UploadError(f"part {index} is lost from the blob store; send it again",
                                  "parts_missing")
            X[start:start + len(part)] = part
            start += len(part)
        stored = self.datasets.put(X, owner=owner)
        with self.redis.pipeline() as pipe:  # the parts go; the answer stays for a retry
            pipe.delete(key)
            pipe.hset(key, mapping={"owner": owner, "created_at": fields[b"created_at"],
                                    "dataset_id": stored[0]["id"]})
            pipe.expire(key, self.ttl)
            pipe.execute()
        self._remove_parts(key, parts)
        return stored

    def _part_blobs(self, upload_id: str, count: int) -> list[str]:
        names = self.redis.hmget(Keys.upload(upload_id), [f"part:{i}" for i in range(count)])
        return [name.decode() for name in names if name is not None]

    def _remove_parts(self, key: str, blobs: list[str]) -> None:
        for blob in blobs:
            self.datasets.lifetimes.remove(key, blob)

    def delete(self, upload_id: str, owner: str) -> bool:
        fields = self._fields(upload_id, owner)
        if fields is None:
            return False
        rows = self._rows(fields)
        parts = self._part_blobs(upload_id, max(rows) + 1) if rows else []
        deleted = bool(self.redis.delete(Keys.upload(upload_id)))
        self._remove_parts(Keys.upload(upload_id), parts)
        return deleted


# ---------------------------------------------------------------------------------------------

# Atomic "move from one of these statuses to that one, and set these fields": the worker, the API
# (cancel) and failure handlers race on a job record, and whoever moves first wins. A fencing
# token (ARGV[2], the attempt's RQ job id; empty: none) must equal the record's ``rq_job_id`` (if
# it has one), so an earlier attempt still running after its job was re-queued cannot write; the
# result (ARGV[3], to KEYS[3] for ARGV[4] seconds) is written in the same step as the status. A
# status outside ARGV[6] (the active statuses) takes the job out of its tenant's active set.
# Statuses come as JSON lists of JSON strings, the form in which the record holds them.
_TRANSITION = """
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return 0 end
local attempt = redis.call('HGET', KEYS[1], 'rq_job_id')
if ARGV[2] ~= '' and attempt and attempt ~= ARGV[2] then return 0 end
local allowed = cjson.decode(ARGV[1])
local active = {}
for _, status in ipairs(cjson.decode(ARGV[6])) do active[status] = true end
for _, status in ipairs(allowed) do
  if status == current then
    if ARGV[3] ~= '' then
      redis.call('SET', KEYS[3], ARGV[3], 'EX', tonumber(ARGV[4]))
    end
    if ARGV[5] ~= '' then
      redis.call('EXPIRE', KEYS[4], tonumber(ARGV[5]))
    end
    for i = 7, #ARGV, 2 do
      redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
      if ARGV[i] == 'status' and not active[ARGV[i + 1]] then
        local owner = redis.call('HGET', KEYS[1], 'owner')
        local id = redis.call('HGET', KEYS[1], 'id')
        if owner and id then
          redis.call('SREM', KEYS[2] .. cjson.decode(owner), cjson.decode(id))
        end
      end
    end
    return 1
  end
end
return 0
"""

# Admission, idempotency and the job record in one step. An Idempotency-Key is never claimed
# without its job record existing, so a concurrent request with the same key either runs this
# first (and creates the job) or finds the record it replays; there is no window in which a key
# points at nothing. KEYS: job, job input, owner index, active set, idempotency key (or absent).
# ARGV: ttl, job id, queued_at, cap, input JSON, idempotency value, idempotency ttl, then the
# record's field/value pairs. Returns {1} created, {0, earlier claim} replay, {2} cap reached.
_CREATE = """
if #KEYS == 5 then
  local earlier = redis.call('GET', KEYS[5])
  if earlier then return {0, earlier} end
end
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[4]) then return {2} end
redis.call('SADD', KEYS[4], ARGV[2])
redis.call('EXPIRE', KEYS[4], ARGV[1])
for i = 8, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[5], 'EX', ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
redis.call('EXPIRE', KEYS[3], ARGV[1])
if #KEYS == 5 then redis.call('SET', KEYS[5], ARGV[6], 'EX', ARGV[7]) end
return {1}
"""

# Delete an idempotency key only if it still names this job (a later job may own it by now).
_RELEASE_CLAIM = """
local value = redis.call('GET', KEYS[1])
if value and cjson.decode(value)['job_id'] == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""


def _encoded_statuses(statuses: Iterable[JobStatus]) -> str:
    """``statuses`` for the Lua scripts: a JSON list of each status as the record stores it."""
    return json.dumps([json.dumps(status) for status in sorted(statuses)])


_ENCODED_ACTIVE = _encoded_statuses(ACTIVE_STATUSES)


class JobStore:
    """Job records (a hash per job, JSON-encoded fields), their input, results and owner index.

    An input larger than ``inline_input_max_bytes`` and the bulk of a result (its labels and
    decision values) are blobs, which the record names."""

    _json_fields = ("algorithm", "params", "progress", "error", "timing")
    # The fields of a result that go to its blob; the rest (extras, model id) stays in Redis.
    bulk_result_fields = ("labels", "decision_values")

    def __init__(self, redis: Redis, ttl_seconds: int, blobs: BlobStore,
                 inline_input_max_bytes: int = 64 * 1024):
        self.redis = redis
        self.ttl = ttl_seconds
        self.blobs = blobs
        self.lifetimes = BlobLifetimes(redis, blobs)
        self.inline_input_max_bytes = inline_input_max_bytes
        self._transition = redis.register_script(_TRANSITION)
        self._create = redis.register_script(_CREATE)

    @staticmethod
    def _encode(fields: Mapping[str, Any]) -> dict[str, str]:
        return {key: json.dumps(value) for key, value in fields.items()}

    def create_admitted(self, record: JobRecord, job_input: dict[str, Any], cap: int,
                        claim: tuple[str, dict[str, str], int] | None = None
                        ) -> tuple[str, dict[str, str] | None]:
        """Create the job if ``record['owner']`` has fewer than ``cap`` active jobs and the
        idempotency ``claim`` (key, value, ttl) is free, all at once. Returns ``("created",
        None)``, ``("replay", earlier claim)`` or ``("full", None)``."""
        keys, args = self._create_call(record, job_input, cap, claim)
        for attempt in range(2):
            outcome = self.create_outcome(self._create(keys=keys, args=args))
            if outcome[0] != "full":
                return outcome
            if attempt == 0:
                self._prune_active(record["owner"])
        return "full", None

    def create_on(self, pipe, record: JobRecord, job_input: dict[str, Any], cap: int,
                  claim: tuple[str, dict[str, str], int] | None = None) -> None:
        """Queue :meth:`create_admitted`'s step on ``pipe`` (one try, no pruning); read its
        reply with :meth:`create_outcome`. EVAL, not EVALSHA: a pipeline cannot load a script
        that Redis lost (a restart) and retry."""
        keys, args = self._create_call(record, job_input, cap, claim)
        pipe.eval(_CREATE, len(keys), *keys, *args)

    @staticmethod
    def create_outcome(reply: list[Any]) -> tuple[str, dict[str, str] | None]:
        if reply[0] == 1:
            return "created", None
        if reply[0] == 0:
            return "replay", json.loads(reply[1])
        return "full", None

    def _create_call(self, record: JobRecord, job_input: dict[str, Any], cap: int,
                     claim: tuple[str, dict[str, str], int] | None
                     ) -> tuple[list[str], list[Any]]:
        job_id, owner = record["id"], record["owner"]
        keys = [Keys.job(job_id), Keys.job_input(job_id), Keys.owner_jobs(owner),
                Keys.active(owner)]
        args: list[Any] = [self.ttl, job_id, record["queued_at"], cap,
                           self._stored_input(job_id, owner, job_input), "", 0]
        if claim is not None:
            keys.append(claim[0])
            args[5:7] = [json.dumps(claim[1]), claim[2]]
        for key, value in self._encode(record).items():
            args += [key, value]
        return keys, args

    def _stored_input(self, job_id: str, owner: str, job_input: dict[str, Any]) -> str:
        """The input's JSON for Redis: itself, or when large the name of the blob holding it."""
        encoded = json.dumps(job_input)
        if len(encoded) <= self.inline_input_max_bytes:
            return encoded
        blob = BlobKeys.job_input(owner, job_id)
        self.lifetimes.put(Keys.job(job_id), blob, encoded.encode(), self.ttl)
        return json.dumps({"blob": blob})

    def delete(self, job_id: str, owner: str) -> None:
        stored = self.redis.get(Keys.job_input(job_id))
        self.redis.delete(Keys.job(job_id), Keys.job_input(job_id))
        self.redis.zrem(Keys.owner_jobs(owner), job_id)
        blob = None if stored is None else json.loads(stored).get("blob")
        if blob:
            self.lifetimes.remove(Keys.job(job_id), blob)

    def get(self, job_id: str) -> JobRecord | None:
        raw = self.redis.hgetall(Keys.job(job_id))
        if not raw:
            return None
        return job_record({key.decode(): json.loads(value) for key, value in raw.items()})

    def exists(self, job_id: str) -> bool:
        return bool(self.redis.exists(Keys.job(job_id)))

    def load_input(self, job_id: str) -> dict[str, Any] | None:
        raw = self.redis.get(Keys.job_input(job_id))
        if raw is None:
            return None
        stored = json.loads(raw)
        if set(stored) != {"blob"}:
            return stored
        payload = read(self.blobs, stored["blob"])
        return None if payload is None else json.loads(payload)

    def transition(self, job_id: str, allowed_from: Iterable[JobStatus], *,
                   fence: str | None = None,
                   result: dict[str, Any] | None = None,
                   keep_model: tuple[str, int] | None = None, **fields: Unpack[JobUpdate]
                   ) -> bool:
        """Set ``fields`` atomically if the job's status is one of ``allowed_from`` and, with a
        ``fence`` (an attempt's RQ job id), if that attempt is still the job's current one;
        ``result`` is stored in the same step, and ``keep_model = (model id, seconds)`` gives
        that model its lifetime (stored provisionally: :meth:`ModelStore.put`)."""
        # Fields are stored JSON-encoded, so statuses and the fence are compared in that form.
        args = [_encoded_statuses(allowed_from),
                "" if fence is None else json.dumps(fence),
                "" if result is None else json.dumps(result), self.ttl,
                "" if keep_model is None else keep_model[1], _ENCODED_ACTIVE]
        for key, value in self._encode(fields).items():
            args += [key, value]
        model_key = Keys.model(keep_model[0]) if keep_model else Keys.model("none")
        moved = bool(self._transition(
            keys=[Keys.job(job_id), Keys.active_prefix(), Keys.result(job_id), model_key],
            args=args))
        if moved and "status" in fields:
            # After the write, so a long poll woken by the message reads the new status.
            self.redis.publish(Keys.job_events(job_id), str(fields["status"]))
        return moved

    # -- per-tenant cap on queued + running jobs --------------------------------------------------
    def _prune_active(self, owner: str) -> None:
        """Drop jobs that ended or expired without leaving the tenant's active set."""
        key = Keys.active(owner)
        stale = [member for member in self.redis.smembers(key)
                 if self._status(member.decode()) not in ACTIVE_STATUSES]
        if stale:
            self.redis.srem(key, *stale)

    def active(self, owner: str) -> list[str]:
        return sorted(member.decode() for member in self.redis.smembers(Keys.active(owner)))

    def release(self, owner: str, job_id: str) -> None:
        self.redis.srem(Keys.active(owner), job_id)

    def _status(self, job_id: str) -> JobStatus | None:
        raw = self.redis.hget(Keys.job(job_id), "status")
        return None if raw is None else JobStatus(json.loads(raw))

    def list(self, owner: str, offset: int, limit: int, *,
             statuses: frozenset[JobStatus] = frozenset(), algorithm: str | None = None,
             created_after: float | None = None, created_before: float | None = None
             ) -> tuple[list[JobRecord], int]:
        """``owner``'s jobs, newest first: a page of records and the number that match.

        The creation-time bounds are a range of the owner's index (sorted by creation time);
        ``statuses`` and ``algorithm`` are matched on each job of that range, read in batches
        of :data:`LIST_BATCH` (so their cost grows with the jobs in the range, which their
        lifetime bounds)."""
        key = Keys.owner_jobs(owner)
        high = "+inf" if created_before is None else f"({created_before!r}"
        low = "-inf" if created_after is None else f"({created_after!r}"
        if not statuses and algorithm is None:
            ids = [i.decode() for i in
                   self.redis.zrevrangebyscore(key, high, low, start=offset, num=limit)]
            total = int(self.redis.zcount(key, low, high))
            records, expired = self._records(ids)
            self._forget(key, expired)
            return records, total - len(expired)
        wanted_status = {json.dumps(status) for status in statuses}
        wanted_algorithm = None if algorithm is None else json.dumps(algorithm)
        matched: list[str] = []
        expired: list[str] = []
        start = 0
        while True:
            batch = [i.decode() for i in
                     self.redis.zrevrangebyscore(key, high, low, start=start, num=LIST_BATCH)]
            if not batch:
                break
            start += len(batch)
            with self.redis.pipeline(transaction=False) as pipe:
                for job_id in batch:
                    pipe.hmget(Keys.job(job_id), "status", "algorithm")
                fields = pipe.execute()
            for job_id, (status, name) in zip(batch, fields, strict=True):
                if status is None:
                    expired.append(job_id)
                elif ((not wanted_status or status.decode() in wanted_status)
                      and (wanted_algorithm is None or (name or b"").decode() == wanted_algorithm)):
                    matched.append(job_id)
        self._forget(key, expired)
        records, gone = self._records(matched[offset:offset + limit])
        return records, len(matched) - len(gone)

    def _records(self, ids: list[str]) -> tuple[list[JobRecord], list[str]]:
        records, expired = [], []
        for job_id in ids:
            record = self.get(job_id)
            (records if record else expired).append(record or job_id)
        return records, expired

    def _forget(self, key: str, expired: list[str]) -> None:
        if expired:
            self.redis.zrem(key, *expired)

    # -- results --------------------------------------------------------------------------------
    def store_result_bulk(self, job_id: str, owner: str, result: dict[str, Any],
                          attempt: str | None = None) -> dict[str, Any]:
        """Write the result's labels and decision values to the blob of this ``attempt``
        (durably, before the job's record can say succeeded) and return the result for
        :meth:`transition`, which names that blob instead of holding them. Arrays (see
        :func:`result_bulk_chunks`) are written as they are, without Python lists."""
        blob = BlobKeys.result(owner, job_id, attempt)
        bulk = {name: result.get(name) for name in self.bulk_result_fields}
        self.lifetimes.put(Keys.result(job_id), blob, result_bulk_chunks(bulk), self.ttl)
        rest = {name: value for name, value in result.items()
                if name not in self.bulk_result_fields}
        return {**rest, "blob": blob}

    def discard_result_bulk(self, job_id: str, stored: dict[str, Any]) -> None:
        """Delete the blob of a result that its job did not keep (canceled meanwhile)."""
        self.lifetimes.remove(Keys.result(job_id), stored["blob"])

    def get_result(self, job_id: str) -> dict[str, Any] | None:
        """The result with its labels and decision values as JSON values (``None`` once it has
        expired), from a blob in either format of :func:`result_bulk_chunks`."""
        raw = self.redis.get(Keys.result(job_id))
        if raw is None:
            return None
        result = json.loads(raw)
        blob = result.pop("blob", None)
        if blob is None:
            return result
        payload = read(self.blobs, blob)
        return None if payload is None else {**result, **read_result_bulk(payload)}


def as_json(value: Any) -> Any:
    """``value`` with its arrays (also inside lists and tuples) as lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    return value


def result_bulk_chunks(bulk: dict[str, Any]) -> Chunks:
    """The blob of a result's labels and decision values (:attr:`JobStore.bulk_result_fields`).

    Labels in one array, with decision values in one array or ``None`` (vector input): the
    labels' ``.npy`` followed by the decision values' ``.npy`` when there are any, as views of
    the arrays' buffers. On millions of points the JSON of the same values, and the lists it is
    made from, are many times the arrays' size. Anything else (the label sequences of sequence
    input): JSON, the format of every result blob before the arrays' one."""
    labels, decision = bulk["labels"], bulk["decision_values"]
    if isinstance(labels, np.ndarray) and (decision is None or isinstance(decision, np.ndarray)):
        return [*npy_chunks(labels), *([] if decision is None else npy_chunks(decision))]
    return json.dumps({name: as_json(value) for name, value in bulk.items()}).encode()


def read_result_bulk(payload: bytes) -> dict[str, Any]:
    """The labels and decision values of a blob of :func:`result_bulk_chunks`, as JSON values:
    what the JSON format held, so the API answers alike for both."""
    if not payload.startswith(np.lib.format.MAGIC_PREFIX):
        return json.loads(payload)
    stream = io.BytesIO(payload)
    labels = np.lib.format.read_array(stream, allow_pickle=False)
    decision = (np.lib.format.read_array(stream, allow_pickle=False)
                if stream.tell() < len(payload) else None)
    return {"labels": labels.tolist(), "decision_values": as_json(decision)}


# ---------------------------------------------------------------------------------------------


# Lifetime of a model its job has not yet kept: longer than a result and a plot take to store.
PROVISIONAL_MODEL_SECONDS = 3600


class ModelStore:
    """Trained models: JSON metadata in Redis, their ``.npz`` arrays a blob; never pickles."""

    def __init__(self, redis: Redis, ttl_seconds: int, blobs: BlobStore,
                 settings: Settings | None = None):
        self.redis = redis
        self.ttl = ttl_seconds
        self.blobs = blobs
        self.settings = settings  # where datasets by URL are read (core.dataset_urls)
        self.lifetimes = BlobLifetimes(redis, blobs)
        self._delete_owned = redis.register_script(_DELETE_OWNED)

    def put(self, meta: dict[str, Any], arrays: dict[str, np.ndarray], info: dict[str, Any],
            *, provisional: bool = False, ttl_seconds: int | None = None) -> str:
        """Store a model for ``ttl_seconds`` (default ``self.ttl``), or with ``provisional`` for
        ``PROVISIONAL_MODEL_SECONDS`` until the job's fenced step keeps it
        (``JobStore.transition(keep_model=...)``): a work horse killed by a cancel between the
        two leaves no model behind for the model lifetime."""
        return self.put_payload(meta, arrays_to_npz_bytes(arrays), info, provisional=provisional,
                                ttl_seconds=ttl_seconds)

    def put_payload(self, meta: dict[str, Any], payload: bytes, info: dict[str, Any], *,
                    provisional: bool = False, ttl_seconds: int | None = None) -> str:
        """:meth:`put` with the arrays already as ``.npz`` bytes (an imported export)."""
        model_id = new_id()
        key = Keys.model(model_id)
        ttl = PROVISIONAL_MODEL_SECONDS if provisional else (ttl_seconds or self.ttl)
        blob = BlobKeys.model(info.get("owner", "anonymous"), model_id)
        self.lifetimes.put(key, blob, payload, ttl)
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={
                "meta": json.dumps(meta),
                "blob": blob,
                "stored_bytes": len(payload),
                "info": json.dumps({**info, "id": model_id, "created_at": time.time()}),
            })
            pipe.expire(key, ttl)
            pipe.execute()
        return model_id

    def exists(self, model_id: str) -> bool:
        return bool(self.redis.exists(Keys.model(model_id)))

    def expires_in(self, model_id: str) -> int | None:
        """Seconds the model has left (``None`` when it does not exist)."""
        ttl = int(self.redis.ttl(Keys.model(model_id)))
        return None if ttl == -2 else max(ttl, 0)

    def delete_owned(self, model_id: str, owner: str) -> int | None:
        """Remove ``owner``'s model; the bytes of its arrays removed, or ``None`` when it does
        not exist, has expired or is another tenant's."""
        return _delete_owned(self._delete_owned, self.lifetimes, Keys.model(model_id), owner,
                             "info")

    def delete(self, model_id: str) -> None:
        key = Keys.model(model_id)
        blob = self.redis.hget(key, "blob")
        self.redis.delete(key)
        if blob is not None:
            self.lifetimes.remove(key, blob.decode())

    def info(self, model_id: str, owner: str | None = None) -> dict[str, Any] | None:
        """The model's description; with ``owner``, only if that tenant's job trained it."""
        raw = self.redis.hget(Keys.model(model_id), "info")
        if raw is None:
            return None
        info = json.loads(raw)
        if owner is not None and info.get("owner", "anonymous") != owner:
            return None
        return info

    def load(self, model_id: str, owner: str | None = None
             ) -> tuple[dict[str, Any], bytes] | None:
        key = Keys.model(model_id)
        meta, blob, info = self.redis.hmget(key, "meta", "blob", "info")
        if meta is None:
            return None
        if owner is not None and json.loads(info or "{}").get("owner", "anonymous") != owner:
            return None
        # A model stored before the blob store has its bytes in the record.
        payload = self.redis.hget(key, "npz") if blob is None else read(self.blobs, blob.decode())
        return None if payload is None else (json.loads(meta), payload)


# ---------------------------------------------------------------------------------------------


class IdempotencyStore:
    """``Idempotency-Key`` -> (hash of the request body, job id). The key is claimed together
    with the job record (:meth:`JobStore.create_admitted`); this class reads and releases it."""

    def __init__(self, redis: Redis, ttl_seconds: int):
        self.redis = redis
        self.ttl = ttl_seconds
        self._release = redis.register_script(_RELEASE_CLAIM)

    def claim_for(self, owner: str, key: str, body_hash: str, job_id: str
                  ) -> tuple[str, dict[str, str], int]:
        """The ``claim`` argument of :meth:`JobStore.create_admitted`."""
        return Keys.idempotency(owner, key), {"body_hash": body_hash, "job_id": job_id}, self.ttl

    def earlier(self, owner: str, key: str) -> dict[str, str] | None:
        raw = self.redis.get(Keys.idempotency(owner, key))
        return None if raw is None else json.loads(raw)

    def release(self, owner: str, key: str, job_id: str) -> None:
        """Forget ``key`` if it still names ``job_id`` (the job could not be queued)."""
        self._release(keys=[Keys.idempotency(owner, key)], args=[job_id])


class PlotStore:
    """The rendered plot of a job (SVG and PNG bytes), a blob per format kept as long as the
    job's record (about 60 KB per job). SVG is stored zlib-compressed (about 8x smaller; PNG is
    compressed already)."""

    formats = ("svg", "png")
    _compressed = frozenset({"svg"})

    def __init__(self, redis: Redis, ttl_seconds: int, blobs: BlobStore):
        self.redis = redis
        self.ttl = ttl_seconds
        self.blobs = blobs
        self.lifetimes = BlobLifetimes(redis, blobs)

    def put(self, job_id: str, owner: str, images: dict[str, bytes]) -> None:
        for fmt in self.formats:
            if fmt in images:
                blob = BlobKeys.plot(owner, job_id, fmt)
                image = images[fmt]
                self.lifetimes.put(Keys.job(job_id), blob,
                                   zlib.compress(image) if fmt in self._compressed else image,
                                   self.ttl)

    def get(self, job_id: str, owner: str, fmt: str) -> bytes | None:
        stored = read(self.blobs, BlobKeys.plot(owner, job_id, fmt))
        if stored is None or fmt not in self._compressed:
            return stored
        return zlib.decompress(stored)


class Stores:
    """The stores over one connection, with TTLs from the settings."""

    def __init__(self, redis: Redis, settings: Settings, blobs: BlobStore | None = None):
        self.redis = redis
        self.blobs = blob_store(settings) if blobs is None else blobs
        self.lifetimes = BlobLifetimes(redis, self.blobs)
        self.datasets = DatasetStore(redis, settings.dataset_ttl_seconds, self.blobs, settings)
        self.uploads = UploadStore(redis, self.datasets, settings.dataset_ttl_seconds)
        self.jobs = JobStore(redis, settings.job_ttl_seconds, self.blobs,
                             settings.inline_input_max_bytes)
        self.models = ModelStore(redis, settings.model_ttl_seconds, self.blobs)
        self.idempotency = IdempotencyStore(redis, settings.idempotency_ttl_seconds)
        self.plots = PlotStore(redis, settings.job_ttl_seconds, self.blobs)

    def job_data(self, job_input: dict[str, Any], input_kind: str) -> Any | None:
        """What a job clusters, from its stored input: its integer sequences (``input_kind``
        ``"sequences"``), or the matrix of its dataset (``None`` once that dataset has expired)."""
        if input_kind == "sequences":
            return [np.asarray(s, dtype=np.int64) for s in job_input["sequences"]]
        return self.datasets.load(job_input["dataset_id"])
