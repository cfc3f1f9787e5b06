"""The /v1 API end to end: real HTTP (uvicorn subprocess), a real redis-server, real RQ workers."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import load_digits, make_blobs, make_moons

from algorithms.inputs import npz_bytes_to_arrays
from algorithms.metrics import clustering_error
from algorithms.registry import REGISTRY, model_from_export
from tests.conftest import TEST_MAX_BODY_BYTES
from tests.helpers import npy_bytes, run_job, submit_job, uploaded_in_parts, wait_for_job

PROBLEM = "application/problem+json"


def blobs_payload(n: int = 40, seed: int = 0, **params) -> dict:
    X, _ = make_blobs(n_samples=n, centers=2, random_state=seed)
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0, **params}},
            "data": {"X": X.tolist()}}


def slow_payload(seed: int) -> dict:
    """An iterSVR job that runs for a long time (many restarts of a 1,500-point exact kernel)."""
    X = np.random.default_rng(seed).normal(size=(1500, 5))
    return {"algorithm": {"name": "itersvr",
                          "params": {"n_init": 100, "max_alternations": 1000,
                                     "random_state": seed}},
            "data": {"X": X.tolist()}}


def assert_problem(response: httpx.Response, status: int, *needles: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status and body["title"]
    text = json.dumps(body)
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text}"
    return body


def wait_until_running(base_url: str, job_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(f"{base_url}/v1/jobs/{job_id}").json()
        if job["status"] != "queued":
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never started")


@pytest.fixture(scope="module")
def digits_3_8():
    X, y = load_digits(return_X_y=True)
    mask = (y == 3) | (y == 8)
    return X[mask], y[mask]


@pytest.fixture(scope="module")
def small_model(service_url):
    """A fitted iterSVR model on 2-D blobs: ``(model_id, n_features)``."""
    # portfolio=False: iterSVR's own tree of SVMs (Genie's partition of these touching blobs
    # differs from k-means' by one point).
    result = run_job(service_url, blobs_payload(portfolio=False))
    return result["model_id"], 2


# -- the whole flow -------------------------------------------------------------------------------


def test_digits_3_8_job_over_http_clusters_as_in_the_paper_and_predicts(service_url, digits_3_8):
    X, y = digits_3_8
    upload = httpx.post(f"{service_url}/v1/datasets", content=npy_bytes(X),
                        headers={"content-type": "application/x-npy"})
    assert upload.status_code in (200, 201), upload.text
    dataset_id = upload.json()["id"]
    assert upload.json()["n_samples"] == X.shape[0] == 357

    job = submit_job(service_url, {"algorithm": {"name": "itersvr",
                                                 "params": {"random_state": 0}},
                                   "data": {"dataset_id": dataset_id}})
    assert job["status"] == "queued" and job["queue"] == "fast"
    observed = []
    deadline = time.monotonic() + 180
    while True:
        current = httpx.get(f"{service_url}/v1/jobs/{job['id']}").json()
        if current["status"] == "running":
            observed.append(current["progress"]["step"])
        if current["status"] in ("succeeded", "failed", "canceled"):
            break
        assert time.monotonic() < deadline, current
        time.sleep(0.02)
    assert current["status"] == "succeeded", current["error"]
    # Progress advanced while running: the record keeps the last step the worker reported, and
    # every step a poll saw while the job ran came in order. (A fast fit may end between polls.)
    assert current["progress"]["step"] >= 1, current["progress"]
    assert observed == sorted(observed)
    assert all(step <= current["progress"]["step"] for step in observed), observed
    timing = current["timing"]
    for field in ("queued_at", "started_at", "finished_at", "fit_seconds"):
        assert timing[field] is not None, field
    assert timing["fit_seconds"] > 0

    result = httpx.get(f"{service_url}/v1/jobs/{job['id']}/result").json()
    # Zhang, Tsang and Kwok 2007, Table 1 row "digits 3-8": the accepted bound is <= 4.4 % error.
    error = clustering_error(y, result["labels"])
    assert error <= 0.044, error
    assert len(result["decision_values"]) == X.shape[0]
    assert result["extras"]["n_iter"] >= 1

    # Predict 50 new points (training digits with pixel noise) and compare with the exported
    # model's own predict.
    rng = np.random.default_rng(1)
    new = np.clip(X[rng.choice(X.shape[0], 50, replace=False)] + rng.normal(0, 1, (50, 64)), 0, 16)
    # The first predict loads the estimator modules into the API process: seconds on a
    # loaded machine, past httpx's 5 s default.
    predicted = httpx.post(f"{service_url}/v1/models/{result['model_id']}/predict",
                           json={"X": new.tolist()}, timeout=60)
    assert predicted.status_code == 200, predicted.text
    exported = httpx.get(f"{service_url}/v1/models/{result['model_id']}/export").json()
    import base64

    model = model_from_export(exported["meta"],
                              npz_bytes_to_arrays(base64.b64decode(exported["npz_base64"])))
    assert predicted.json()["labels"] == model.predict(new).tolist()
    info = httpx.get(f"{service_url}/v1/models/{result['model_id']}").json()
    assert info["algorithm"] == "itersvr" and info["n_features_in"] == 64


def test_result_names_the_partition_kept_and_every_candidate_score(service_url):
    # Two moons beside a blob: the method's partition is weighed against the portfolio's
    # (algorithms.selection.portfolio); the winner and every score come back in the extras.
    X, _ = make_moons(n_samples=200, noise=0.05, random_state=0)
    X = np.vstack([X, make_blobs(n_samples=60, centers=[[4.0, 0.0]], cluster_std=0.2,
                                 random_state=0)[0]])
    result = run_job(service_url, {"algorithm": {"name": "itersvr", "params": {
        "n_clusters": 3, "random_state": 0}}, "data": {"X": X.tolist()}})
    extras = result["extras"]
    assert extras["candidate"] in extras["candidate_scores"]
    assert len(extras["candidate_scores"]) >= 3  # distinct partitions, each scored once
    scores = extras["candidate_scores"]
    assert scores[extras["candidate"]] == min(scores.values())
    predicted = httpx.post(f"{service_url}/v1/models/{result['model_id']}/predict",
                           json={"X": X.tolist()})
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["labels"] == result["labels"]


# -- bad input never reaches a worker -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "mutate", "needle"),
    [
        ("unknown algorithm", lambda p: p["algorithm"].update(name="kmeans"), "algorithm"),
        ("unknown parameter", lambda p: p["algorithm"]["params"].update(bogus=1), "bogus"),
        ("parameter out of bounds", lambda p: p["algorithm"]["params"].update(C=-1), "C"),
        ("NaN", lambda p: p["data"]["X"][3].__setitem__(0, float("nan")), "NaN"),
        ("infinity", lambda p: p["data"]["X"][3].__setitem__(1, float("inf")), "infinity"),
        ("ragged rows", lambda p: p["data"]["X"][5].append(1.0), "ragged"),
        ("strings", lambda p: p["data"]["X"][0].__setitem__(0, "abc"), "data.X.0.0"),
        ("empty X", lambda p: p["data"].update(X=[]), "empty"),
        ("n_clusters > n", lambda p: (p["data"].update(X=p["data"]["X"][:3]),
                                      p["algorithm"]["params"].update(n_clusters=5)), "n_clusters"),
        ("labels for an unlabeled algorithm", lambda p: p["data"].update(y=[0] * 40), "data.y"),
        ("both X and dataset_id", lambda p: p["data"].update(dataset_id="0" * 64), "exactly one"),
        ("unknown data field", lambda p: p["data"].update(Z=1), "data.Z"),
    ],
)
def test_invalid_job_is_a_422_problem_naming_the_field(service_url, name, mutate, needle):
    payload = blobs_payload()
    mutate(payload)
    response = httpx.post(f"{service_url}/v1/jobs", content=json.dumps(payload),
                          headers={"content-type": "application/json"})
    body = assert_problem(response, 422, needle)
    assert body["errors"] and all("field" in e and "message" in e for e in body["errors"])


def test_too_many_points_is_a_422_naming_max_n(service_url):
    max_n = REGISTRY["itersvr"].max_n
    X = np.tile(np.arange(2.0, dtype=np.float32), max_n // 2 + 1)[: max_n + 1, None]
    dataset_id = uploaded_in_parts(service_url, X, TEST_MAX_BODY_BYTES // 2)
    response = httpx.post(f"{service_url}/v1/jobs", json={
        "algorithm": {"name": "itersvr"}, "data": {"dataset_id": dataset_id}})
    assert_problem(response, 422, f"max_n={max_n}", str(max_n + 1))


def test_body_over_the_limit_is_a_413_problem_that_names_the_upload_route(service_url):
    body = b"[" + b"1.0," * (TEST_MAX_BODY_BYTES // 4) + b"1.0]"
    response = httpx.post(f"{service_url}/v1/jobs", content=body,
                          headers={"content-type": "application/json"})
    assert_problem(response, 413, "MMC_MAX_BODY_BYTES", "POST /v1/datasets/uploads")
    dataset = httpx.post(f"{service_url}/v1/datasets", content=body,
                         headers={"content-type": "application/x-npy"})
    assert_problem(dataset, 413, "POST /v1/datasets/uploads", "/parts/")


def test_predict_with_wrong_feature_count_is_a_422(service_url, small_model):
    model_id, n_features = small_model
    response = httpx.post(f"{service_url}/v1/models/{model_id}/predict",
                          json={"X": [[0.0] * (n_features + 1)]})
    assert_problem(response, 422, f"trained on {n_features}")


def test_predict_on_a_cached_model_labels_like_the_training_run(service_url, small_model):
    model_id, _ = small_model
    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    first = httpx.post(f"{service_url}/v1/models/{model_id}/predict", json={"X": X.tolist()})
    second = httpx.post(f"{service_url}/v1/models/{model_id}/predict", json={"X": X.tolist()})
    assert first.status_code == 200 and first.json() == second.json()
    # One of the 40 points lies among the other blob's points: k-means mislabels it too.
    assert clustering_error(make_blobs(n_samples=40, centers=2, random_state=0)[1],
                            first.json()["labels"]) < 2 / 40


@pytest.mark.parametrize("path", ["/v1/jobs/{id}", "/v1/jobs/{id}/result", "/v1/models/{id}",
                                  "/v1/models/{id}/export", "/v1/datasets/{id}",
                                  "/v1/algorithms/nope"])
def test_unknown_ids_are_404_problems(service_url, path):
    well_formed = "0" * (64 if "datasets" in path else 32)  # ids of the right shape, unknown
    response = httpx.get(service_url + path.format(id=well_formed))
    assert_problem(response, 404)


def test_head_answers_like_get_without_a_body_and_options_lists_the_methods(service_url,
                                                                           small_model):
    model_id, _ = small_model
    for path in ("/v1/algorithms", f"/v1/models/{model_id}", "/healthz", "/"):
        got, head = httpx.get(service_url + path), httpx.head(service_url + path)
        assert (head.status_code, head.content) == (got.status_code, b""), path
        assert head.headers["content-type"] == got.headers["content-type"], path
    assert httpx.head(f"{service_url}/v1/models/{'0' * 32}").status_code == 404
    options = httpx.options(f"{service_url}/v1/jobs")
    assert options.status_code == 204
    assert options.headers["allow"] == "GET, HEAD, OPTIONS, POST"


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("DELETE", "/v1/jobs", "GET, HEAD, OPTIONS, POST"),  # said "POST" alone: GET is routed apart
    ("PUT", f"/v1/jobs/{'0' * 32}", "DELETE, GET, HEAD, OPTIONS"),
    ("GET", f"/v1/models/{'0' * 32}/predict", "OPTIONS, POST"),
    ("HEAD", f"/v1/models/{'0' * 32}/predict", "OPTIONS, POST"),
])
def test_a_method_the_path_does_not_take_is_a_405_that_allows_all_it_takes(
        service_url, method, path, allow):
    response = httpx.request(method, service_url + path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    if method != "HEAD":
        assert_problem(response, 405, "takes")


def test_predict_on_unknown_model_is_404(service_url):
    response = httpx.post(f"{service_url}/v1/models/{'0' * 32}/predict", json={"X": [[1.0]]})
    assert_problem(response, 404, "model")


def test_job_over_an_unknown_dataset_is_404(service_url):
    response = httpx.post(f"{service_url}/v1/jobs", json={"algorithm": {"name": "itersvr"},
                                                          "data": {"dataset_id": "f" * 64}})
    assert_problem(response, 404, "dataset")


# -- idempotency ----------------------------------------------------------------------------------


def test_idempotency_key_replays_the_same_job_and_refuses_another_body(service_url):
    key = {"Idempotency-Key": f"test-{time.time_ns()}"}
    first = httpx.post(f"{service_url}/v1/jobs", json=blobs_payload(seed=3), headers=key)
    again = httpx.post(f"{service_url}/v1/jobs", json=blobs_payload(seed=3), headers=key)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    other = httpx.post(f"{service_url}/v1/jobs", json=blobs_payload(seed=4), headers=key)
    assert_problem(other, 409, "Idempotency-Key")
    assert wait_for_job(service_url, first.json()["id"])["status"] == "succeeded"


# -- cancel and worker death ----------------------------------------------------------------------


def test_cancel_queued_and_running_jobs_and_the_worker_keeps_serving(service_url):
    running = submit_job(service_url, slow_payload(1))
    assert wait_until_running(service_url, running["id"])["status"] == "running"
    queued = submit_job(service_url, slow_payload(2))
    assert httpx.get(f"{service_url}/v1/jobs/{queued['id']}").json()["status"] == "queued"

    canceled = httpx.delete(f"{service_url}/v1/jobs/{queued['id']}")
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
    canceled = httpx.delete(f"{service_url}/v1/jobs/{running['id']}")
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"

    # The fast worker is free again: a new job runs to the end, and the canceled ones stay so.
    result = run_job(service_url, blobs_payload(seed=5), timeout=120)
    assert len(result["labels"]) == 40
    for job in (running, queued):
        final = httpx.get(f"{service_url}/v1/jobs/{job['id']}").json()
        assert final["status"] == "canceled", final
    assert_problem(httpx.delete(f"{service_url}/v1/jobs/{queued['id']}"), 409, "canceled")
    assert_problem(httpx.get(f"{service_url}/v1/jobs/{queued['id']}/result"), 409, "canceled")


def test_job_whose_work_horse_dies_ends_failed_with_a_reason(service_url, redis_url):
    job = submit_job(service_url, slow_payload(3))
    assert wait_until_running(service_url, job["id"])["status"] == "running"
    record = Redis.from_url(redis_url).hget(f"mmc:job:{job['id']}", "worker")
    os.kill(json.loads(record)["pid"], signal.SIGKILL)
    final = wait_for_job(service_url, job["id"], timeout=60)
    assert final["status"] == "failed"
    assert "worker" in final["error"]["message"]
    assert len(run_job(service_url, blobs_payload(seed=6))["labels"]) == 40


# -- datasets, listing, discovery, health ---------------------------------------------------------


def test_dataset_uploads_are_content_addressed_across_formats(service_url):
    X = np.array([[1.0, 2.0], [3.0, 4.5], [5.0, 6.0]])
    as_json = httpx.post(f"{service_url}/v1/datasets", json={"X": X.tolist()})
    as_csv = httpx.post(f"{service_url}/v1/datasets", content="a,b\n1,2\n3,4.5\n5,6\n",
                        headers={"content-type": "text/csv"})
    as_npy = httpx.post(f"{service_url}/v1/datasets",
                        files={"file": ("x.npy", npy_bytes(X), "application/octet-stream")})
    ids = {r.json()["id"] for r in (as_json, as_csv, as_npy)}
    assert len(ids) == 1, [r.text for r in (as_json, as_csv, as_npy)]
    assert {as_csv.status_code, as_npy.status_code} == {200}
    described = httpx.get(f"{service_url}/v1/datasets/{ids.pop()}").json()
    assert (described["n_samples"], described["n_features"]) == (3, 2)
    assert_problem(httpx.post(f"{service_url}/v1/datasets", content="1,x\n",
                              headers={"content-type": "text/csv"}), 422, "numbers")
    assert_problem(httpx.post(f"{service_url}/v1/datasets", content=b"\x93NUMPYgarbage",
                              headers={"content-type": "application/x-npy"}), 422, ".npy")


def test_a_matrix_larger_than_one_body_goes_up_in_parts(service_url):
    X = np.random.default_rng(0).normal(size=(30, 3))
    opened = httpx.post(f"{service_url}/v1/datasets/uploads")
    assert opened.status_code == 201, opened.text
    path = opened.headers["location"]
    assert path == f"/v1/datasets/uploads/{opened.json()['id']}"
    url = f"{service_url}{path}"
    npy = {"content-type": "application/x-npy"}
    # Parts in any order, any format; sending an index again replaces it.
    assert httpx.put(f"{url}/parts/1", content=npy_bytes(X[10:25]), headers=npy).is_success
    assert httpx.put(f"{url}/parts/1", content=npy_bytes(X[10:20]), headers=npy).is_success
    assert_problem(httpx.post(f"{url}/complete"), 409, "missing")
    assert httpx.put(f"{url}/parts/0", json={"X": X[:10].tolist()}).is_success
    assert_problem(httpx.put(f"{url}/parts/2", content=npy_bytes(X[20:, :2]), headers=npy),
                   422, "columns")
    state = httpx.put(f"{url}/parts/2", content=npy_bytes(X[20:]), headers=npy).json()
    assert (state["parts"], state["n_samples"], state["n_features"]) == ([0, 1, 2], 30, 3)
    assert httpx.get(url).json()["parts"] == [0, 1, 2]
    completed = httpx.post(f"{url}/complete")
    assert completed.status_code == 201, completed.text
    # The dataset is the rows in part order: the same content id as one upload of X.
    whole = httpx.post(f"{service_url}/v1/datasets", content=npy_bytes(X), headers=npy)
    assert (whole.status_code, whole.json()["id"]) == (200, completed.json()["id"])
    # A retried completion gets the same answer; no part can be added any more.
    again = httpx.post(f"{url}/complete")
    assert (again.status_code, again.json()["id"]) == (200, completed.json()["id"])
    assert_problem(httpx.put(f"{url}/parts/3", content=npy_bytes(X), headers=npy), 409,
                   "complete")
    # An empty upload cannot complete; a deleted or unknown one is a 404.
    empty = f"{service_url}{httpx.post(f'{service_url}/v1/datasets/uploads').headers['location']}"
    assert_problem(httpx.post(f"{empty}/complete"), 409, "no parts")
    assert httpx.delete(empty).status_code == 204
    assert_problem(httpx.get(empty), 404, "upload")
    assert_problem(httpx.put(f"{empty}/parts/0", content=npy_bytes(X), headers=npy), 404)


def test_jobs_are_listed_newest_first(service_url):
    first = submit_job(service_url, blobs_payload(seed=7))
    second = submit_job(service_url, blobs_payload(seed=8))
    page = httpx.get(f"{service_url}/v1/jobs", params={"limit": 2}).json()
    assert [item["id"] for item in page["items"]] == [second["id"], first["id"]]
    assert page["total"] >= 2
    for job in (first, second):
        wait_for_job(service_url, job["id"])


def test_algorithms_endpoint_lists_every_registered_algorithm(service_url):
    listed = {a["name"]: a for a in httpx.get(f"{service_url}/v1/algorithms").json()}
    assert set(listed) == set(REGISTRY)
    assert listed["itersvr"]["params_schema"]["properties"]["C"]["default"] == 500.0


def test_health_readiness_and_metrics(service_url):
    assert httpx.get(f"{service_url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{service_url}/readyz").json()
    assert ready["redis"] and ready["workers"]["fast"] >= 1 and ready["workers"]["slow"] >= 1
    text = httpx.get(f"{service_url}/metrics").text
    assert 'mmc_queue_workers{queue="fast"}' in text
    assert "mmc_http_requests_total" in text and "mmc_redis_up 1" in text


def test_failure_callback_marks_a_timed_out_job_failed(redis_url, tmp_path):
    from rq.timeouts import JobTimeoutException

    from core.settings import Settings
    from core.stores import Stores
    from worker.tasks import on_failure

    redis = Redis.from_url(redis_url)
    store = Stores(redis, Settings(blob_url=str(tmp_path))).jobs
    job_id = f"timeout-{time.time_ns()}"
    outcome, _ = store.create_admitted(
        {"id": job_id, "owner": "nobody", "status": "running", "queued_at": time.time()},
        {"dataset_id": None}, cap=100)
    assert outcome == "created"
    on_failure(type("RQJob", (), {"id": job_id})(), redis, JobTimeoutException,
               JobTimeoutException("Task exceeded maximum timeout value (5 seconds)"), None)
    record = store.get(job_id)
    assert record["status"] == "failed"
    assert record["error"]["type"] == "JobTimeoutException"
    assert record["error"]["message"].startswith("timed out")
    assert "Task exceeded maximum timeout value (5 seconds)" in record["error"]["message"]
