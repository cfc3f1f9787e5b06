from __future__ import annotations

import json
import logging
from pathlib import PurePath
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from starlette.concurrency import run_in_threadpool

from core.dataset_urls import DataURLError, check_allowed, describe_object, parse_data_url
from core.records import iso_time
from core.settings import Settings
from core.stores import Stores, UploadError, UploadStore
from service.deps import (
    AppMetrics,
    AppSettings,
    AppStores,
    Caller,
    api_key_header,
    bearer,
    owner,
)
from service.inputs import matrix_or_422, parse_csv, parse_npy
from service.json_body import (
    is_json_media_type,
    media_type,
    parse_matrix,
    parse_model,
    read_payload,
)
from service.problems import ProblemError, field_error, header, links, problem_responses
from service.schemas import (
    DatasetIdPath,
    DatasetJSON,
    DatasetResource,
    DatasetURL,
    UploadIdPath,
    UploadResource,
)

log = logging.getLogger("service.audit")

router = APIRouter(prefix="/v1/datasets", tags=["datasets"],
                   dependencies=[Depends(api_key_header), Depends(bearer), Depends(owner)])

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"anyOf": [DatasetJSON.model_json_schema(),
                                                      DatasetURL.model_json_schema()]},
                                 "examples": {
                "object": {"summary": "Rows of numbers under X",
                           "value": {"X": [[0.0, 0.1], [0.2, 0.0], [5.0, 5.1], [5.2, 4.9]]}},
                "matrix": {"summary": "A bare matrix",
                           "value": [[0.0, 0.1], [0.2, 0.0], [5.0, 5.1], [5.2, 4.9]]},
                "url": {"summary": "An object in S3, read where it is (MMC_DATA_URL_ALLOW)",
                        "value": {"url": "s3://datasets/team-a/points.parquet",
                                  "columns": ["x", "y"]}}}},
            "text/csv": {"schema": {"type": "string"}, "examples": {
                "csv": {"summary": "One row per line, an optional header",
                        "value": "x,y\n0.0,0.1\n0.2,0.0\n5.0,5.1\n5.2,4.9\n"}}},
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
        # Row by row into float64 (service.json_body): no Python float per number.
        return matrix_or_422(parse_matrix(payload, DatasetJSON), "body.X")
    if kind == "csv":
        return parse_csv(payload.decode("utf-8", errors="replace"))
    return parse_npy(payload, max_values)


def _matrix(limit: int, kind: str, payload: bytes):
    """The matrix of a body of ``kind``, of at most ``limit`` values (MMC_MAX_POINTS_X_FEATURES)."""
    X = _parse(kind, payload, limit)
    if X.size > limit:
        raise field_error(422, "body", f"{X.shape[0]} x {X.shape[1]} = {X.size} values exceed "
                                       f"MMC_MAX_POINTS_X_FEATURES={limit}", "too_many_values")
    return X


def _store(stores: Stores, limit: int, kind: str, payload: bytes, caller: str
           ) -> tuple[dict, bool]:
    X = _matrix(limit, kind, payload)
    del payload
    return stores.datasets.put(X, owner=caller)


# What an upload is, by its file name's suffix or by its media type (the part before any ";"
# parameters, compared whole: a substring test read "sales_json.npy" as JSON).
_KIND_OF_SUFFIX = {".json": "json", ".csv": "csv", ".txt": "csv", ".npy": "npy"}
_KIND_OF_MEDIA_TYPE = {"application/json": "json", "text/json": "json", "text/csv": "csv",
                       "application/csv": "csv", "text/plain": "csv",
                       "application/x-npy": "npy", "application/npy": "npy",
                       "application/octet-stream": "npy"}


def _kind_of_media_type(content_type: str) -> str | None:
    media = media_type(content_type)
    return _KIND_OF_MEDIA_TYPE.get(media) or ("json" if is_json_media_type(media) else None)


def _kind_of_file_name(name: str) -> str | None:
    return _KIND_OF_SUFFIX.get(PurePath(name).suffix.lower())


_LOCATION = {"Location": header("Path of the dataset, /v1/datasets/{id}.")}
_LINKS = links("dataset_id", "$response.body#/id", "get_dataset")


@router.post("", status_code=201, response_model=DatasetResource, openapi_extra=_UPLOAD_BODY,
             responses={
                 201: {"description": "Stored.", "headers": _LOCATION, "links": _LINKS},
                 200: {"description": "Already stored by this tenant (same content): its "
                                      "lifetime is renewed.", "model": DatasetResource,
                       "headers": _LOCATION, "links": _LINKS},
                 **problem_responses(403, 413, 415, 422)})
async def upload_dataset(request: Request, response: Response, stores: AppStores,
                         settings: AppSettings, caller: Caller):
    """Upload a matrix once (JSON ``{"X": [[...]]}`` or bare matrix, CSV, ``.npy``, or a
    multipart ``file``); the id is the SHA-256 of its content, so uploads deduplicate. A matrix
    larger than one request body goes up in parts (``POST /v1/datasets/uploads``).

    Or name an object in S3, ``{"url": "s3://bucket/key.parquet"}`` (``.npy``, ``.npz``,
    ``.parquet``, ``.csv``), inside the buckets and prefixes the operator allowed
    (``MMC_DATA_URL_ALLOW``; others are a 403): the API reads only its shape and the workers
    read its values where it is. Its id names the object's version (ETag)."""
    kind, payload = await _body(request)
    reference = _url_request(kind, payload)
    if reference is not None:
        description, created = await run_in_threadpool(
            _register_url, stores, settings, reference, caller)
        return _dataset_answer(response, description, created)
    # Parsing, hashing and storing are CPU and Redis work: off the event loop.
    description, created = await run_in_threadpool(
        _store, stores, settings.max_points_x_features, kind, payload, caller)
    return _dataset_answer(response, description, created)


def _url_request(kind: str, payload: bytes) -> DatasetURL | None:
    """The body as a dataset by URL when it is a JSON object naming ``url``; else None (a
    matrix to upload)."""
    if kind != "json" or len(payload) > 64 * 1024 or payload[:64].lstrip()[:1] != b"{":
        return None
    try:
        document = json.loads(payload)
    except ValueError:
        return None  # the matrix parser says what is wrong with it
    if not isinstance(document, dict) or "url" not in document:
        return None
    return parse_model(payload, DatasetURL, ())  # type: ignore[return-value]


def _register_url(stores: Stores, settings: Settings, reference: DatasetURL, caller: str
                  ) -> tuple[dict, bool]:
    """Check the URL against the allow-list (before any call to the store), read the object's
    shape, and record it as the caller's dataset."""
    try:
        data_url = parse_data_url(reference.url)
        check_allowed(data_url, settings.data_url_allow)
        source = describe_object(settings, data_url, reference.columns)
    except DataURLError as problem:
        if problem.status == 403:
            log.info("dataset URL refused: tenant=%s url=%s", caller, reference.url)
            raise ProblemError(403, str(problem)) from None
        raise field_error(problem.status, "body.url", str(problem), problem.code) from None
    stored = stores.datasets.put_reference(source, owner=caller)
    log.info("dataset by URL recorded: tenant=%s id=%s url=%s", caller, stored[0]["id"],
             data_url.url)
    return stored


def _dataset_answer(response: Response, description: dict, created: bool) -> dict:
    description = {**description, "created_at": iso_time(description["created_at"])}
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/datasets/{description['id']}"
    return description


async def _body(request: Request) -> tuple[str, bytes]:
    """The matrix body's kind (json, csv, npy) and bytes, from a plain or multipart body."""
    content_type = request.headers.get("content-type", "")
    if media_type(content_type) == "multipart/form-data":
        form = await request.form()
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise field_error(422, "body.file", "send the matrix as a file field named 'file'")
        kind = (_kind_of_file_name(upload.filename or "")
                or _kind_of_media_type(upload.content_type or ""))
        payload = await upload.read()
    else:
        kind = _kind_of_media_type(content_type)
        payload = await read_payload(request)  # emptied by the JSON parser once decoded
    if kind is None:
        raise ProblemError(415, "send application/json, text/csv, application/x-npy or a "
                                "multipart file (.json, .csv, .npy)")
    return kind, payload


# Uploads in parts: a matrix larger than MMC_MAX_BODY_BYTES is sent as blocks of rows. These
# routes come before /{dataset_id}, which would otherwise take "uploads" for a dataset id.

_UPLOAD_LOCATION = {"Location": header("Path of the upload, /v1/datasets/uploads/{id}.")}


def _upload_answer(description: dict | None, upload_id: str) -> dict:
    if description is None:
        raise ProblemError(404, f"upload {upload_id} does not exist or has expired")
    return {**description, "created_at": iso_time(description["created_at"])}


@router.post("/uploads", status_code=201, response_model=UploadResource,
             responses={201: {"description": "Opened: send its parts, then complete it.",
                              "headers": _UPLOAD_LOCATION},
                        **problem_responses()})
def open_upload(response: Response, stores: AppStores, caller: Caller):
    """Open an upload in parts, for a matrix larger than one request body
    (``MMC_MAX_BODY_BYTES``): ``PUT`` its blocks of rows as parts ``0, 1, ...`` in any order,
    then ``POST .../complete`` to store the dataset. It expires as a dataset does."""
    description = stores.uploads.open(caller)
    response.headers["Location"] = f"/v1/datasets/uploads/{description['id']}"
    return _upload_answer(description, description["id"])


@router.get("/uploads/{upload_id}", response_model=UploadResource,
            responses=problem_responses(404, 422))
def get_upload(upload_id: UploadIdPath, stores: AppStores, caller: Caller):
    """The parts stored so far."""
    return _upload_answer(stores.uploads.describe(upload_id, caller), upload_id)


def _put_part(uploads: UploadStore, limit: int, upload_id: str, index: int, kind: str,
              payload: bytes, caller: str) -> dict | None:
    X = _matrix(limit, kind, payload)
    del payload
    try:
        return uploads.put_part(upload_id, caller, index, X, limit)
    except UploadError as problem:
        if problem.code == "completed":
            raise ProblemError(409, str(problem)) from None
        raise field_error(422, "body", str(problem), problem.code) from None


@router.put("/uploads/{upload_id}/parts/{index}", response_model=UploadResource,
            openapi_extra=_UPLOAD_BODY, responses=problem_responses(404, 409, 413, 415, 422))
async def put_upload_part(upload_id: UploadIdPath,
                          index: Annotated[int, Path(ge=0, lt=UploadStore.MAX_PARTS,
                                                     description="The part's place, from 0.")],
                          request: Request, stores: AppStores, settings: AppSettings,
                          caller: Caller):
    """Store a block of rows as part ``index`` (any format of ``POST /v1/datasets``); sending
    an index again replaces that part. Every part has the first part's number of columns."""
    kind, payload = await _body(request)
    description = await run_in_threadpool(_put_part, stores.uploads,
                                          settings.max_points_x_features, upload_id, index,
                                          kind, payload, caller)
    return _upload_answer(description, upload_id)


def _complete(uploads: UploadStore, upload_id: str, caller: str) -> tuple[dict, bool] | None:
    try:
        return uploads.complete(upload_id, caller)
    except UploadError as problem:
        raise ProblemError(409, str(problem)) from None


@router.post("/uploads/{upload_id}/complete", status_code=201, response_model=DatasetResource,
             responses={
                 201: {"description": "Stored as a dataset; the upload is gone.",
                       "headers": _LOCATION, "links": _LINKS},
                 200: {"description": "Already stored by this tenant (same content): its "
                                      "lifetime is renewed.", "model": DatasetResource,
                       "headers": _LOCATION, "links": _LINKS},
                 **problem_responses(404, 409, 422)})
async def complete_upload(upload_id: UploadIdPath, response: Response, stores: AppStores,
                          caller: Caller):
    """Join parts ``0..k-1`` into one dataset (its rows in part order) and delete the upload.
    A 409 when no part was sent or one below the last is missing."""
    stored = await run_in_threadpool(_complete, stores.uploads, upload_id, caller)
    if stored is None:
        raise ProblemError(404, f"upload {upload_id} does not exist or has expired")
    return _dataset_answer(response, *stored)


@router.delete("/uploads/{upload_id}", status_code=204, response_class=Response,
               responses={204: {"description": "Deleted with its parts."},
                          **problem_responses(404, 422)})
def delete_upload(upload_id: UploadIdPath, stores: AppStores, caller: Caller):
    """Abandon an upload: its parts are deleted now."""
    if not stores.uploads.delete(upload_id, caller):
        raise ProblemError(404, f"upload {upload_id} does not exist or has expired")
    return Response(status_code=204)


@router.get("/{dataset_id}", response_model=DatasetResource,
            responses=problem_responses(404, 422))
def get_dataset(dataset_id: DatasetIdPath, stores: AppStores, caller: Caller):
    description = stores.datasets.describe(dataset_id, caller)
    if description is None:
        raise ProblemError(404, f"dataset {dataset_id} does not exist or has expired")
    return {**description, "created_at": iso_time(description["created_at"])}


@router.delete("/{dataset_id}", status_code=204, response_class=Response,
               responses={204: {"description": "Deleted: every stored byte of it is gone."},
                          **problem_responses(404, 422)})
def delete_dataset(dataset_id: DatasetIdPath, stores: AppStores, metrics: AppMetrics,
                   caller: Caller):
    """Delete the caller's dataset now, before its lifetime ends. A job that has not started
    yet then fails, saying that its dataset was deleted; a finished job keeps its result and
    model. A second delete, or another tenant's id, is a 404."""
    removed = stores.datasets.delete(dataset_id, caller)
    if removed is None:
        raise ProblemError(404, f"dataset {dataset_id} does not exist or has expired")
    log.info("dataset deleted: tenant=%s id=%s bytes=%d", caller, dataset_id, removed)
    metrics.lifecycle("dataset", "deleted", removed)
    return Response(status_code=204)
