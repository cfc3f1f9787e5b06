"""The README's curl flow runs as written, pasted whole into bash, against a served instance: a
fresh directory beside the virtualenv, ``API`` pointing at the test deployment (the block's
default is ``make serve``'s address), ``set -eu`` so that a failing line or an unset variable
stops it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

FLOW_HEADING = "## The whole flow with curl"


def readme_flow() -> str:
    """The first ``bash`` block under the flow's heading."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(FLOW_HEADING):]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_readme_flow_runs_to_the_end_against_a_served_instance(service_url, tmp_path):
    flow = readme_flow()
    assert ". .venv/bin/activate" in flow and "until=finished" in flow
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    done = subprocess.run(["bash", "-euc", flow], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
                               "API": service_url})
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    result = json.loads((tmp_path / "result.json").read_text())
    assert len(result["labels"]) == 357 and set(result["labels"]) == {0, 1}  # digits 3 and 8
    assert (tmp_path / "plot.svg").read_text().lstrip().startswith("<?xml")
    assert not re.search(r'"status": ?5\d\d', done.stdout), done.stdout[-3000:]  # no 5xx
