"""Each worker sizes its jobs' BLAS and OpenMP threads to its share of the CPUs it may use: a
container's CPU quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), else its affinity,
over the workers on the machine; ``MMC_THREADS_PER_JOB`` overrides it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from algorithms.threads import cgroup_cpu_quota, share_of_cpus, usable_cpus
from tests.conftest import ROOT


@pytest.mark.parametrize("cpu_max, cpus", [("200000 100000\n", 2.0), ("150000 100000", 1.5),
                                           ("max 100000\n", None)])
def test_cgroup_v2_quota_is_quota_over_period(tmp_path, cpu_max, cpus):
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert cgroup_cpu_quota(tmp_path / "cpu.max", tmp_path / "none") == cpus


@pytest.mark.parametrize("quota, cpus", [("50000", 0.5), ("-1", None)])
def test_cgroup_v1_quota_is_read_where_there_is_no_v2_file(tmp_path, quota, cpus):
    (tmp_path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(tmp_path / "cpu.max", tmp_path) == cpus


def test_no_cgroup_files_is_no_quota(tmp_path):
    assert cgroup_cpu_quota(tmp_path / "cpu.max", tmp_path / "cpu") is None


def test_the_share_divides_the_usable_cpus_and_is_never_zero():
    cpus = usable_cpus()
    assert 1 <= cpus <= len(os.sched_getaffinity(0))
    assert share_of_cpus(1) == cpus
    assert share_of_cpus(cpus) == 1 and share_of_cpus(4 * cpus) == 1


def worker_threads(env: dict[str, str], affinity: set[int] | None = None) -> dict:
    """What a worker process sets: its job threads and the BLAS/OpenMP pools' sizes after."""
    code = (
        "import json, os\n"
        f"{'' if affinity is None else f'os.sched_setaffinity(0, {sorted(affinity)!r})'}\n"
        "from threadpoolctl import threadpool_info\n"
        "from core.settings import get_settings\n"
        "from worker.main import job_threads\n"
        "from algorithms.threads import limit_process_threads\n"
        "threads = job_threads(get_settings())\n"
        "limit_process_threads(threads)\n"
        "print(json.dumps({'threads': threads, 'omp': os.environ['OMP_NUM_THREADS'],\n"
        "  'pools': sorted({pool['num_threads'] for pool in threadpool_info()})}))\n")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MMC_") and not k.endswith("_NUM_THREADS")}
    return printed_json(code, {**clean, **env})


def printed_json(code: str, env: dict[str, str]) -> dict:
    """What ``code``, run in a fresh Python with ``env``, printed as JSON."""
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_a_worker_limits_its_pools_to_its_share_of_its_cpus():
    cpus = usable_cpus()
    alone = worker_threads({})
    assert alone == {"threads": cpus, "omp": str(cpus), "pools": [cpus]}
    # mmc serve --workers-per-queue 2: four workers on the machine.
    assert worker_threads({"MMC_LOCAL_WORKERS": "4"})["pools"] == [max(cpus // 4, 1)]
    # A worker pinned to one CPU (taskset, a cpuset) gets one thread.
    assert worker_threads({}, affinity={min(os.sched_getaffinity(0))})["pools"] == [1]


def test_mmc_threads_per_job_overrides_the_share():
    limited = worker_threads({"MMC_THREADS_PER_JOB": "3", "MMC_LOCAL_WORKERS": "8"})
    assert limited == {"threads": 3, "omp": "3", "pools": [3]}


def compiled_bands(limit: int | None) -> dict:
    """In a fresh process (optionally after ``limit_process_threads(limit)``): the threads the
    compiled kernels' loops may use, and the bands a kernel sum of 4,096 rows (``rbf_sums``)
    was filled in, one per thread."""
    code = (
        "import json\n"
        "import numpy as np\n"
        "import algorithms.kernels as kernels\n"
        "from algorithms.threads import compute_threads, limit_process_threads, usable_cpus\n"
        f"{'' if limit is None else f'limit_process_threads({limit})'}\n"
        "bands = []\n"
        "compiled = kernels.compiled_rbf_sums()\n"
        "def fill(*args):\n"
        "    bands.append(len(args[-1]))\n"
        "    compiled(*args)\n"
        "kernels.compiled_rbf_sums = lambda: fill\n"
        "X = np.random.default_rng(0).normal(size=(4096, 3))\n"
        "sums = kernels.rbf_sums(X, X[:50], 0.5, np.ones(50))\n"
        "kernels.compiled_rbf_sums = lambda: compiled\n"
        "assert np.allclose(sums, kernels.rbf_sums(X, X[:50], 0.5, np.ones(50)))\n"
        "print(json.dumps({'threads': compute_threads(), 'bands': len(bands),\n"
        "                  'cpus': usable_cpus()}))\n")
    return printed_json(code, {k: v for k, v in os.environ.items()
                               if not k.endswith("_NUM_THREADS")})


def test_the_compiled_kernels_loops_keep_to_the_process_limit():
    # A worker's share of one thread: one band, where the machine's cores would oversubscribe
    # the CPUs the worker shares with others (or a container's quota, below the host's cores).
    assert compiled_bands(1) == {"threads": 1, "bands": 1, "cpus": usable_cpus()}
    unlimited = compiled_bands(None)
    assert unlimited["threads"] == unlimited["cpus"] == usable_cpus()
    assert unlimited["bands"] == min(usable_cpus(), 16)
