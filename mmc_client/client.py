"""``Client`` (blocking) and ``AsyncClient`` (asyncio) over httpx: the same methods, defined once.

Every method builds an operation of :mod:`mmc_client._flows` and hands it to ``_run``, which
performs its requests and pauses: blocking in :class:`Client` (no threads), awaited in
:class:`AsyncClient` (each method returns a coroutine).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from mmc_client import _flows as flows
from mmc_client._flows import Call, Flow, Sleep

DEFAULT_TIMEOUT = 30.0  # seconds for one request (a long poll adds its wait)
CLUSTER_TIMEOUT = 600.0


class _Methods:
    """The service's operations; ``_run`` decides how they are performed."""

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, headers: dict[str, str] | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Accept": "application/json", **(headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._kinds: dict[str, str] = {}  # algorithm name -> input kind, read once

    def _run(self, flow: Flow) -> Any:
        raise NotImplementedError

    def _call(self, call: Call) -> dict[str, Any]:
        return {"method": call.method, "url": call.path, "params": call.params,
                "json": call.json, "content": call.content, "headers": call.headers,
                "timeout": call.timeout or self.timeout}

    # -- the operations ---------------------------------------------------------------------
    def cluster(self, X: Any, algorithm: str, *, y: Any = None,
                timeout: float | None = CLUSTER_TIMEOUT, **params: Any):
        """Run ``algorithm`` on ``X`` (a matrix, or integer sequences for m3n) and return its
        :class:`Result`: submit, long-poll until it ends, fetch the result. A job still running
        after ``timeout`` seconds is canceled and :class:`JobTimeoutError` raised; a failed
        job raises :class:`JobFailedError`; a rejected request :class:`MMCError`."""
        return self._run(flows.cluster(X, algorithm, params, y=y, timeout=timeout,
                                       request_timeout=self.timeout, kinds=self._kinds))

    def submit(self, X: Any = None, algorithm: str = "itersvr", *, y: Any = None,
               dataset_id: str | None = None, idempotency_key: str | None = None,
               callback_url: str | None = None, **params: Any):
        """Queue a job and return its resource (``id``, ``status``...) at once."""
        return self._run(flows.submit(X, algorithm, params, y=y, dataset_id=dataset_id,
                                      idempotency_key=idempotency_key,
                                      callback_url=callback_url, kinds=self._kinds))

    def wait(self, job_id: str, timeout: float | None = CLUSTER_TIMEOUT):
        """The job resource once it has ended (long polling); :class:`JobTimeoutError` after
        ``timeout`` seconds, the job left as it is."""
        return self._run(flows.wait(job_id, timeout, self.timeout))

    def job(self, job_id: str):
        """The job resource now: status, progress, timing, error."""
        return self._run(self._json(Call("GET", f"/v1/jobs/{job_id}")))

    def jobs(self, offset: int = 0, limit: int = 20, *, status: str | list[str] | None = None,
             algorithm: str | None = None, created_after: str | None = None,
             created_before: str | None = None):
        """A page of the caller's jobs, newest first, optionally only those in ``status`` (one
        or several), of ``algorithm``, or created between two ISO 8601 times."""
        params: dict[str, Any] = {"offset": offset, "limit": limit}
        filters = {"status": [status] if isinstance(status, str) else status,
                   "algorithm": algorithm, "created_after": created_after,
                   "created_before": created_before}
        params.update({name: value for name, value in filters.items() if value is not None})
        return self._run(self._json(Call("GET", "/v1/jobs", params=params)))

    def result(self, job_id: str):
        """:class:`Result` of a succeeded job (:class:`JobFailedError` otherwise)."""
        return self._run(flows.result(job_id))

    def cancel(self, job_id: str):
        """Cancel a queued or running job; returns its resource."""
        return self._run(flows.cancel(job_id))

    def predict(self, model_id: str, X: Any = None, *, sequences: Any = None):
        """Labels of new points (``sequences`` for an m3n model) from a trained model."""
        return self._run(flows.predict(model_id, X, sequences))

    def upload(self, X: Any):
        """Store a matrix once (sent as .npy) and return its dataset id for ``submit``."""
        return self._run(flows.upload(X))

    def export_model(self, model_id: str):
        """``(meta, arrays)``: the portable model (JSON metadata and numpy arrays)."""
        return self._run(flows.export_model(model_id))

    def import_model(self, meta: dict[str, Any], arrays: dict[str, Any], *,
                     ttl_seconds: int | None = None):
        """Store an exported model (``export_model``'s ``(meta, arrays)``, from this service or
        another) as a new model of the caller; returns its resource, whose ``id`` predicts."""
        return self._run(flows.import_model(meta, arrays, ttl_seconds))

    def delete_dataset(self, dataset_id: str) -> None:
        """Delete the caller's dataset now (:class:`MMCError` 404 if it is not there)."""
        self._run(flows.request(Call("DELETE", f"/v1/datasets/{dataset_id}", ok=(204,))))

    def delete_model(self, model_id: str) -> None:
        """Delete the caller's model now; no API process predicts with it again."""
        self._run(flows.request(Call("DELETE", f"/v1/models/{model_id}", ok=(204,))))

    def algorithms(self):
        """The algorithms with their parameter schemas and limits."""
        return self._run(self._json(Call("GET", "/v1/algorithms")))

    @staticmethod
    def _json(call: Call) -> Flow:
        return (yield from flows.request(call)).json()


class Client(_Methods):
    """Blocking client: ``Client("http://127.0.0.1:8000").cluster(X, "itersvr")``.

    Use as a context manager (or call :meth:`close`) to release its connections.
    """

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None):
        super().__init__(base_url, api_key, timeout=timeout, headers=headers)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers,
                                  transport=transport)

    def _run(self, flow: Flow) -> Any:
        try:
            step = next(flow)
            while True:
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    step = flow.send(None)
                    continue
                try:
                    response = self._http.request(**self._call(step))
                except httpx.TransportError as exc:
                    step = flow.throw(exc)
                    continue
                step = flow.send(response)
        except StopIteration as stop:
            return stop.value

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Methods):
    """The asyncio twin of :class:`Client`: the same methods, each to be awaited.

    ``async with AsyncClient(url) as client: result = await client.cluster(X, "itersvr")``
    """

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, headers: dict[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        super().__init__(base_url, api_key, timeout=timeout, headers=headers)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self.headers,
                                       transport=transport)

    async def _run(self, flow: Flow) -> Any:
        try:
            step = next(flow)
            while True:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    step = flow.send(None)
                    continue
                try:
                    response = await self._http.request(**self._call(step))
                except httpx.TransportError as exc:
                    step = flow.throw(exc)
                    continue
                step = flow.send(response)
        except StopIteration as stop:
            return stop.value

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
