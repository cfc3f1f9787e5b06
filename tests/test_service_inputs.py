"""Input rules the schema cannot express, driven by the registry's spec fields, and API keys.

The specs below are built from registered estimators with other capabilities (labels required or
optional, sequence input) so the rules are pinned before such algorithms land in the registry.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from sklearn.datasets import make_blobs

from algorithms.registry import REGISTRY, Limit
from core.settings import Settings
from service.app import create_app
from service.inputs import prepare_job_input
from service.problems import ProblemError

BASE = REGISTRY["itersvr"]
PARAMS = BASE.parse_params({})
POINTS = [[0.0, 0.0], [0.0, 1.0], [5.0, 5.0], [5.0, 6.0]]


def data(**fields):
    return SimpleNamespace(**{"X": None, "dataset_id": None, "y": None, "sequences": None,
                              **fields})


def refused(spec, payload, *needles):
    with pytest.raises(ProblemError) as caught:
        prepare_job_input(spec, PARAMS, payload, lambda _id: None)
    assert caught.value.status == 422
    for needle in needles:
        assert needle in caught.value.detail, caught.value.detail
    return caught.value


def test_required_labels_must_be_present_and_hold_two_classes():
    spec = dataclasses.replace(BASE, labels="required")
    refused(spec, data(X=POINTS), "needs labels")
    refused(spec, data(X=POINTS, y=[1, 1, 1, 1]), "two classes")
    refused(spec, data(X=POINTS, y=[0, 1]), "2 labels for 4 points")
    assert prepare_job_input(spec, PARAMS, data(X=POINTS, y=[0, 0, 1, 1]), None).y == [0, 0, 1, 1]


def test_optional_labels_may_be_partial_or_absent():
    spec = dataclasses.replace(BASE, labels="optional")
    assert prepare_job_input(spec, PARAMS, data(X=POINTS), None).y is None
    partial = [0, -1, -1, 1]
    assert prepare_job_input(spec, PARAMS, data(X=POINTS, y=partial), None).y == partial


def test_sequence_algorithms_take_sequences_only():
    spec = dataclasses.replace(BASE, input_kind="sequences")
    refused(spec, data(X=POINTS), "takes data.sequences")
    refused(spec, data(sequences=[]), "required")
    refused(spec, data(sequences=[[0, 1], []]), "sequences.1")
    prepared = prepare_job_input(spec, PARAMS, data(sequences=[[0, 1, 1], [1, 0]]), None)
    assert prepared.n_samples == 2 and prepared.sequences == [[0, 1, 1], [1, 0]]


def test_size_limit_names_the_alternative_from_the_spec_notes():
    spec = dataclasses.replace(BASE, limits=(Limit(3),),
                               notes={"alternative": "use cpm3c for large n"})
    problem = refused(spec, data(X=POINTS), "max_n=3", "use cpm3c for large n")
    assert problem.errors[0]["type"] == "too_many_points"


def test_queue_and_limit_follow_the_spec_rules():
    spec = dataclasses.replace(BASE, limits=(Limit(2, "slow"),))
    assert spec.queue_for(PARAMS) == "slow"
    refused(spec, data(X=POINTS), "max_n=2")


def test_api_keys_guard_v1_and_scope_jobs_to_their_key(redis_url):
    # A database no worker serves: the job stays queued until the test cancels it (a worker
    # would finish a 20-point job in milliseconds).
    idle = redis_url.rsplit("/", 1)[0] + "/15"
    app = create_app(Settings(redis_url=idle, api_keys="alpha,beta"), redis=Redis.from_url(idle))
    X, _ = make_blobs(n_samples=20, centers=2, random_state=0)
    payload = {"algorithm": {"name": "itersvr"}, "data": {"X": X.tolist()}}
    with TestClient(app) as client:
        missing = client.post("/v1/jobs", json=payload)
        assert missing.status_code == 401
        assert missing.headers["content-type"].startswith("application/problem+json")
        assert client.get("/v1/jobs", headers={"X-API-Key": "wrong"}).status_code == 401
        created = client.post("/v1/jobs", json=payload, headers={"X-API-Key": "alpha"})
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        assert client.get(f"/v1/jobs/{job_id}",
                          headers={"Authorization": "Bearer alpha"}).status_code == 200
        assert client.get(f"/v1/jobs/{job_id}", headers={"X-API-Key": "beta"}).status_code == 404
        assert client.delete(f"/v1/jobs/{job_id}", headers={"X-API-Key": "alpha"}).json()[
            "status"] == "canceled"
        assert client.get("/healthz").status_code == 200  # health needs no key


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({}, "must be a matrix"),  # found by schemathesis: {"X": {}} on /v1/datasets was a 500
        ("text", "must be a matrix"),
        ([[{}]], "not 'dict'"),
        ([], "is empty"),
    ],
)
def test_matrix_that_is_not_a_list_of_rows_of_numbers_is_a_422(bad, needle):
    refused(BASE, data(X=bad), needle)
