"""The service on Redis over TLS with a password, as a managed Redis runs
(``MMC_REDIS_URL=rediss://:<password>@host:port/0``): the API, a worker (its work horse and its
sweeper) and long polling all connect through it, and a job goes from submit to predict.

Needs a ``redis-server`` built with TLS (Debian's; ``.ci/run`` installs it) and ``openssl`` for
the test's certificates; skipped, saying why, without them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from redis import Redis
from redis.exceptions import AuthenticationError, ConnectionError, ResponseError
from sklearn.datasets import make_blobs

from mmc import processes
from tests.helpers import run_job

PASSWORD = "tls-test-password-7c1e"


def make_certificates(directory: Path) -> dict[str, Path]:
    """A certificate authority and a server certificate for 127.0.0.1 signed by it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: the test makes its certificates with it")
    files = {name: directory / name for name in ("ca.key", "ca.crt", "server.key", "server.csr",
                                                   "server.crt", "san.cnf")}
    files["san.cnf"].write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=mmc-test-ca",
         "-keyout", files["ca.key"], "-out", files["ca.crt"]],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", files["server.key"], "-out", files["server.csr"]],
        ["x509", "-req", "-in", files["server.csr"], "-CA", files["ca.crt"], "-CAkey",
         files["ca.key"], "-CAcreateserial", "-days", "2", "-extfile", files["san.cnf"],
         "-out", files["server.crt"]],
    ]
    for step in steps:
        subprocess.run([openssl, *map(str, step)], check=True, capture_output=True, timeout=60)
    return files


def start_tls_redis(directory: Path, port: int, certificates: dict[str, Path]) -> subprocess.Popen:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server on PATH (apt-get install redis-server: .ci/run does it)")
    command = [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
               "--tls-cert-file", str(certificates["server.crt"]),
               "--tls-key-file", str(certificates["server.key"]),
               "--tls-ca-cert-file", str(certificates["ca.crt"]), "--tls-auth-clients", "no",
               "--requirepass", PASSWORD, "--dir", str(directory), "--save", "",
               "--appendonly", "no", "--daemonize", "no"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    time.sleep(0.3)
    if server.poll() is not None:
        output = server.stdout.read().decode() if server.stdout else ""
        if "tls" in output.lower():
            pytest.skip(f"{binary} is built without TLS: {output.strip()[:200]}")
        raise RuntimeError(f"redis-server exited: {output}")
    return server


@pytest.fixture(scope="module")
def tls_deployment(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    certificates = make_certificates(directory)
    port = processes.free_port()
    server = start_tls_redis(directory, port, certificates)
    url = (f"rediss://:{PASSWORD}@127.0.0.1:{port}/0"
           f"?ssl_ca_certs={certificates['ca.crt']}&ssl_cert_reqs=required")
    env = {**os.environ, "MMC_REDIS_URL": url, "MMC_API_KEYS": "", "OMP_NUM_THREADS": "1"}
    started = []
    try:
        deadline = time.monotonic() + 10
        while True:  # the server is up once a TLS client with the password is answered
            try:
                Redis.from_url(url, socket_connect_timeout=0.5).ping()
                break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline, "the TLS redis-server does not answer"
                time.sleep(0.1)
        worker_log = open(directory / "worker.log", "wb")  # noqa: SIM115
        started.append(processes.start_worker(["fast", "slow"], env, log_file=worker_log))
        api_port = processes.free_port()
        api_log = open(directory / "api.log", "wb")  # noqa: SIM115
        started.append(processes.start_api("127.0.0.1", api_port, env, log_file=api_log))
        base = f"http://127.0.0.1:{api_port}"
        processes.wait_ready(base, timeout=120, processes=started)
        yield {"url": base, "redis_url": url, "port": port}
    finally:
        for process in started:
            processes.stop(process)
        processes.stop(server)


def test_redis_refuses_plain_connections_and_clients_without_the_password(tls_deployment):
    port = tls_deployment["port"]
    with pytest.raises((ConnectionError, OSError)):
        Redis(port=port, socket_connect_timeout=1, socket_timeout=1).ping()  # no TLS
    without_password = tls_deployment["redis_url"].replace(f":{PASSWORD}@", "")
    with pytest.raises((AuthenticationError, ResponseError)):
        Redis.from_url(without_password, socket_connect_timeout=2).ping()


def test_a_job_goes_from_submit_to_predict_over_tls_redis(tls_deployment):
    url = tls_deployment["url"]
    X, _ = make_blobs(60, centers=[[0, 0], [5, 5]], random_state=0)
    result = run_job(url, {"algorithm": {"name": "itersvr", "params": {"random_state": 0}},
                           "data": {"X": X.tolist()}})
    assert sorted(set(result["labels"])) == [0, 1]
    # Long polling listens on Redis pub/sub through the same TLS connection settings.
    job = httpx.get(f"{url}/v1/jobs/{result['job_id']}?wait=1", timeout=30).json()
    assert job["status"] == "succeeded"
    predicted = httpx.post(f"{url}/v1/models/{result['model_id']}/predict",
                           json={"X": X[:5].tolist()}, timeout=30)
    assert predicted.status_code == 200 and predicted.json()["labels"] == result["labels"][:5]
    ready = httpx.get(f"{url}/readyz", timeout=10).json()
    assert ready["redis"] is True and min(ready["workers"].values()) >= 1, ready
