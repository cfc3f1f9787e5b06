"""Group commit of small job submissions: the requests that arrive while a batch is being stored
are stored together as the next batch, in three Redis round trips and one worker-thread call
(:meth:`service.jobs.JobService.create_many`), instead of three round trips and a thread each.

With one request at a time a batch holds one job and nothing waits longer than before; under
load the batches grow, and the per-request cost of the round trips, the thread hand-offs and
their contention for the GIL shrinks with them. Only small, self-contained submissions are
batched (points or sequences in the body): one that names a stored dataset loads it first, which
may take long and would hold up the batch behind it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from anyio import CapacityLimiter, to_thread

from core import deadlines
from core.job_record import JobRecord
from service.jobs import JobService

MAX_BATCH = 64  # bounds one batch's time in its thread (a millisecond or so per job)


class SubmitBatcher:
    def __init__(self, jobs: JobService):
        self.jobs = jobs
        self._waiting: list[tuple[tuple[Any, str, str | None], asyncio.Future,
                                  deadlines.Deadline | None]] = []
        self._drain: asyncio.Task | None = None
        self._limiter: CapacityLimiter | None = None

    async def create(self, request: Any, owner: str, idempotency_key: str | None
                     ) -> tuple[JobRecord, bool]:
        """:meth:`JobService.create`, stored in the next batch. Waiting for it (and for the
        batch before it) is waiting on Redis and the store: it counts against the request's
        deadline, which answers 503 when it passes first (the batch may still store the job: a
        retry with the same Idempotency-Key finds it)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        deadline = deadlines.current()
        self._waiting.append(((request, owner, idempotency_key), future, deadline))
        if self._drain is None or self._drain.done():
            self._drain = loop.create_task(self._store_batches())
        if deadline is None:
            result = await future
        else:
            try:
                with deadline.waiting():
                    result = await asyncio.wait_for(future, max(deadline.left(), 0.0))
            except TimeoutError:
                raise deadlines.DeadlineExceededError(
                    deadline.seconds, "storing the job (Redis and the blob store)") from None
        if isinstance(result, BaseException):
            raise result
        return result

    async def _store_batches(self) -> None:
        if self._limiter is None:  # made on first use: a limiter belongs to the event loop
            self._limiter = CapacityLimiter(1)
        while self._waiting:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            # The batch's calls may wait as long as the most patient of its requests.
            deadlines.use(_latest([deadline for _, _, deadline in batch]))
            try:
                results = await to_thread.run_sync(
                    self.jobs.create_many, [item for item, _, _ in batch], limiter=self._limiter)
            except Exception as exc:  # each waiting request answers with it
                results = [exc] * len(batch)
            except BaseException:  # shutting down: the waiting requests end with the loop
                for _, future, _ in [*batch, *self._waiting]:
                    future.cancel()
                raise
            for (_, future, _), result in zip(batch, results, strict=True):
                if not future.done():  # a request whose client left (or deadline passed)
                    future.set_result(result)


def _latest(batch: list[deadlines.Deadline | None]) -> deadlines.Deadline | None:
    """The most time left among the batch's requests, as the batch's own deadline."""
    given = [deadline for deadline in batch if deadline is not None]
    return deadlines.Deadline(max(deadline.left() for deadline in given)) if given else None
