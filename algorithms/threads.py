"""Thread control for the many small BLAS and OpenMP calls of a fit.

Threads pay off for large matrix products, not for calls of a few milliseconds, where the hand-off
and spin-waiting of idle threads dominate (worst with another process on a core, where a small
k-means can spend far longer spin-waiting than computing). Every algorithm limits threads through
:func:`small_problem_threads`, so a notebook user and a worker see the same speed without setting
``OMP_NUM_THREADS``.

A worker limits the threads of its whole process to its share of the CPUs
(:func:`limit_process_threads`, :func:`share_of_cpus`), so that the large products of a fit
(SVC's kernel sums) do not oversubscribe a machine or a container's CPU limit that other
workers share.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


# Read by the BLAS and OpenMP libraries when they load: set for those a process loads later.
THREAD_ENVIRONMENT = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                      "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")


def cgroup_cpu_quota(v2: Path = CGROUP_V2_CPU_MAX, v1: Path = CGROUP_V1_CPU) -> float | None:
    """CPUs the cgroup's quota allows (a container's CPU limit: ``quota / period``), or None
    where no quota is set (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``)."""
    try:
        quota, period = v2.read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (v1 / "cpu.cfs_quota_us").read_text().strip()
            period = (v1 / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    if quota in ("max", "-1") or int(period) <= 0:
        return None
    return int(quota) / int(period)


def usable_cpus() -> int:
    """CPUs this process may use: those of its affinity mask, fewer under a cgroup quota
    (rounded up: a quota of 1.5 CPUs keeps two threads busy part of the time)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus or 1, math.ceil(quota))
    return max(cpus or 1, 1)


def share_of_cpus(processes: int) -> int:
    """Threads for one of ``processes`` processes sharing :func:`usable_cpus` (at least 1)."""
    return max(usable_cpus() // max(processes, 1), 1)


# The limit of limit_process_threads, inherited by forked children; None: no limit was set.
_process_threads: int | None = None


def limit_process_threads(threads: int) -> None:
    """At most ``threads`` BLAS and OpenMP threads in this process and the ones it forks: the
    libraries loaded now through threadpoolctl, those loaded later through their environment
    variables, and the threads of the compiled kernels' own parallel loops
    (:func:`compute_threads`). :func:`small_problem_threads` still goes down to one within it,
    and restores this limit after. (The numba kernels are serial: numba starts no threads of
    its own.)"""
    global _process_threads
    for name in THREAD_ENVIRONMENT:
        os.environ[name] = str(threads)
    _thread_pools().limit(limits=threads)
    _process_threads = max(int(threads), 1)


def compute_threads() -> int:
    """Threads for a fit's own parallel loops (the compiled kernels run in bands of rows on
    threads that release the GIL): the limit of :func:`limit_process_threads` where one was
    set (a worker's share of the CPUs), else the CPUs this process may use
    (:func:`usable_cpus`: its affinity and its container's CPU quota, not the host's cores)."""
    return _process_threads if _process_threads is not None else _usable_cpus_of(os.getpid())


@functools.cache
def _usable_cpus_of(pid: int) -> int:
    # Read once per process: the loops ask thousands of times in a fit.
    return usable_cpus()
