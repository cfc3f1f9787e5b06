"""Worker entry point: ``mmc worker [--queue fast] [--queue slow]`` or ``python -m worker``."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from redis import Redis
from rq import Worker as ForkingWorker
from rq.worker import WorkerStatus

from algorithms.threads import set_thread_environment, share_of_cpus
from core.blobs import blob_store
from core.lifetime import die_with_parent
from core.queues import IN_PROCESS, QUEUE_NAMES, SERIALIZER, WEBHOOK_QUEUE, get_queue
from core.settings import Settings, get_settings
from worker.arguments import build_parser
from worker.warmup import WarmUp, warm_up_steps


def horse_killed(job, retpid, ret_val, rusage) -> None:
    """A work horse died (``kill -9``, out of memory): re-queue a retry-safe job once, else fail
    it with the reason at once rather than on the next read."""
    from core.jobs import lost_job, record_id

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
    job like any other (the sweepers re-queue or fail it) and its supervisor restarts it.

    Its warm-up (:mod:`worker.warmup`) runs after it has registered, a step at a time while no
    job waits on its queues, so that it counts as listening at once and a job that comes first
    waits for one step at most. It starts at the API's priority and lowers its own
    (``niceness``) once registered, before its warm-up and its first job: a worker starting on a
    busy machine is not left behind the processes it yields to while it computes."""

    _in_process = False
    warm_up: WarmUp | None = None
    niceness = 0

    def bootstrap(self, *args, **kwargs):
        super().bootstrap(*args, **kwargs)
        lower_priority(self.niceness)

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        self.continue_warm_up()
        return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)

    def continue_warm_up(self) -> None:
        """Run warm-up steps until it is done or a job waits; say so once it is done."""
        if self.warm_up is None or self.warm_up.done:
            return
        while not self.warm_up.done and not self.jobs_waiting():
            self.warm_up.step()
        if self.warm_up.done:
            self.log.info("Worker %s: warmed up (numerics imported, kernels loaded)", self.name)

    def jobs_waiting(self) -> bool:
        """Whether a job is queued on one of this worker's queues."""
        return any(queue.count for queue in self.queues)

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


def lower_priority(niceness: int) -> None:
    """Add ``niceness`` to this process's nice value, so that on a machine shared with the API,
    submits, polls and predicts answer in milliseconds while fits take the CPU left.

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
    # Before any BLAS or OpenMP library loads: the work horses fork from this process and
    # inherit the limit (the warm-up applies it to the pools it loads).
    threads = job_threads(settings)
    set_thread_environment(threads)
    # Imported after it: the sweeper loads numpy (through the job records), whose BLAS reads
    # the environment once, when it loads.
    from worker.sweeper import Sweeper

    connection = Redis.from_url(redis_url or settings.redis_url)
    worker = Worker(
        [get_queue(q, connection) for q in [*queues, WEBHOOK_QUEUE]],
        connection=connection,
        serializer=SERIALIZER,
        name=name,
        job_monitoring_interval=5,
        work_horse_killed_handler=horse_killed,
    )
    worker.warm_up = WarmUp(warm_up_steps(queues, threads))
    worker.niceness = settings.worker_niceness
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
