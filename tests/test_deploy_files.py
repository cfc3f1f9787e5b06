"""Docker cannot run here: check that the compose file and Dockerfile name what exists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.queues import QUEUE_NAMES
from mmc.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def compose_services() -> dict[str, dict[str, str]]:
    """Services of docker-compose.yml as {name: {key: raw value}} (two-space YAML, flow lists)."""
    services: dict[str, dict[str, str]] = {}
    in_services, current = False, None
    for line in (ROOT / "docker-compose.yml").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            in_services = line.startswith("services:")
            continue
        if in_services and re.match(r"^  [\w-]+:\s*$", line):
            current = line.strip()[:-1]
            services[current] = {}
        elif in_services and current and re.match(r"^    [\w-]+:", line):
            key, _, value = line.strip().partition(":")
            services[current][key] = value.strip()
        elif in_services and current:
            services[current][key] += "\n" + line.strip()
    return services


def test_compose_runs_redis_with_aof_api_and_one_worker_per_queue():
    services = compose_services()
    assert set(services) == {"redis", "s3", "api", "worker-fast", "worker-slow"}
    redis_command = json.loads(services["redis"]["command"])
    assert redis_command[:3] == ["redis-server", "--appendonly", "yes"]
    assert "redis-data:/data" in services["redis"]["volumes"]
    for name, service in services.items():
        assert service["restart"] == "unless-stopped", name
        assert "healthcheck" in service, name
    assert "MMC_REDIS_URL: redis://redis:6379/0" in services["api"]["environment"]


def test_compose_gives_the_api_and_the_workers_one_s3_blob_store():
    """Containers share no directory: the default local blob store would split the data."""
    services = compose_services()
    assert json.loads(services["s3"]["command"])[:2] == ["server", "-s3"]
    for name in ("api", *(f"worker-{queue}" for queue in QUEUE_NAMES)):
        environment = services[name]["environment"]
        assert "MMC_BLOB_URL: s3://mmc/blobs" in environment, name
        assert "MMC_S3_ENDPOINT: http://s3:8333" in environment, name


def test_compose_commands_exist():
    services = compose_services()
    api = json.loads(services["api"]["command"])
    assert api[:3] == ["uvicorn", "--factory", "service.app:create_app"]
    from service.app import create_app

    assert callable(create_app)
    parser = build_parser()
    for queue in QUEUE_NAMES:
        command = json.loads(services[f"worker-{queue}"]["command"])
        assert command[0] == "mmc", command
        args = parser.parse_args(command[1:])  # exits (fails the test) if the CLI lacks it
        assert args.command == "worker" and args.queues == [queue]


@pytest.mark.parametrize("needle", ["FROM python:3.11-slim AS build", "USER 10001",
                                    "COPY --from=build /opt/venv /opt/venv", "HEALTHCHECK"])
def test_dockerfile_builds_a_slim_non_root_image(needle):
    assert needle in (ROOT / "Dockerfile").read_text()


def test_dockerfile_final_stage_has_no_build_tools():
    final_stage = (ROOT / "Dockerfile").read_text().split("\nFROM ")[-1]
    assert "build-essential" not in final_stage and "apt-get install" not in final_stage
    assert 'CMD ["uvicorn", "--factory", "service.app:create_app"' in final_stage


def test_compose_gives_every_process_that_sends_callbacks_the_webhook_secrets():
    # The API (cancel, lost jobs) and the workers (finished jobs) sign callbacks; without the
    # secrets a worker drops them (logged only).
    services = compose_services()
    for name in ("api", *(f"worker-{queue}" for queue in QUEUE_NAMES)):
        assert "MMC_WEBHOOK_SECRETS: ${MMC_WEBHOOK_SECRETS:-}" in services[name]["environment"]


def test_installs_are_pinned_to_the_versions_ci_tested():
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    assert pins["rq"].startswith("3.") and "fastapi" in pins and "numpy" in pins
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in (ROOT / "Dockerfile").read_text()
    from importlib.metadata import version

    for package in ("rq", "fastapi", "pydantic", "redis", "numpy"):
        assert version(package) == pins[package], package  # the environment under test


def test_one_version_from_pyproject_in_the_api_document_the_cli_and_the_image_tag():
    import tomllib

    from core.version import service_version

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert service_version() == version  # the installed metadata: reinstall after a bump
    document = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    assert document["info"]["version"] == version
    overlay = yaml.safe_load(
        (ROOT / "deploy/kubernetes/overlays/production/kustomization.yaml").read_text())
    assert [image["newTag"] for image in overlay["images"]] == [version]
    command = subprocess.run([sys.executable, "-m", "mmc", "--version"], capture_output=True,
                             text=True, check=True, cwd=ROOT)
    assert command.stdout.strip() == f"mmc {version}"


def test_make_serve_installs_again_only_when_pyproject_or_the_constraints_change(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()

    def planned() -> str:
        return subprocess.run(["make", "-n", "--no-print-directory", "install", f"VENV={venv}"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert "pip install" in planned() and "warm_compiled_kernels" in planned()  # fresh venv
    sources = [ROOT / "pyproject.toml", ROOT / "constraints.txt", *ROOT.glob("algorithms/**/*.py")]
    newest = max(path.stat().st_mtime for path in sources)
    for stamp in (".installed", ".kernels-compiled"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (newest + 1, newest + 1))
    assert "pip install" not in planned() and "warm_compiled_kernels" not in planned()
    # pyproject.toml (or constraints.txt) newer than the last install: install again.
    older = (ROOT / "pyproject.toml").stat().st_mtime - 1
    os.utime(venv / ".installed", (older, older))
    assert "pip install" in planned()


def test_compose_workers_have_the_cpu_quota_their_threads_are_sized_to():
    # The worker reads its cgroup's CPU quota (algorithms.threads.usable_cpus); without one, a
    # container sees the host's cores and its BLAS threads oversubscribe them.
    services = compose_services()
    assert services["worker-fast"]["cpus"] == "1.0"
    assert services["worker-slow"]["cpus"] == "2.0"
