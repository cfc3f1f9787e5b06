"""A finished job's outputs as files: its plot (SVG or PNG) and its labels (CSV)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, Query, Request, Response

from algorithms.registry import get_spec
from core.job_record import JobRecord, JobStatus
from core.stores import Stores
from service.deps import (
    AppJobService,
    AppModelCache,
    AppSettings,
    AppStores,
    Caller,
    api_key_header,
    bearer,
)
from service.jobs import JobService
from service.model_cache import ModelCache
from service.problems import ProblemError, problem_responses
from service.schemas import JobIdPath

router = APIRouter(prefix="/v1/jobs", tags=["jobs"],
                   dependencies=[Depends(api_key_header), Depends(bearer)])

MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
BYTES = "application/octet-stream"
# A finished job's outputs never change; they expire with the job.
CACHE_CONTROL = "private, max-age=3600"


def succeeded_job(job_service: JobService, job_id: str, caller: str) -> JobRecord:
    """The caller's job once it has succeeded: 404 for another tenant's, 409 before the end."""
    record = job_service.get(job_id, caller)
    if record["status"] != JobStatus.SUCCEEDED:
        raise ProblemError(409, f"job {job_id} is {record['status']}; its outputs exist once it "
                                "has succeeded")
    return record


def negotiate(accept: str) -> str:
    """``png`` when the Accept header ranks ``image/png`` above ``image/svg+xml``, else ``svg``."""
    ranks = {"svg": 0.0, "png": 0.0}
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        for fmt, media_type in MEDIA_TYPES.items():
            if media.lower() == media_type:
                ranks[fmt] = max(ranks[fmt], quality)
    return "png" if ranks["png"] > ranks["svg"] else "svg"


# Declared as bytes, so that generated clients return them instead of skipping the response.
_BINARY = {"type": "string", "format": "binary"}


@router.get(
    "/{job_id}/plot",
    response_class=Response,
    responses={200: {"content": {"image/svg+xml": {"schema": _BINARY},
                                 "image/png": {"schema": _BINARY},
                                 BYTES: {"schema": _BINARY}},
                     "description": "The clustering as a picture; as application/octet-stream "
                                    "(the format ?format= names, SVG by default) when the "
                                    "Accept header asks for that alone."},
               **problem_responses(404, 409, 422)},
)
def get_plot(
    job_id: JobIdPath,
    request: Request,
    job_service: AppJobService,
    stores: AppStores,
    model_cache: AppModelCache,
    settings: AppSettings,
    caller: Caller,
    format: Annotated[Literal["svg", "png"] | None, Query(
        description="Overrides the Accept header (for links and <img> tags).")] = None,
):
    """The clustering as a picture: SVG by default, PNG when ``Accept: image/png`` (or
    ``?format=png``). The points in 2-D (the data itself with 2 features, else a PCA projection,
    said in the title), coloured by cluster, outliers marked, and for 2-D data the regions the
    model predicts; sequences get a state-by-position plot. Drawn from the job's data and model
    the first time it is asked for, then kept as long as the job."""
    record = succeeded_job(job_service, job_id, caller)
    fmt = format or negotiate(request.headers.get("accept", ""))
    image = stores.plots.get(job_id, caller, fmt)
    if image is None:
        if not settings.plots:
            raise ProblemError(404, "plots are turned off on this server (MMC_PLOTS=false)")
        images = draw_plot(stores, model_cache, job_id, record)
        stores.plots.put(job_id, caller, images)
        image = images[fmt]
    return Response(image, media_type=_media_type(fmt, request.headers.get("accept", "")),
                    headers={"Cache-Control": CACHE_CONTROL, "Vary": "Accept"})


def _media_type(fmt: str, accept: str) -> str:
    """The image's own media type, or ``application/octet-stream`` for a client that accepts
    only that (as generated API clients do for a response of bytes)."""
    media = {item.split(";")[0].strip().lower() for item in accept.split(",")}
    if BYTES in media and not media & set(MEDIA_TYPES.values()):
        return BYTES
    return MEDIA_TYPES[fmt]


def draw_plot(stores: Stores, model_cache: ModelCache, job_id: str, record: JobRecord
              ) -> dict[str, bytes]:
    """Both images of a succeeded job, from its stored result, data and model (404 when one of
    them has expired)."""
    from service.plots import job_plot  # matplotlib loads with the first plot, not the API

    spec = get_spec(record["algorithm"])
    result = stores.jobs.get_result(job_id)
    job_input = stores.jobs.load_input(job_id)
    if result is None or job_input is None:
        raise ProblemError(404, f"job {job_id} has no plot: its result or input has expired")
    if job_input.get("dataset_id") and stores.datasets.referenced_shape(
            job_input["dataset_id"], record.get("owner", "")):
        raise ProblemError(404, f"job {job_id} has no plot: its dataset is read by URL, and the "
                                "API never reads such data (plots are drawn by the API)")
    data = stores.job_data(job_input, spec.input_kind)
    if data is None:
        raise ProblemError(404, f"job {job_id} has no plot: it is drawn from the job's dataset "
                                f"{job_input['dataset_id']}, which has expired "
                                "(MMC_DATASET_TTL_SECONDS)")
    if spec.input_kind == "sequences":
        labels: Any = [np.asarray(states) for states in result["labels"]]
        predict = None
    else:
        labels = np.asarray(result["labels"])
        model = model_cache.get(result["model_id"])
        predict = None if model is None else model[0].predict
    extras = result.get("extras") or {}
    return job_plot(
        spec.name, data, labels, predict=predict,
        # A classifier's labels are its classes; -1 marks an outlier only for clusterers.
        outlier_label=None if spec.labels == "required" else -1,
        outliers=extras.get("outliers") or (),
        strengths=extras.get("n_clusters_strengths"), chosen_k=extras.get("n_clusters"),
    )


@router.get(
    "/{job_id}/labels.csv",
    response_class=Response,
    responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                     "description": "One line per point (per sequence for m3n)."},
               **problem_responses(404, 409, 422)},
)
def get_labels_csv(job_id: JobIdPath, job_service: AppJobService, stores: AppStores,
                   caller: Caller):
    """The labels as the file ``mmc cluster`` writes: one label per line, or for sequences one
    line of comma-separated states per sequence."""
    succeeded_job(job_service, job_id, caller)
    result = stores.jobs.get_result(job_id)
    if result is None:
        raise ProblemError(404, f"the result of job {job_id} has expired")
    lines = [",".join(map(str, label)) if isinstance(label, list) else str(label)
             for label in result["labels"]]
    return Response("\n".join(lines) + "\n", media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{job_id}.labels.csv"',
        "Cache-Control": CACHE_CONTROL,
    })
