from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from redis.exceptions import RedisError
from rq import Worker

from core.keys import Keys
from core.queues import QUEUE_NAMES, get_queue
from service.problems import ProblemError
from service.schemas import Readiness

router = APIRouter(tags=["health"])


def _workers_per_queue(request: Request) -> dict[str, int]:
    redis = request.app.state.redis
    return {name: Worker.count(queue=get_queue(name, redis)) for name in QUEUE_NAMES}


def _retry(request: Request) -> dict[str, str]:
    return {"Retry-After": str(request.app.state.settings.retry_after_seconds)}


@router.get("/healthz")
async def healthz():
    """The process is up (answered on the event loop itself: no thread hand-off)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness,
            responses={503: {"description": "Redis unreachable or a queue has no worker"}})
def readyz(request: Request):
    """Redis answers and every queue has at least one worker listening."""
    try:
        request.app.state.redis.ping()
        workers = _workers_per_queue(request)
    except RedisError as exc:
        raise ProblemError(503, f"Redis is unreachable: {exc}", headers=_retry(request)) from None
    idle = [name for name, count in workers.items() if count == 0]
    if idle:
        raise ProblemError(503, f"no worker listens on queue(s): {', '.join(idle)}",
                           headers=_retry(request))
    if request.app.state.api_keys:
        return {"redis": True, "workers": workers, "auth": "api_keys"}
    return {"redis": True, "workers": workers, "auth": "open",
            "warnings": ["MMC_API_KEYS is empty: the API is open, without authentication"]}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request):
    """Prometheus text format."""
    state = request.app.state
    gauges: dict[str, list] = {}
    try:
        redis = state.redis
        gauges["mmc_queue_jobs"] = [({"queue": q}, float(len(get_queue(q, redis))))
                                    for q in QUEUE_NAMES]
        gauges["mmc_queue_workers"] = [({"queue": q}, float(n))
                                       for q, n in _workers_per_queue(request).items()]
        gauges["mmc_redis_up"] = [({}, 1.0)]
        gauges["mmc_process_restarts"] = [
            ({"process": name.decode()}, float(count))
            for name, count in sorted(redis.hgetall(Keys.process_restarts()).items())]
    except RedisError:
        gauges["mmc_redis_up"] = [({}, 0.0)]
    # Deprecated (this process only): mmc_model_cache_total{result="hit"|"miss"} replaces them.
    cache = state.model_cache
    gauges["mmc_model_cache_hits"] = [({}, float(cache.hits))]
    gauges["mmc_model_cache_misses"] = [({}, float(cache.misses))]
    return Response(state.metrics.render(gauges), media_type=CONTENT_TYPE_LATEST)
