"""Request and response schemas; the job request is generated from the algorithm registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, create_model

from algorithms.registry import AlgorithmSpec
from core.job_record import JobStatus

DATASET_ID_PATTERN = r"^[0-9a-f]{64}$"
RECORD_ID_PATTERN = r"^[0-9a-f]{32}$"  # jobs and models
DatasetId = Annotated[
    str, Field(pattern=DATASET_ID_PATTERN, description="Id from POST /v1/datasets.")
]

# Path ids are checked before they touch Redis: "<job id>:input" would otherwise read another key.
JobIdPath = Annotated[str, Path(pattern=RECORD_ID_PATTERN, description="Id of a job.")]
ModelIdPath = Annotated[str, Path(pattern=RECORD_ID_PATTERN, description="Id of a model.")]
DatasetIdPath = Annotated[str, Path(pattern=DATASET_ID_PATTERN, description="Id of a dataset.")]
UploadIdPath = Annotated[str, Path(pattern=RECORD_ID_PATTERN,
                                   description="Id of an upload in parts.")]


class _Strict(BaseModel):
    # Unknown fields are errors and numbers are finite: 1e400 or NaN is a 422 here, not a job that
    # fails in a worker.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Algorithm"


def build_job_request_model(registry: Mapping[str, AlgorithmSpec]) -> type[BaseModel]:
    """``JobRequest`` with ``algorithm`` a union of one model per registered algorithm,
    discriminated on ``name``, each carrying that algorithm's own params model."""
    choices = []
    for spec in registry.values():
        choices.append(create_model(
            _class_name(spec.name),
            __config__=ConfigDict(extra="forbid"),
            __doc__=spec.summary,
            name=(Literal[spec.name], Field(description="Algorithm name.")),
            params=(spec.params_model, Field(default_factory=spec.params_model)),
        ))
    if len(choices) == 1:
        algorithm: Any = choices[0]
    else:
        algorithm = Annotated[Union[tuple(choices)], Field(discriminator="name")]  # noqa: UP007
    return create_model(
        "JobRequest",
        __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
        __doc__="A clustering (or classification) job: the algorithm with its parameters and data.",
        algorithm=(algorithm, ...),
        data=(JobData, ...),
        callback_url=(str | None, Field(
            None, max_length=2048,
            description="Called with a signed (Standard Webhooks) POST when the job ends.")),
    )


class JobData(_Strict):
    """Exactly one of ``X`` or ``dataset_id`` for vector algorithms, ``sequences`` for m3n."""

    X: list[list[float]] | None = Field(None, description="Points as rows of numbers.")
    dataset_id: DatasetId | None = None
    y: list[int] | None = Field(
        None, description="Labels; -1 = unknown for semi-supervised clustering."
    )
    sequences: list[list[int]] | None = Field(
        None, description="Integer observation sequences (sequence algorithms)."
    )


class Progress(BaseModel):
    step: int = 0
    objective: float | None = None
    message: str = ""
    updated_at: str | None = Field(None, description="ISO 8601 UTC time of the last report.")


class Timing(BaseModel):
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    fit_seconds: float | None = None
    load_seconds: float | None = None
    store_seconds: float | None = None
    plot_seconds: float | None = Field(
        None, deprecated=True,
        description="Always null: the plot is drawn on first request (GET /v1/jobs/{id}/plot), "
                    "not by the job. Removed in the next release.")


class JobError(BaseModel):
    type: str
    message: str


class AlgorithmRef(BaseModel):
    name: str
    params: dict[str, Any]


class JobResource(BaseModel):
    id: str
    status: JobStatus
    algorithm: AlgorithmRef
    queue: str
    n_samples: int
    n_features: int | None = None
    progress: Progress
    timing: Timing
    error: JobError | None = None
    model_id: str | None = None
    links: dict[str, str]


class JobPage(BaseModel):
    items: list[JobResource]
    total: int
    offset: int
    limit: int


class JobResult(BaseModel):
    id: str = Field(description="The job's id (every resource names its id 'id').")
    job_id: str = Field(description="Deprecated: the same as id; kept for older clients.",
                        json_schema_extra={"deprecated": True})
    algorithm: str
    labels: list[Any] = Field(description="Cluster per point (a list per sequence for m3n).")
    decision_values: list[Any] | None = None
    extras: dict[str, Any]
    warnings: list[str] = []
    model_id: str
    n_samples: int


class DatasetResource(BaseModel):
    id: str
    n_samples: int
    n_features: int
    stored_bytes: int = Field(description="Bytes the service stores (0 for a dataset by URL).")
    url: str | None = Field(None, description="The object it is read from, for a dataset by URL.")
    created_at: str = Field(description="ISO 8601 UTC, like every time in the API.")
    expires_in_seconds: int


class UploadResource(BaseModel):
    id: str
    parts: list[int] = Field(description="Indices of the parts stored so far.")
    n_samples: int = Field(description="Rows in the parts stored so far.")
    n_features: int | None = Field(description="Columns of every part; null before the first.")
    created_at: str = Field(description="ISO 8601 UTC, like every time in the API.")
    expires_in_seconds: int


class DatasetJSON(_Strict):
    X: list[list[float]]


class DatasetURL(_Strict):
    """A dataset named by URL: an object that stays where it is and is read by the workers."""

    url: str = Field(max_length=2048, description="s3://bucket/key ending in .npy, .npz, "
                                                  ".parquet or .csv, inside the operator's "
                                                  "MMC_DATA_URL_ALLOW.",
                     examples=["s3://datasets/team-a/points.parquet"])
    columns: list[str] | None = Field(
        None, min_length=1, max_length=100_000,
        description="The columns to read, in this order (.parquet, or .csv with a header); "
                    "default: every column, which must then all be numeric.")


class ModelResource(BaseModel):
    id: str
    algorithm: str
    estimator: str
    job_id: str | None = Field(None, description="The job that trained it; null when imported.")
    imported: bool = Field(False, description="Stored by POST /v1/models from an export.")
    input_kind: str
    n_features_in: int | None = None
    params: dict[str, Any]
    created_at: str = Field(description="ISO 8601 UTC, like every time in the API.")
    expires_in_seconds: int | None = Field(None, description="Seconds until it is deleted.")


class ModelExport(BaseModel):
    format: str
    meta: dict[str, Any]
    npz_base64: str = Field(description="The arrays as .npz bytes (load with allow_pickle=False).")


class ModelImport(_Strict):
    """An export (``GET /v1/models/{id}/export``, from this deployment or another) to store as a
    new model of the caller."""

    format: str
    meta: dict[str, Any]
    npz_base64: str = Field(description="The arrays as .npz bytes (no pickles).")
    ttl_seconds: int | None = Field(
        None, ge=60, description="Lifetime of the imported model; default and maximum "
                                 "MMC_MODEL_TTL_SECONDS.")


class PredictRequest(_Strict):
    X: list[list[float]] | None = None
    sequences: list[list[int]] | None = None


class PredictResponse(BaseModel):
    model_id: str
    labels: list[Any]
    decision_values: list[Any] | None = None


class AlgorithmDescription(BaseModel):
    name: str
    summary: str
    paper: str = Field(description="The paper that defines the algorithm, by authors and year.")
    seed: str = Field(deprecated=True, description="Deprecated name of `paper`; removed in the "
                                                   "next release.")
    estimator: str
    input_kind: str
    labels: str
    queue: str = Field(description="Queue of a job with the default parameters.")
    max_n: int = Field(description="Largest n_samples (positions for sequences) with the default "
                                   "parameters.")
    limits_rule: str = Field(description="How queue and max_n follow from the parameters.")
    timeout_seconds: int
    accepts_sparse: bool
    params_schema: dict[str, Any]
    renamed: dict[str, str] = Field(description=(
        "Old spellings that params still accept for one release, with a warning, and the new "
        "spelling each becomes: a parameter name, or name='value' for a value."))
    notes: dict[str, str]


class Readiness(BaseModel):
    redis: bool
    workers: dict[str, int]
    auth: Literal["api_keys", "open"] = Field(
        description="``open``: MMC_API_KEYS is empty and anyone can call the API.")
    warnings: list[str] = Field(default_factory=list)
