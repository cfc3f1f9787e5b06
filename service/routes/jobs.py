# No ``from __future__ import annotations``: the request model is built at app creation and
# FastAPI must see it as a real annotation of the handler.
from datetime import UTC, datetime
from typing import Annotated, Literal

from anyio import to_thread
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel

from algorithms.registry import algorithm_names
from core.job_record import JobStatus
from core.records import render_job
from service.deps import (
    AppJobEvents,
    AppJobService,
    AppMetrics,
    AppSettings,
    AppStores,
    AppSubmitLimiter,
    AppSubmits,
    Caller,
    api_key_header,
    bearer,
)
from service.json_body import SMALL_BODY_BYTES, json_body_openapi, parse_body, read_json_payload
from service.longpoll import MAX_WAIT_SECONDS, read_job, wait_for_change
from service.problems import ProblemError, field_error, header, links, problem_responses
from service.schemas import JobIdPath, JobPage, JobResource, JobResult

# Six points in two groups, for the examples: small enough to read, valid for every method.
_POINTS = [[0.0, 0.1], [0.2, 0.0], [0.1, 0.3], [5.0, 5.1], [5.2, 4.9], [4.9, 5.0]]


def _points_job(name: str, params: dict, **data) -> dict:
    return {"algorithm": {"name": name, "params": params}, "data": {"X": _POINTS, **data}}


# Shown in /docs and /redoc, one per algorithm or way of sending data.
JOB_EXAMPLES = {
    "points": {"summary": "Two clusters of 2-D points (iterSVR)",
               "value": _points_job("itersvr", {"n_clusters": 2, "random_state": 0})},
    "dataset": {"summary": "A stored dataset (POST /v1/datasets), with a signed callback",
                "value": {"algorithm": {"name": "cpm3c", "params": {"n_clusters": 3}},
                          "data": {"dataset_id": "0" * 64},
                          "callback_url": "https://example.com/hooks/mmc"}},
    "sdp_mmc": {"summary": "Semi-supervised SDP MMC: y labels two points, -1 leaves the rest",
                "value": _points_job("sdp_mmc", {"n_clusters": 2, "C": 100.0},
                                     y=[0, -1, -1, 1, -1, -1])},
    "gmmc": {"summary": "GMMC learning the kernel among several widths",
             "value": _points_job("gmmc", {"n_clusters": 2, "kernel_learning": True})},
    "svc": {"summary": "Support vector clustering: the number of clusters follows the width",
            "value": _points_job("svc", {"n_clusters": None, "gamma": 0.5})},
    "robust_svm": {"summary": "Robust SVM (outlier ablation by ROD) on labeled points",
                   "value": _points_job("robust_svm", {"method": "rod", "C": 1.0, "rho": 0.8},
                                        y=[0, 0, 0, 1, 1, 1])},
    "sequences": {"summary": "HMM state labels of integer sequences (m3n)", "value": {
        "algorithm": {"name": "m3n", "params": {"n_states": 2}},
        "data": {"sequences": [[0, 0, 1, 1, 0], [1, 1, 0, 0, 1, 1]]}}},
}


def job_status_filter(values: list[str] | None) -> frozenset[JobStatus]:
    """``?status=`` values, repeated or comma-separated; an unknown status is a 422."""
    given = frozenset(part.strip() for value in values or () for part in value.split(",")
                      if part.strip())
    unknown = sorted(given - set(JobStatus))
    if unknown:
        raise field_error(422, "query.status", f"unknown status {', '.join(unknown)}; one of "
                          f"{', '.join(JobStatus)}", "enum")
    return frozenset(JobStatus(status) for status in given)


def algorithm_filter(name: str | None) -> str | None:
    if name is not None and name not in algorithm_names():
        raise field_error(422, "query.algorithm", f"unknown algorithm {name!r}; one of "
                          f"{', '.join(algorithm_names())}", "enum")
    return name


def epoch(moment: datetime | None) -> float | None:
    """Seconds since the epoch; a time without a zone is taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


_CALLER = [Depends(api_key_header), Depends(bearer)]
# The routes that read or change a job: the request model plays no part in them.
router = APIRouter(prefix="/v1/jobs", tags=["jobs"], dependencies=_CALLER)


def build_router(job_request: type[BaseModel]) -> APIRouter:
    """The jobs routes: the submit, whose body is ``job_request`` (the union of the registry's
    algorithms, built at app creation), then the module's :data:`router`."""
    jobs = APIRouter()

    @jobs.post("/v1/jobs", status_code=202, response_model=JobResource, tags=["jobs"],
               dependencies=_CALLER,
               openapi_extra=json_body_openapi(job_request, JOB_EXAMPLES),
               responses={202: {"description": "Queued (or, with a known Idempotency-Key, the "
                                               "job it created).",
                                "links": links("job_id", "$response.body#/id",
                                               "get_job",
                                               "cancel_job",
                                               "get_result"),
                                "headers": {
                   "Location": header("Path of the job, /v1/jobs/{id}."),
                   "Idempotent-Replayed": header("'true' when an earlier request with this "
                                                 "Idempotency-Key created the job.")}},
                   **problem_responses(404, 409, 413, 415, 422, 429)})
    async def create_job(
        request: Request,
        response: Response,
        submits: AppSubmits,
        job_service: AppJobService,
        submit_limiter: AppSubmitLimiter,
        metrics: AppMetrics,
        caller: Caller,
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
    ):
        """Queue a job. With ``Idempotency-Key``, the same key and body return the same job and
        the same key with another body is a 409."""
        # A large body is parsed in a worker thread, matrix straight to float64
        # (service.json_body): it neither stalls the event loop nor costs a Python float per number.
        payload = await read_json_payload(request)
        small = len(payload) <= SMALL_BODY_BYTES
        body = await parse_body(payload, job_request, (("data", "X"),))
        del payload
        if small and body.data.dataset_id is None:  # stored with the others arriving now
            record, replayed = await submits.create(body, caller, idempotency_key)
        else:
            record, replayed = await to_thread.run_sync(
                job_service.create, body, caller, idempotency_key,
                limiter=submit_limiter)
        response.headers["Location"] = f"/v1/jobs/{record['id']}"
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
        else:
            metrics.job_created(record["algorithm"])
        return render_job(record)

    jobs.include_router(router)
    return jobs


@router.get("", response_model=JobPage, responses=problem_responses(422))
def list_jobs(
    settings: AppSettings,
    job_service: AppJobService,
    caller: Caller,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,  # past Redis range: 422, not 503
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    status: Annotated[list[str] | None, Query(
        description="Only jobs in these statuses: repeat the parameter or separate them "
                    "by commas (status=queued,running).")] = None,
    algorithm: Annotated[str | None, Query(description="Only jobs of this algorithm.")
                         ] = None,
    created_after: Annotated[datetime | None, Query(
        description="Only jobs created (queued_at) after this ISO 8601 time; UTC when it "
                    "names no zone.")] = None,
    created_before: Annotated[datetime | None, Query(
        description="Only jobs created before this ISO 8601 time.")] = None,
):
    """The caller's jobs, newest first; ``total`` counts those that match the filters."""
    limit = min(limit, settings.page_size_max)
    records, total = job_service.list(
        caller, offset, limit, statuses=job_status_filter(status),
        algorithm=algorithm_filter(algorithm), created_after=epoch(created_after),
        created_before=epoch(created_before))
    return {"items": [render_job(r) for r in records], "total": total,
            "offset": offset, "limit": limit}

@router.get("/{job_id}", response_model=JobResource, responses=problem_responses(404, 422))
async def get_job(
    job_id: JobIdPath,
    request: Request,
    job_service: AppJobService,
    job_events: AppJobEvents,
    caller: Caller,
    wait: Annotated[float | None, Query(
        gt=0, le=MAX_WAIT_SECONDS,
        description="Long poll: answer as soon as the job's status differs from the one "
                    "it had when the request arrived, or after this many seconds (at most "
                    "60); a finished job answers at once.")] = None,
    until: Annotated[Literal["change", "finished"], Query(
        description="With `wait`: answer at the first status change (`change`, the "
                    "default) or only once the job has finished: succeeded, failed or "
                    "canceled (`finished`).")] = "change",
):
    """Status, progress, timing, and the error when it failed."""
    record = await read_job(job_service, job_id, caller)
    if wait is not None:
        record = await wait_for_change(job_events, request, job_id, record, wait,
                                       lambda: read_job(job_service, job_id, caller),
                                       until_finished=until == "finished")
    return render_job(record)

@router.delete("/{job_id}", response_model=JobResource,
               responses=problem_responses(404, 409, 422))
def cancel_job(job_id: JobIdPath, job_service: AppJobService, caller: Caller):
    """Cancel a queued or running job; a finished job is a 409."""
    return render_job(job_service.cancel(job_id, caller))

@router.get("/{job_id}/result", response_model=JobResult, responses={
    200: {"description": "The result.", "links": links(
        "model_id", "$response.body#/model_id", "get_model",
        "export_model",
        "predict")},
    **problem_responses(404, 409, 422)})
def get_result(job_id: JobIdPath, job_service: AppJobService, stores: AppStores,
               caller: Caller):
    """Labels, decision values, algorithm extras and the model id of a succeeded job."""
    record = job_service.get(job_id, caller)
    if record["status"] != JobStatus.SUCCEEDED:
        detail = f"job {job_id} is {record['status']}; a result exists once it has succeeded"
        if record.get("error"):
            detail += f" (error: {record['error']['message']})"
        raise ProblemError(409, detail)
    result = stores.jobs.get_result(job_id)
    if result is None:
        raise ProblemError(404, f"the result of job {job_id} has expired")
    return {**result, "id": job_id}
