"""Settings from environment variables (prefix ``MMC_``), documented in the README's table."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the API and the workers; both read the same variables."""

    model_config = SettingsConfigDict(env_prefix="MMC_", extra="ignore")

    redis_url: str = Field(
        "redis://127.0.0.1:6379/0", description="Redis holding the queues and all records."
    )
    blob_url: str = Field(
        "", description="Where datasets, models, results and plots live: s3://bucket/prefix "
                        "(any S3 API), or a directory shared by the API and the workers "
                        "(default: .mmc/blobs; mmc serve: <data dir>/blobs)."
    )
    s3_endpoint: str | None = Field(
        None, description="The S3 API's URL (SeaweedFS, MinIO, ...); default: boto3's, from "
                          "AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL or the AWS region. "
                          "Credentials: the standard AWS variables."
    )
    blob_timeout_seconds: float = Field(
        5.0, gt=0, description="Connect and read timeout of each call to the object store."
    )
    blob_retry_seconds: Annotated[tuple[float, ...], NoDecode] = Field(
        (1.0, 2.0, 4.0, 8.0, 8.0, 8.0),
        description="Comma-separated waits of a worker before each retry of a blob store call "
                    "that failed for a transient reason (the store down or answering 5xx); "
                    "once they are spent the job fails saying why (empty: no retry).")
    data_url_allow: str = Field(
        "", description="Comma-separated s3://bucket or s3://bucket/prefix that POST /v1/datasets "
                        "{\"url\": ...} may name (read with the store's endpoint and "
                        "credentials); empty: no dataset by URL.")
    inline_input_max_bytes: int = Field(
        64 * 1024, ge=0, description="A job's input (labels, sequences) larger than this is "
                                     "stored in the blob store instead of Redis."
    )
    api_keys: str = Field(
        "", description="Comma-separated tenant:key pairs (a bare key is its own tenant); "
                        "empty: no authentication (open mode, for local use)."
    )
    max_active_jobs_per_tenant: int = Field(
        100, ge=1, description="Queued plus running jobs a tenant may have; more is a 429."
    )
    max_points_x_features: int = Field(
        20_000_000, ge=1, description="Largest n_samples x n_features of a job or dataset."
    )
    worker_heartbeat_seconds: int = Field(
        30, ge=1, description="A running job whose worker is silent this long is lost."
    )
    in_process_max_samples: int = Field(
        500, ge=0, description="A fast-queue job on at most this many points (and 64 values per "
                               "point) runs in its worker, without forking a work horse; 0: "
                               "every job forks.")
    worker_niceness: int = Field(
        0, ge=0, le=19, description="Added to each worker's nice value at start (0: the "
                                    "priority of other work on the machine). Raised, fits take "
                                    "only the CPU other processes leave: beside one busy "
                                    "process, a fit at 10 runs about 8x slower."
    )
    threads_per_job: int | None = Field(
        None, ge=1, le=1024, description="BLAS and OpenMP threads of each worker's jobs (default: "
                                         "the CPUs the worker may use, its cgroup's quota or its "
                                         "affinity, over MMC_LOCAL_WORKERS, at least 1)."
    )
    job_memory_mb: int | None = Field(
        None, ge=0, description="Memory a job may allocate beyond its worker's own (0: no cap; "
                                "default: 3/4 of the machine's memory over its workers)."
    )
    retry_lost_jobs: int = Field(
        1, ge=0, le=5, description="Times a lost job of a retry-safe algorithm is re-queued."
    )
    redis_timeout_seconds: float = Field(
        5.0, gt=0, description="Redis connect and socket timeout of the API."
    )
    request_deadline_seconds: float = Field(
        5.0, gt=0, description="One deadline for all of an API request's calls to Redis and the "
                               "blob store: the time it may wait on them in all; past it the "
                               "request is a 503.")
    retry_after_seconds: int = Field(
        5, ge=1, description="Retry-After of 429 and 503 answers."
    )
    webhook_secrets: str = Field(
        "", description="Comma-separated tenant:whsec_<base64> secrets signing callbacks."
    )
    webhook_allow_private: bool = Field(
        False, description="Allow callbacks to loopback, link-local and private addresses."
    )
    webhook_max_attempts: int = Field(
        10, ge=1, le=20, description="Deliveries tried per event (retries spaced 1, 2, 4, ... s "
                                     "by default: 10 attempts span about 8.5 minutes)."
    )
    webhook_backoff_seconds: float = Field(
        1.0, ge=0, description="First retry delay of a callback; doubles per attempt."
    )
    webhook_timeout_seconds: float = Field(5.0, gt=0, description="Timeout of one delivery.")
    max_body_bytes: int = Field(64 * 2**20, ge=1024, description="Largest request body accepted.")
    body_read_timeout_seconds: float = Field(
        30.0, gt=0, description="Longest wait for the next bytes of a request body; a body that "
                                "stalls longer is answered 408 and its bytes are released.")
    max_body_bytes_in_flight: int = Field(
        128 * 2**20, ge=1024, description="Request-body bytes one API process holds at once "
                                          "(declared Content-Length); more is a 503.")
    max_concurrent_requests: int = Field(
        64, ge=1, description="Requests one API process serves at once (health probes and "
                              "metrics exempt); more is a 503.")
    job_ttl_seconds: int = Field(
        7 * 86400, ge=60, description="Lifetime of job records and results."
    )
    dataset_ttl_seconds: int = Field(86400, ge=60, description="Lifetime of uploaded datasets.")
    model_ttl_seconds: int = Field(30 * 86400, ge=60, description="Lifetime of trained models.")
    idempotency_ttl_seconds: int = Field(
        86400, ge=60, description="How long an Idempotency-Key is remembered."
    )
    job_timeout_cap_seconds: int = Field(
        3600, ge=1, description="Upper bound on a job's run time (each algorithm has its own)."
    )
    max_predict_rows: int = Field(
        100_000, ge=1, description="Rows (sequence positions for m3n) of one predict request.")
    model_cache_size: int = Field(64, ge=0, description="Decoded models kept per API process.")
    page_size_max: int = Field(100, ge=1, description="Largest page of GET /v1/jobs.")
    plots: bool = Field(
        True, description="GET /v1/jobs/{id}/plot draws a job's plot the first time it is asked "
                          "for (about 0.3 s) and keeps it as long as the job (about 60 KB of "
                          "Redis); false answers it 404.")

    @field_validator("blob_retry_seconds", mode="before")
    @classmethod
    def _split_waits(cls, value: object) -> object:
        """``"1,2,4"`` from the environment as the waits ``(1.0, 2.0, 4.0)``."""
        if isinstance(value, str):
            return tuple(float(item) for item in value.split(",") if item.strip())
        return value

    @field_validator("blob_retry_seconds")
    @classmethod
    def _waits_not_negative(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(wait < 0 for wait in value):
            raise ValueError("a wait cannot be negative")
        return value


def parse_pairs(value: str) -> dict[str, str]:
    """``"a:x,b:y"`` -> ``{"a": "x", "b": "y"}``; a bare item ``x`` maps ``"key-<sha256[:12]>"``
    to ``x`` so a key given without a tenant is a tenant of its own."""
    pairs: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        tenant, sep, secret = item.partition(":")
        if not sep:
            tenant, secret = "key-" + hashlib.sha256(item.encode()).hexdigest()[:12], item
        pairs[tenant.strip()] = secret.strip()
    return pairs


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
