"""Prometheus text exposition aggregated in Redis, so every API process and every worker adds to
one set of counters and a scrape of any API process reports the same totals.

An API process counts requests locally (no Redis call on the request path) and a daemon thread
adds the deltas to the hash ``mmc:metrics`` every second; a scrape first flushes its own process.
Workers add job outcomes, fit seconds, lost jobs and webhook deliveries directly (rare events).
Queue depths and worker counts are read from Redis at scrape time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict

from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

REDIS_KEY = "mmc:metrics"
FLUSH_SECONDS = 1.0
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
FIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

# name -> (type, help); histograms are stored as their _bucket/_count/_sum series.
FAMILIES = {
    "mmc_http_requests_total": ("counter", "HTTP requests by method, route and status."),
    "mmc_http_request_seconds": ("histogram", "Request latency by route."),
    "mmc_jobs_created_total": ("counter", "Jobs accepted by algorithm."),
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


def _field(name: str, labels: Labels) -> str:
    return json.dumps([name, list(labels)])


def _histogram_deltas(name: str, labels: dict[str, str], value: float, buckets
                      ) -> list[tuple[str, Labels, float]]:
    base = tuple(sorted(labels.items()))
    deltas = [(f"{name}_bucket", (*base, ("le", str(bound))), 1.0)
              for bound in buckets if value <= bound]
    deltas.append((f"{name}_bucket", (*base, ("le", "+Inf")), 1.0))
    deltas.append((f"{name}_count", base, 1.0))
    deltas.append((f"{name}_sum", base, value))
    return deltas


def _add(redis: Redis, deltas) -> None:
    with redis.pipeline(transaction=False) as pipe:
        for name, labels, amount in deltas:
            pipe.hincrbyfloat(REDIS_KEY, _field(name, labels), amount)
        pipe.execute()


def record(redis: Redis, name: str, amount: float = 1.0, **labels: str) -> None:
    """Add to a counter now (workers; never raises: metrics must not fail a job)."""
    try:
        _add(redis, [(name, tuple(sorted(labels.items())), amount)])
    except RedisError as exc:
        log.warning("metric %s not recorded: %s", name, exc)


def observe(redis: Redis, name: str, value: float, buckets=FIT_BUCKETS, **labels: str) -> None:
    """Add one observation to a histogram now (workers; never raises)."""
    try:
        _add(redis, _histogram_deltas(name, labels, value, buckets))
    except RedisError as exc:
        log.warning("metric %s not recorded: %s", name, exc)


def job_finished(redis: Redis, algorithm: str, outcome: str,
                 fit_seconds: float | None = None) -> None:
    """A job reached ``outcome``; a succeeded one adds its fit time to the histogram."""
    record(redis, "mmc_jobs_finished_total", algorithm=algorithm, outcome=outcome)
    if outcome == "succeeded" and fit_seconds is not None:
        observe(redis, "mmc_job_fit_seconds", float(fit_seconds), algorithm=algorithm)


class Metrics:
    """One API process's counters: deltas kept locally and flushed to Redis."""

    def __init__(self, redis: Redis):
        self.redis = redis
        self._lock = threading.Lock()
        self._deltas: dict[tuple[str, Labels], float] = defaultdict(float)
        self._flusher: threading.Thread | None = None

    def _count(self, deltas) -> None:
        with self._lock:
            for name, labels, amount in deltas:
                self._deltas[(name, labels)] += amount
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_forever, name="metrics-flush",
                                             daemon=True)
            self._flusher.start()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self._count([("mmc_http_requests_total", (("method", method), ("route", route),
                                                  ("status", str(status))), 1.0),
                     *_histogram_deltas("mmc_http_request_seconds", {"route": route}, seconds,
                                        REQUEST_BUCKETS)])

    def job_created(self, algorithm: str) -> None:
        self._count([("mmc_jobs_created_total", (("algorithm", algorithm),), 1.0)])

    def flush(self) -> None:
        with self._lock:
            deltas, self._deltas = self._deltas, defaultdict(float)
        if not deltas:
            return
        try:
            _add(self.redis, [(name, labels, amount) for (name, labels), amount in deltas.items()])
        except RedisError:
            with self._lock:  # keep them for the next flush
                for key, amount in deltas.items():
                    self._deltas[key] += amount
            raise

    def _flush_forever(self) -> None:
        stop = threading.Event()
        while not stop.wait(FLUSH_SECONDS):
            try:
                self.flush()
            except RedisError as exc:
                log.debug("metrics not flushed: %s", exc)

    def render(self, gauges: dict[str, list[tuple[dict[str, str], float]]]) -> str:
        """Every process's totals (after flushing this one's) plus the scrape-time gauges."""
        series: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
        try:
            self.flush()
            for field, value in self.redis.hgetall(REDIS_KEY).items():
                name, labels = json.loads(field)
                series[name].append((tuple(tuple(pair) for pair in labels), float(value)))
        except RedisError:
            pass  # mmc_redis_up says so
        lines = []
        for family, (kind, text) in FAMILIES.items():
            lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}"]
            names = ([f"{family}_bucket", f"{family}_count", f"{family}_sum"]
                     if kind == "histogram" else [family])
            for name in names:
                for labels, value in sorted(series.get(name, []), key=_bucket_order):
                    lines.append(f"{name}{_labels(labels)} {_number(value)}")
        for name, samples in gauges.items():
            lines.append(f"# TYPE {name} gauge")
            for labels, value in samples:
                lines.append(f"{name}{_labels(tuple(labels.items()))} {_number(value)}")
        return "\n".join(lines) + "\n"


def _bucket_order(item: tuple[Labels, float]):
    labels = dict(item[0])
    le = labels.pop("le", None)
    bound = float("inf") if le == "+Inf" else float(le) if le is not None else 0.0
    return sorted(labels.items()), bound


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
