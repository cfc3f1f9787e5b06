"""Settings from environment variables (prefix ``MMC_``), documented in the README's table."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the API and the workers; both read the same variables."""

    model_config = SettingsConfigDict(env_prefix="MMC_", extra="ignore")

    redis_url: str = Field(
        "redis://127.0.0.1:6379/0", description="Redis holding the queues and all records."
    )
    api_keys: str = Field("", description="Comma-separated API keys; empty: no auth.")
    max_body_bytes: int = Field(64 * 2**20, ge=1024, description="Largest request body accepted.")
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
    model_cache_size: int = Field(64, ge=0, description="Decoded models kept per API process.")
    page_size_max: int = Field(100, ge=1, description="Largest page of GET /v1/jobs.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
