"""Every Redis key name of the service, in one place (RQ keeps its own under ``rq:``)."""

from __future__ import annotations

import hashlib


class Keys:
    """All Redis key names of the service (RQ keeps its own under ``rq:``)."""

    prefix = "mmc"

    @classmethod
    def dataset(cls, dataset_id: str) -> str:
        return f"{cls.prefix}:dataset:{dataset_id}"

    @classmethod
    def upload(cls, upload_id: str) -> str:
        return f"{cls.prefix}:upload:{upload_id}"

    @classmethod
    def job(cls, job_id: str) -> str:
        return f"{cls.prefix}:job:{job_id}"

    @classmethod
    def job_input(cls, job_id: str) -> str:
        return f"{cls.prefix}:job:{job_id}:input"

    @classmethod
    def result(cls, job_id: str) -> str:
        return f"{cls.prefix}:result:{job_id}"

    @classmethod
    def model(cls, model_id: str) -> str:
        return f"{cls.prefix}:model:{model_id}"

    @classmethod
    def owner_jobs(cls, owner: str) -> str:
        return f"{cls.prefix}:jobs:{owner}"

    @classmethod
    def active_prefix(cls) -> str:
        return f"{cls.prefix}:active:"

    @classmethod
    def active(cls, owner: str) -> str:
        return f"{cls.active_prefix()}{owner}"

    @classmethod
    def job_alive(cls, job_id: str) -> str:
        return f"{cls.prefix}:job:{job_id}:alive"

    @classmethod
    def job_events(cls, job_id: str) -> str:
        """Pub/sub channel announcing each status change of a job (long polling listens)."""
        return f"{cls.prefix}:job:{job_id}:events"

    @classmethod
    def plot(cls, job_id: str) -> str:
        return f"{cls.prefix}:plot:{job_id}"

    @classmethod
    def process_restarts(cls) -> str:
        """Hash of restart counts by child process of ``mmc serve`` (``GET /metrics``)."""
        return f"{cls.prefix}:supervisor:restarts"

    @classmethod
    def idempotency(cls, owner: str, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return f"{cls.prefix}:idempotency:{owner}:{digest}"
