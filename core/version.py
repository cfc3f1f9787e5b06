"""The service's version: the installed distribution's, which ``pyproject.toml`` sets.

The OpenAPI document, ``mmc --version`` and the image tag of ``make image`` read it from here
(the image tag through the same metadata), so a release changes one line of ``pyproject.toml``.
"""

from __future__ import annotations

from importlib.metadata import version

DISTRIBUTION = "mmc-service"


def service_version() -> str:
    return version(DISTRIBUTION)
