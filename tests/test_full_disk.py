"""A full disk under the local blob store, through the app: 507 with a message that says so, and
Redis left consistent (no dataset or job recorded for what could not be stored, every dataset
record naming a blob that exists, no half-written file).

The disk is a real 1 MiB tmpfs. Mounting one needs no root here: the API process runs in a user
and mount namespace of its own (``unshare --user --map-root-user --mount``, where the kernel
allows unprivileged user namespaces), mounts the tmpfs over its blob directory and execs uvicorn.
Only the API sees that filesystem; the test looks into it through ``/proc/<pid>/root``. Redis is
a real redis-server outside it; no worker is needed."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from redis import Redis

from core.keys import BlobKeys, Keys
from core.stores import DatasetStore
from mmc import processes
from tests.conftest import ROOT
from tests.hardening import wait_healthy

OWNER = "anonymous"
DISK = "1m"
MOUNT = 'mount -t tmpfs -o size={size} mmc-full-disk "$0" && exec "$@"'


def _can_mount_tmpfs(directory: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            MOUNT.format(size=DISK), str(directory), "true"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def full_disk_api(tmp_path_factory):
    """The API on a 1 MiB tmpfs blob store and a private Redis; yields (url, redis, blob
    directory as this process sees it through the API's mount namespace)."""
    tmp = tmp_path_factory.mktemp("full-disk")
    blobs = tmp / "blobs"
    blobs.mkdir()
    if not _can_mount_tmpfs(blobs):
        pytest.skip("no tmpfs: unprivileged user and mount namespaces (unshare) are unavailable")
    redis_port, api_port = processes.free_port(), processes.free_port()
    redis_server = processes.start_redis(redis_port, tmp / "redis")
    env = {**os.environ, "MMC_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
           "MMC_BLOB_URL": str(blobs), "MMC_API_KEYS": "", "MMC_RETRY_AFTER_SECONDS": "7",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
               MOUNT.format(size=DISK), str(blobs), sys.executable, "-m", "uvicorn", "--factory",
               "service.app:create_app", "--host", "127.0.0.1", "--port", str(api_port),
               "--log-level", "warning"]
    with open(tmp / "api.log", "wb") as log:
        api = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        url = f"http://127.0.0.1:{api_port}"
        wait_healthy(url, timeout=120, process=api)
        yield url, Redis(port=redis_port), Path(f"/proc/{api.pid}/root") / blobs.relative_to("/")
    finally:
        processes.stop(api)
        processes.stop(redis_server)


def _npy(X: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, X)
    return buffer.getvalue()


def _upload(url: str, X: np.ndarray) -> httpx.Response:
    return httpx.post(f"{url}/v1/datasets", content=_npy(X), timeout=30,
                      headers={"Content-Type": "application/x-npy"})


def _dataset_records(redis: Redis) -> dict[str, str]:
    return {key.decode(): redis.hget(key, "blob").decode()
            for key in redis.scan_iter(match=Keys.dataset("*"))}


def test_a_full_disk_is_a_507_and_redis_records_nothing_of_it(full_disk_api):
    url, redis, disk = full_disk_api
    small = np.random.default_rng(0).normal(size=(20, 2))
    stored = _upload(url, small)
    assert stored.status_code == 201, stored.text
    assert (disk / BlobKeys.dataset(OWNER, stored.json()["id"])).is_file()

    large = np.random.default_rng(1).normal(size=(100_000, 2))  # 1.6 MB > the 1 MiB disk
    refused = _upload(url, large)
    assert refused.status_code == 507, refused.text
    assert refused.headers["retry-after"] == "7"
    detail = refused.json()["detail"]
    assert "is full" in detail and "nothing was stored" in detail

    # A job whose inline data cannot be stored is refused the same way, and leaves no job.
    job = httpx.post(f"{url}/v1/jobs", timeout=30, json={
        "algorithm": {"name": "cpm3c", "params": {"kernel": "linear"}},
        "data": {"X": (large + 1).tolist()}})
    assert job.status_code == 507, job.text

    large_id = DatasetStore.content_id(large, OWNER)
    assert not redis.exists(Keys.dataset(large_id))
    assert not list(redis.scan_iter(match=Keys.job("*")))
    assert not [member for member in redis.zrange(Keys.expiring_blobs(), 0, -1)
                if large_id.encode() in member]
    records = _dataset_records(redis)
    assert list(records) == [Keys.dataset(stored.json()["id"])]
    assert all((disk / blob).is_file() for blob in records.values())
    assert not [path for path in disk.rglob("*") if path.name.startswith(".tmp-")]

    # A delete frees its blob on the disk, and what fits is stored again.
    assert httpx.delete(f"{url}/v1/datasets/{stored.json()['id']}").status_code == 204
    assert not (disk / BlobKeys.dataset(OWNER, stored.json()["id"])).exists()
    assert _upload(url, small).status_code == 201
    assert httpx.get(f"{url}/healthz").status_code == 200
