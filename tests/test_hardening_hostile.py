"""Hostile input over HTTP against a private deployment: each case once answered 500 "this is a
bug" (or accepted a job that could only fail) and must now be a 4xx problem+json that says what to
fix, or a 503 with Retry-After when Redis refuses a command."""

from __future__ import annotations

import functools
import io
import json
import struct
import threading

import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import make_blobs

from tests.hardening import Deployment, SharedApi
from tests.helpers import run_job, uploaded_in_parts

PROBLEM = "application/problem+json"
PREDICT_ROWS = 2500


@pytest.fixture(scope="module")
def deployment(service_env, service_workers, tmp_path_factory):
    deployment = SharedApi(tmp_path_factory.mktemp("hostile"), service_env, service_workers, {
        "MMC_RETRY_AFTER_SECONDS": "3", "MMC_MAX_PREDICT_ROWS": str(PREDICT_ROWS)})
    yield deployment
    deployment.close()


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """A deployment whose Redis the tests push into OOM and READONLY, so these tests keep away
    from ``deployment``. It has no worker: its tests only submit, and a worker would die of that
    Redis (a worker-supervision matter)."""
    deployment = Deployment(tmp_path_factory.mktemp("hostile-faults"),
                            {"MMC_RETRY_AFTER_SECONDS": "3"}, workers=0)
    yield deployment
    deployment.close()


def assert_problem(response: httpx.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body = response.json()
    assert body["status"] == status
    for word in words:
        assert word in body["detail"], body
    return body


def strict_json(text: str):
    """JSON as RFC 8259 has it: a bare NaN or Infinity token is an error, not a number."""

    def refuse(token: str):
        raise AssertionError(f"invalid JSON token {token} in {text[:300]}")

    return json.loads(text, parse_constant=refuse)


def blobs_job(**params) -> dict:
    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    return {"algorithm": {"name": "itersvr", "params": {"random_state": 0, **params}},
            "data": {"X": X.tolist()}}


def huge_npy_header(shape: tuple[int, ...]) -> bytes:
    """A valid .npy header claiming ``shape`` of float64, followed by 8 bytes of data."""
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (117 - len(header)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 8


# -- the five 500s ---------------------------------------------------------------------------------


def test_deeply_nested_json_dataset_is_422(deployment):
    body = "[" * 100_000 + "]" * 100_000
    response = httpx.post(f"{deployment.url}/v1/datasets", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    assert_problem(response, 422, "nested")


def test_deeply_nested_json_job_is_422(deployment):
    body = '{"algorithm": {"name": "itersvr"}, "data": {"X": ' + "[" * 100_000 + "]" * 100_000
    body += "}}"
    response = httpx.post(f"{deployment.url}/v1/jobs", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    assert_problem(response, 422, "nested")


def test_csv_field_over_the_csv_module_limit_is_422(deployment):
    body = "1," + "2" * 200_000 + "\n3,4\n"
    response = httpx.post(f"{deployment.url}/v1/datasets", content=body,
                          headers={"content-type": "text/csv"}, timeout=30)
    assert_problem(response, 422, "CSV")


def test_npy_header_claiming_a_huge_shape_is_422(deployment):
    payload = huge_npy_header((100_000_000, 1_000_000))
    assert len(payload) == 136
    response = httpx.post(f"{deployment.url}/v1/datasets", content=payload,
                          headers={"content-type": "application/x-npy"}, timeout=30)
    assert_problem(response, 422, "shape")


def test_npy_header_whose_data_is_short_is_422(deployment):
    payload = huge_npy_header((1000, 10))
    response = httpx.post(f"{deployment.url}/v1/datasets", content=payload,
                          headers={"content-type": "application/x-npy"}, timeout=30)
    assert_problem(response, 422)


def test_a_real_npy_upload_still_works(deployment):
    buffer = io.BytesIO()
    np.save(buffer, np.arange(12, dtype=np.float64).reshape(4, 3))
    response = httpx.post(f"{deployment.url}/v1/datasets", content=buffer.getvalue(),
                          headers={"content-type": "application/x-npy"}, timeout=30)
    assert response.status_code in (200, 201), response.text
    assert response.json()["n_samples"] == 4


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("suffix", [":input", ":alive", "x", "%3Ainput"])
def test_job_ids_are_checked_before_they_reach_redis(deployment, method, suffix):
    job = httpx.post(f"{deployment.url}/v1/jobs", json=blobs_job(), timeout=30).json()
    response = httpx.request(method, f"{deployment.url}/v1/jobs/{job['id']}{suffix}", timeout=30)
    assert_problem(response, 422, "32 hexadecimal")


@pytest.mark.parametrize("path", ["/v1/models/{id}:x", "/v1/models/{id}:x/export",
                                  "/v1/datasets/{id}:x", "/v1/jobs/{id}:input/result"])
def test_model_and_dataset_ids_are_checked_too(deployment, path):
    response = httpx.get(deployment.url + path.format(id="0" * 32), timeout=30)
    assert_problem(response, 422, "hexadecimal")
    response = httpx.post(f"{deployment.url}/v1/models/{'0' * 32}:x/predict",
                          json={"X": [[1.0]]}, timeout=30)
    assert_problem(response, 422, "hexadecimal")


def test_redis_out_of_memory_is_503_with_retry_after(faulty):
    redis = Redis.from_url(faulty.redis_url)
    redis.config_set("maxmemory-policy", "noeviction")
    redis.config_set("maxmemory", "1")
    try:
        response = httpx.post(f"{faulty.url}/v1/jobs", json=blobs_job(), timeout=30)
        assert_problem(response, 503, "Redis")
        assert response.headers["retry-after"] == "3"
    finally:
        redis.config_set("maxmemory", "0")


def test_redis_read_only_is_503_with_retry_after(faulty):
    redis = Redis.from_url(faulty.redis_url)
    # A replica of an address nobody serves: Redis answers writes with READONLY.
    redis.execute_command("REPLICAOF", "127.0.0.1", "1")
    try:
        response = httpx.post(f"{faulty.url}/v1/jobs", json=blobs_job(), timeout=30)
        assert_problem(response, 503, "Redis")
        assert response.headers["retry-after"] == "3"
    finally:
        redis.execute_command("REPLICAOF", "NO", "ONE")
    response = httpx.post(f"{faulty.url}/v1/jobs", json=blobs_job(), timeout=30)
    assert response.status_code == 202, response.text


# -- parameters: finite and in range --------------------------------------------------------------


@pytest.mark.parametrize("gamma", ["1e400", "-1e400", "NaN", "0", "-1.5", "Infinity"])
def test_gamma_must_be_finite_and_positive(deployment, gamma):
    body = ('{"algorithm": {"name": "itersvr", "params": {"gamma": ' + gamma + '}}, '
            '"data": {"X": [[0, 0], [1, 1], [2, 2], [3, 3]]}}')
    response = httpx.post(f"{deployment.url}/v1/jobs", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    problem = assert_problem(response, 422)
    assert any("gamma" in error["field"] for error in problem["errors"]), problem
    strict_json(response.text)


def test_finite_gamma_is_accepted_and_shown(deployment):
    response = httpx.post(f"{deployment.url}/v1/jobs", json=blobs_job(gamma=0.5), timeout=30)
    assert response.status_code == 202, response.text
    assert response.json()["algorithm"]["params"]["gamma"] == 0.5


@pytest.mark.parametrize("number", ["1e400", "NaN", "-Infinity"])
def test_non_finite_numbers_in_data_are_422(deployment, number):
    body = ('{"algorithm": {"name": "itersvr"}, '
            '"data": {"X": [[0, 0], [1, 1], [2, 2], [3, ' + number + ']]}}')
    response = httpx.post(f"{deployment.url}/v1/jobs", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    assert_problem(response, 422)


# -- idempotency under concurrency ----------------------------------------------------------------


def test_concurrent_posts_with_one_idempotency_key_never_404(deployment):
    X = np.random.default_rng(0).normal(size=(8000, 10)).round(6)
    payload = {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
               "data": {"X": X.tolist()}}
    for round_ in range(6):
        answers: list[httpx.Response] = []

        def post(key=f"race-{round_}", answers=answers):
            answers.append(httpx.post(f"{deployment.url}/v1/jobs", json=payload, timeout=60,
                                      headers={"Idempotency-Key": key}))

        threads = [threading.Thread(target=post) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [202, 202], [a.text for a in answers]
        assert len({answer.json()["id"] for answer in answers}) == 1
        replayed = [answer.headers.get("idempotent-replayed") for answer in answers]
        assert sorted(map(str, replayed)) == ["None", "true"], replayed
        # 8,000 points are minutes of work for the module's one worker: cancel it.
        httpx.delete(f"{deployment.url}/v1/jobs/{answers[0].json()['id']}", timeout=30)


@pytest.mark.parametrize("broken_key", ["mmc:jobs:anonymous", "rq:queues"])
def test_a_redis_error_while_creating_releases_the_idempotency_key(faulty, broken_key):
    """A key of the wrong type makes Redis fail the job's creation (the owner index) or its
    enqueueing (RQ's queue set), after the key would be claimed."""
    redis = Redis.from_url(faulty.redis_url)
    payload = blobs_job(random_state=7)
    key = f"released-{broken_key}"
    saved = redis.dump(broken_key)
    redis.delete(broken_key)
    redis.set(broken_key, "not a set")
    try:
        response = httpx.post(f"{faulty.url}/v1/jobs", json=payload, timeout=30,
                              headers={"Idempotency-Key": key})
        assert_problem(response, 503, "Redis")
    finally:
        redis.delete(broken_key)
        if saved is not None:
            redis.restore(broken_key, 0, saved)
    response = httpx.post(f"{faulty.url}/v1/jobs", json=payload, timeout=30,
                          headers={"Idempotency-Key": key})
    assert response.status_code == 202, response.text
    assert "idempotent-replayed" not in response.headers
    again = httpx.post(f"{faulty.url}/v1/jobs", json=payload, timeout=30,
                       headers={"Idempotency-Key": key})
    assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == response.json()["id"]


# -- predict: bounded, block by block --------------------------------------------------------------


def test_predict_is_bounded_by_rows_and_evaluated_in_blocks(deployment):
    X, _ = make_blobs(n_samples=60, centers=3, random_state=1)
    result = run_job(deployment.url, {"algorithm": {"name": "itersvr", "params": {
        "n_clusters": 3, "random_state": 0}}, "data": {"X": X.tolist()}})
    url = f"{deployment.url}/v1/models/{result['model_id']}/predict"
    new = np.random.default_rng(2).normal(scale=5, size=(PREDICT_ROWS, 2))
    whole = httpx.post(url, json={"X": new.tolist()}, timeout=60)
    assert whole.status_code == 200, whole.text
    assert len(whole.json()["labels"]) == PREDICT_ROWS
    # Several blocks (1,024 rows each) label exactly as requests of a few rows do.
    pieces = [httpx.post(url, json={"X": new[i:i + 500].tolist()}, timeout=60).json()
              for i in range(0, PREDICT_ROWS, 500)]
    assert whole.json()["labels"] == [label for p in pieces for label in p["labels"]]
    assert np.allclose(whole.json()["decision_values"],
                       [value for p in pieces for value in p["decision_values"]])
    too_many = np.vstack([new, new[:1]])
    response = httpx.post(url, json={"X": too_many.tolist()}, timeout=60)
    assert_problem(response, 422, "MMC_MAX_PREDICT_ROWS")


# -- /v1/algorithms reports the limits a job with the default parameters gets ----------------------


@functools.cache
def uploaded_rows(url: str, n: int) -> str:
    """The id of an uploaded n x 1 float32 matrix, sent in parts (n goes up to the largest
    max_n)."""
    X = np.random.default_rng(0).normal(size=(n, 1)).round(3).astype(np.float32)
    return uploaded_in_parts(url, X, 16 * 2**20)


def test_described_limits_are_those_of_the_default_parameters(deployment):
    described = httpx.get(f"{deployment.url}/v1/algorithms", timeout=30).json()
    assert {d["name"]: d["max_n"] for d in described}["robust_svm"] == 1000
    for algorithm in described:
        name, max_n = algorithm["name"], algorithm["max_n"]
        assert algorithm["limits_rule"], name
        rng = np.random.default_rng(0)
        if algorithm["input_kind"] == "sequences":
            data = {"sequences": [[int(v) for v in rng.integers(0, 3, size=max_n + 1)]]}
        else:  # max_n + 1 rows, sent as .npy parts rather than as JSON
            data = {"dataset_id": uploaded_rows(deployment.url, max_n + 1)}
        response = httpx.post(f"{deployment.url}/v1/jobs", timeout=60, json={
            "algorithm": {"name": name}, "data": data})
        assert_problem(response, 422, f"max_n={max_n} ")
        small = {"sequences": [[0, 1, 2, 1, 0, 2]] * 3} if "sequences" in data else {
            "X": rng.normal(size=(12, 2)).tolist()}
        if algorithm["labels"] == "required":
            small["y"] = [0, 1] * 6
        job = httpx.post(f"{deployment.url}/v1/jobs", timeout=60, json={
            "algorithm": {"name": name}, "data": small})
        assert job.status_code == 202, job.text
        assert job.json()["queue"] == algorithm["queue"], name
        httpx.delete(f"{deployment.url}/v1/jobs/{job.json()['id']}", timeout=30)


@pytest.mark.parametrize("offset", ["5490233989231703194895122432", "-1", "2147483648"])
def test_a_page_offset_beyond_the_store_is_422(deployment, offset):
    # Found by schemathesis' stateful phase: Redis refused the index and the API answered 503.
    response = httpx.get(f"{deployment.url}/v1/jobs", params={"offset": offset}, timeout=30)
    assert_problem(response, 422)
    assert response.json()["errors"][0]["field"] == "query.offset"


# -- found by a fuzzing pass: 500s, and jobs accepted that could only fail -------------------------


def post_json(deployment, path: str, body: str | dict) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(f"{deployment.url}{path}", content=content,
                      headers={"content-type": "application/json"}, timeout=30)


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/datasets"])
def test_an_integer_literal_beyond_python_s_digit_cap_is_422(deployment, path):
    huge = "1" + "0" * 5000  # int() refuses more than 4,300 digits: this was a 500
    rows = f"[[{huge}, 1], [2, 3], [4, 5]]"
    body = ('{"algorithm": {"name": "itersvr"}, "data": {"X": ' + rows + "}}"
            if path == "/v1/jobs" else '{"X": ' + rows + "}")
    assert_problem(post_json(deployment, path, body), 422, "4,300 digits")


def test_npy_header_with_a_syntax_error_is_422(deployment):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, }"
    header += " " * (117 - len(header)) + "\n"
    payload = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    response = httpx.post(f"{deployment.url}/v1/datasets", content=payload + b"\0" * 48,
                          headers={"content-type": "application/x-npy"}, timeout=30)
    assert_problem(response, 422, "not a readable .npy")


@pytest.mark.parametrize("name", ["itersvr", "svc"])
def test_values_whose_squares_overflow_are_422_at_submit_and_at_predict(deployment, name):
    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    job = {"algorithm": {"name": name, "params": {"random_state": 0}},
           "data": {"X": (X * 1e200).tolist()}}
    assert_problem(post_json(deployment, "/v1/jobs", job), 422, "magnitude", "rescale")
    job["data"]["X"] = X.tolist()
    result = run_job(deployment.url, job)
    response = post_json(deployment, f"/v1/models/{result['model_id']}/predict",
                         {"X": [[1e200, 1.0]]})  # svc's neighbour search answered 500
    assert_problem(response, 422, "magnitude")


def test_m3n_symbols_are_bounded_at_submit_and_at_predict(deployment):
    sequences = [[0, 1, 1, 0, 1], [1, 0, 0, 1]]
    job = {"algorithm": {"name": "m3n", "params": {"random_state": 0}},
           "data": {"sequences": [[0, 1, 10**9, 0]] * 2}}  # asked a worker for 15 GB
    assert_problem(post_json(deployment, "/v1/jobs", job), 422, "999,999", "re-index")
    job["data"]["sequences"] = [[0]]  # one position, two states
    assert_problem(post_json(deployment, "/v1/jobs", job), 422, "fewer than n_states=2")
    job["data"]["sequences"] = sequences
    result = run_job(deployment.url, job)
    url = f"/v1/models/{result['model_id']}/predict"
    for symbol in (2**63, 10**30):  # an OverflowError (500) before
        body = '{"sequences": [[0, ' + str(symbol) + ", 1]]}"
        assert_problem(post_json(deployment, url, body), 422)


@pytest.mark.parametrize(("name", "params", "y", "words"), [
    ("sdp_mmc", {}, [5] + [-1] * 29, ("-1 (unknown) or 0..1", "[5]")),
    ("sdp_mmc", {}, [2**63] + [-1] * 29, ("from -9223372036854775808",)),
    ("robust_svm", {}, [0] * 10 + [1] * 10 + [2] * 10, ("exactly two classes, got 3",)),
    ("sdp_mmc", {"class_balance": 0.0}, [0] * 25 + [1] * 5, ("25 of 30 points in cluster 0",)),
    ("sdp_mmc", {"n_clusters": 3, "multiclass": "joint"}, [2] * 20 + [-1] * 10,
     ("more than size_band=0.1 allows (13.0)",)),  # SCS "infeasible" in the worker before
])
def test_labels_a_worker_could_only_fail_on_are_422(deployment, name, params, y, words):
    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    job = {"algorithm": {"name": name, "params": params}, "data": {"X": X.tolist(), "y": y}}
    body = assert_problem(post_json(deployment, "/v1/jobs", job), 422, *words)
    assert body["errors"][0]["field"] == "body.data.y"


def test_svc_with_c_below_one_over_n_is_422(deployment):
    X, _ = make_blobs(n_samples=60, centers=2, random_state=0)
    job = {"algorithm": {"name": "svc", "params": {"C": 1e-9}}, "data": {"X": X.tolist()}}
    assert_problem(post_json(deployment, "/v1/jobs", job), 422, "below 1/N")


@pytest.mark.parametrize(("body", "rows"), [
    ("\ufeff1,2\n3,4\n", 2),  # a byte order mark and no header: the first row was dropped
    ("\ufeffx,y\n1,2\n3,4\n", 2),
    ('"a","b"\n1,2\n3,4\n', 2),
])
def test_csv_keeps_every_row_of_numbers(deployment, body, rows):
    response = httpx.post(f"{deployment.url}/v1/datasets", content=body.encode(),
                          headers={"content-type": "text/csv"}, timeout=30)
    assert response.status_code in (200, 201), response.text
    assert response.json()["n_samples"] == rows


@pytest.mark.parametrize(("body", "words"), [
    ("1,,2\n3,4,5\n", ("numbers only",)),  # a gap in the first row: not a header
    ("0x10,2\n3,4\n", ("0x10",)),
    ('"1,2\n3,4\n', ("could not be read",)),  # an unterminated quote, not "is empty"
])
def test_csv_rows_mixing_numbers_and_text_are_422_not_dropped(deployment, body, words):
    response = httpx.post(f"{deployment.url}/v1/datasets", content=body.encode(),
                          headers={"content-type": "text/csv"}, timeout=30)
    assert_problem(response, 422, *words)


def test_a_json_body_may_start_with_a_byte_order_mark(deployment):
    body = "\ufeff" + json.dumps({"X": [[0.0, 1.0], [2.0, 3.0]]})
    response = httpx.post(f"{deployment.url}/v1/datasets", content=body.encode(),
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code in (200, 201), response.text


def test_m3n_exact_on_too_few_pairs_is_422_not_an_infeasible_job(deployment):
    # One adjacent pair: a row of N holds its diagonal 1, but the pair balance allows row sums
    # up to (1/4 + 0.3) x 1, so the SDP is infeasible: the request is refused before a job
    # could fail with a solver's bare "infeasible".
    job = {"algorithm": {"name": "m3n", "params": {"method": "exact"}},
           "data": {"sequences": [[0, 1]]}}
    assert_problem(post_json(deployment, "/v1/jobs", job), 422, "pair_size_band",
                   "method='alternating'")


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/datasets"])
def test_numbers_in_quotes_are_422_as_the_readme_says_strings_are(deployment, path):
    rows = '[[0, 0], [1, 1], [2, 2], ["3", "3.5"]]'  # numpy parsed them as numbers: a 202
    body = ('{"algorithm": {"name": "itersvr"}, "data": {"X": ' + rows + "}}"
            if path == "/v1/jobs" else '{"X": ' + rows + "}")
    problem = assert_problem(post_json(deployment, path, body), 422, "valid number")
    assert problem["errors"][0]["field"].endswith("X.3.0")


def test_gmmc_paper_widths_on_two_points_are_422(deployment):
    job = {"algorithm": {"name": "gmmc", "params": {"gamma": "paper"}},
           "data": {"X": [[0.0, 0.0], [1.0, 1.0]]}}
    assert_problem(post_json(deployment, "/v1/jobs", job), 422, "at least 3 points")


def test_an_empty_idempotency_key_is_422_not_a_key_for_a_day(deployment):
    response = httpx.post(f"{deployment.url}/v1/jobs", json=blobs_job(),
                          headers={"Idempotency-Key": ""}, timeout=30)
    assert_problem(response, 422)
