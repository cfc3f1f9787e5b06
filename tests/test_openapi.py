"""The committed OpenAPI document is the app's: regenerate it with `make openapi`."""

from __future__ import annotations

import json

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
