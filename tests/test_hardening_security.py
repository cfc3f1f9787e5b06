"""Security checks: nothing a client sends or Redis returns is unpickled or evaluated, RQ uses its
JSON serializer, uploads are parsed with type and size limits."""

from __future__ import annotations

import ast
import io
import json
import zlib
from pathlib import Path

import httpx
import numpy as np
import pytest
from redis import Redis
from rq.serializers import JSONSerializer
from sklearn.datasets import make_blobs

from tests.conftest import ROOT
from tests.helpers import submit_job, wait_for_job

SCANNED = ("service", "worker", "algorithms")
BANNED_MODULES = {"pickle", "cPickle", "_pickle", "joblib", "dill", "cloudpickle", "marshal",
                  "shelve"}
BANNED_CALLS = {"eval", "exec", "compile", "__import__"}


def python_files():
    for package in SCANNED:
        yield from sorted((ROOT / package).rglob("*.py"))


def offences(path: Path) -> list[str]:
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        else:
            names = []
        found += [f"{path}:{node.lineno} imports {n}" for n in names if n in BANNED_MODULES]
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if isinstance(func, ast.Name) and name in BANNED_CALLS:
                found.append(f"{path}:{node.lineno} calls {name}()")
            for keyword in node.keywords:
                if keyword.arg == "allow_pickle" and not (
                        isinstance(keyword.value, ast.Constant) and keyword.value.value is False):
                    value = ast.unparse(keyword.value)
                    found.append(f"{path}:{node.lineno} passes allow_pickle={value}")
            if name == "load" and isinstance(func, ast.Attribute) and \
                    getattr(func.value, "id", "") in ("np", "numpy") and not any(
                        k.arg == "allow_pickle" for k in node.keywords):
                found.append(f"{path}:{node.lineno} calls np.load without allow_pickle=False")
    return found


def test_no_pickle_joblib_eval_or_exec_in_service_worker_or_algorithms():
    files = list(python_files())
    assert len(files) > 20
    problems = [offence for path in files for offence in offences(path)]
    assert problems == []


def test_the_scanner_catches_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nfrom joblib import load\neval('1')\n"
                   "import numpy as np\nnp.load('x')\nnp.load('x', allow_pickle=True)\n")
    assert len(offences(bad)) == 5


def test_rq_jobs_are_json_in_redis(service_url, redis_url):
    from core.queues import SERIALIZER, get_queue

    redis = Redis.from_url(redis_url)
    assert SERIALIZER is JSONSerializer
    assert get_queue("fast", redis).serializer is JSONSerializer
    X, _ = make_blobs(n_samples=20, centers=2, random_state=0)
    job = submit_job(service_url, {"algorithm": {"name": "itersvr"}, "data": {"X": X.tolist()}})
    wait_for_job(service_url, job["id"])
    stored = redis.hget(f"rq:job:{job['id']}", "data")
    assert json.loads(zlib.decompress(stored))[0] == "worker.tasks.run_job"
    record = redis.hgetall(f"mmc:job:{job['id']}")
    assert all(isinstance(json.loads(value), object) for value in record.values())


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize("payload", [
    _npy(np.array([{"a": 1}, None], dtype=object)),  # a pickle inside an .npy
    b"\x80\x04\x95" + b"cos\nsystem\n",  # a raw pickle stream
])
def test_pickled_uploads_are_refused_unread(service_url, payload):
    response = httpx.post(f"{service_url}/v1/datasets", content=payload,
                          headers={"content-type": "application/x-npy"})
    assert response.status_code == 422, response.text
    assert "pickle" in response.json()["detail"] or ".npy" in response.json()["detail"]


def test_uploads_of_unknown_type_are_415(service_url):
    for content_type in ("application/xml", "image/png", "application/x-python-pickle"):
        response = httpx.post(f"{service_url}/v1/datasets", content=b"<x/>",
                              headers={"content-type": content_type})
        assert response.status_code == 415, (content_type, response.text)


def test_upload_kind_is_read_from_the_file_suffix_and_the_whole_media_type(service_url):
    # A substring test read a file named "sales_json_export.npy" as JSON (422) and
    # application/x-ndjson as JSON.
    X = np.arange(12.0).reshape(6, 2)
    buffer = io.BytesIO()
    np.save(buffer, X)
    response = httpx.post(f"{service_url}/v1/datasets", files={
        "file": ("sales_json_export.npy", buffer.getvalue(), "application/octet-stream")})
    assert response.status_code in (200, 201), response.text
    assert (response.json()["n_samples"], response.json()["n_features"]) == (6, 2)
    response = httpx.post(f"{service_url}/v1/datasets", content=b'{"X": [[1, 2], [3, 4]]}',
                          headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 415, response.text
    response = httpx.post(f"{service_url}/v1/datasets", content=b"1,2\n3,4\n5,7\n",
                          headers={"content-type": "Text/CSV; charset=utf-8"})
    assert response.status_code in (200, 201), response.text


def test_oversized_upload_is_413_before_parsing(service_url):
    from tests.conftest import TEST_MAX_BODY_BYTES

    response = httpx.post(f"{service_url}/v1/datasets",
                          content=b"1,2\n" * (TEST_MAX_BODY_BYTES // 4 + 1),
                          headers={"content-type": "text/csv"})
    assert response.status_code == 413, response.text
