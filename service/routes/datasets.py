from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from service.deps import api_key_header, bearer, owner
from service.inputs import matrix_or_422, parse_csv, parse_npy
from service.problems import PROBLEM_RESPONSES, ProblemError, field_error
from service.schemas import DatasetIdPath, DatasetJSON, DatasetResource

router = APIRouter(prefix="/v1/datasets", tags=["datasets"],
                   dependencies=[Depends(api_key_header), Depends(bearer), Depends(owner)])

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": DatasetJSON.model_json_schema()},
            "text/csv": {"schema": {"type": "string"}},
            "application/x-npy": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {"type": "object", "properties": {
                    "file": {"type": "string", "format": "binary",
                             "description": ".csv, .npy or .json file"}}},
            },
        },
    }
}


def _parse(kind: str, payload: bytes, max_values: int):
    if kind == "json":
        try:
            document = json.loads(payload)
        except ValueError as exc:
            raise field_error(422, "body", f"invalid JSON: {exc}") from None
        except RecursionError:
            raise field_error(422, "body", "JSON nested too deeply; send {\"X\": [[...], ...]}, "
                                           "a list of rows of numbers") from None
        rows = document.get("X") if isinstance(document, dict) else document
        return matrix_or_422(rows, "body.X")
    if kind == "csv":
        return parse_csv(payload.decode("utf-8", errors="replace"))
    return parse_npy(payload, max_values)


def _kind_of(name_or_type: str) -> str | None:
    value = name_or_type.lower()
    for kind, markers in (("json", ("json",)), ("csv", ("csv", "text/plain")),
                          ("npy", ("npy", "octet-stream"))):
        if any(marker in value for marker in markers):
            return kind
    return None


@router.post("", status_code=201, response_model=DatasetResource, responses=PROBLEM_RESPONSES,
             openapi_extra=_UPLOAD_BODY)
async def upload_dataset(request: Request, response: Response,
                         caller: Annotated[str, Depends(owner)]):
    """Upload a matrix once (JSON ``{"X": [[...]]}`` or bare matrix, CSV, ``.npy``, or a
    multipart ``file``); the id is the SHA-256 of its content, so uploads deduplicate."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        form = await request.form()
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise field_error(422, "body.file", "send the matrix as a file field named 'file'")
        kind = _kind_of(upload.filename or "") or _kind_of(upload.content_type or "")
        payload = await upload.read()
    else:
        kind = _kind_of(content_type)
        payload = await request.body()
    if kind is None:
        raise ProblemError(415, "send application/json, text/csv, application/x-npy or a "
                                "multipart file (.json, .csv, .npy)")
    limit = request.app.state.settings.max_points_x_features
    X = _parse(kind, payload, limit)
    if X.size > limit:
        raise field_error(422, "body", f"{X.shape[0]} x {X.shape[1]} = {X.size} values exceed "
                                       f"MMC_MAX_POINTS_X_FEATURES={limit}", "too_many_values")
    description, created = request.app.state.stores.datasets.put(X, owner=caller)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/datasets/{description['id']}"
    return description


@router.get("/{dataset_id}", response_model=DatasetResource, responses=PROBLEM_RESPONSES)
def get_dataset(dataset_id: DatasetIdPath, request: Request,
                caller: Annotated[str, Depends(owner)]):
    description = request.app.state.stores.datasets.describe(dataset_id, caller)
    if description is None:
        raise ProblemError(404, f"dataset {dataset_id} does not exist or has expired")
    return description
