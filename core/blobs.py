"""The blob store: bulk bytes (datasets, upload parts, large job inputs, models, results, plots).

Two implementations of one small interface: a local directory (the default; atomic writes) and
any S3-compatible object store (AWS S3, SeaweedFS, MinIO, Ceph, R2). Redis keeps only the
records that name a blob by its key (:class:`core.keys.BlobKeys`, tenant-scoped). Why the bytes
left Redis: docs/storage.md.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple, Protocol
from urllib.parse import urlsplit

from core.deadlines import DeadlineExceededError, current, time_left, waiting
from core.settings import Settings

Chunks = bytes | bytearray | memoryview | Iterable[bytes | bytearray | memoryview]


class BlobUnavailableError(Exception):
    """The store cannot take or give bytes now (down, timing out, answering 5xx): retry later."""


class BlobStoreFullError(BlobUnavailableError):
    """The store has no room for a write (a full disk under the local directory)."""


class BlobDeadlineError(DeadlineExceededError, BlobUnavailableError):
    """The request's deadline (:mod:`core.deadlines`) passed before the store answered."""

    def __init__(self, seconds: float):
        super().__init__(seconds, "the blob store")


class BlobStore(Protocol):
    """Bytes by key. A ``put`` is all or nothing: a reader sees the old object, the new one, or
    none, never part of one."""

    def put(self, key: str, data: Chunks) -> int:
        """Store ``data`` (bytes, or an iterable of byte chunks) under ``key``; its size."""

    def open(self, key: str) -> BinaryIO | None:
        """A stream of the object's bytes (close it), or ``None`` when there is none."""

    def delete(self, key: str) -> None:
        """Remove the object; removing a missing one is not an error."""

    def exists(self, key: str) -> bool: ...

    def keys(self, prefix: str = "") -> Iterator[str]:
        """The keys under ``prefix`` (listing, for checks and migrations)."""


def read(store: BlobStore, key: str) -> bytes | None:
    """The whole object, or ``None`` when there is none."""
    stream = store.open(key)
    if stream is None:
        return None
    with contextlib.closing(stream):
        return stream.read()


def _chunks(data: Chunks) -> Iterable[bytes | bytearray | memoryview]:
    return (data,) if isinstance(data, bytes | bytearray | memoryview) else data


class LocalBlobStore:
    """Objects as files under ``root``: written to a temporary file in the target's directory,
    fsynced, then renamed over the target (and the directory fsynced), so a crash leaves the
    old file or the new one."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ValueError(f"blob key {key!r} leaves the store's directory")
        return path

    def put(self, key: str, data: Chunks) -> int:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                size = 0
                with os.fdopen(fd, "wb") as handle:
                    for chunk in _chunks(data):
                        handle.write(chunk)
                        size += memoryview(chunk).nbytes
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            _fsync_directory(path.parent)
        except OSError as exc:
            raise _unavailable(exc, path) from exc
        return size

    def open(self, key: str) -> BinaryIO | None:
        try:
            return open(self._path(key), "rb")  # the caller closes it
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _unavailable(exc, self._path(key)) from exc

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def keys(self, prefix: str = "") -> Iterator[str]:
        for path in sorted(self.root.rglob("*")):
            name = path.relative_to(self.root).as_posix()
            if path.is_file() and not path.name.startswith(".tmp-") and name.startswith(prefix):
                yield name


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unavailable(exc: OSError, path: Path) -> BlobUnavailableError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return BlobStoreFullError(f"the blob directory {path.parent} is full ({exc.strerror})")
    return BlobUnavailableError(f"the blob directory cannot be used: {exc}")


class ObjectInfo(NamedTuple):
    size: int
    etag: str


class ObjectChangedError(ValueError):
    """An object read by ETag was replaced or deleted since its ETag was taken."""


class S3BlobStore:
    """Objects in ``bucket`` under ``prefix`` of an S3 API. The endpoint is ``endpoint`` (else
    boto3's own lookup: ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the AWS region's), the
    credentials boto3's chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an
    instance role). Timeouts are short and retries few: a caller gets a 503 in seconds rather
    than waiting on a store that is down."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint: str | None = None,
                 timeout_seconds: float = 5.0, attempts: int = 2):
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        config = Config(connect_timeout=timeout_seconds, read_timeout=timeout_seconds,
                        retries={"max_attempts": attempts, "mode": "standard"},
                        s3={"addressing_style": "path"})
        self.client = boto3.client("s3", endpoint_url=endpoint or None, config=config)
        self.timeout_seconds = timeout_seconds
        self.client.meta.events.register("before-send.s3", self._within_deadline)
        self.client.meta.events.register_first("needs-retry.s3", self._retry_within_deadline)

    def _within_deadline(self, request, **_) -> None:
        """Each HTTP request (botocore's retries too) reads for at most what is left of the API
        request's deadline; with none left it is not sent. Its body goes without waiting for
        ``100 Continue``: that wait (up to 1 s) would come on top of the read timeout."""
        context = getattr(request, "context", None)
        if current() is not None and context is not None:
            context["read_timeout"] = time_left(self.timeout_seconds, BlobDeadlineError)
            if "Expect" in request.headers:
                del request.headers["Expect"]

    # botocore's standard mode waits up to this long before its one retry (max_attempts=2).
    RETRY_BACKOFF_SECONDS = 1.0

    def _retry_within_deadline(self, response=None, caught_exception=None, **_) -> None:
        """A failed call is not retried when the request's deadline would pass during
        botocore's wait before the retry: the caller gets its 503 now."""
        failed = caught_exception is not None or (
            response is not None and response[0].status_code >= 500)
        if failed and current() is not None:
            time_left(None, BlobDeadlineError)
            if current().left() <= self.RETRY_BACKOFF_SECONDS:  # type: ignore[union-attr]
                raise BlobDeadlineError(current().seconds)  # type: ignore[union-attr]

    def _key(self, key: str) -> str:
        return self.prefix + key

    # Objects up to this size go in one PUT; larger ones as a multipart upload.
    single_put_bytes = 8 * 2**20

    def put(self, key: str, data: Chunks) -> int:
        from botocore.exceptions import ClientError

        chunks = list(_chunks(data))
        try:
            return self._put(key, chunks)
        except ClientError as exc:
            # A store started empty (compose's SeaweedFS): the first write makes the bucket.
            if exc.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise
            self.ensure_bucket()
            return self._put(key, chunks)

    def _put(self, key: str, chunks: list[bytes | bytearray | memoryview]) -> int:
        size = sum(memoryview(chunk).nbytes for chunk in chunks)
        with _translated():
            if size <= self.single_put_bytes:  # one request, retried by botocore alone
                self.client.put_object(Bucket=self.bucket, Key=self._key(key),
                                       Body=b"".join(chunks))
            else:  # S3 makes the object visible only once every part is in
                from boto3.s3.transfer import TransferConfig

                # Under a request's deadline the parts go from this thread, which holds it.
                transfer = TransferConfig(use_threads=current() is None)
                self.client.upload_fileobj(_ChunkStream(chunks), self.bucket, self._key(key),
                                           Config=transfer)
        return size

    def open(self, key: str) -> BinaryIO | None:
        with _translated():
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            except self.client.exceptions.NoSuchKey:
                return None
        return _TranslatedStream(answer["Body"])

    def stat(self, key: str) -> ObjectInfo | None:
        """The object's size and ETag, or ``None`` when there is none."""
        from botocore.exceptions import ClientError

        with _translated():
            try:
                answer = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise
        return ObjectInfo(int(answer["ContentLength"]), answer.get("ETag", ""))

    def open_at(self, key: str, etag: str, start: int = 0, stop: int | None = None) -> BinaryIO:
        """A stream of bytes ``start`` to ``stop`` (exclusive; ``None``: the end) of the object
        whose ETag is ``etag``; :class:`ObjectChangedError` when the object is another by now."""
        from botocore.exceptions import ClientError

        byte_range = f"bytes={start}-" + ("" if stop is None else str(stop - 1))
        with _translated():
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key),
                                                Range=byte_range, IfMatch=etag)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
                    raise ObjectChangedError(key) from None
                raise
        if answer.get("ETag", etag) != etag:  # a store that ignores If-Match
            answer["Body"].close()
            raise ObjectChangedError(key)
        return _TranslatedStream(answer["Body"])

    def delete(self, key: str) -> None:
        with _translated():
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        with _translated():
            try:
                self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return False
                raise
        return True

    def keys(self, prefix: str = "") -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        with _translated():
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
                for item in page.get("Contents", []):
                    yield item["Key"][len(self.prefix):]

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (tests, compose; an operator's bucket is
        usually made beforehand)."""
        from botocore.exceptions import ClientError

        with _translated():
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except ClientError:
                self.client.create_bucket(Bucket=self.bucket)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """botocore's connection errors, timeouts and 5xx answers as :class:`BlobUnavailableError`;
    a 4xx (a missing bucket, refused credentials) stays an error of the deployment."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        with waiting():  # against the API request's deadline, if there is one
            yield
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if status >= 500 or status in (429, 503):
            raise BlobUnavailableError(f"the object store answered {status}: {exc}") from exc
        raise
    except BotoCoreError as exc:
        raise BlobUnavailableError(f"the object store is unreachable: {exc}") from exc


class _ChunkStream(io.RawIOBase):
    """A readable file over byte chunks, so boto3 uploads them without joining them first."""

    def __init__(self, chunks: Iterable[bytes | bytearray | memoryview]):
        self._chunks = iter(chunks)
        self._current = memoryview(b"")
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._current.nbytes:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._current = memoryview(chunk).cast("B")
        count = min(len(buffer), self._current.nbytes)
        buffer[:count] = self._current[:count]
        self._current = self._current[count:]
        self.size += count
        return count


class _TranslatedStream(io.RawIOBase):
    """An S3 object's body whose read errors are :class:`BlobUnavailableError`."""

    def __init__(self, body):
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        time_left(None, BlobDeadlineError)
        with _translated():
            data = self._body.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        time_left(None, BlobDeadlineError)
        with _translated():
            return self._body.read()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._body.close()
        super().close()


def blob_store(settings: Settings) -> BlobStore:
    """The store that ``MMC_BLOB_URL`` names: ``s3://bucket/prefix``, else a directory
    (``file://`` or a path; default ``.mmc/blobs``). One per process and setting: an S3 client
    takes tens of milliseconds to make, and a forked work horse makes its own rather than share
    its parent's connections."""
    return _store_of(settings.blob_url or ".mmc/blobs", settings.s3_endpoint,
                     settings.blob_timeout_seconds, os.getpid())


def s3_bucket(settings: Settings, bucket: str) -> S3BlobStore:
    """An S3 store of ``bucket`` (no prefix) at the configured endpoint with the configured
    credentials, for datasets named by URL (:mod:`core.dataset_urls`)."""
    store = _store_of(f"s3://{bucket}", settings.s3_endpoint, settings.blob_timeout_seconds,
                      os.getpid())
    assert isinstance(store, S3BlobStore)
    return store


@functools.lru_cache(maxsize=32)
def _store_of(url: str, endpoint: str | None, timeout_seconds: float, pid: int) -> BlobStore:
    parts = urlsplit(url)
    if parts.scheme == "s3":
        return S3BlobStore(parts.netloc, parts.path, endpoint=endpoint,
                           timeout_seconds=timeout_seconds)
    if parts.scheme == "file":
        return LocalBlobStore(parts.path)
    if parts.scheme:
        raise ValueError(f"MMC_BLOB_URL={url!r}: use s3://bucket/prefix or a directory")
    return LocalBlobStore(url)
