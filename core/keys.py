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
    def expiring_blobs(cls) -> str:
        """Sorted set of ``<record key>|<blob key>`` by the time the blob's record ends
        (:class:`core.stores.BlobLifetimes`)."""
        return f"{cls.prefix}:blobs:expiring"

    @classmethod
    def webhook_claims(cls) -> str:
        """Sorted set of the due webhook retries a sweeper has taken from RQ's scheduled
        registry to queue, by the time it took them (``worker.sweeper.promote_due_deliveries``)."""
        return f"{cls.prefix}:webhooks:promoting"

    @classmethod
    def webhook_delivered(cls, msg_id: str) -> str:
        """Set once an event (its webhook-id) got a 2xx answer: a copy of its delivery job that
        runs after that posts nothing (``worker.deliveries.deliver_event``)."""
        return f"{cls.prefix}:webhooks:delivered:{msg_id}"

    @classmethod
    def process_restarts(cls) -> str:
        """Hash of restart counts by child process of ``mmc serve`` (``GET /metrics``)."""
        return f"{cls.prefix}:supervisor:restarts"

    @classmethod
    def idempotency(cls, owner: str, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return f"{cls.prefix}:idempotency:{owner}:{digest}"


class BlobKeys:
    """Every blob key, under the tenant that owns it (``<kind>/<tenant>/...``), so one tenant's
    objects are one prefix of the bucket or directory."""

    @staticmethod
    def tenant(owner: str) -> str:
        """The owner as one safe path segment: itself when it is plain, else a digest."""
        if owner and len(owner) <= 64 and all(c.isalnum() or c in "-_." for c in owner) \
                and owner.strip(".") == owner:
            return owner
        return "t-" + hashlib.sha256(owner.encode()).hexdigest()[:32]

    @classmethod
    def dataset(cls, owner: str, dataset_id: str) -> str:
        return f"datasets/{cls.tenant(owner)}/{dataset_id}.npy"

    @classmethod
    def upload_part(cls, owner: str, upload_id: str, index: int) -> str:
        return f"uploads/{cls.tenant(owner)}/{upload_id}/{index}.npy"

    @classmethod
    def job_input(cls, owner: str, job_id: str) -> str:
        return f"inputs/{cls.tenant(owner)}/{job_id}.json"

    @classmethod
    def model(cls, owner: str, model_id: str) -> str:
        return f"models/{cls.tenant(owner)}/{model_id}.npz"

    @classmethod
    def result(cls, owner: str, job_id: str, attempt: str | None = None) -> str:
        """One per attempt (``attempt``: its RQ job id, the fence of its writes; the first
        attempt's is the job id): an attempt whose final step is refused deletes its own
        labels, never those of the attempt that the job kept."""
        return f"results/{cls.tenant(owner)}/{attempt or job_id}.npz"

    @classmethod
    def plot(cls, owner: str, job_id: str, fmt: str) -> str:
        return f"plots/{cls.tenant(owner)}/{job_id}.{fmt}"
