"""Checks that keep bad input away from the workers: every failure is a 422 naming the field.

The schema already guarantees types (numbers, integers); these are the checks a schema cannot
express: rectangular finite matrices, enough points for the clusters, size limits per algorithm,
labels as the algorithm needs them, feature counts at predict.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.hmm import as_symbol_sequences
from algorithms.inputs import as_float_matrix, check_clustering_input
from algorithms.params.common import AUTO, AlgorithmParams
from algorithms.registry import AlgorithmSpec
from core.dataset_urls import is_header
from service.problems import ProblemError, field_error

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # what a worker stores labels as


def matrix_or_422(X: Any, field: str) -> np.ndarray:
    if not isinstance(X, list | np.ndarray):
        raise field_error(422, field, "must be a matrix: a list of rows, each a list of numbers")
    if (X.size if isinstance(X, np.ndarray) else len(X)) == 0:
        raise field_error(422, field, "is empty: send at least one row of numbers")
    try:
        return as_float_matrix(X)
    except (TypeError, ValueError) as exc:  # TypeError: objects where numbers belong
        raise field_error(422, field, str(exc)) from None


@dataclass
class PreparedInput:
    n_samples: int
    n_features: int | None
    X: np.ndarray | None = None
    dataset_id: str | None = None
    y: list[int] | None = None
    sequences: list[list[int]] | None = None


def _size_limit(spec: AlgorithmSpec, params: AlgorithmParams, n: int, unit: str = "points") -> None:
    """``max_n`` counts points for vector input and total positions for sequence input; the
    spec's ``check_size`` may refuse ``n`` for these parameters too."""
    if spec.check_size is not None and (problem := spec.check_size(params, n)):
        raise field_error(422, "body.algorithm.params", problem)
    limit = spec.max_n_for(params)
    if n <= limit:
        return
    hint = ""
    for key in ("alternative", "large_n", "scaling"):
        if spec.notes.get(key):
            hint = f"; {spec.notes[key]}"
            break
    raise field_error(
        422, "body.data",
        f"{n} {unit} exceed max_n={limit} for {spec.name} with these parameters{hint}",
        "too_many_points",
    )


def _labels(spec: AlgorithmSpec, params: AlgorithmParams, y: list[int] | None, n: int
            ) -> list[int] | None:
    if spec.labels == "none":
        if y is not None:
            raise field_error(422, "body.data.y", f"{spec.name} does not take labels; omit y")
        return None
    if y is None:
        if spec.labels == "required":
            raise field_error(422, "body.data.y", f"{spec.name} needs labels y, one per point")
        return None
    if len(y) != n:
        raise field_error(422, "body.data.y", f"has {len(y)} labels for {n} points")
    if not all(INT64_MIN <= label <= INT64_MAX for label in y):
        raise field_error(422, "body.data.y", f"labels must be integers from {INT64_MIN} to "
                                              f"{INT64_MAX}")
    if spec.labels == "required" and len(set(y)) < 2:
        raise field_error(422, "body.data.y", "needs at least two classes")
    if spec.check_labels is not None and (problem := spec.check_labels(params, y)):
        raise field_error(422, "body.data.y", problem)
    return y


def prepare_job_input(spec: AlgorithmSpec, params: AlgorithmParams, data: Any,
                      load_dataset) -> PreparedInput:
    """Validate ``data`` for ``spec``; ``load_dataset(id)`` returns a stored matrix, the
    ``(n_samples, n_features)`` of a dataset by URL (whose values the API never reads), or
    ``None``."""
    if spec.input_kind == "sequences":
        for name in ("X", "dataset_id"):
            if getattr(data, name) is not None:
                raise field_error(422, f"body.data.{name}",
                                  f"{spec.name} takes data.sequences, not {name}")
        if not data.sequences:
            raise field_error(422, "body.data.sequences", "is required and must not be empty")
        for i, seq in enumerate(data.sequences):
            if not seq:
                raise field_error(422, f"body.data.sequences.{i}", "is empty")
            if min(seq) < 0:
                raise field_error(422, f"body.data.sequences.{i}", "holds negative symbols")
        try:
            as_symbol_sequences(data.sequences)
        except ValueError as exc:
            raise field_error(422, "body.data.sequences", str(exc)) from None
        n = len(data.sequences)
        positions = sum(len(seq) for seq in data.sequences)
        _size_limit(spec, params, positions, unit="positions")
        n_states = getattr(params, "n_states", None)
        if n_states is not None and positions < n_states:
            raise field_error(422, "body.data.sequences", f"has {positions} positions in all, "
                              f"fewer than n_states={n_states}: send more positions or fewer "
                              "states")
        if spec.check_sequences is not None and (
                problem := spec.check_sequences(params, data.sequences)):
            raise field_error(422, "body.data.sequences", problem)
        y = _labels(spec, params, data.y, n)
        return PreparedInput(n, None, sequences=data.sequences, y=y)

    if data.sequences is not None:
        raise field_error(422, "body.data.sequences", f"{spec.name} takes X or dataset_id")
    if (data.X is None) == (data.dataset_id is None):
        raise field_error(422, "body.data", "send exactly one of X or dataset_id")
    dataset_id = data.dataset_id
    if dataset_id is not None:
        X = load_dataset(dataset_id)
        if X is None:
            raise ProblemError(404, f"dataset {dataset_id} does not exist or has expired")
        if isinstance(X, tuple):
            return _by_shape(spec, params, data, dataset_id, *X)
    else:
        X = matrix_or_422(data.X, "body.data.X")
    n = X.shape[0]
    _size_limit(spec, params, n)
    n_clusters = getattr(params, "n_clusters", None)
    if n_clusters == AUTO:  # at least two clusters; "auto" chooses within what the data allows
        n_clusters = 2
    if n_clusters is not None:
        try:
            check_clustering_input(X, n_clusters)
        except ValueError as exc:
            raise field_error(422, "body.data.X", str(exc)) from None
    y = _labels(spec, params, data.y, n)
    return PreparedInput(n, int(X.shape[1]), X=X, dataset_id=dataset_id, y=y)


def _by_shape(spec: AlgorithmSpec, params: AlgorithmParams, data: Any, dataset_id: str,
              n: int, n_features: int) -> PreparedInput:
    """The checks of a job on a dataset by URL that its shape allows; those that need its values
    (identical points, a tiny spread) are the fit's own, in the worker, which fails the job
    saying what to fix."""
    _size_limit(spec, params, n)
    n_clusters = getattr(params, "n_clusters", None)
    n_clusters = 2 if n_clusters == AUTO else n_clusters
    if isinstance(n_clusters, int) and n < max(n_clusters, 2):
        raise field_error(422, "body.data.dataset_id", f"the dataset has {n} points, fewer than "
                          f"n_clusters={n_clusters}: ask for fewer clusters")
    y = _labels(spec, params, data.y, n)
    return PreparedInput(n, n_features, dataset_id=dataset_id, y=y)


# -- dataset uploads ------------------------------------------------------------------------------


def parse_csv(text: str) -> np.ndarray:
    """Rows of numbers; a first row with no number in it is a header and is skipped. A row
    that mixes numbers and text is refused, never dropped: it may be data with a bad field."""
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark, as spreadsheets write
    try:
        rows = [row for row in csv.reader(io.StringIO(text), strict=True)
                if row and any(c.strip() for c in row)]
    except csv.Error as exc:  # an unterminated quote, a field over csv.field_size_limit(), ...
        raise field_error(422, "body", f"CSV could not be read ({exc}); send one number per "
                                       "field, comma-separated") from None
    if rows and is_header(rows[0]):
        rows = rows[1:]  # a header line
    try:
        values = [[float(c) for c in row] for row in rows]
    except ValueError as exc:
        raise field_error(422, "body", f"CSV must hold numbers only ({exc})") from None
    return matrix_or_422(values, "body")


def _npy_header(stream: io.BytesIO) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a ``.npy`` header, before any array memory is allocated."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise ValueError(f".npy format version {version} is not supported (send 1.0 or 2.0)")
    return shape, dtype


def parse_npy(payload: bytes, max_values: int | None = None) -> np.ndarray:
    """A 2-D numeric ``.npy``; its header is checked against the payload and ``max_values`` first,
    so a 200-byte file claiming shape (1e8, 1e6) is refused without allocating anything."""
    if payload[:4] == b"PK\x03\x04":
        raise field_error(422, "body", "send one .npy array, not an .npz archive")
    stream = io.BytesIO(payload)
    try:
        shape, dtype = _npy_header(stream)
    except Exception as exc:
        # The header is untrusted text that numpy tokenizes and reads with ast.literal_eval:
        # besides ValueError it raises SyntaxError, tokenize.TokenError, RecursionError, ...
        # Parsing has no side effects, so every failure is the client's malformed file.
        raise field_error(422, "body", f"not a readable .npy array (no pickles): {exc}") from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise field_error(422, "body", f"the .npy array holds {dtype}; send numbers")
    count = int(np.prod(shape, dtype=object))
    if len(shape) != 2:
        raise field_error(422, "body", f"the .npy array has shape {shape}; send a 2-D matrix")
    if max_values is not None and count > max_values:
        raise field_error(422, "body", f"the .npy shape {shape} holds {count} values, over "
                                       f"MMC_MAX_POINTS_X_FEATURES={max_values}",
                          "too_many_values")
    if count * dtype.itemsize != len(payload) - stream.tell():
        raise field_error(422, "body", f"the .npy header claims shape {shape} of {dtype} "
                                       f"({count * dtype.itemsize} bytes) but "
                                       f"{len(payload) - stream.tell()} bytes follow it")
    try:
        array = np.load(io.BytesIO(payload), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise field_error(422, "body", f"not a readable .npy array (no pickles): {exc}") from None
    return matrix_or_422(array, "body")
