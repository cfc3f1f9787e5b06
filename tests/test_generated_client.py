"""A client generated from ``openapi/openapi.json`` by openapi-python-client (the common Python
generator): its functions carry the operationIds' short names, and it runs a job from submit to
predict and fetches the plot against the live service."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "openapi" / "openapi.json"
PACKAGE = "mmc_generated_client"
# Short snake_case verb phrases: no method or path suffix.
OPERATION_ID = re.compile(r"[a-z]+(_[a-z0-9]+){0,3}")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    generator = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent))
    if generator is None:
        pytest.skip("openapi-python-client is not installed (a dev dependency: make install)")
    out = tmp_path_factory.mktemp("generated")
    done = subprocess.run(
        [generator, "generate", "--path", str(SPEC), "--meta", "none",
         "--output-path", str(out / PACKAGE)],
        capture_output=True, text=True, timeout=300, cwd=out)
    assert done.returncode == 0, done.stdout + done.stderr
    # Request bodies of other media types than JSON (CSV, .npy uploads) are left to the JSON
    # form; every response, the plot's image bytes included, is generated.
    assert "response will be omitted" not in done.stdout, done.stdout
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_every_operation_id_is_a_short_verb_phrase():
    import json

    spec = json.loads(SPEC.read_text())
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if not OPERATION_ID.fullmatch(i)] == []
    assert {"create_job", "get_job", "list_jobs", "predict", "delete_dataset", "delete_model",
            "import_model", "export_model"} <= set(ids)


def test_generated_client_submits_waits_reads_the_result_and_predicts(generated, service_url):
    from sklearn.datasets import make_blobs

    jobs = importlib.import_module(f"{PACKAGE}.api.jobs")
    models = importlib.import_module(f"{PACKAGE}.api.models")
    schemas = importlib.import_module(f"{PACKAGE}.models")
    client = generated.Client(base_url=service_url, timeout=60.0)

    X, _ = make_blobs(40, centers=[[0, 0], [5, 5]], random_state=0)
    body = schemas.JobRequest.from_dict({
        "algorithm": {"name": "itersvr", "params": {"n_clusters": 2, "random_state": 0}},
        "data": {"X": X.tolist()}})
    job = importlib.import_module(f"{PACKAGE}.api.jobs.create_job").sync(client=client, body=body)
    assert isinstance(job, schemas.JobResource), job
    get_job = importlib.import_module(f"{PACKAGE}.api.jobs.get_job")
    deadline = time.monotonic() + 120
    while (current := get_job.sync(job.id, client=client)).status not in (
            "succeeded", "failed", "canceled"):
        assert time.monotonic() < deadline, current
        time.sleep(0.1)
    assert current.status == "succeeded", current

    result = importlib.import_module(f"{PACKAGE}.api.jobs.get_result").sync(job.id, client=client)
    assert isinstance(result, schemas.JobResult), result
    assert sorted(set(result.labels)) == [0, 1]
    predicted = importlib.import_module(f"{PACKAGE}.api.models.predict").sync(
        result.model_id, client=client,
        body=schemas.PredictRequest.from_dict({"X": X[:10].tolist()}))
    assert isinstance(predicted, schemas.PredictResponse), predicted
    assert predicted.labels == result.labels[:10]

    plot = importlib.import_module(f"{PACKAGE}.api.jobs.get_plot").sync(job.id, client=client)
    assert plot.payload.read().lstrip().startswith(b"<")  # SVG by default
    assert jobs and models  # the tag modules exist under their tags' names
