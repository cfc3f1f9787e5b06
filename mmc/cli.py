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
import signal
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from redis import Redis
from rq import Worker

from core.queues import QUEUE_NAMES, SERIALIZER
from core.settings import Settings
from mmc import processes
from mmc.supervisor import Child, GaveUpError, Supervisor, say

# The packages a command runs (the solvers, the web app, the worker, the client) are imported
# inside that command's function: each one costs seconds at start-up, and ``mmc predict`` needs
# none of the web stack while ``mmc serve``'s parent process needs none of the solvers.

# -- serve ----------------------------------------------------------------------------------------


def serve(host: str, port: int, data_dir: str, workers_per_queue: int, api_workers: int = 1,
          *, grace_seconds: float = 30.0, max_quick_crashes: int = 5) -> int:
    """Start everything and supervise it: a child that dies is restarted (see
    :mod:`mmc.supervisor`); Ctrl-C or SIGTERM stops everything in order."""
    env = dict(os.environ)
    children: list[Child] = []
    if "MMC_REDIS_URL" not in os.environ:
        binary = processes.find_redis_server()
        redis_port = processes.free_port()
        redis_dir = Path(data_dir).resolve() / "redis"
        fsync = os.environ.get("MMC_REDIS_APPENDFSYNC", "everysec")
        children.append(Child("redis", lambda: processes.start_redis(
            redis_port, redis_dir, binary=binary, appendfsync=fsync), kind="redis"))
        env["MMC_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
        say(f"embedded Redis {binary} on port {redis_port}, data in {redis_dir} "
            f"(appendfsync {fsync})")
    else:
        say(f"using Redis at {os.environ['MMC_REDIS_URL']}")
    n_workers = workers_per_queue * len(QUEUE_NAMES)
    env.setdefault("MMC_LOCAL_WORKERS", str(n_workers))  # the default per-job memory cap
    for queue in QUEUE_NAMES:
        for index in range(workers_per_queue):
            children.append(worker_child(queue, index + 1, env))
    children.append(Child("api", lambda: processes.start_api(
        host, port, env, log_file=sys.stderr, workers=api_workers), kind="api"))

    stop_requested = False

    def request_stop(*_):
        nonlocal stop_requested
        stop_requested = True

    # Explicit handlers: a shell may start us with SIGINT ignored (background jobs).
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    supervisor = Supervisor(children, env["MMC_REDIS_URL"], max_quick_crashes=max_quick_crashes)
    code = 0
    try:
        supervisor.start_all()
        say(f"API on http://{host}:{port} (console at /, docs at /docs); Ctrl-C stops everything")
        supervisor.run(lambda: stop_requested)
        say(f"stopping (running jobs get {grace_seconds:g} s to finish)")
    except GaveUpError as exc:
        say(str(exc))
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        supervisor.stop_all(grace_seconds, lambda pids: settle_stopped_jobs(env, pids))
    return code


def worker_child(queue: str, index: int, env: dict[str, str]):
    """A supervised worker whose RQ registration is removed when it dies, so ``/readyz`` counts
    only live workers (RQ would keep a SIGKILLed one listed until its key expires)."""
    name = f"worker-{queue}-{index}"

    def rq_name(child: Child) -> str:
        return f"{name}.{os.getpid()}.{len(child.pids)}"

    def start():
        return processes.start_worker([queue], env, log_file=sys.stderr,
                                      name=f"{name}.{os.getpid()}.{len(child.pids) + 1}")

    def forget(dead: Child) -> None:
        redis = Redis.from_url(env["MMC_REDIS_URL"], socket_connect_timeout=0.5, socket_timeout=2)
        worker = Worker.find_by_key(f"{Worker.redis_worker_namespace_prefix}{rq_name(dead)}",
                                    connection=redis, serializer=SERIALIZER)
        if worker is not None:
            worker.register_death()

    child = Child(name, start, on_exit=forget)
    return child


def settle_stopped_jobs(env: dict[str, str], worker_pids: list[int]) -> None:
    """Jobs that were still running on the stopped workers end failed or are re-queued (a
    retry-safe one runs again at the next start) instead of waiting for the sweeper."""
    from worker.sweeper import settle_jobs_of_workers

    settings = Settings(redis_url=env["MMC_REDIS_URL"])
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=1, socket_timeout=5)
    for job_id, status in settle_jobs_of_workers(redis, settings, set(worker_pids)):
        print(f"mmc: job {job_id} was running at shutdown: now {status}", file=sys.stderr,
              flush=True)


# -- cluster / predict ----------------------------------------------------------------------------


# A file a user hands the CLI can be missing, truncated or edited by hand; each of these is what
# reading, rebuilding or applying such a file raises, and the CLI names the file instead of
# printing a traceback (pickles stay refused: npz arrays load with allow_pickle=False).
UNREADABLE_FILE_ERRORS = (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError,
                          zipfile.BadZipFile)


def describe(exc: BaseException) -> str:
    """The error's message, with its type where the message alone says little (a KeyError's
    message is the bare key)."""
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, (KeyError, IndexError)) else str(exc)


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


def load_data_files(args: argparse.Namespace) -> tuple[Any, np.ndarray | None] | None:
    """``mmc cluster``'s points and, with ``--labels``, their labels; None (and the reason on
    stderr) when a file cannot be read."""
    try:
        X = load_matrix_file(args.file)
        y = None
        if args.labels:
            y = np.asarray(load_matrix_file(args.labels)).ravel().astype(np.int64)
    except UNREADABLE_FILE_ERRORS as exc:
        named = f"{args.file} or {args.labels}" if args.labels else args.file
        print(f"mmc: cannot read {named}: {describe(exc)}", file=sys.stderr)
        return None
    return X, y


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


def chosen_k_note(extras: dict[str, Any]) -> str:
    """", n_clusters='auto' chose k (clear)" for a fit that chose its k, else nothing."""
    from algorithms.params.common import STRENGTH_THRESHOLD

    strengths = extras.get("n_clusters_strengths")
    if not strengths:
        return ""
    k = extras.get("n_clusters")
    how = "" if extras.get("n_clusters_clear") else f", no k reached strength {STRENGTH_THRESHOLD}"
    return (f", n_clusters='auto' chose {k} (prediction strength "
            f"{strengths.get(str(k), strengths.get(k, 0.0)):.2f}{how})")


def write_labels(path: str, labels: Any, sequences: bool) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        if sequences:
            handle.writelines(",".join(map(str, np.asarray(s).tolist())) + "\n" for s in labels)
        else:
            handle.writelines(f"{int(label)}\n" for label in labels)


def cluster_remote(args: argparse.Namespace) -> int:
    """``mmc cluster --url``: the same files as a local run, computed by a running service."""
    from algorithms.inputs import arrays_to_npz_bytes
    from mmc_client import Client, MMCError

    data = load_data_files(args)
    if data is None:
        return 2
    X, y = data
    started = time.perf_counter()
    with Client(args.url, args.api_key) as client:
        try:
            result = client.cluster(X, args.algorithm, y=y, timeout=args.timeout,
                                    **dict(args.param or []))
            meta, arrays = client.export_model(result.model_id)
        except MMCError as exc:
            print(f"mmc: {exc}", file=sys.stderr)  # the detail names every field to fix
            return 2 if exc.status and 400 <= exc.status < 500 else 1
    prefix = args.output or str(Path(args.file).with_suffix(""))
    write_labels(f"{prefix}.labels.csv", result.labels, isinstance(X, list))
    with open(f"{prefix}.model.json", "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
    with open(f"{prefix}.model.npz", "wb") as handle:
        handle.write(arrays_to_npz_bytes(arrays))
    print(f"mmc: {args.algorithm} on {len(X)} points at {args.url} (job {result.job_id}, fit "
          f"{result.timing.get('fit_seconds') or 0:.2f} s) in {time.perf_counter() - started:.2f}"
          f" s{chosen_k_note(result.extras)}; wrote {prefix}.labels.csv, {prefix}.model.json, "
          f"{prefix}.model.npz", file=sys.stderr)
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
        from service.problems import validation_detail, validation_errors

        # The field as the API's 422 names it, so that the message is the same both ways.
        errors = validation_errors(exc.errors(), ("body", "algorithm", spec.name, "params"))
        print(f"mmc: {validation_detail(errors)}", file=sys.stderr)
        return 2
    data = load_data_files(args)
    if data is None:
        return 2
    X, y = data
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
    print(f"mmc: {spec.name} on {len(X)} points in {time.perf_counter() - started:.2f} s"
          f"{chosen_k_note(estimator.result_extras())}; wrote {prefix}.labels.csv, {json_path}, "
          f"{npz_path}", file=sys.stderr)
    return 0


def load_model_files(prefix: str):
    from algorithms.inputs import npz_bytes_to_arrays
    from algorithms.registry import model_from_export

    with open(f"{prefix}.json", encoding="utf-8") as handle:
        meta = json.load(handle)
    if not isinstance(meta, dict):
        raise ValueError("the JSON file is not an object")
    with open(f"{prefix}.npz", "rb") as handle:
        return model_from_export(meta, npz_bytes_to_arrays(handle.read()))


def predict(args: argparse.Namespace) -> int:
    try:
        model = load_model_files(args.model)
    except UNREADABLE_FILE_ERRORS as exc:
        print(f"mmc: cannot load the model {args.model}.json / .npz: {describe(exc)}",
              file=sys.stderr)
        return 2
    try:
        X = load_matrix_file(args.file)
    except UNREADABLE_FILE_ERRORS as exc:
        print(f"mmc: cannot read {args.file}: {describe(exc)}", file=sys.stderr)
        return 2
    try:
        predicted = model.predict(X)
    except UNREADABLE_FILE_ERRORS as exc:
        print(f"mmc: the model {args.model} cannot label {args.file}: {describe(exc)}",
              file=sys.stderr)
        return 2
    for label in predicted:
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
    serve_parser.add_argument(
        "--grace-seconds", type=float, default=30.0,
        help="on Ctrl-C/SIGTERM, how long running jobs may take to finish before they are "
             "stopped (then failed, or re-queued if retry-safe)")
    serve_parser.add_argument(
        "--max-quick-crashes", type=int, default=5,
        help="a child that exits within 10 s of starting this many times in a row is given up "
             "on, and mmc serve stops")

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
        return serve(args.host, args.port, args.data_dir, args.workers_per_queue, args.api_workers,
                     grace_seconds=args.grace_seconds, max_quick_crashes=args.max_quick_crashes)
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
