"""``mmc cluster`` and ``mmc predict``: one clustering of a file, in this process or on a
service (``--url``), and labels of new points from the model files it wrote."""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

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

    from algorithms.export import save_model
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
