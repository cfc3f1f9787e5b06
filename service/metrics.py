"""The API process's request metrics and the Prometheus text exposition of ``GET /metrics``.

An API process counts requests locally (no Redis call on the request path) and a daemon thread
adds the deltas to the shared hash of :mod:`core.metrics` every second; a scrape first flushes
its own process. Queue depths and worker counts are read from Redis at scrape time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict

from redis import Redis
from redis.exceptions import RedisError

from core.metrics import FAMILIES, REDIS_KEY, Labels, add_deltas, histogram_deltas

log = logging.getLogger(__name__)

FLUSH_SECONDS = 1.0
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


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
                     *histogram_deltas("mmc_http_request_seconds", {"route": route}, seconds,
                                       REQUEST_BUCKETS)])

    def job_created(self, algorithm: str) -> None:
        self._count([("mmc_jobs_created_total", (("algorithm", algorithm),), 1.0)])

    def lifecycle(self, kind: str, action: str, stored_bytes: int) -> None:
        labels = (("action", action), ("kind", kind))
        self._count([("mmc_lifecycle_total", labels, 1.0),
                     ("mmc_lifecycle_bytes_total", labels, float(stored_bytes))])

    def flush(self) -> None:
        with self._lock:
            deltas, self._deltas = self._deltas, defaultdict(float)
        if not deltas:
            return
        try:
            add_deltas(self.redis, [(name, labels, amount)
                                    for (name, labels), amount in deltas.items()])
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
