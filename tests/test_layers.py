"""Core's queue names are the registry's (core spells them out so as not to import the solvers).

The direction of imports between the packages, and the absence of cycles between the modules of
a package, are checked by ``lint-imports`` (the contracts in pyproject.toml).
"""

from __future__ import annotations

import typing

from algorithms.registry import QueueName
from core.queues import QUEUE_NAMES


def test_queue_names_are_the_registrys():
    assert typing.get_args(QueueName) == QUEUE_NAMES
