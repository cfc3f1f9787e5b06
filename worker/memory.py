"""A per-job memory cap (``MMC_JOB_MEMORY_MB``), the second line of defence after each
algorithm's ``max_n``.

RQ runs every job in a work horse forked for it, so the cap is an address-space limit
(``RLIMIT_AS``) set inside the horse: the worker and the next job are untouched. The limit is the
horse's address space at the start of the job plus the cap, so the cap counts what the job adds
(its data, the fit's matrices), not the libraries the worker had already loaded. An allocation
past it raises ``MemoryError`` in the fit, which fails the job with a message instead of letting
the kernel's OOM killer take the whole worker (or a neighbour) down.
"""

from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass

MB = 2**20


def default_cap_mb() -> int:
    """Three quarters of the machine's memory divided by the workers on it
    (``MMC_LOCAL_WORKERS``, which ``mmc serve`` sets; else one per CPU)."""
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // MB
    workers = int(os.environ.get("MMC_LOCAL_WORKERS") or os.cpu_count() or 1)
    return max(256, int(0.75 * total_mb / max(workers, 1)))


def address_space_mb() -> float:
    """This process's virtual memory size (``VmSize``), in MB."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) / 1024
    raise OSError("no VmSize in /proc/self/status")


@dataclass(frozen=True)
class MemoryCap:
    cap_mb: int
    baseline_mb: float

    def used_mb(self) -> float:
        return max(address_space_mb() - self.baseline_mb, 0.0)

    def message(self, exc: MemoryError, hint: str) -> str:
        """``used X MB``: what the job held plus the allocation that failed (numpy names it)."""
        used = self.used_mb() + requested_mb(str(exc))
        return (f"out of memory: used {used:.0f} MB of {self.cap_mb} MB (MMC_JOB_MEMORY_MB); "
                f"{hint}")


_UNITS = {"B": 1 / MB, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "TiB": 1024.0**2}


def requested_mb(message: str) -> float:
    """The size in numpy's "Unable to allocate 68.7 MiB for an array ...", else 0."""
    match = re.search(r"allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)", message)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0


def apply_cap(cap_mb: int) -> MemoryCap | None:
    """Limit this process (a work horse) to its current address space plus ``cap_mb``;
    ``None`` when the platform has no such limit or the cap is off (0)."""
    if cap_mb <= 0:
        return None
    try:
        baseline = address_space_mb()
        limit = int((baseline + cap_mb) * MB)
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError):
        return None
    return MemoryCap(cap_mb, baseline)


def hint(algorithm: str, max_n: int, n_samples: int | None) -> str:
    size = f"this job has {n_samples} points; " if n_samples else ""
    return (f"hint: {size}submit fewer points (max_n of {algorithm} is {max_n}, memory "
            "permitting), pick an algorithm that needs less memory (itersvr and cpm3c grow "
            "linearly with n), or raise MMC_JOB_MEMORY_MB")
