"""Job metrics in Redis: counters and histograms that every worker adds to one hash
(``mmc:metrics``), so a scrape of any API process reports the deployment's totals
(:mod:`service.metrics`). Workers serve no HTTP: job outcomes, fit seconds, lost jobs and webhook
deliveries (rare events) go to Redis as they happen. The API's own request metrics are
``prometheus_client``'s, per process.
"""

from __future__ import annotations

import json
import logging

from redis import Redis
from redis.exceptions import RedisError

from core.job_record import JobStatus

log = logging.getLogger(__name__)

REDIS_KEY = "mmc:metrics"
FIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

# The families the workers add to the hash: name -> (type, help); histograms are stored as
# their _bucket/_count/_sum series.
FAMILIES = {
    "mmc_jobs_finished_total": ("counter", "Jobs that reached a final status, by algorithm and "
                                           "outcome (succeeded, failed, canceled)."),
    "mmc_job_fit_seconds": ("histogram", "Fit time of succeeded jobs by algorithm."),
    "mmc_jobs_lost_total": ("counter", "Jobs whose worker died, by algorithm and action "
                                       "(requeued, failed)."),
    "mmc_webhook_deliveries_total": ("counter", "Job callbacks by outcome (delivered, failed "
                                                "after every attempt, refused by the SSRF guard, "
                                                "no_secret for the tenant)."),
}

Labels = tuple[tuple[str, str], ...]


def field_name(name: str, labels: Labels) -> str:
    """The hash field of one series: its name and sorted labels as JSON."""
    return json.dumps([name, list(labels)])


def histogram_deltas(name: str, labels: dict[str, str], value: float, buckets
                     ) -> list[tuple[str, Labels, float]]:
    base = tuple(sorted(labels.items()))
    deltas = [(f"{name}_bucket", (*base, ("le", str(bound))), 1.0)
              for bound in buckets if value <= bound]
    deltas.append((f"{name}_bucket", (*base, ("le", "+Inf")), 1.0))
    deltas.append((f"{name}_count", base, 1.0))
    deltas.append((f"{name}_sum", base, value))
    return deltas


def add_deltas(redis: Redis, deltas) -> None:
    """Add ``(name, labels, amount)`` deltas to the shared hash in one round trip."""
    with redis.pipeline(transaction=False) as pipe:
        for name, labels, amount in deltas:
            pipe.hincrbyfloat(REDIS_KEY, field_name(name, labels), amount)
        pipe.execute()


def record(redis: Redis, name: str, amount: float = 1.0, **labels: str) -> None:
    """Add to a counter now (workers; never raises: metrics must not fail a job)."""
    try:
        add_deltas(redis, [(name, tuple(sorted(labels.items())), amount)])
    except RedisError as exc:
        log.warning("metric %s not recorded: %s", name, exc)


def observe(redis: Redis, name: str, value: float, buckets=FIT_BUCKETS, **labels: str) -> None:
    """Add one observation to a histogram now (workers; never raises)."""
    try:
        add_deltas(redis, histogram_deltas(name, labels, value, buckets))
    except RedisError as exc:
        log.warning("metric %s not recorded: %s", name, exc)


def job_finished(redis: Redis, algorithm: str, outcome: JobStatus,
                 fit_seconds: float | None = None) -> None:
    """A job reached ``outcome``; a succeeded one adds its fit time to the histogram."""
    record(redis, "mmc_jobs_finished_total", algorithm=algorithm, outcome=outcome)
    if outcome == JobStatus.SUCCEEDED and fit_seconds is not None:
        observe(redis, "mmc_job_fit_seconds", float(fit_seconds), algorithm=algorithm)
