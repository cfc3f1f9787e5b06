"""Start-up time of ``make serve`` (reported, not asserted): seconds from the command to the first
``GET /readyz`` that answers 200, for a first start and for restarts on the same tree.

    python benchmarks/serve_restart.py [--starts 2] [--port P] [--log FILE]

Each start runs ``make serve PORT=P`` in its own process group, polls ``/readyz`` every 50 ms,
then stops it with SIGTERM to make's process and waits until the whole group has exited (so the
next start finds its data directory and port free). The supervisor's output of each start goes to
``--log`` with the seconds since that start in front of each line. The target: a second start on
an unchanged tree is ready in under 10 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mmc import processes  # noqa: E402


def copy_with_times(stream, started: float, log) -> None:
    """Write each line of ``stream`` to ``log`` with the seconds since ``started`` in front."""
    for line in iter(stream.readline, b""):
        log.write(f"{time.monotonic() - started:7.2f} {line.decode(errors='replace')}")
        log.flush()


def wait_ready(url: str, process: subprocess.Popen, timeout: float) -> None:
    """Poll ``url/readyz`` until it answers 200; raises if ``process`` ends first or on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"make serve exited with {process.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} not ready after {timeout:g} s")


def stop_group(process: subprocess.Popen, timeout: float = 60.0) -> None:
    """SIGTERM to make's process, then wait until every process of its group has exited."""
    process.send_signal(signal.SIGTERM)
    process.wait(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)


def one_start(port: int, log, timeout: float) -> float:
    """Seconds from ``make serve`` to ``/readyz`` 200; the service is stopped before returning."""
    started = time.monotonic()
    process = subprocess.Popen(["make", "serve", f"PORT={port}"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    copier = threading.Thread(target=copy_with_times, args=(process.stdout, started, log),
                              daemon=True)
    copier.start()
    try:
        wait_ready(f"http://127.0.0.1:{port}", process, timeout)
        return time.monotonic() - started
    finally:
        stop_group(process)
        copier.join(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=2)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--log", default=os.devnull, help="the supervisor's output, timed")
    args = parser.parse_args()
    port = args.port or processes.free_port()
    with open(args.log, "a") as log:
        for index in range(args.starts):
            log.write(f"--- start {index + 1}\n")
            seconds = one_start(port, log, args.timeout)
            print(f"start {index + 1}: ready in {seconds:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
