"""The statuses of a job, as the service spells them in ``status``.

The client imports nothing of the server, so it names them itself;
``tests/test_job_records.py`` checks that they are the service's ``core.job_record.JobStatus``.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Queued, running, then one of the final three; a member equals its string."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


FINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED})
