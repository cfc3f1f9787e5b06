"""The two ways service.json_body reads a request body agree: a small well-formed body parsed in
one call gives the same model and matrix as the windowed walk, and every body the one-call path
declines is judged by the walk, so each bad body gets the walk's 422 whatever its size."""

from __future__ import annotations

import json

import numpy as np
import pytest

from algorithms.registry import REGISTRY
from service import json_body
from service.problems import ProblemError
from service.schemas import PredictRequest, build_job_request_model

JOB = build_job_request_model(REGISTRY)
JOB_MATRIX = (("data", "X"),)
PREDICT_MATRIX = (("X",),)


def job(X, **params) -> bytes:
    return json.dumps({"algorithm": {"name": "itersvr", "params": params},
                       "data": {"X": X}}).encode()


def raw_job(x_text: str) -> bytes:
    return b'{"algorithm": {"name": "itersvr", "params": {}}, "data": {"X": ' + \
        x_text.encode() + b"}}"


def deep(levels: int) -> bytes:
    return (b'{"algorithm": {"name": "itersvr", "params": {}}, "data": {"X": [[1, 2], [3, 4]]},'
            b' "extra": ' + b"[" * levels + b"]" * levels + b"}")


WELL_FORMED = {
    "floats": job([[0.0, 0.1], [5.0, 5.2], [0.3, 0.1]]),
    "integers": job([[0, 1], [5, 6], [1, 0]]),
    "boolean parameter beside numbers": job([[0.0, 1.0], [2.0, 3.0]], scale=True),
    "whitespace": b' {"algorithm" : {"name":"itersvr","params":{}} ,\n"data":{"X":[[1,2]]}} ',
    "duplicate key, the last wins": raw_job('[[1, 2]], "X": [[3, 4], [5, 6]]'),
    "empty rows": raw_job("[[], []]"),
}

DECLINED = {
    "NaN": raw_job("[[NaN, 1]]"),
    "Infinity": raw_job("[[1, -Infinity]]"),
    "1e400 reads as infinity": raw_job("[[1e400, 1]]"),
    "true among numbers": raw_job("[[1, true], [2, 3]]"),
    "number as a string": raw_job('[[1, "1.5"]]'),
    "null": raw_job("[[1, null]]"),
    "ragged rows": raw_job("[[1, 2], [3]]"),
    "rows of rows": raw_job("[[[1], [2]]]"),
    "a row that is a number": raw_job("[1, 2]"),
    "an integer past float64": raw_job("[[" + "9" * 400 + ", 1]]"),
    "nested past the limit": deep(70),
    "byte order mark": b"\xef\xbb\xbf" + job([[1.0, 2.0], [3.0, 4.0]]),
    "not UTF-8": raw_job("[[1, 2]]").replace(b"itersvr", b"iter\xffsvr"),
    "lone surrogate": raw_job("[[1, 2]]").replace(b"itersvr", b"\\ud800"),
    "trailing data": job([[1.0, 2.0]]) + b" {}",
    "truncated": job([[1.0, 2.0]])[:-3],
    "an array, not an object": b"[[1, 2]]",
}

EITHER = {
    "empty matrix": raw_job("[]"),
    "matrix is an object": raw_job('{"a": 1}'),
    "unknown algorithm": job([[1.0, 2.0]]).replace(b"itersvr", b"nope"),
    "nested within the limit": deep(40),
}


def outcome(parse, payload: bytes, model=JOB, matrices=JOB_MATRIX):
    """What a parser makes of ``payload``: the model's fields and its matrices, or the 422."""
    try:
        parsed = parse(bytearray(payload), model, matrices)
    except ProblemError as exc:
        return "problem", exc.status, exc.detail, exc.errors
    arrays = []
    for path in matrices:
        target = parsed
        for key in path:
            target = getattr(target, key)
        arrays.append(None if target is None else np.asarray(target).tolist())
    return "parsed", repr(parsed.model_dump(exclude={"data": {"X"}, "X": True})), arrays


@pytest.mark.parametrize("payload", [*WELL_FORMED.values(), *DECLINED.values(), *EITHER.values()],
                         ids=[*WELL_FORMED, *DECLINED, *EITHER])
def test_both_paths_give_the_same_answer(payload):
    assert outcome(json_body.parse_model, payload) == outcome(json_body._walk, payload)


@pytest.mark.parametrize("payload", WELL_FORMED.values(), ids=WELL_FORMED)
def test_well_formed_small_bodies_take_the_one_call_path(payload):
    assert json_body._parse_small(bytearray(payload), JOB_MATRIX) is not None


@pytest.mark.parametrize("payload", DECLINED.values(), ids=DECLINED)
def test_bodies_the_walk_must_judge_are_declined(payload):
    assert json_body._parse_small(bytearray(payload), JOB_MATRIX) is None


def test_a_predict_body_reads_the_same_on_both_paths():
    payload = json.dumps({"X": [[0.5, 1.0], [2, 3]]}).encode()
    assert json_body._parse_small(bytearray(payload), PREDICT_MATRIX) is not None
    fast = outcome(json_body.parse_model, payload, PredictRequest, PREDICT_MATRIX)
    assert fast == outcome(json_body._walk, payload, PredictRequest, PREDICT_MATRIX)
    assert fast[2] == [[[0.5, 1.0], [2.0, 3.0]]]


def test_a_body_past_the_small_size_is_walked(monkeypatch):
    payload = job(np.arange(40.0).reshape(20, 2).tolist())
    monkeypatch.setattr(json_body, "SMALL_BODY_BYTES", len(payload) - 1)
    monkeypatch.setattr(json_body, "_parse_small", lambda *args: pytest.fail("not walked"))
    assert outcome(json_body.parse_model, payload)[0] == "parsed"
