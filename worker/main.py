"""Worker entry point: ``mmc worker [--queue fast] [--queue slow]`` or ``python -m worker``."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import sklearn
from redis import Redis
from rq import Worker as ForkingWorker
from rq.worker import WorkerStatus

from algorithms.dual_qp import compiled_smo
from algorithms.kernels import (
    compiled_rbf_block,
    compiled_rbf_segments_inside,
    compiled_rbf_segments_inside_from_factors,
    compiled_rbf_sums,
)
from algorithms.lowrank_sdp import compiled_active_set, compiled_factored_dual, compiled_lbfgs
from algorithms.registry import get_spec, import_estimators
from algorithms.selection.candidates import compiled_kmeans
from algorithms.selection.n_clusters import compiled_transfer
from algorithms.threads import limit_process_threads, share_of_cpus
from core.blobs import blob_store
from core.jobs import lost_job, record_id
from core.lifetime import die_with_parent
from core.queues import IN_PROCESS, QUEUE_NAMES, SERIALIZER, WEBHOOK_QUEUE, get_queue
from core.settings import Settings, get_settings
from worker.arguments import build_parser
from worker.sweeper import Sweeper


def horse_killed(job, retpid, ret_val, rusage) -> None:
    """A work horse died (``kill -9``, out of memory): re-queue a retry-safe job once, else fail
    it with the reason at once rather than on the next read."""
    signal_name = f"signal {os.WTERMSIG(ret_val)}" if ret_val and os.WIFSIGNALED(ret_val) \
        else f"status {ret_val}"
    lost_job(job.connection, get_settings(), record_id(job.id),
             f"the worker process running the job was killed ({signal_name}) before it finished",
             expected_rq_id=job.id)


class Worker(ForkingWorker):
    """RQ's worker, which runs each job in a work horse forked for it, except the small jobs
    that the API marks ``in_process`` (:func:`core.jobs.runs_in_process`): those run in the
    worker itself, as RQ's ``SimpleWorker`` runs every job.

    A small job keeps what matters of a horse's isolation: its exceptions, its timeout (SIGALRM)
    and a cancel (noticed at its next progress report) end that job alone, and its data is too
    small for a memory cap to matter; if it crashes the process, the worker's death is a lost
    job like any other (the sweepers re-queue or fail it) and its supervisor restarts it."""

    _in_process = False

    def execute_job(self, job, queue):
        if not job.meta.get(IN_PROCESS):
            return super().execute_job(job, queue)
        execution = self.prepare_execution(job)
        self._in_process = True
        try:
            self.perform_job(job, queue, execution)
        finally:
            self._in_process = False
        self.set_state(WorkerStatus.IDLE)
        return None

    def main_work_horse(self, job, queue):
        die_with_parent(signal.SIGKILL)  # a worker killed takes its job with it
        return super().main_work_horse(job, queue)

    def kill_horse(self, *args, **kwargs):
        if self._in_process:
            return None  # no horse: killing "its" process group would kill the worker
        return super().kill_horse(*args, **kwargs)

    def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
        if self._in_process:  # nothing renews it while the job runs: cover the job's timeout
            return int(job.timeout or 180) + 60
        return super().get_heartbeat_ttl(job, working_time)


def warm_up_fit() -> None:
    """A tiny iterSVR fit before the work horses fork: it sets up what a fit initialises once
    per process (the thread-pool controllers of threadpoolctl and scikit-learn, lazily loaded
    modules), so that each horse inherits it instead of paying for it in every job."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(-3.0, 1.0, (8, 2)), rng.normal(3.0, 1.0, (8, 2))])
    get_spec("itersvr").build({"random_state": 0, "n_init": 1}).fit(X)


# The numba kernels: the RBF kernel blocks and sums of few features, SVC's segment tests,
# iterSVR's SMO, k-means, the box QP's active set, the factored smoothed dual of the low-rank
# SDPs, the robust SDPs' inner problem, and the one-vs-one SVM of n_clusters="auto" (on iterSVR's
# SMO).
COMPILED_KERNELS = (compiled_rbf_block, compiled_rbf_sums, compiled_rbf_segments_inside,
                    compiled_rbf_segments_inside_from_factors, compiled_smo, compiled_kmeans,
                    compiled_active_set, compiled_factored_dual, compiled_lbfgs,
                    compiled_transfer)
# Compiled into the disk cache in two processes side by side (``make install``), in two rounds:
# first the callees, the active set alone (the longest) beside all the others; then the kernels
# that call them, L-BFGS beside the one-vs-one SVM, which load their compiled callees from the
# cache instead of compiling them again.
_CALLERS = (compiled_lbfgs, compiled_transfer)
_ROUNDS = (((compiled_active_set,),
            tuple(load for load in COMPILED_KERNELS
                  if load not in (*_CALLERS, compiled_active_set))),
           tuple((load,) for load in _CALLERS))


def _load_kernels(kernels: tuple) -> None:
    for load in kernels:
        load()


def warm_compiled_kernels(processes: int = 1) -> None:
    """Load the numba kernels once, not in every work horse; compiled and cached on disk the
    first time. ``processes > 1`` (``make install``) only fills the disk cache, in two
    processes side by side."""
    if processes <= 1:
        for load in COMPILED_KERNELS:
            load()
        return
    context = multiprocessing.get_context("fork")
    # One process per group of the widest round.
    with ProcessPoolExecutor(max(map(len, _ROUNDS)), mp_context=context) as pool:
        for groups in _ROUNDS:
            list(pool.map(_load_kernels, groups))


def lower_priority(niceness: int) -> None:
    """Add ``niceness`` to this process's nice value (``MMC_WORKER_NICENESS``), so that fits
    take only the CPU that other processes leave. Off by default: beside a busy process a fit
    at niceness 10 gets about a tenth of a core, while at equal priority the API still answers
    in milliseconds under a full backlog (the scheduler favours its short, waking requests;
    ``docs/service_performance.md``).

    Under the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``)
    CPU is shared between sessions first and a nice value only orders the processes of one
    session; a worker that leads its own session (``mmc serve`` starts each so) sets its
    session's nice value as well."""
    if niceness <= 0:
        return
    os.nice(niceness)
    if os.getsid(0) == os.getpid():
        with contextlib.suppress(OSError):  # no autogroups in this kernel or container
            Path("/proc/self/autogroup").write_text(f"{niceness}\n")


def local_workers() -> int:
    """Workers sharing this machine's CPUs (``MMC_LOCAL_WORKERS``, which ``mmc serve`` sets);
    one where it is unset, as in a container whose CPU limit is this worker's alone."""
    return max(int(os.environ.get("MMC_LOCAL_WORKERS") or 1), 1)


def job_threads(settings: Settings) -> int:
    """BLAS and OpenMP threads of this worker's jobs: ``MMC_THREADS_PER_JOB``, else its share
    of the CPUs it may use (a container's CPU limit, else its affinity) among the workers on
    the machine. More threads than CPUs spin-wait on each other: a job beside one busy process
    ran many times slower with two threads on two CPUs than with one."""
    return settings.threads_per_job or share_of_cpus(local_workers())


def run_worker(queues: list[str], redis_url: str | None = None, *, burst: bool = False,
               name: str | None = None) -> bool:
    """Serve ``queues`` (in priority order) until stopped; one job at a time, in a forked horse.
    A sweeper thread beside it finds jobs lost by other workers (see :mod:`worker.sweeper`)."""
    settings = get_settings()
    lower_priority(settings.worker_niceness)
    # Before any fit: the work horses fork from this process and inherit its limit.
    limit_process_threads(job_threads(settings))
    connection = Redis.from_url(redis_url or settings.redis_url)
    # The registry names estimators lazily: import them all once, before the work horses fork,
    # so that each horse inherits them instead of importing them for its one job.
    import_estimators()
    # What a job passes to scikit-learn's estimators and functions comes from validated params
    # models: their per-call parameter checks (a tenth of a small job's CPU) are skipped here.
    # Input data is still checked (check_array).
    sklearn.set_config(skip_parameter_validation=True)
    warm_compiled_kernels()
    warm_up_fit()
    if "slow" in queues:
        import cvxpy  # noqa: F401  (the SDPs' general solvers: imported once, not per horse)
    worker = Worker(
        [get_queue(q, connection) for q in [*queues, WEBHOOK_QUEUE]],
        connection=connection,
        serializer=SERIALIZER,
        name=name,
        job_monitoring_interval=5,
        work_horse_killed_handler=horse_killed,
    )
    # The blob store (and, for S3, boto3 and its client) is made here, before the sweeper's
    # thread could make it: a work horse forked while that thread imported boto3 would inherit
    # the import's lock held and wait on it forever.
    blob_store(settings)
    sweeper = Sweeper(redis_url or settings.redis_url, settings)
    if not burst:
        sweeper.start()
    try:
        # The scheduler re-queues webhook deliveries whose retry interval has passed.
        return worker.work(burst=burst, logging_level="INFO", with_scheduler=True)
    finally:
        sweeper.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run_worker(args.queues or list(QUEUE_NAMES), args.redis_url, burst=args.burst, name=args.name)
    return 0
