from __future__ import annotations

import base64
import logging

import numpy as np
from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from core.records import iso_time
from core.settings import Settings
from core.stores import Stores, as_json
from service.deps import (
    AppMetrics,
    AppModelCache,
    AppSettings,
    AppStores,
    Caller,
    api_key_header,
    bearer,
    owner,
)
from service.inputs import matrix_or_422
from service.json_body import json_body_openapi, parse_body, read_json_payload
from service.metrics import Metrics
from service.model_cache import ModelCache
from service.model_import import DECODED_BYTES_PER_BODY_BYTE, decode_arrays, model_info, rebuild
from service.problems import ProblemError, field_error, header, problem_responses
from service.schemas import (
    ModelExport,
    ModelIdPath,
    ModelImport,
    ModelResource,
    PredictRequest,
    PredictResponse,
)

log = logging.getLogger("service.audit")

router = APIRouter(prefix="/v1/models", tags=["models"],
                   dependencies=[Depends(api_key_header), Depends(bearer), Depends(owner)])


# Rows per kernel block at predict: 1,024 x 10,000 support vectors is 80 MB of float64.
PREDICT_BLOCK_ROWS = 1024


def _resource(info: dict, expires_in: int | None) -> dict:
    return {**info, "created_at": iso_time(info.get("created_at")),
            "expires_in_seconds": expires_in}


@router.get("/{model_id}", response_model=ModelResource, responses=problem_responses(404, 422))
def get_model(model_id: ModelIdPath, stores: AppStores, caller: Caller):
    models = stores.models
    info = models.info(model_id, caller)
    if info is None:
        raise ProblemError(404, f"model {model_id} does not exist or has expired")
    return _resource(info, models.expires_in(model_id))


@router.post("", status_code=201, response_model=ModelResource,
             responses={201: {"description": "Stored as a new model of the caller.",
                              "headers": {"Location": header("Path of the new model.")}},
                        **problem_responses(413, 415, 422)},
             openapi_extra=json_body_openapi(ModelImport))
async def import_model(request: Request, response: Response, settings: AppSettings,
                       stores: AppStores, metrics: AppMetrics, caller: Caller):
    """Store a model exported by ``GET /v1/models/{id}/export`` (here or on another
    deployment) as a new model of the caller; its predictions equal the original's. The
    export is checked as strictly as any input: no pickles, numeric and finite arrays, a
    registered estimator that rebuilds and labels a point. ``ttl_seconds`` may shorten its
    lifetime (default and maximum ``MMC_MODEL_TTL_SECONDS``)."""
    payload = await read_json_payload(request)
    body = await parse_body(payload, ModelImport, ())
    del payload
    info = await run_in_threadpool(_import, body, settings, stores, metrics, caller)
    response.headers["Location"] = f"/v1/models/{info['id']}"
    return info


def _import(body: ModelImport, settings: Settings, stores: Stores, metrics: Metrics,
            caller: str) -> dict:
    if body.ttl_seconds is not None and body.ttl_seconds > settings.model_ttl_seconds:
        raise field_error(422, "body.ttl_seconds", f"exceeds MMC_MODEL_TTL_SECONDS="
                          f"{settings.model_ttl_seconds}", "less_than_equal")
    npz, arrays = decode_arrays(body.npz_base64,
                                DECODED_BYTES_PER_BODY_BYTE * settings.max_body_bytes)
    estimator, spec = rebuild(body, arrays)
    info = model_info(spec, estimator, body, caller)
    models = stores.models
    ttl = body.ttl_seconds or settings.model_ttl_seconds
    model_id = models.put_payload(body.meta, npz, info, ttl_seconds=ttl)
    log.info("model imported: tenant=%s id=%s algorithm=%s bytes=%d", caller, model_id,
             spec.name, len(npz))
    metrics.lifecycle("model", "imported", len(npz))
    return _resource(models.info(model_id), ttl)


@router.delete("/{model_id}", status_code=204, response_class=Response,
               responses={204: {"description": "Deleted: no API process predicts with it "
                                              "again."},
                          **problem_responses(404, 422)})
def delete_model(model_id: ModelIdPath, stores: AppStores, model_cache: AppModelCache,
                 metrics: AppMetrics, caller: Caller):
    """Delete the caller's model now, before its lifetime ends. Every API process stops
    predicting with it (each checks that a cached model still exists). The job that trained
    it keeps its result. A second delete, or another tenant's id, is a 404."""
    removed = stores.models.delete_owned(model_id, caller)
    if removed is None:
        raise ProblemError(404, f"model {model_id} does not exist or has expired")
    model_cache.forget(model_id)
    log.info("model deleted: tenant=%s id=%s bytes=%d", caller, model_id, removed)
    metrics.lifecycle("model", "deleted", removed)
    return Response(status_code=204)


@router.get("/{model_id}/export", response_model=ModelExport,
            responses=problem_responses(404, 422))
def export_model(model_id: ModelIdPath, stores: AppStores, caller: Caller):
    """The portable model: JSON metadata and ``.npz`` arrays (no pickles), as stored."""
    loaded = stores.models.load(model_id, caller)
    if loaded is None:
        raise ProblemError(404, f"model {model_id} does not exist or has expired")
    meta, payload = loaded
    return {"format": meta.get("format", ""), "meta": meta,
            "npz_base64": base64.b64encode(payload).decode()}


@router.post("/{model_id}/predict", response_model=PredictResponse,
             responses=problem_responses(404, 413, 415, 422),
             openapi_extra=json_body_openapi(PredictRequest, {"points": {
                 "summary": "Two new points", "value": {"X": [[0.1, 0.1], [5.0, 5.0]]}}}))
async def predict(model_id: ModelIdPath, request: Request, model_cache: AppModelCache,
                  settings: AppSettings, caller: Caller):
    """Labels (and decision values where the model has them) for new points, synchronously: at
    most ``MMC_MAX_PREDICT_ROWS`` rows (default 100,000; sequence positions for m3n) per
    request, evaluated in blocks of 1,024 rows."""
    payload = await read_json_payload(request)
    body = await parse_body(payload, PredictRequest, (("X",),))
    del payload
    return await run_in_threadpool(_predict, model_id, body, model_cache,
                                   settings.max_predict_rows, caller)


def _predict(model_id: str, body: PredictRequest, model_cache: ModelCache, limit: int,
             caller: str) -> dict:
    entry = model_cache.get(model_id)
    if entry is not None and entry[1].get("owner", "anonymous") != caller:
        entry = None
    if entry is None:
        raise ProblemError(404, f"model {model_id} does not exist or has expired")
    estimator, info = entry
    if info.get("input_kind") == "sequences":
        if body.sequences is None or body.X is not None:
            raise field_error(422, "body.sequences", "this model labels sequences; send sequences")
        if not body.sequences or any(len(s) == 0 for s in body.sequences):
            raise field_error(422, "body.sequences", "send non-empty integer sequences")
        positions = sum(len(s) for s in body.sequences)
        if positions > limit:
            raise field_error(422, "body.sequences", f"{positions} positions exceed "
                              f"MMC_MAX_PREDICT_ROWS={limit}; split the request", "too_many_rows")
        try:  # predict validates the symbols (range, integer type) itself
            labels = estimator.predict(body.sequences)
        except ValueError as exc:
            raise field_error(422, "body", str(exc)) from None
        return {"model_id": model_id, "labels": as_json(labels), "decision_values": None}
    if body.X is None or body.sequences is not None:
        raise field_error(422, "body.X", "this model labels points; send X")
    data = matrix_or_422(body.X, "body.X")
    if data.shape[0] > limit:
        raise field_error(422, "body.X", f"{data.shape[0]} rows exceed MMC_MAX_PREDICT_ROWS="
                                         f"{limit}; split the request", "too_many_rows")
    expected = info.get("n_features_in")
    if expected and data.shape[1] != expected:
        raise field_error(422, "body.X",
                          f"rows have {data.shape[1]} features; the model was trained on "
                          f"{expected}")
    try:
        labels, decision = _label_points(estimator, data)
    except ValueError as exc:
        raise field_error(422, "body", str(exc)) from None
    return {"model_id": model_id, "labels": labels.tolist(),
            "decision_values": None if decision is None else decision.tolist()}


def _label_points(estimator, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Labels and decision values a block of rows at a time: a kernel model builds the
    block x support-set kernel, never n_new x n_SV at once. An estimator with
    ``predict_with_decision`` computes both from one kernel evaluation."""
    combined = getattr(estimator, "predict_with_decision", None)
    has_decision = hasattr(estimator, "decision_function")
    labels, decisions = [], []
    for start in range(0, X.shape[0], PREDICT_BLOCK_ROWS):
        block = X[start:start + PREDICT_BLOCK_ROWS]
        if combined is not None:
            block_labels, block_decision = combined(block)
        else:
            block_decision = estimator.decision_function(block) if has_decision else None
            block_labels = estimator.predict(block)
        labels.append(np.asarray(block_labels))
        if block_decision is not None:
            decisions.append(np.asarray(block_decision))
    return np.concatenate(labels), (np.concatenate(decisions) if decisions else None)
