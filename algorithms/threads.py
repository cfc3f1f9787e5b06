"""Thread control for the many small BLAS and OpenMP calls of a fit.

Threads pay off for large matrix products, not for calls of a few milliseconds, where the
hand-off and spin-waiting of idle threads dominate (worst with another process on a core): on a
2-core machine with a busy core, a 300-point k-means with two threads spent ~100 ms spin-waiting,
against 2 ms with one. Every algorithm limits threads through :func:`small_problem_threads`, so a
notebook user and a worker see the same speed without setting ``OMP_NUM_THREADS``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController


@functools.cache
def _thread_pools() -> ThreadpoolController:
    # Finding the loaded BLAS and OpenMP libraries takes ~10 ms: once per process.
    return ThreadpoolController()


@contextmanager
def small_problem_threads() -> Iterator[None]:
    """One OpenMP and BLAS thread for the many small k-means and matrix calls of a fit."""
    with _thread_pools().limit(limits=1):
        yield
