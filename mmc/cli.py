"""``mmc``: run the whole service on one machine, a worker, or one clustering locally.

    mmc serve [--host H] [--port P]      embedded Redis + one worker per queue + the API,
                                         supervised (a child that dies is restarted)
    mmc worker [--queue fast] ...        an RQ worker for an existing Redis (MMC_REDIS_URL)
    mmc cluster FILE --algorithm NAME [--param k=v ...] [--labels FILE] [--output PREFIX]
                [--url URL [--api-key KEY]]    locally, or on a running service
    mmc predict MODEL_PREFIX FILE        labels for new points from a model written by cluster
    mmc openapi                          write openapi/openapi.json
"""


from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from core.queues import QUEUE_NAMES
from core.version import service_version
from worker.arguments import build_parser as worker_parser

# Each command's module is imported when it runs (mmc.serve, mmc.local, the worker, the
# solvers): together they take seconds to import, and ``mmc --help`` needs none of them.


def parse_param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param takes key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


# -- entry point ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mmc", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {service_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve_parser = commands.add_parser("serve", help="embedded Redis + workers + API")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=8000)
    serve_parser.add_argument("--data-dir", default=".mmc",
                              help="where the embedded Redis keeps its append-only file")
    serve_parser.add_argument("--workers-per-queue", type=int, default=1)
    serve_parser.add_argument(
        "--api-workers", type=int, default=int(os.environ.get("MMC_API_WORKERS", "1")),
        help="uvicorn processes serving the API (default: MMC_API_WORKERS, else 1; each one "
             "adds start-up time and about 150 MB, and raises submit throughput)")
    serve_parser.add_argument(
        "--grace-seconds", type=float, default=30.0,
        help="on Ctrl-C/SIGTERM, how long running jobs may take to finish before they are "
             "stopped (then failed, or re-queued if retry-safe)")
    serve_parser.add_argument(
        "--max-quick-crashes", type=int, default=5,
        help="a child that exits within 10 s of starting this many times in a row is given up "
             "on, and mmc serve stops")

    worker_parser(commands.add_parser("worker", help="an RQ worker (MMC_REDIS_URL)"))

    cluster_parser = commands.add_parser(
        "cluster", help="cluster a file (locally, or on a service with --url)")
    cluster_parser.add_argument("file", help=".npy, .csv or .json")
    cluster_parser.add_argument("--algorithm", "-a", required=True)
    cluster_parser.add_argument("--param", "-p", action="append", type=parse_param,
                                metavar="KEY=VALUE", help="algorithm parameter (repeatable)")
    cluster_parser.add_argument("--labels", help="labels file for algorithms that take y")
    cluster_parser.add_argument("--output", "-o",
                                help="output prefix (default: FILE without its suffix)")
    cluster_parser.add_argument("--url", default=os.environ.get("MMC_URL"),
                                help="run on the service at URL (default: MMC_URL; unset: "
                                     "in this process)")
    cluster_parser.add_argument("--api-key", default=os.environ.get("MMC_API_KEY"),
                                help="key for --url (default: MMC_API_KEY)")
    cluster_parser.add_argument("--timeout", type=float, default=600.0,
                                help="seconds to wait for the job with --url (then canceled)")

    predict_parser = commands.add_parser("predict", help="label new points with a saved model")
    predict_parser.add_argument("model", help="prefix of MODEL.json / MODEL.npz")
    predict_parser.add_argument("file")

    commands.add_parser("openapi", help="write openapi/openapi.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from mmc.serve import serve

        return serve(args.host, args.port, args.data_dir, args.workers_per_queue, args.api_workers,
                     grace_seconds=args.grace_seconds, max_quick_crashes=args.max_quick_crashes)
    if args.command == "worker":
        from worker.main import run_worker

        run_worker(args.queues or list(QUEUE_NAMES), args.redis_url, burst=args.burst,
                   name=args.name)
        return 0
    if args.command == "cluster":
        from mmc.local import cluster

        return cluster(args)
    if args.command == "predict":
        from mmc.local import predict

        return predict(args)
    from service.openapi_export import main as export_openapi

    return export_openapi()


if __name__ == "__main__":
    sys.exit(main())
