"""Datasets named by URL: ``s3://bucket/key`` with a ``.npy``, ``.npz``, ``.parquet`` or ``.csv``.

The API checks a URL against the operator's allow-list (``MMC_DATA_URL_ALLOW``) before anything
is sent to the store, then reads only what gives the shape: the ``.npy`` header (also inside an
``.npz``), the Parquet footer. A CSV has no such metadata, so the API streams it once, a block at
a time, to count and check its rows; it is held to the size of a request body. The worker reads
the values as a stream into one preallocated float64 matrix, Parquet a column of a row group at a
time, so no second copy of the data is ever in memory. Every read names the ETag seen at
registration: an object replaced since then is refused rather than clustered unnoticed.
See docs/storage.md.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from core.blobs import ObjectChangedError, S3BlobStore, s3_bucket
from core.settings import Settings

FORMATS = (".npy", ".npz", ".parquet", ".csv")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# Bytes of a CSV read per block, and bytes of a .npy header read in the first request.
_BLOCK = 4 * 2**20
_HEAD = 4096


class DataURLError(ValueError):
    """A URL the service will not read (``status`` 403), or an object it cannot use as a matrix
    (422); the message says what to fix."""

    def __init__(self, message: str, status: int = 422, code: str = "value_error"):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class DataURL:
    bucket: str
    key: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def format(self) -> str:
        return next(suffix for suffix in FORMATS if self.key.lower().endswith(suffix))


def parse_data_url(url: str) -> DataURL:
    """``s3://bucket/key.ext``, refused (422) unless it names one object plainly: a bucket name
    as S3 allows, and a key without empty, ``.`` or ``..`` segments (some stores resolve
    those, which would step out of an allowed prefix) and with one of :data:`FORMATS`."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "s3":
        raise DataURLError(f"{url!r} is not an s3:// URL; name the object as "
                           "s3://bucket/key.npy (.npz, .parquet or .csv)")
    bucket, _, key = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise DataURLError(f"{bucket!r} is not a bucket name (3 to 63 lower-case letters, "
                           "digits, dots and hyphens)")
    segments = key.split("/")
    if not key or any(part in ("", ".", "..") for part in segments):
        raise DataURLError(f"the key {key!r} has an empty, '.' or '..' segment; name the object "
                           "by its plain key")
    if any(ord(char) < 32 or char in "?#\\" for char in key):
        raise DataURLError("the key holds a control character, '?', '#' or '\\'; name the "
                           "object by its plain key")
    if not key.lower().endswith(FORMATS):
        raise DataURLError(f"{url} must end with one of {', '.join(FORMATS)}")
    return DataURL(bucket, key)


def allowed_prefixes(setting: str) -> list[tuple[str, str]]:
    """``MMC_DATA_URL_ALLOW``: comma-separated ``s3://bucket`` or ``s3://bucket/prefix``; a
    prefix covers the keys below it as a directory (``s3://data/team-a`` allows
    ``s3://data/team-a/x.npy``, not ``s3://data/team-ab/x.npy``)."""
    allowed = []
    for item in setting.split(","):
        item = item.strip()
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        bucket, _, prefix = rest.partition("/")
        if scheme.lower() != "s3" or not sep or not _BUCKET.match(bucket):
            raise ValueError(f"MMC_DATA_URL_ALLOW: {item!r} is not s3://bucket[/prefix]")
        allowed.append((bucket, prefix.strip("/")))
    return allowed


def is_allowed(data_url: DataURL, setting: str) -> bool:
    for bucket, prefix in allowed_prefixes(setting):
        if bucket == data_url.bucket and (not prefix or data_url.key.startswith(prefix + "/")):
            return True
    return False


def check_allowed(data_url: DataURL, setting: str) -> None:
    """A 403 for a URL outside the allow-list; it is raised before any call to the store."""
    if not setting.strip():
        raise DataURLError("this service reads no dataset by URL: its operator has not allowed "
                           "any bucket (MMC_DATA_URL_ALLOW); upload the data instead",
                           403, "url_not_allowed")
    if not is_allowed(data_url, setting):
        allowed = ", ".join(f"s3://{b}/{p}".rstrip("/") for b, p in allowed_prefixes(setting))
        raise DataURLError(f"{data_url.url} is outside the buckets and prefixes this service may "
                           f"read (MMC_DATA_URL_ALLOW: {allowed}); put the object under one of "
                           "them or ask the operator to allow its prefix", 403,
                           "url_not_allowed")


# -- metadata (the API) ----------------------------------------------------------------------------


def describe_object(settings: Settings, data_url: DataURL, columns: list[str] | None = None
                    ) -> dict[str, Any]:
    """What the dataset record keeps of ``data_url``: its shape, ETag, size and how to read it,
    from the object's metadata (CSV: from one streamed pass). Raises :class:`DataURLError` for
    a missing object or one that is not a numeric matrix, and for more values than
    ``MMC_MAX_POINTS_X_FEATURES``; ``BlobUnavailableError`` when the store is down."""
    if columns is not None and data_url.format not in (".parquet", ".csv"):
        raise DataURLError(f"columns select columns of a .parquet or .csv object, not of a "
                           f"{data_url.format}; omit them")
    store = s3_bucket(settings, data_url.bucket)
    info = _stat(store, data_url)
    if info.size == 0:
        raise DataURLError(f"{data_url.url} is empty; name a non-empty matrix")
    source: dict[str, Any] = {"url": data_url.url, "format": data_url.format,
                              "etag": info.etag, "object_bytes": info.size}
    with contextlib.closing(_RangeFile(store, data_url.key, info.etag, info.size)) as raw:
        handle = io.BufferedReader(raw, buffer_size=64 * 1024)
        if data_url.format == ".npy":
            source.update(_npy_layout(handle, info.size, data_url.url))
        elif data_url.format == ".npz":
            source.update(_npz_layout(handle, data_url.url))
        elif data_url.format == ".parquet":
            source.update(_parquet_layout(handle, columns, data_url.url))
        else:
            if info.size > settings.max_body_bytes:
                raise DataURLError(
                    f"{data_url.url} is a CSV of {info.size} bytes; a CSV by URL is read whole "
                    f"to learn its shape, so it may hold at most MMC_MAX_BODY_BYTES="
                    f"{settings.max_body_bytes} bytes: store larger data as .npy or .parquet, "
                    "whose shape is in their header", 422, "too_large")
            source.update(_csv_layout(store, source, columns))
    values = source["n_samples"] * source["n_features"]
    if values > settings.max_points_x_features:
        raise DataURLError(f"{data_url.url} holds {source['n_samples']} x "
                           f"{source['n_features']} = {values} values, over "
                           f"MMC_MAX_POINTS_X_FEATURES={settings.max_points_x_features}", 422,
                           "too_many_values")
    if source["n_samples"] == 0 or source["n_features"] == 0:
        raise DataURLError(f"{data_url.url} holds no values (shape {source['n_samples']} x "
                           f"{source['n_features']}); name a non-empty matrix")
    return source


def _stat(store: S3BlobStore, data_url: DataURL):
    from botocore.exceptions import ClientError

    try:
        info = store.stat(data_url.key)
    except ClientError as exc:  # a 4xx other than a missing key: bucket or permissions
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchBucket",):
            raise DataURLError(f"the bucket {data_url.bucket} does not exist; check the URL",
                               422, "no_such_object") from None
        raise DataURLError(f"the object store refused to read {data_url.url} ({code or exc}): "
                           "the service's credentials need read access to it; ask the "
                           "operator", 403, "store_refused") from None
    if info is None:
        raise DataURLError(f"there is no object at {data_url.url}; check the bucket and key",
                           422, "no_such_object")
    return info


def _npy_header(handle: BinaryIO, url: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """Shape, Fortran order, dtype and header length of the ``.npy`` read from ``handle``."""
    start = handle.tell()
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            raise ValueError(f"format version {version} is not supported")
    except Exception as exc:  # untrusted header text: see service.inputs.parse_npy
        raise DataURLError(f"{url} is not a readable .npy array (no pickles): {exc}") from None
    if dtype.hasobject or dtype.kind not in "biuf" or dtype.fields is not None:
        raise DataURLError(f"{url} holds {dtype}; store numbers (integers or floats)")
    if len(shape) != 2:
        raise DataURLError(f"{url} has shape {shape}; store a 2-D matrix (rows x features)")
    return shape, fortran, dtype, handle.tell() - start


def _npy_layout(handle: BinaryIO, size: int, url: str) -> dict[str, Any]:
    shape, fortran, dtype, offset = _npy_header(handle, url)
    expected = shape[0] * shape[1] * dtype.itemsize
    if offset + expected != size:
        raise DataURLError(f"{url}: the .npy header claims shape {shape} of {dtype} ({expected} "
                           f"bytes) but {size - offset} bytes follow it")
    return {"n_samples": int(shape[0]), "n_features": int(shape[1]), "offset": offset,
            "dtype": dtype.str, "fortran_order": bool(fortran)}


def _npz_member(archive: zipfile.ZipFile, url: str) -> zipfile.ZipInfo:
    """The archive's one array, or the one named ``X``."""
    arrays = [info for info in archive.infolist() if info.filename.endswith(".npy")]
    named = [info for info in arrays if info.filename == "X.npy"]
    if len(arrays) == 1 or named:
        return (named or arrays)[0]
    names = ", ".join(info.filename[:-4] for info in arrays[:10]) or "none"
    raise DataURLError(f"{url} holds the arrays {names}; store one array, or name the matrix X")


def _npz_layout(handle: BinaryIO, url: str) -> dict[str, Any]:
    try:
        archive = zipfile.ZipFile(handle)
    except zipfile.BadZipFile as exc:
        raise DataURLError(f"{url} is not an .npz archive: {exc}") from None
    with archive:
        member = _npz_member(archive, url)
        if member.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise DataURLError(f"{url}: {member.filename} is compressed in a way numpy does not "
                               "write; store it with np.savez or np.savez_compressed")
        with archive.open(member) as stream:
            shape, fortran, dtype, offset = _npy_header(stream, url)
    expected = shape[0] * shape[1] * dtype.itemsize
    if offset + expected != member.file_size:
        raise DataURLError(f"{url}: {member.filename} claims shape {shape} of {dtype} but holds "
                           f"{member.file_size - offset} bytes of data")
    return {"n_samples": int(shape[0]), "n_features": int(shape[1]), "member": member.filename,
            "dtype": dtype.str, "fortran_order": bool(fortran)}


def _parquet_file(handle: BinaryIO, url: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # pre_buffer off: every read happens in the calling thread, one column chunk at a time.
        return pq.ParquetFile(handle, pre_buffer=False)
    except (pa.ArrowException, OSError) as exc:
        raise DataURLError(f"{url} is not a readable Parquet file: {exc}") from None


def _parquet_layout(handle: BinaryIO, columns: list[str] | None, url: str) -> dict[str, Any]:
    import pyarrow as pa

    parquet = _parquet_file(handle, url)
    schema = parquet.schema_arrow
    names = list(schema.names) if columns is None else columns
    missing = [name for name in names if name not in schema.names]
    if missing:
        raise DataURLError(f"{url} has no column {', '.join(map(repr, missing[:10]))}; its "
                           f"columns are {', '.join(schema.names[:20])}")
    if len(set(names)) != len(names):
        raise DataURLError("columns names a column twice; name each once")
    for name in names:
        kind = schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            hint = ("name the numeric columns in 'columns'" if columns is None
                    else "name numeric columns only")
            raise DataURLError(f"{url}: column {name!r} holds {kind}, not numbers; {hint}")
    metadata = parquet.metadata
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            stats = chunk.statistics
            if chunk.path_in_schema in names and stats is not None and stats.has_null_count \
                    and stats.null_count:
                raise DataURLError(f"{url}: column {chunk.path_in_schema!r} has missing values "
                                   "(nulls); remove or impute them")
    return {"n_samples": int(metadata.num_rows), "n_features": len(names), "columns": names}


def _csv_layout(store: S3BlobStore, source: dict[str, Any], columns: list[str] | None
                ) -> dict[str, Any]:
    """Shape of a CSV, from one streamed pass through :func:`_csv_blocks` (its values checked
    on the way, so a bad row is a 422 now rather than a failed job later)."""
    header, names = _csv_names(store, source)
    layout = {"header": header, "names": names, "columns": columns}
    rows = sum(block.shape[0] for block in _csv_blocks(store, {**source, **layout}))
    return {**layout, "n_samples": rows, "n_features": len(columns or names)}


def _csv_names(store: S3BlobStore, source: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether the first line is a header (it holds no number: the rule of CSV uploads), and
    the column names: the header's, else ``f0, f1, ...``."""
    with contextlib.closing(store.open_at(_key(source), source["etag"], 0,
                                          min(_HEAD * 16, source["object_bytes"]))) as stream:
        head = stream.read().decode("utf-8", errors="replace").removeprefix("\ufeff")
    first = next(csv.reader(io.StringIO(head.split("\n", 1)[0])), [])
    if first and is_header(first):
        return True, [field.strip() for field in first]
    return False, [f"f{index}" for index in range(len(first))]


def is_header(fields: list[str]) -> bool:
    """A CSV's first row is a header when none of its fields is a number (uploads and URLs)."""
    for field in fields:
        try:
            float(field)
        except ValueError:
            continue
        return False
    return True


def _key(source: dict[str, Any]) -> str:
    return source["url"].partition("://")[2].partition("/")[2]


def _csv_blocks(store: S3BlobStore, source: dict[str, Any]) -> Iterator[np.ndarray]:
    """The CSV's rows as float64 blocks (pyarrow's streaming reader), the selected columns in
    their order; a field that is not a finite number is a :class:`DataURLError`."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names, columns, url = source["names"], source.get("columns"), source["url"]
    if columns is not None and not source["header"]:
        raise DataURLError(f"{url} has no header line, so its columns have no names; omit "
                           "columns to read every column")
    if columns is not None:
        missing = [name for name in columns if name not in names]
        if missing:
            raise DataURLError(f"{url} has no column {', '.join(map(repr, missing[:10]))}; its "
                               f"columns are {', '.join(names[:20])}")
    read = pacsv.ReadOptions(block_size=_BLOCK, use_threads=False,
                             skip_rows=1 if source["header"] else 0, column_names=names)
    convert = pacsv.ConvertOptions(include_columns=columns or [],
                                   column_types={name: pa.float64() for name in names})
    stream = store.open_at(_key(source), source["etag"])
    try:
        reader = pacsv.open_csv(stream, read_options=read, convert_options=convert)
        row = 0
        for batch in reader:
            block = np.column_stack([column.to_numpy(zero_copy_only=False)
                                     for column in batch.columns]).astype(np.float64, copy=False)
            if batch.num_columns and any(column.null_count for column in batch.columns):
                raise DataURLError(f"{url} has an empty field near row {row + 1}; every field "
                                   "must hold a number")
            _check_finite(block, url, row)
            row += block.shape[0]
            yield block
    except pa.ArrowInvalid as exc:
        raise DataURLError(f"{url} could not be read as CSV of numbers: {exc}") from None
    finally:
        stream.close()


def _check_finite(block: np.ndarray, url: str, first_row: int) -> None:
    if not np.isfinite(block).all():
        row = first_row + int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
        raise DataURLError(f"{url} holds NaN or infinity in row {row + 1}; remove or impute "
                           "those values")


# -- values (the worker) ---------------------------------------------------------------------------


def read_matrix(settings: Settings, source: dict[str, Any]) -> np.ndarray:
    """The dataset's values as one C-ordered float64 ``n_samples x n_features`` matrix, filled
    while the object streams in. Raises :class:`DataURLError` when the URL is no longer
    allowed or the object changed since it was registered."""
    data_url = parse_data_url(source["url"])
    check_allowed(data_url, settings.data_url_allow)
    store = s3_bucket(settings, data_url.bucket)
    X = np.empty((source["n_samples"], source["n_features"]))
    try:
        if source["format"] == ".npy":
            with contextlib.closing(store.open_at(data_url.key, source["etag"],
                                                  source["offset"])) as stream:
                _fill_from_npy_stream(X, stream, source)
        elif source["format"] == ".npz":
            _fill_from_npz(X, store, data_url, source)
        elif source["format"] == ".parquet":
            _fill_from_parquet(X, store, data_url, source)
        else:
            start = 0
            for block in _csv_blocks(store, source):
                if start + block.shape[0] > X.shape[0]:
                    raise ObjectChangedError(data_url.key)
                X[start:start + block.shape[0]] = block
                start += block.shape[0]
            if start != X.shape[0]:
                raise ObjectChangedError(data_url.key)
    except ObjectChangedError:
        raise DataURLError(f"{data_url.url} changed since it was registered as a dataset (its "
                           "ETag differs); register it again") from None
    return X


def _fill_from_npy_stream(X: np.ndarray, stream: BinaryIO, source: dict[str, Any]) -> None:
    """Cast the raw values of ``stream`` (after the header) into ``X`` a block at a time. A
    C-ordered file fills ``X`` row after row; a Fortran-ordered one column after column."""
    dtype = np.dtype(source["dtype"])
    targets = [X[:, j] for j in range(X.shape[1])] if source["fortran_order"] \
        else [X.reshape(-1)]
    per_block = max(_BLOCK // dtype.itemsize, 1)
    buffer = bytearray(per_block * dtype.itemsize)
    for target in targets:
        for start in range(0, target.size, per_block):
            count = min(per_block, target.size - start)
            view = memoryview(buffer)[:count * dtype.itemsize]
            filled = 0
            while filled < len(view):
                read = stream.readinto(view[filled:])
                if not read:
                    raise ObjectChangedError(source["url"])
                filled += read
            target[start:start + count] = np.frombuffer(view, dtype=dtype, count=count)
    _check_finite(X, source["url"], 0)


def _fill_from_npz(X: np.ndarray, store: S3BlobStore, data_url: DataURL,
                   source: dict[str, Any]) -> None:
    with contextlib.closing(_RangeFile(store, data_url.key, source["etag"],
                                       source["object_bytes"])) as raw:
        handle = io.BufferedReader(raw, buffer_size=_BLOCK)
        with zipfile.ZipFile(handle) as archive, archive.open(source["member"]) as stream:
            _npy_header(stream, source["url"])
            _fill_from_npy_stream(X, stream, source)


def _fill_from_parquet(X: np.ndarray, store: S3BlobStore, data_url: DataURL,
                       source: dict[str, Any]) -> None:
    """Column by column of each row group into ``X``: beside ``X`` only one column chunk is in
    memory at a time."""
    with contextlib.closing(_RangeFile(store, data_url.key, source["etag"],
                                       source["object_bytes"])) as raw:
        parquet = _parquet_file(io.BufferedReader(raw, buffer_size=1 << 20), data_url.url)
        start = 0
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            for index, name in enumerate(source["columns"]):
                column = parquet.read_row_group(group, columns=[name]).column(0)
                if column.null_count:
                    raise DataURLError(f"{data_url.url}: column {name!r} has missing values "
                                       "(nulls); remove or impute them")
                offset = start
                for chunk in column.chunks:
                    values = chunk.to_numpy(zero_copy_only=False)
                    X[offset:offset + len(values), index] = values
                    offset += len(values)
                del column
            _check_finite(X[start:start + rows], data_url.url, start)
            start += rows


class _RangeFile(io.RawIOBase):
    """A seekable read-only file over one object version: each read is a ranged GET naming the
    ETag, so the reads of a ZIP directory or a Parquet footer cost a few small requests."""

    def __init__(self, store: S3BlobStore, key: str, etag: str, size: int):
        self.store, self.key, self.etag, self.size = store, key, etag, size
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(base + offset, 0)
        return self.position

    def readinto(self, buffer) -> int:
        stop = min(self.position + len(buffer), self.size)
        if stop <= self.position:
            return 0
        with contextlib.closing(self.store.open_at(self.key, self.etag, self.position,
                                                   stop)) as stream:
            view = memoryview(buffer)
            filled = 0
            while filled < stop - self.position:
                read = stream.readinto(view[filled:stop - self.position])
                if not read:
                    raise ObjectChangedError(self.key)
                filled += read
        self.position = stop
        return filled
