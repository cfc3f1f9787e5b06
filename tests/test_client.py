"""``mmc_client`` against the live test deployment: ``Client`` and its asyncio twin, and
``mmc cluster --url`` built on it."""

from __future__ import annotations

import json
import re
import threading

import httpx
import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs

from algorithms.inputs import npz_bytes_to_arrays
from algorithms.metrics import clustering_error
from algorithms.registry import model_from_export
from mmc.cli import main
from mmc_client import AsyncClient, Client, JobFailedError, JobTimeoutError, MMCError, Result
from mmc_client._flows import npy_bytes
from tests.conftest import TENANT_KEYS
from tests.helpers import run_async

# A two-class SDP on 300 points runs for seconds (about 30 s on the test machine): long enough
# to time out on.
SLOW_X = make_blobs(n_samples=300, centers=2, random_state=0)[0]
# SDP MMC on SCS (about 30 s here); its default low-rank solver takes about 1 s.
SLOW = {"solver": "scs"}
# tests/test_itersvr.py, the paper's Table 1: iterSVR on digits 3-8 within 4.4 % error.
DIGITS_3_8_MAX_ERROR = 0.044


@pytest.fixture(scope="module")
def digits_3_8():
    X, y = load_digits(return_X_y=True)
    mask = np.isin(y, (3, 8))
    return X[mask], y[mask]


@pytest.fixture
def client(service_url):
    with Client(service_url) as client:
        yield client


def test_cluster_digits_3_8_returns_labels_within_the_itersvr_bound(client, digits_3_8):
    X, y = digits_3_8
    result = client.cluster(X, "itersvr", random_state=0)
    assert isinstance(result, Result)
    assert result.labels.shape == (len(X),)
    assert clustering_error(y, result.labels) <= DIGITS_3_8_MAX_ERROR
    assert result.timing["fit_seconds"] > 0 and result.timing["finished_at"]
    assert result.job["status"] == "succeeded" and result.model_id
    assert "objective" in result.extras


def test_predict_matches_the_exported_model(client, digits_3_8):
    X, _ = digits_3_8
    result = client.cluster(X[::2], "itersvr", random_state=0)
    held_out = X[1::2]
    labels = client.predict(result.model_id, held_out)
    meta, arrays = client.export_model(result.model_id)
    local = model_from_export(meta, arrays)
    np.testing.assert_array_equal(labels, local.predict(held_out))



def test_an_imported_model_predicts_as_its_export_and_deletes_are_final(client, digits_3_8):
    X, _ = digits_3_8
    result = client.cluster(X[::3], "itersvr", random_state=0)
    imported = client.import_model(*client.export_model(result.model_id), ttl_seconds=3600)
    assert imported["imported"] is True and imported["id"] != result.model_id
    np.testing.assert_array_equal(client.predict(imported["id"], X),
                                  client.predict(result.model_id, X))
    client.delete_model(imported["id"])
    with pytest.raises(MMCError) as gone:
        client.predict(imported["id"], X[:2])
    assert gone.value.status == 404
    dataset_id = client.upload(X[:20])
    client.delete_dataset(dataset_id)
    with pytest.raises(MMCError) as again:
        client.delete_dataset(dataset_id)
    assert again.value.status == 404
    page = client.jobs(status=["succeeded"], algorithm="itersvr", limit=1000)
    assert result.job["id"] in [job["id"] for job in page["items"]]
    assert all(job["status"] == "succeeded" for job in page["items"])


def test_a_bad_request_raises_with_the_problems_detail_and_fields(client):
    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    with pytest.raises(MMCError) as caught:
        client.cluster(X, "itersvr", n_clusters=1)
    error = caught.value
    assert error.status == 422
    assert "n_clusters" in error.detail
    assert error.errors[0]["field"].endswith("params.n_clusters")
    assert error.title == "Invalid request"
    with pytest.raises(MMCError, match="features") as caught:
        client.predict(client.cluster(X, "itersvr").model_id, np.zeros((2, 5)))
    assert caught.value.status == 422
    with pytest.raises(MMCError) as caught:
        client.job("0" * 32)
    assert caught.value.status == 404 and "does not exist" in caught.value.detail


def test_a_timeout_raises_cancels_the_job_and_leaves_no_thread(client):
    threads = threading.active_count()
    with pytest.raises(JobTimeoutError) as caught:
        client.cluster(SLOW_X, "sdp_mmc", timeout=1.0, **SLOW)
    assert threading.active_count() == threads
    error = caught.value
    assert isinstance(error, MMCError) and error.job_id
    assert client.wait(error.job_id, timeout=60)["status"] == "canceled"


def job_reads(base_url: str) -> int:
    """``GET /v1/jobs/{id}`` requests the API has answered, from its /metrics."""
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    return sum(int(float(count)) for labels, count in
               re.findall(r"^mmc_http_requests_total\{([^}]*)\} (\S+)$", text, flags=re.M)
               if 'method="GET"' in labels and 'route="/v1/jobs/{job_id}"' in labels)


def test_waiting_long_polls_instead_of_polling_in_a_loop(client, service_url):
    # A two-class SDP on 90 points runs for one to a few seconds: a loop polling every 0.1 s
    # would read the job tens of times; long polls read it once per status change.
    job = client.submit(make_blobs(n_samples=90, centers=2, random_state=8)[0], "sdp_mmc")
    before = job_reads(service_url)
    assert client.wait(job["id"], timeout=300)["status"] == "succeeded"
    assert job_reads(service_url) - before <= 3  # queued -> running -> succeeded, at most


def test_wait_times_out_without_touching_the_job(client):
    job = client.submit(SLOW_X, "sdp_mmc", **SLOW)
    try:
        with pytest.raises(JobTimeoutError):
            client.wait(job["id"], timeout=0.5)
        assert client.job(job["id"])["status"] in ("queued", "running")
    finally:
        assert client.cancel(job["id"])["status"] == "canceled"


def test_submit_upload_wait_result_and_failed_jobs(client):
    X, _ = make_blobs(n_samples=60, centers=2, random_state=4)
    dataset_id = client.upload(X)
    job = client.submit(dataset_id=dataset_id, algorithm="itersvr", random_state=0)
    assert job["status"] in ("queued", "running", "succeeded")
    assert client.wait(job["id"], timeout=120)["status"] == "succeeded"
    result = client.result(job["id"])
    assert result.labels.shape == (60,)
    assert any(item["id"] == job["id"] for item in client.jobs(limit=50)["items"])
    # More values than go inline (INLINE_MAX_VALUES) go up as .npy first.
    wide, _ = make_blobs(n_samples=500, n_features=120, centers=2, random_state=0)
    job = client.submit(wide, "itersvr", random_state=0)
    assert client.wait(job["id"], timeout=300)["status"] == "succeeded"
    assert client.result(job["id"]).labels.shape == (500,)
    # A job that did not succeed has no result: the error says what became of it.
    canceled = client.submit(SLOW_X, "sdp_mmc", **SLOW)
    client.cancel(canceled["id"])
    with pytest.raises(JobFailedError, match="canceled"):
        client.result(canceled["id"])


def test_a_matrix_larger_than_a_part_goes_up_in_parts(client, monkeypatch):
    # Parts of 4 KiB (256 rows of 2 values): 1,200 x 2 goes up in five parts.
    import mmc_client._flows as flows

    monkeypatch.setattr(flows, "PART_BYTES", 4096)
    sent = []
    request = flows.request

    def recorded(call, **options):
        sent.append((call.method, call.path.rsplit("/", 2)[-2:]))
        return (yield from request(call, **options))

    monkeypatch.setattr(flows, "request", recorded)
    X, _ = make_blobs(n_samples=1200, centers=2, random_state=5)
    dataset_id = client.upload(X)
    assert [method for method, _ in sent] == ["POST"] + ["PUT"] * 5 + ["POST"]
    assert [tail for _, tail in sent[1:6]] == [["parts", str(i)] for i in range(5)]
    # The parts joined are X itself: the dataset id is the SHA-256 of its content and shape.
    whole = httpx.post(f"{client.base_url}/v1/datasets", content=npy_bytes(X),
                       headers={"content-type": "application/x-npy"})
    assert (whole.status_code, whole.json()["id"]) == (200, dataset_id)


def test_sequences_cluster_and_predict(client):
    rng = np.random.default_rng(1)
    sequences = [rng.integers(0, 3, size=int(rng.integers(5, 10))) for _ in range(10)]
    result = client.cluster(sequences, "m3n", n_states=2, random_state=0)
    assert [len(row) for row in result.labels] == [len(s) for s in sequences]
    labels = client.predict(result.model_id, sequences=sequences[:3])
    assert [len(row) for row in labels] == [len(s) for s in sequences[:3]]


def test_async_client_is_the_same_api_awaited(service_url, digits_3_8):
    X, y = digits_3_8

    async def scenario():
        async with AsyncClient(service_url) as client:
            result = await client.cluster(X, "itersvr", random_state=0)
            labels = await client.predict(result.model_id, X[:20])
            with pytest.raises(JobTimeoutError):
                await client.cluster(SLOW_X, "sdp_mmc", timeout=0.5, **SLOW)
            with pytest.raises(MMCError) as caught:
                await client.cluster(X, "no_such_algorithm")
            return result, labels, caught.value

    threads = threading.active_count()
    result, labels, error = run_async(scenario())
    assert threading.active_count() == threads
    assert clustering_error(y, result.labels) <= DIGITS_3_8_MAX_ERROR
    assert labels.shape == (20,)
    assert error.status == 422 and "no_such_algorithm" in error.detail


def test_api_keys_select_the_tenant_and_a_wrong_key_is_a_401(keyed_service_url):
    X, _ = make_blobs(n_samples=30, centers=2, random_state=5)
    with Client(keyed_service_url, TENANT_KEYS["acme"]) as acme:
        result = acme.cluster(X, "itersvr")
    with Client(keyed_service_url, TENANT_KEYS["globex"]) as globex, pytest.raises(MMCError) as c:
        globex.result(result.job_id)
    assert c.value.status == 404
    with Client(keyed_service_url, "not-a-key") as stranger, pytest.raises(MMCError) as caught:
        stranger.jobs()
    assert caught.value.status == 401 and "API key" in caught.value.detail


def test_an_unreachable_service_raises_mmc_error(tmp_path):
    from mmc.processes import free_port

    with Client(f"http://127.0.0.1:{free_port()}", timeout=1.0) as client, \
            pytest.raises(MMCError, match="cannot reach"):
        client.jobs()


def test_mmc_cluster_url_writes_what_a_local_run_writes(service_url, tmp_path, capsys):
    X, _ = make_blobs(n_samples=50, centers=2, random_state=6)
    data = tmp_path / "blobs.csv"
    np.savetxt(data, X, delimiter=",")
    assert main(["cluster", str(data), "--algorithm", "itersvr", "--param", "random_state=0",
                 "--url", service_url]) == 0
    assert service_url in capsys.readouterr().err
    labels = np.loadtxt(tmp_path / "blobs.labels.csv", dtype=int)
    meta = json.loads((tmp_path / "blobs.model.json").read_text())
    arrays = npz_bytes_to_arrays((tmp_path / "blobs.model.npz").read_bytes())
    model = model_from_export(meta, arrays)
    assert labels.shape == (50,)
    assert clustering_error(labels, model.predict(X)) <= 0.02
    assert main(["cluster", str(data), "--algorithm", "itersvr", "--param", "n_clusters=1",
                 "--url", service_url]) == 2
    assert "n_clusters" in capsys.readouterr().err
