"""One deadline per API request for all of its calls to Redis and the blob store.

A request may spend ``MMC_REQUEST_DEADLINE_SECONDS`` waiting on Redis and the store, summed over
all of its calls and their retries: each call waits at most for what is left (and never longer
than its own timeout), and once nothing is left a call fails at once with
:class:`DeadlineExceededError` instead of starting. A frozen Redis or store thus costs a request
one deadline, not one timeout per call and retry. The request's own work between its calls
(reading and parsing the body, validating, drawing a plot) is not counted, so a loaded machine
does not turn slow work into 503s. Outside a request (workers, the sweeper) no deadline is set and
each call keeps its own timeout. See docs/storage.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

from redis.exceptions import RedisError


class DeadlineExceededError(Exception):
    """The request's deadline passed before a call to Redis or the blob store could finish."""

    def __init__(self, seconds: float, what: str):
        super().__init__(f"{what} did not answer within the request's deadline of {seconds:g} s "
                         "(MMC_REQUEST_DEADLINE_SECONDS)")
        self.seconds = seconds


class RedisDeadlineError(DeadlineExceededError, RedisError):
    """Not one of the errors redis-py retries: a call past the deadline is not tried again."""

    def __init__(self, seconds: float):
        super().__init__(seconds, "the job store (Redis)")


class Deadline:
    """``seconds`` of waiting, spent by the calls that run inside :meth:`waiting`."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.spent = 0.0
        # A call made inside another (redis-py's health check, a retry) counts once: the
        # outermost call's wait, counted as it goes.
        self._depth = 0
        self._since = 0.0

    def left(self) -> float:
        waiting_now = time.monotonic() - self._since if self._depth else 0.0
        return self.seconds - self.spent - waiting_now

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        if not self._depth:
            self._since = time.monotonic()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth:
                self.spent += time.monotonic() - self._since


# A mutable object in the context: threads that run a request's code (Starlette's thread pool
# copies the context) share the request's one budget.
_current: ContextVar[Deadline | None] = ContextVar("mmc_request_deadline", default=None)


def current() -> Deadline | None:
    return _current.get()


def waiting() -> contextlib.AbstractContextManager:
    """Count the block as waiting on Redis or the store against the current deadline."""
    deadline = _current.get()
    return contextlib.nullcontext() if deadline is None else deadline.waiting()


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[Deadline]:
    """Run the block under a new deadline of ``seconds``."""
    token = _current.set(Deadline(seconds))
    try:
        yield _current.get()  # type: ignore[misc]
    finally:
        _current.reset(token)


def use(deadline: Deadline | None) -> None:
    """Make ``deadline`` the current one in this context (a batch stored for several
    requests)."""
    _current.set(deadline)


def time_left(cap: float | None, error: type[DeadlineExceededError], *args) -> float | None:
    """``cap`` (a call's own timeout; ``None``: none) shortened to what is left of the current
    deadline; raises ``error(seconds, *args)`` when nothing is left. Without a deadline: ``cap``."""
    deadline = _current.get()
    if deadline is None:
        return cap
    left = deadline.left()
    if left <= 0:
        raise error(deadline.seconds, *args)
    return left if cap is None else min(cap, left)


class DeadlineConnection:
    """Mixed into the API's Redis connection class (:func:`bound_redis`): connecting, sending and
    reading each wait at most for what is left of the request's deadline."""

    def _connect(self):
        configured = self.socket_connect_timeout
        self.socket_connect_timeout = time_left(configured, RedisDeadlineError)
        try:
            with waiting():
                return super()._connect()
        finally:
            self.socket_connect_timeout = configured

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[None]:
        if _current.get() is None or self._sock is None:
            yield
            return
        try:
            left = time_left(self.socket_timeout, RedisDeadlineError)
        except RedisDeadlineError:
            self.disconnect()  # a reply may be pending on it: the next user must not read it
            raise
        before = self._sock.gettimeout()
        self._sock.settimeout(left)
        try:
            with waiting():
                yield
        finally:
            if self._sock is not None:  # None once an error disconnected it
                self._sock.settimeout(before)

    def send_packed_command(self, command, check_health=True):
        if _current.get() is not None and self._sock is None:
            time_left(None, RedisDeadlineError)  # nothing left: do not even connect
        with self._bounded():
            return super().send_packed_command(command, check_health)

    def read_response(self, *args, **kwargs):
        with self._bounded():
            return super().read_response(*args, **kwargs)


def bound_redis(client):
    """``client`` (a sync redis-py client) with :class:`DeadlineConnection` mixed into its pool's
    connection class (plain, TLS or Unix socket alike); returns it."""
    pool = client.connection_pool
    base = pool.connection_class
    if not issubclass(base, DeadlineConnection):
        pool.connection_class = type(f"Deadline{base.__name__}", (DeadlineConnection, base), {})
    return client
