"""Core's queue names are the registry's (core spells them out so as not to import the solvers),
and the API process starts without the numerics.

The direction of imports between the packages, and the absence of cycles between the modules of
a package, are checked by ``lint-imports`` (the contracts in pyproject.toml).
"""

from __future__ import annotations

import subprocess
import sys
import typing

from algorithms.registry import REGISTRY, QueueName
from core.queues import QUEUE_NAMES
from tests.conftest import ROOT


def test_queue_names_are_the_registrys():
    assert typing.get_args(QueueName) == QUEUE_NAMES


def test_the_api_imports_no_estimator_until_one_is_needed():
    # The API validates, queues and describes jobs from the params models alone; an estimator
    # module (and scikit-learn, cvxpy, numba, scipy behind it) loads on the first predict.
    heavy = ["sklearn", "cvxpy", "numba", "scipy", "algorithms.base",
             *(spec.estimator_path.rpartition(".")[0] for spec in REGISTRY.values())]
    code = ("import sys, service.app; service.app.create_app(); "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "[]", loaded
    # The lazy reference still names a class that exists.
    assert all(spec.estimator.__name__ == spec.estimator_name for spec in REGISTRY.values())


def test_mmc_help_imports_none_of_the_commands():
    # mmc --help and --version build the parser only; each command's modules (the web stack,
    # redis-py and RQ, numpy and the solvers) load when that command runs.
    heavy = ["numpy", "redis", "rq", "pydantic", "fastapi", "worker.main", "mmc.serve",
             "mmc.local"]
    code = ("import sys, mmc.cli; mmc.cli.build_parser().format_help(); "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "[]", loaded


def test_the_routes_reach_the_apps_objects_through_typed_dependencies():
    # create_app stores them on app.state once; service.deps.app_objects is their one reader.
    users = {path.relative_to(ROOT).as_posix() for path in (ROOT / "service").rglob("*.py")
             if "app.state" in path.read_text(encoding="utf-8")}
    assert users == {"service/app.py", "service/deps.py"}
