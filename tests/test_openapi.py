"""The committed OpenAPI document is the app's: regenerate it with `make openapi`."""

from __future__ import annotations

import json

from algorithms.registry import REGISTRY
from service.openapi_export import OPENAPI_PATH, current_openapi


def test_committed_openapi_json_is_current():
    committed = json.loads(OPENAPI_PATH.read_text(encoding="utf-8"))
    current = json.loads(json.dumps(current_openapi()))
    assert committed == current, "openapi/openapi.json is stale: run `make openapi` and commit it"


def test_openapi_documents_every_route_and_problem_responses():
    document = current_openapi()
    paths = document["paths"]
    for path in ("/v1/algorithms", "/v1/datasets", "/v1/jobs", "/v1/jobs/{job_id}",
                 "/v1/jobs/{job_id}/result", "/v1/jobs/{job_id}/plot",
                 "/v1/jobs/{job_id}/labels.csv", "/v1/models/{model_id}",
                 "/v1/models/{model_id}/export", "/v1/models/{model_id}/predict",
                 "/healthz", "/readyz", "/metrics"):
        assert path in paths, path
    create = paths["/v1/jobs"]["post"]
    assert "application/problem+json" in create["responses"]["422"]["content"]
    assert "409" in create["responses"]


def test_reference_shows_a_request_for_every_algorithm_and_an_example_of_every_problem():
    document = current_openapi()
    create = document["paths"]["/v1/jobs"]["post"]
    examples = create["requestBody"]["content"]["application/json"]["examples"]
    shown = {example["value"]["algorithm"]["name"] for example in examples.values()}
    assert shown == set(REGISTRY)
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                problem = response.get("content", {}).get("application/problem+json")
                if problem is not None:
                    assert problem["example"]["status"] == int(status), (method, path, status)
