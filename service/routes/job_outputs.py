"""A finished job's outputs as files: its plot (SVG or PNG) and its labels (CSV)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from service.deps import api_key_header, bearer, owner
from service.problems import ProblemError, problem_responses
from service.schemas import JobIdPath

router = APIRouter(prefix="/v1/jobs", tags=["jobs"],
                   dependencies=[Depends(api_key_header), Depends(bearer)])

MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
# A finished job's outputs never change; they expire with the job.
CACHE_CONTROL = "private, max-age=3600"


def succeeded_job(request: Request, job_id: str, caller: str) -> dict[str, Any]:
    """The caller's job once it has succeeded: 404 for another tenant's, 409 before the end."""
    record = request.app.state.jobs.get(job_id, caller)
    if record["status"] != "succeeded":
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


@router.get(
    "/{job_id}/plot",
    response_class=Response,
    responses={200: {"content": {"image/svg+xml": {}, "image/png": {}},
                     "description": "The clustering as a picture."},
               **problem_responses(404, 409, 422)},
)
def get_plot(
    job_id: JobIdPath,
    request: Request,
    caller: Annotated[str, Depends(owner)],
    format: Annotated[Literal["svg", "png"] | None, Query(
        description="Overrides the Accept header (for links and <img> tags).")] = None,
):
    """The clustering as a picture, drawn once by the worker when the job ended: SVG by default,
    PNG when ``Accept: image/png`` (or ``?format=png``). The points in 2-D (the data itself with
    2 features, else a PCA projection, said in the title), coloured by cluster, outliers marked,
    and for 2-D data the regions the model predicts; sequences get a state-by-position plot."""
    succeeded_job(request, job_id, caller)
    fmt = format or negotiate(request.headers.get("accept", ""))
    image = request.app.state.stores.plots.get(job_id, fmt)
    if image is None:
        raise ProblemError(404, f"job {job_id} has no plot: it expired, the workers draw none "
                                "(MMC_PLOTS=false), or this one could not be drawn (see the "
                                "worker's log)")
    return Response(image, media_type=MEDIA_TYPES[fmt],
                    headers={"Cache-Control": CACHE_CONTROL, "Vary": "Accept"})


@router.get(
    "/{job_id}/labels.csv",
    response_class=Response,
    responses={200: {"content": {"text/csv": {}},
                     "description": "One line per point (per sequence for m3n)."},
               **problem_responses(404, 409, 422)},
)
def get_labels_csv(job_id: JobIdPath, request: Request, caller: Annotated[str, Depends(owner)]):
    """The labels as the file ``mmc cluster`` writes: one label per line, or for sequences one
    line of comma-separated states per sequence."""
    succeeded_job(request, job_id, caller)
    result = request.app.state.stores.jobs.get_result(job_id)
    if result is None:
        raise ProblemError(404, f"the result of job {job_id} has expired")
    lines = [",".join(map(str, label)) if isinstance(label, list) else str(label)
             for label in result["labels"]]
    return Response("\n".join(lines) + "\n", media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{job_id}.labels.csv"',
        "Cache-Control": CACHE_CONTROL,
    })
