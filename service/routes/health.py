from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from redis import Redis
from redis.exceptions import RedisError
from rq import Worker

from core.keys import Keys
from core.queues import QUEUE_NAMES, get_queue
from core.settings import Settings
from service.deps import AppApiKeys, AppMetrics, AppModelCache, AppRedis, AppSettings
from service.problems import ProblemError
from service.schemas import Readiness

router = APIRouter(tags=["health"])


def _workers_per_queue(redis: Redis) -> dict[str, int]:
    return {name: Worker.count(queue=get_queue(name, redis)) for name in QUEUE_NAMES}


def _retry(settings: Settings) -> dict[str, str]:
    return {"Retry-After": str(settings.retry_after_seconds)}


@router.get("/healthz")
async def healthz():
    """The process is up (answered on the event loop itself: no thread hand-off)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness,
            responses={503: {"description": "Redis unreachable or a queue has no worker"}})
def readyz(redis: AppRedis, settings: AppSettings, api_keys: AppApiKeys):
    """Redis answers and every queue has at least one worker listening."""
    try:
        redis.ping()
        workers = _workers_per_queue(redis)
    except RedisError as exc:
        raise ProblemError(503, f"Redis is unreachable: {exc}", headers=_retry(settings)) from None
    idle = [name for name, count in workers.items() if count == 0]
    if idle:
        raise ProblemError(503, f"no worker listens on queue(s): {', '.join(idle)}",
                           headers=_retry(settings))
    if api_keys:
        return {"redis": True, "workers": workers, "auth": "api_keys"}
    return {"redis": True, "workers": workers, "auth": "open",
            "warnings": ["MMC_API_KEYS is empty: the API is open, without authentication"]}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(redis: AppRedis, model_cache: AppModelCache, job_metrics: AppMetrics):
    """Prometheus text format."""
    gauges: dict[str, list] = {}
    try:
        gauges["mmc_queue_jobs"] = [({"queue": q}, float(len(get_queue(q, redis))))
                                    for q in QUEUE_NAMES]
        gauges["mmc_queue_workers"] = [({"queue": q}, float(n))
                                       for q, n in _workers_per_queue(redis).items()]
        gauges["mmc_redis_up"] = [({}, 1.0)]
        gauges["mmc_process_restarts"] = [
            ({"process": name.decode()}, float(count))
            for name, count in sorted(redis.hgetall(Keys.process_restarts()).items())]
    except RedisError:
        gauges["mmc_redis_up"] = [({}, 0.0)]
    # Deprecated (this process only): mmc_model_cache_total{result="hit"|"miss"} replaces them.
    gauges["mmc_model_cache_hits"] = [({}, float(model_cache.hits))]
    gauges["mmc_model_cache_misses"] = [({}, float(model_cache.misses))]
    return Response(job_metrics.render(gauges), media_type=CONTENT_TYPE_LATEST)
