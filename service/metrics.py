"""``GET /metrics``: the API process's own metrics and the deployment's, in Prometheus's format
(written by ``prometheus_client``).

- **This process's** requests, latencies, jobs created, deletes and imports, and model-cache hits
  are ``prometheus_client`` counters and histograms. Where one pod (or ``mmc serve``) runs several
  uvicorn processes, ``PROMETHEUS_MULTIPROC_DIR`` names a directory they share (``processes.
  start_api`` sets one), and a scrape of any of them reports their sum
  (``prometheus_client``'s multiprocess mode). Prometheus sums over pods.
- **The deployment's** job outcomes, fit seconds, lost jobs and webhook deliveries, which the
  workers add to one Redis hash (:mod:`core.metrics`), and the queue depths, workers per queue and
  process restarts, are read from Redis at scrape time: every API pod reports the same values, so
  queries take their ``max`` over pods (docs/kubernetes.md).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from redis import Redis
from redis.exceptions import RedisError

from core.metrics import FAMILIES, REDIS_KEY

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"

# This process's metrics (files in PROMETHEUS_MULTIPROC_DIR when it is set).
_PROCESS = CollectorRegistry(auto_describe=True)
REQUESTS = Counter("mmc_http_requests", "HTTP requests by method, route and status.",
                   ["method", "route", "status"], registry=_PROCESS)
REQUEST_SECONDS = Histogram("mmc_http_request_seconds", "Request latency by route.", ["route"],
                            buckets=REQUEST_BUCKETS, registry=_PROCESS)
JOBS_CREATED = Counter("mmc_jobs_created", "Jobs accepted by algorithm.", ["algorithm"],
                       registry=_PROCESS)
LIFECYCLE = Counter("mmc_lifecycle", "Datasets and models deleted or imported by their tenant, "
                    "by kind (dataset, model) and action (deleted, imported).",
                    ["kind", "action"], registry=_PROCESS)
LIFECYCLE_BYTES = Counter("mmc_lifecycle_bytes", "Stored bytes those deletes removed and those "
                          "imports added, by kind and action.", ["kind", "action"],
                          registry=_PROCESS)
MODEL_CACHE = Counter("mmc_model_cache", "Predict-cache lookups of decoded models, by result "
                      "(hit, miss).", ["result"], registry=_PROCESS)


class Metrics:
    """What the API's routes count, and the scrape."""

    def __init__(self, redis: Redis):
        self.redis = redis

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        REQUESTS.labels(method, route, str(status)).inc()
        REQUEST_SECONDS.labels(route).observe(seconds)

    def job_created(self, algorithm: str) -> None:
        JOBS_CREATED.labels(algorithm).inc()

    def lifecycle(self, kind: str, action: str, stored_bytes: int) -> None:
        LIFECYCLE.labels(kind, action).inc()
        LIFECYCLE_BYTES.labels(kind, action).inc(stored_bytes)

    @staticmethod
    def model_cache(hit: bool) -> None:
        MODEL_CACHE.labels("hit" if hit else "miss").inc()

    def render(self, gauges: dict[str, list[tuple[dict[str, str], float]]]) -> bytes:
        """The exposition: this process's (or its pod's) metrics, the deployment's totals from
        Redis, and the scrape-time ``gauges``."""
        registry = CollectorRegistry()
        directory = os.environ.get(MULTIPROCESS_DIRECTORY)
        if directory:
            MultiProcessCollector(registry, path=directory)  # registers itself
        else:
            registry.register(_ProcessCollector())
        registry.register(_DeploymentCollector(self.redis, gauges))
        return generate_latest(registry)


class _ProcessCollector:
    def collect(self):
        yield from _PROCESS.collect()


class _DeploymentCollector:
    """The workers' counters and histograms from the Redis hash, and the scrape's gauges."""

    def __init__(self, redis: Redis, gauges: dict[str, list[tuple[dict[str, str], float]]]):
        self.redis = redis
        self.gauges = gauges

    def collect(self):
        series: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        try:
            for field, value in self.redis.hgetall(REDIS_KEY).items():
                name, labels = json.loads(field)
                series[name].append((dict(labels), float(value)))
        except RedisError:
            pass  # mmc_redis_up says so
        for family, (kind, text) in FAMILIES.items():
            metric = Metric(family.removesuffix("_total"), text, kind)
            names = ([f"{family}_bucket", f"{family}_count", f"{family}_sum"]
                     if kind == "histogram" else [family])
            for name in names:
                for labels, value in sorted(series.get(name, []), key=_bucket_order):
                    metric.add_sample(name, labels, value)
            yield metric
        for name, samples in self.gauges.items():
            metric = Metric(name, f"{name} at scrape time.", "gauge")
            for labels, value in samples:
                metric.add_sample(name, labels, value)
            yield metric


def _bucket_order(item: tuple[dict[str, str], float]):
    labels = dict(item[0])
    le = labels.pop("le", None)
    bound = float("inf") if le == "+Inf" else float(le) if le is not None else 0.0
    return sorted(labels.items()), bound
