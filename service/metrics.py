"""Prometheus text exposition of request counts, latencies, jobs and queue depths (no client
library: a handful of counters is all the API keeps)."""

from __future__ import annotations

import threading
from collections import defaultdict

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[str, list[float]] = {}
        self.jobs_created: dict[str, int] = defaultdict(int)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            hist = self.latency.setdefault(route, [0.0] * (len(_BUCKETS) + 2))
            for i, bound in enumerate(_BUCKETS):
                if seconds <= bound:
                    hist[i] += 1
            hist[-2] += 1  # count
            hist[-1] += seconds  # sum

    def job_created(self, algorithm: str) -> None:
        with self._lock:
            self.jobs_created[algorithm] += 1

    def render(self, gauges: dict[str, list[tuple[dict[str, str], float]]]) -> str:
        lines = ["# HELP mmc_http_requests_total HTTP requests by route and status.",
                 "# TYPE mmc_http_requests_total counter"]
        with self._lock:
            for (method, route, status), count in sorted(self.requests.items()):
                lines.append(f"mmc_http_requests_total"
                             f"{_labels(method=method, route=route, status=str(status))} {count}")
            lines += ["# HELP mmc_http_request_seconds Request latency by route.",
                      "# TYPE mmc_http_request_seconds histogram"]
            for route, hist in sorted(self.latency.items()):
                for bound, count in zip(_BUCKETS, hist, strict=False):
                    lines.append(f"mmc_http_request_seconds_bucket"
                                 f"{_labels(route=route, le=str(bound))} {int(count)}")
                lines.append(f"mmc_http_request_seconds_bucket{_labels(route=route, le='+Inf')} "
                             f"{int(hist[-2])}")
                count = int(hist[-2])
                lines.append(f"mmc_http_request_seconds_count{_labels(route=route)} {count}")
                lines.append(f"mmc_http_request_seconds_sum{_labels(route=route)} {hist[-1]:.6f}")
            lines += ["# HELP mmc_jobs_created_total Jobs accepted by algorithm.",
                      "# TYPE mmc_jobs_created_total counter"]
            for algorithm, count in sorted(self.jobs_created.items()):
                lines.append(f"mmc_jobs_created_total{_labels(algorithm=algorithm)} {count}")
        for name, samples in gauges.items():
            lines.append(f"# TYPE {name} gauge")
            for labels, value in samples:
                lines.append(f"{name}{_labels(**labels)} {value:g}")
        return "\n".join(lines) + "\n"
