"""``mmc``: run the whole service on one machine, a worker, or one clustering locally.

    mmc serve [--host H] [--port P]      embedded Redis + one worker per queue + the API
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
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from worker.queues import QUEUE_NAMES

# -- serve ----------------------------------------------------------------------------------------


def serve(host: str, port: int, data_dir: str, workers_per_queue: int, api_workers: int = 1) -> int:
    """Start everything, wait for Ctrl-C (or a child's death), then stop everything."""
    from service import processes

    env = dict(os.environ)
    children: list = []
    redis_process = None
    if "MMC_REDIS_URL" not in os.environ:
        binary = processes.find_redis_server()
        redis_port = processes.free_port()
        redis_dir = Path(data_dir).resolve() / "redis"
        redis_process = processes.start_redis(redis_port, redis_dir, binary=binary)
        env["MMC_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
        print(f"mmc: embedded Redis {binary} on port {redis_port}, data in {redis_dir}",
              file=sys.stderr, flush=True)
    else:
        print(f"mmc: using Redis at {os.environ['MMC_REDIS_URL']}", file=sys.stderr, flush=True)

    def shutdown(*_):
        raise KeyboardInterrupt

    # Explicit handlers: a shell may start us with SIGINT ignored (background jobs).
    signal.signal(signal.SIGINT, shutdown)
    signal.signal(signal.SIGTERM, shutdown)
    try:
        for queue in QUEUE_NAMES:
            for _ in range(workers_per_queue):
                children.append(processes.start_worker([queue], env, log_file=sys.stderr))
        children.append(processes.start_api(host, port, env, log_file=sys.stderr,
                                            workers=api_workers))
        print(f"mmc: API on http://{host}:{port} (console at /, docs at /docs); Ctrl-C stops "
              "everything",
              file=sys.stderr, flush=True)
        while True:
            for child in children:
                if child.poll() is not None:
                    print(f"mmc: {' '.join(map(str, child.args[:4]))} exited with "
                          f"{child.returncode}; stopping", file=sys.stderr, flush=True)
                    return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("mmc: stopping", file=sys.stderr, flush=True)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in reversed(children):
            processes.stop(child)
        if redis_process is not None:
            processes.stop(redis_process)


# -- cluster / predict ----------------------------------------------------------------------------


def load_matrix_file(path: str) -> Any:
    """A matrix from ``.npy``, ``.csv`` or ``.json`` (a matrix, ``{"X": ...}`` or
    ``{"sequences": ...}``); sequences come back as a list of integer arrays."""
    from service.inputs import parse_csv

    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix == ".json":
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        if isinstance(document, dict) and "sequences" in document:
            return [np.asarray(s, dtype=np.int64) for s in document["sequences"]]
        return np.asarray(document["X"] if isinstance(document, dict) else document, dtype=float)
    return parse_csv(Path(path).read_text(encoding="utf-8"))


def parse_param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param takes key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


class ProgressBar:
    """One status line on stderr: elapsed time, step, objective and the solver's message."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()
        self.tty = self.stream.isatty()

    def __call__(self, step: int, objective: float | None, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        filled = step % 20
        bar = "#" * filled + "-" * (20 - filled)
        value = "" if objective is None else f" objective={objective:.6g}"
        line = f"[{bar}] {elapsed:6.1f}s step {step}{value} {message}"[:160]
        if self.tty:
            self.stream.write("\r" + line.ljust(160))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def write_labels(path: str, labels: Any, sequences: bool) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        if sequences:
            handle.writelines(",".join(map(str, np.asarray(s).tolist())) + "\n" for s in labels)
        else:
            handle.writelines(f"{int(label)}\n" for label in labels)


def cluster_remote(args: argparse.Namespace) -> int:
    """``mmc cluster --url``: the same files as a local run, computed by a running service."""
    from algorithms.base import arrays_to_npz_bytes
    from mmc_client import Client, MMCError

    X = load_matrix_file(args.file)
    y = None
    if args.labels:
        y = np.asarray(load_matrix_file(args.labels)).ravel().astype(np.int64)
    started = time.perf_counter()
    with Client(args.url, args.api_key) as client:
        try:
            result = client.cluster(X, args.algorithm, y=y, timeout=args.timeout,
                                    **dict(args.param or []))
            meta, arrays = client.export_model(result.model_id)
        except MMCError as exc:
            print(f"mmc: {exc}", file=sys.stderr)
            for error in exc.errors:
                print(f"  {error.get('field')}: {error.get('message')}", file=sys.stderr)
            return 2 if exc.status and 400 <= exc.status < 500 else 1
    prefix = args.output or str(Path(args.file).with_suffix(""))
    write_labels(f"{prefix}.labels.csv", result.labels, isinstance(X, list))
    with open(f"{prefix}.model.json", "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
    with open(f"{prefix}.model.npz", "wb") as handle:
        handle.write(arrays_to_npz_bytes(arrays))
    print(f"mmc: {args.algorithm} on {len(X)} points at {args.url} (job {result.job_id}, fit "
          f"{result.timing.get('fit_seconds') or 0:.2f} s) in {time.perf_counter() - started:.2f}"
          f" s; wrote {prefix}.labels.csv, {prefix}.model.json, {prefix}.model.npz",
          file=sys.stderr)
    return 0


def cluster(args: argparse.Namespace) -> int:
    if args.url:
        return cluster_remote(args)
    from pydantic import ValidationError

    from algorithms.base import save_model
    from algorithms.registry import get_spec

    try:
        spec = get_spec(args.algorithm)
    except KeyError as exc:
        print(f"mmc: {exc.args[0]}", file=sys.stderr)
        return 2
    try:
        params = spec.parse_params(dict(args.param or []))
    except ValidationError as exc:
        print(f"mmc: invalid parameters for {spec.name}:\n{exc}", file=sys.stderr)
        return 2
    X = load_matrix_file(args.file)
    y = None
    if args.labels:
        y = np.asarray(load_matrix_file(args.labels)).ravel().astype(np.int64)
    if spec.labels == "required" and y is None:
        print(f"mmc: {spec.name} needs --labels FILE", file=sys.stderr)
        return 2
    estimator = spec.build(params)
    bar = ProgressBar()
    started = time.perf_counter()
    try:
        if spec.labels == "none":
            estimator.fit(X, progress=bar)
        else:
            estimator.fit(X, y, progress=bar)
    except ValueError as exc:
        bar.close()
        print(f"mmc: {exc}", file=sys.stderr)
        return 2
    bar.close()
    prefix = args.output or str(Path(args.file).with_suffix(""))
    write_labels(f"{prefix}.labels.csv", estimator.labels_, spec.input_kind == "sequences")
    json_path, npz_path = save_model(estimator, f"{prefix}.model")
    print(f"mmc: {spec.name} on {len(X)} points in {time.perf_counter() - started:.2f} s; wrote "
          f"{prefix}.labels.csv, {json_path}, {npz_path}", file=sys.stderr)
    return 0


def predict(args: argparse.Namespace) -> int:
    from algorithms.base import npz_bytes_to_arrays
    from algorithms.registry import model_from_export

    with open(f"{args.model}.json", encoding="utf-8") as handle:
        meta = json.load(handle)
    with open(f"{args.model}.npz", "rb") as handle:
        model = model_from_export(meta, npz_bytes_to_arrays(handle.read()))
    for label in model.predict(load_matrix_file(args.file)):
        value = np.asarray(label)
        print(",".join(map(str, value.ravel().tolist())) if value.ndim else int(value))
    return 0


# -- entry point ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mmc", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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

    from worker.main import build_parser as worker_parser

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
        return serve(args.host, args.port, args.data_dir, args.workers_per_queue, args.api_workers)
    if args.command == "worker":
        from worker.main import run_worker

        run_worker(args.queues or list(QUEUE_NAMES), args.redis_url, burst=args.burst,
                   name=args.name)
        return 0
    if args.command == "cluster":
        return cluster(args)
    if args.command == "predict":
        return predict(args)
    from service.openapi_export import main as export_openapi

    return export_openapi()


if __name__ == "__main__":
    sys.exit(main())
