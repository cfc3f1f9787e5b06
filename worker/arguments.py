"""The worker's command line (``mmc worker``, ``python -m worker``), light to import: ``mmc``
builds its parser without loading the worker and its solvers."""

from __future__ import annotations

import argparse

from core.queues import QUEUE_NAMES


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        prog="mmc worker", description="An RQ worker on the service's queues (MMC_REDIS_URL).")
    parser.add_argument("--queue", "-q", action="append", choices=QUEUE_NAMES, dest="queues",
                        help="queue to serve (repeat for several; default: all)")
    parser.add_argument("--redis-url", default=None, help="default: MMC_REDIS_URL")
    parser.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    parser.add_argument("--name", default=None, help="worker name (default: RQ's)")
    return parser
