"""Input checks every fit makes, and the portable array format of stored models.

Light on purpose (numpy only; scipy.sparse where the data is sparse): the API checks a request's
data with these before a job is queued, without importing an estimator.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

# ---------------------------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------------------------


# Largest magnitude of an input value: every method squares differences and inner products of
# points, which overflow to inf (then NaN) from about 1e154. 1e100 keeps sums of squares over
# any number of features finite.
MAX_ABS_VALUE = 1e100
# Smallest spread (largest max - min over the features) of data to cluster: squared distances
# of a smaller spread underflow towards 0, and the points look identical to every kernel.
MIN_SPREAD = 1e-100


def _check_magnitude(values: np.ndarray, name: str) -> None:
    # max(|max|, |min|): no array of |values| beside the data
    largest = max(abs(float(values.max())), abs(float(values.min()))) if values.size else 0.0
    if largest > MAX_ABS_VALUE:
        raise ValueError(
            f"{name} holds values of magnitude {largest:.3g}, above {MAX_ABS_VALUE:.0e}: squared "
            "distances and kernels would overflow; rescale X (for example, standardize it)"
        )


def is_sparse(X: Any) -> bool:
    """Whether ``X`` is a scipy sparse matrix or array, without importing scipy.sparse: until
    something has imported it, nothing can be one (the API, which never builds one, and a
    worker then start without it)."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(X)


def as_float_matrix(X: Any, *, name: str = "X", accept_sparse: bool = False) -> np.ndarray:
    """Convert ``X`` to a finite 2-D float64 array (or CSR) of magnitude at most
    ``MAX_ABS_VALUE``, with errors that say what to fix."""
    if is_sparse(X):
        if not accept_sparse:
            raise ValueError(f"{name} is a sparse matrix; this algorithm needs a dense array")
        X = sys.modules["scipy.sparse"].csr_matrix(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D")
        if not np.all(np.isfinite(X.data)):
            raise ValueError(f"{name} contains NaN or infinity; remove or impute those values")
        _check_magnitude(X.data, name)
        return X
    if isinstance(X, list | tuple) and len(X) and isinstance(X[0], list | tuple | np.ndarray):
        widths = {len(row) for row in X}
        if len(widths) > 1:
            raise ValueError(
                f"{name} is ragged: rows have {sorted(widths)} features; "
                "every row needs the same count"
            )
    try:
        array = np.asarray(X)
    except ValueError as exc:  # numpy refuses inhomogeneous nesting
        raise ValueError(f"{name} is ragged or not numeric: {exc}") from None
    if array.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} must hold real numbers")
    if array.dtype.kind in "OUSV" or array.dtype == bool:
        try:
            array = array.astype(np.float64)
        except ValueError:
            raise ValueError(
                f"{name} must contain numbers only (found {array.dtype} values)"
            ) from None
        # A TypeError (say, a dict inside an object array) keeps numpy's own message.
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must contain numbers only (found {array.dtype} values)")
    if array.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {array.ndim}D array instead: {name} must be a matrix with one "
            "row per point. Reshape your data with X.reshape(-1, 1) if it has a single feature"
        )
    # The wording of scikit-learn's check_array, so callers matching it keep working.
    if array.shape[0] == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={array.shape}) while a minimum of 1 is "
            f"required: {name} is empty"
        )
    if array.shape[1] == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={array.shape}) while a minimum of 1 is "
            f"required: each point of {name} needs at least one feature"
        )
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinity; remove or impute those values")
    _check_magnitude(array, name)
    return array


def check_clustering_input(X: np.ndarray | sp.spmatrix, n_clusters: int) -> None:
    """Checks every clustering fit makes: enough points, and not all the same point."""
    n_samples = X.shape[0]
    if n_samples < max(n_clusters, 2):
        raise ValueError(
            f"n_samples={n_samples} is fewer than n_clusters={n_clusters}: "
            "clustering needs at least as many points as clusters (and at least 2)"
        )
    spread = (X.max(axis=0) - X.min(axis=0)).toarray() if is_sparse(X) else np.ptp(X, axis=0)
    if not np.any(spread > 0):
        raise ValueError("all points in X are identical: there is nothing to cluster")
    if spread.max() < MIN_SPREAD:
        raise ValueError(
            f"X spans at most {spread.max():.3g} in every feature, below {MIN_SPREAD:.0e}: its "
            "squared distances underflow; rescale X (for example, standardize it)"
        )
    if not is_sparse(X) and n_clusters > 2:
        # Identical points belong together: with fewer distinct points than clusters some
        # cluster would cut a set of identical points (a bisection leaf of one repeated point
        # has no kernel to split by). Distinct values of a random projection never exceed the
        # distinct rows and are far cheaper to count than the rows; the rows are counted only
        # when the projection falls short.
        projection = X @ np.random.default_rng(0).standard_normal(X.shape[1])
        distinct = np.unique(projection).size
        if distinct < n_clusters:
            distinct = np.unique(X, axis=0).shape[0]
        if distinct < n_clusters:
            raise ValueError(
                f"X has {distinct} distinct points, fewer than n_clusters={n_clusters}: "
                "identical points belong to one cluster; ask for at most that many clusters"
            )


def check_partial_labels(y: Any, n_samples: int) -> np.ndarray | None:
    """Partial labels for semi-supervised modes: integers, ``-1`` = unknown. ``None`` if absent."""
    if y is None:
        return None
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != n_samples:
        raise ValueError(
            f"y must be 1-D with one entry per point ({n_samples}), got {labels.shape}"
        )
    whole = labels.dtype.kind == "f" and np.all(np.isfinite(labels))
    if whole and np.all(labels == np.round(labels)):
        labels = labels.astype(np.int64)
    if labels.dtype.kind not in "iu":
        raise ValueError("y must hold integer labels, with -1 for unknown")
    return labels.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Portable arrays: npz bytes that load with allow_pickle=False
# ---------------------------------------------------------------------------------------------


def arrays_to_npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Serialise numeric arrays to compressed ``.npz`` bytes; object arrays are refused."""
    buffer = io.BytesIO()
    clean = {}
    for key, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.kind not in "biufc":
            raise TypeError(
                f"array {key!r} has dtype {array.dtype}; only numeric arrays are portable"
            )
        clean[key] = array
    np.savez_compressed(buffer, **clean)
    return buffer.getvalue()


def npz_bytes_to_arrays(data: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`arrays_to_npz_bytes`; never unpickles."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}
