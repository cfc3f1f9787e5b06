"""Schemathesis against the exported OpenAPI document (openapi/openapi.json) and the live app:
at least 500 generated requests, no 5xx answer, every answer matching its documented schema; the
stateful phase follows the document's links (job -> result -> model, dataset -> dataset)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT
from tests.hardening import Deployment

OPENAPI = ROOT / "openapi" / "openapi.json"
MIN_REQUESTS = 500


def schemathesis_cli() -> list[str] | None:
    found = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    return [found] if Path(found).exists() else None


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory):
    deployment = Deployment(tmp_path_factory.mktemp("fuzz"), {
        # Jobs a fuzzer manages to create stay tiny and end fast.
        "MMC_JOB_TIMEOUT_CAP_SECONDS": "2",
        "MMC_MAX_POINTS_X_FEATURES": "2000",
        "MMC_MAX_BODY_BYTES": str(256 * 1024),
    })
    yield deployment
    deployment.close()


def requests_served(url: str) -> int:
    text = httpx.get(f"{url}/metrics").text
    return int(sum(float(v) for v in re.findall(r"^mmc_http_requests_total\{[^}]*\} (\S+)$",
                                                 text, flags=re.M)))


def test_fuzzed_requests_get_no_5xx_and_match_the_schema(fuzz_target, tmp_path):
    cli = schemathesis_cli()
    if cli is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    before = requests_served(fuzz_target.url)
    command = [
        *cli,
        "run", str(OPENAPI), "--url", fuzz_target.url,
        "--checks", "not_a_server_error,response_schema_conformance",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", "15", "--seed", "1", "--request-timeout", "30",
        "--continue-on-failure", "--suppress-health-check", "all", "--no-color",
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)
    served = requests_served(fuzz_target.url) - before
    assert finished.returncode == 0, finished.stdout[-6000:] + finished.stderr[-2000:]
    print(f"schemathesis: {served} requests served\n{finished.stdout[-1500:]}")
    assert served >= MIN_REQUESTS, f"only {served} requests generated"
