"""Thread control for the many small BLAS and OpenMP calls of a fit.

Threads pay off for large matrix products, not for calls of a few milliseconds, where the hand-off
and spin-waiting of idle threads dominate (worst with another process on a core, where a small
k-means can spend far longer spin-waiting than computing). Every algorithm limits threads through
:func:`small_problem_threads`, so a notebook user and a worker see the same speed without setting
``OMP_NUM_THREADS``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController


@functools.cache
def _thread_pools() -> ThreadpoolController:
    # Finding the loaded BLAS and OpenMP libraries is slow compared with a call: once per process.
    return ThreadpoolController()


@contextmanager
def small_problem_threads() -> Iterator[None]:
    """One OpenMP and BLAS thread for the many small k-means and matrix calls of a fit."""
    with _thread_pools().limit(limits=1):
        yield
