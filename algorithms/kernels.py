"""Kernels, width heuristics and kernel-derived matrices shared by every algorithm.

Conventions follow scikit-learn: the RBF kernel is ``exp(-gamma * ||x - x'||^2)``. The papers write
widths differently; the conversions are:

* iterSVR / SDP MMC: ``exp(-||x - x'||^2 / sigma^2)``  ->  ``gamma = 1 / sigma^2``
* GMMC (Gaussian with ``2 sigma^2``):                  ->  ``gamma = 1 / (2 sigma^2)``
* SVC (Ben-Hur et al.): ``exp(-q ||x - x'||^2)``         ->  ``gamma = q``
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack, solve_triangular
from sklearn.metrics.pairwise import euclidean_distances, linear_kernel
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state

from algorithms.threads import compute_threads, small_problem_threads

KernelName = Literal["rbf", "linear"]
KERNELS: tuple[str, ...] = ("rbf", "linear")
GammaSpec = float | Literal["local_scaling", "paper", "scale"]
# Neighbour rank of the local-scaling width (Zelnik-Manor & Perona 2004 use the 7th neighbour).
LOCAL_SCALING_NEIGHBOR = 7
# Relative diagonal below which a pivoted Cholesky factor stops: directions with no energy would
# blow up in the inverse factor of a Nystrom map.
NYSTROM_RANK_TOL = 1e-10


def distinct_rows(X: np.ndarray | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """``(first, copies_of)``: the index of each distinct row of ``X`` where it first occurs, in
    the order the rows came, and for every row the position of its distinct row in ``first``
    (``X == X[first][copies_of]``)."""
    if sp.issparse(X):
        return _distinct_sparse_rows(X)
    _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order], rank[inverse.ravel()]


def _distinct_sparse_rows(X: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct_rows` of a sparse matrix: each row's stored entries, in canonical form (no
    explicit zeros, sorted columns), are its key (one pass over the rows)."""
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    position: dict[tuple[bytes, bytes], int] = {}
    first: list[int] = []
    copies_of = np.empty(X.shape[0], dtype=np.int64)
    for row, (start, end) in enumerate(zip(X.indptr[:-1], X.indptr[1:], strict=True)):
        key = (X.indices[start:end].tobytes(), X.data[start:end].tobytes())
        if key not in position:
            position[key] = len(first)
            first.append(row)
        copies_of[row] = position[key]
    return np.asarray(first, dtype=np.int64), copies_of


def copies_of_rows(X: np.ndarray) -> np.ndarray | None:
    """Each row's position among the distinct rows of dense ``X`` (:func:`distinct_rows`) when
    some row repeats, else None."""
    first, copies_of = distinct_rows(X)
    return copies_of if first.size < X.shape[0] else None


def data_diameter(X: np.ndarray | sp.spmatrix) -> float:
    """Crude estimate of the largest pairwise distance (Zhang, Tsang and Kwok 2007, footnote 5).

    ``D = sqrt(sum_k (max_k - min_k)^2)``, the diagonal of the data's bounding box.
    """
    span = np.asarray(X.max(axis=0).todense() if sp.issparse(X) else X.max(axis=0)).ravel()
    low = np.asarray(X.min(axis=0).todense() if sp.issparse(X) else X.min(axis=0)).ravel()
    return float(np.sqrt(np.sum((span - low) ** 2)))


def largest_pairwise_distance(
    X: np.ndarray | sp.spmatrix, random_state=None, max_points: int = 2000
) -> float:
    """The largest distance between two points (``sigma_0`` of Zhao, Wang and Zhang 2008, 4.2).

    Exact for ``n <= max_points``; otherwise the largest distance within ``max_points`` points
    drawn at random (O(max_points^2 d) instead of O(n^2 d)).
    """
    if X.shape[0] > max_points:
        rng = check_random_state(random_state)
        X = X[np.sort(rng.choice(X.shape[0], size=max_points, replace=False))]
    return float(np.sqrt(max(float(squared_distances(X).max()), 0.0)))


WidthReference = Literal["diameter", "max_distance"]


def local_scaling_gamma(
    X: np.ndarray | sp.spmatrix,
    n_neighbors: int = LOCAL_SCALING_NEIGHBOR,
    random_state=None,
    max_points: int = 2000,
) -> float:
    """The shared data-adaptive RBF width: ``exp(-||x - x'||^2 / (2 sigma^2))``, i.e.
    ``gamma = 1 / (2 sigma^2)``, with ``sigma`` the median distance from a point to its
    ``n_neighbors``-th nearest neighbour.

    ``sigma`` is the local scaling of Zelnik-Manor & Perona ("Self-tuning spectral clustering",
    NIPS 2004: ``sigma_i`` = distance to the 7th neighbour), made global by the median so that one
    stationary kernel (and hence one out-of-sample model) serves all points; it is used as the
    Gaussian's length scale, as in scikit-learn's ``gaussian_process.kernels.RBF``. It depends on
    X alone, is invariant to translation and scales with X, and measures the distance at which a
    point has a handful of neighbours: two points of one cluster are linked through a chain of
    such neighbours, while a gap of a few ``sigma`` between clusters drives the kernel to zero.
    The papers' bounding-box widths (``gamma="paper"``) are many times wider, an almost linear
    kernel on clustered data. Above ``max_points`` points the width is that of ``max_points``
    points drawn at random, neighbours searched among them: the width at which a point has a
    handful of neighbours among ``max_points``, not among all n, which would shrink it as
    ``n^(-1/d)`` below what a model of a few hundred basis functions (CPM3C's Nystrom
    coordinates) spans; iterSVR and SVC fit samples of similar size above their exact limits,
    so every method sees this width.
    """
    n = X.shape[0]
    rank = min(n_neighbors, n - 1)
    if rank < 1:
        raise ValueError("gamma='local_scaling' needs at least two points")
    X = centred(X)
    if n > max_points:
        X = X[np.sort(check_random_state(random_state).choice(n, max_points, replace=False))]
    # Column 0 is the query point itself.
    with small_problem_threads():  # a few ms of work: threads would only spin
        distances = NearestNeighbors(n_neighbors=rank + 1).fit(X).kneighbors(X)[0][:, rank]
    # Duplicated points give zero distances: take the median over the positive ones, and when a
    # point has more than n_neighbors copies everywhere, over the positive distances between the
    # sampled points.
    positive = distances[distances > 0]
    if positive.size == 0:
        pairwise = np.sqrt(squared_distances(X))
        positive = pairwise[pairwise > 0]
    if positive.size == 0:
        raise ValueError("gamma='local_scaling' needs points that are not all identical")
    return 0.5 / float(np.median(positive)) ** 2


def scale_gamma_of_distances(D: np.ndarray) -> float:
    """scikit-learn's ``gamma="scale"``, ``1 / (n_features * X.var())``, of the points whose
    squared distances are ``D`` (``n x n``), taken about their mean: for centred ``X`` the mean
    of ``D`` over all ordered pairs is ``2 * n_features * X.var()``. It depends on the spread of
    all the points, not on the densest ones' neighbour distances (:func:`local_scaling_gamma`)."""
    mean = float(D.mean())
    if mean <= 0:
        raise ValueError("gamma='scale' needs points that are not all identical")
    return 2.0 / mean


def resolve_gamma(
    X: np.ndarray | sp.spmatrix,
    gamma: GammaSpec,
    width_factor: float = 1.0,
    *,
    width_reference: WidthReference = "diameter",
    random_state=None,
) -> float:
    """Turn a ``gamma`` parameter into the number used by the RBF kernel.

    * ``"local_scaling"`` (the default of most algorithms): :func:`local_scaling_gamma`, the
      shared data-adaptive width.
    * ``"paper"``: the bounding-box rule of iterSVR and CPM3C, ``sigma = width_factor * D``
      and ``gamma = 1 / sigma^2``, with ``D`` the heuristic of Zhang, Tsang and Kwok 2007
      (section 4, :func:`data_diameter`) or, for ``width_reference="max_distance"``,
      :func:`largest_pairwise_distance` (``sigma_0`` of Zhao, Wang and Zhang 2008).
    * ``"scale"``: scikit-learn's ``1 / (n_features * X.var())``.
    * a positive number: used as is.
    """
    if isinstance(gamma, str):
        if gamma == "local_scaling":
            return local_scaling_gamma(X, random_state=random_state)
        if gamma == "paper":
            if width_reference == "max_distance":
                diameter = largest_pairwise_distance(X, random_state)
            else:
                diameter = data_diameter(X)
            if diameter <= 0:
                raise ValueError("gamma='paper' needs points that are not all identical")
            return 1.0 / (width_factor * diameter) ** 2
        if gamma == "scale":
            variance = (X.multiply(X)).mean() - X.mean() ** 2 if sp.issparse(X) else X.var()
            if variance <= 0:
                raise ValueError("gamma='scale' needs points that are not all identical")
            return 1.0 / (X.shape[1] * float(variance))
        raise ValueError(
            f"unknown gamma {gamma!r}: use a positive number, 'local_scaling', 'paper' or 'scale'"
        )
    gamma = float(gamma)
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be a positive number, got {gamma}")
    return gamma


def check_kernel_name(kernel: str) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}: use one of {', '.join(KERNELS)}")
    return kernel


def pairwise_kernel(
    X: np.ndarray | sp.spmatrix,
    Y: np.ndarray | sp.spmatrix | None = None,
    *,
    kernel: str = "rbf",
    gamma: float = 1.0,
) -> np.ndarray:
    """Dense kernel matrix between the rows of ``X`` and ``Y`` (``Y = X`` when omitted)."""
    check_kernel_name(kernel)
    if kernel == "linear":
        return np.asarray(linear_kernel(X, Y), dtype=np.float64)
    K = squared_distances(X, Y)
    K *= -gamma
    return np.exp(K, out=K)


def centred(X: np.ndarray | sp.spmatrix) -> np.ndarray | sp.spmatrix:
    """Dense ``X`` as float64 minus its mean (sparse ``X`` unchanged, to stay sparse): neighbour
    searches and distances on it are exact at any offset (see :func:`squared_distances`)."""
    if sp.issparse(X):
        return X
    X = np.asarray(X, dtype=np.float64)
    return X - X.mean(axis=0)


def squared_distances(X: np.ndarray | sp.spmatrix,
                      Y: np.ndarray | sp.spmatrix | None = None) -> np.ndarray:
    """Squared Euclidean distances, clipped at zero against round-off.

    Dense inputs are first shifted by a common centre: the expansion
    ``|x|^2 + |y|^2 - 2 x.y`` loses every digit of a distance that is small beside ``|x|``
    (points at 1e8 + N(0, 1) came out as 0 or 2^26), and distances do not change under a shift.
    A shift cannot help a distance small beside the spread of the data (two groups a unit apart,
    each within 1e-9: the local width is 1e-9 and the expansion's error of 1e-16 in ``d^2``
    is 1e2 times ``d^2`` itself, a kernel of noise), so the entries the expansion cannot give to
    six digits are recomputed from the differences (:func:`_exact_where_inaccurate`).
    """
    if sp.issparse(X) or (Y is not None and sp.issparse(Y)):
        D = euclidean_distances(X, Y, squared=True)
        np.maximum(D, 0.0, out=D)
        return D
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    centre = Y.mean(axis=0)
    X_shifted = X - centre
    Y_shifted = X_shifted if Y is X else Y - centre
    D = euclidean_distances(X_shifted, Y_shifted, squared=True)
    np.maximum(D, 0.0, out=D)
    _exact_where_inaccurate(D, X, Y, X_shifted, Y_shifted)
    return D


# Pairs recomputed per block by _exact_where_inaccurate (a block's differences are pairs x d).
_EXACT_PAIRS_PER_BLOCK = 1 << 16


def _exact_where_inaccurate(distances: np.ndarray, X: np.ndarray, Y: np.ndarray,
                            X_shifted: np.ndarray, Y_shifted: np.ndarray) -> None:
    """Overwrite the entries of ``distances`` (squared distances of the rows of ``X`` and ``Y``
    by the expansion on the shifted rows) that may be wrong in the sixth digit with
    ``|x - y|^2`` from the differences of the rows as given (a shift rounds them too).

    The expansion's absolute error is at most a few ``eps (|x|^2 + |y|^2)``; an entry below a
    million times that bound is recomputed. On data at its own scale that is the diagonal and
    near-duplicate pairs, a few per point."""
    bound = 4.0 * np.finfo(np.float64).eps * (
        float(np.einsum("ij,ij->i", X_shifted, X_shifted).max(initial=0.0))
        + float(np.einsum("ij,ij->i", Y_shifted, Y_shifted).max(initial=0.0)))
    rows, cols = np.nonzero(distances < 1e6 * bound)
    step = max(1, _EXACT_PAIRS_PER_BLOCK // max(X.shape[1], 1))
    for start in range(0, rows.size, step):
        r, c = rows[start: start + step], cols[start: start + step]
        difference = X[r] - Y[c]
        distances[r, c] = np.einsum("ij,ij->i", difference, difference)


def center_kernel(K: np.ndarray) -> np.ndarray:
    """``H K H`` with ``H = I - ee^T / n``: the feature-space centering that lets the bias drop."""
    row_means = K.mean(axis=0)
    return K - row_means[None, :] - row_means[:, None] + row_means.mean()


def normalized_laplacian(K: np.ndarray) -> np.ndarray:
    """``I - D^{-1/2} K D^{-1/2}`` with ``D = diag(K e)``: the normalized graph Laplacian."""
    degree = K.sum(axis=1)
    if np.any(degree <= 0):
        raise ValueError("the affinity matrix has a row with no positive weight")
    inv_sqrt = 1.0 / np.sqrt(degree)
    L = -K * inv_sqrt[:, None] * inv_sqrt[None, :]
    L[np.diag_indices_from(L)] += 1.0
    return (L + L.T) / 2.0


def pivoted_cholesky(W: np.ndarray, relative_tol: float) -> tuple[np.ndarray, np.ndarray]:
    """``(L, pivots)`` with ``W[pivots][:, pivots] ~= L @ L.T`` for a PSD ``W``: LAPACK's pivoted
    Cholesky (``dpstrf``), stopped when the largest remaining diagonal is below ``relative_tol``
    times the largest diagonal of ``W``. ``L`` is ``m x rank`` and lower trapezoidal."""
    with small_problem_threads():
        factor, pivots, rank, info = lapack.dpstrf(W, lower=1,
                                                   tol=relative_tol * float(np.max(np.diag(W))))
    if info < 0:
        raise ValueError(f"pivoted Cholesky: argument {-info} is invalid")
    return np.tril(factor)[:, :rank], pivots - 1


# Rows of X mapped at once by NystromMap: a kernel block of this many rows by a few hundred
# landmarks (about 40 MB at 300), however many rows there are.
NYSTROM_CHUNK_ROWS = 16_384
# Up to this many features an RBF kernel block is filled from the row differences by a compiled
# loop (:mod:`algorithms.kernels_compiled`), about twice as fast at 16; by 64 features the
# expansion's matrix product is as fast.
COMPILED_RBF_MAX_FEATURES = 16


def rbf_block_in_threads(X: np.ndarray, YT: np.ndarray, gamma: float, out: np.ndarray) -> None:
    """:func:`compiled_rbf_block` (``YT``: the rows of ``Y`` as columns) on every core."""
    _in_bands(compiled_rbf_block(), (X,), (YT, gamma), out)


class KernelColumns:
    """The kernel between blocks of at most ``block_rows`` rows and fixed points ``Y`` (its
    columns): an RBF kernel on dense rows of at most ``COMPILED_RBF_MAX_FEATURES`` features
    from the row differences (:func:`compiled_rbf_block`, on every core, into one buffer that
    every block reuses), any other by :func:`pairwise_kernel`. Labelling a million points by a
    kernel expansion or a Nystrom map is mostly this kernel."""

    def __init__(self, Y: np.ndarray | sp.spmatrix, kernel: str, gamma: float,
                 block_rows: int):
        self.Y, self.kernel, self.gamma = Y, kernel, gamma
        self.compiled = (kernel == "rbf" and not sp.issparse(Y)
                         and Y.shape[1] <= COMPILED_RBF_MAX_FEATURES)
        if self.compiled:
            self.YT = np.ascontiguousarray(np.asarray(Y).T, dtype=np.float64)  # d x m
            self._buffer = np.empty((block_rows, Y.shape[0]))

    def block(self, rows: np.ndarray | sp.spmatrix) -> np.ndarray:
        """``K(rows, Y)``; a compiled block is a view of the buffer, valid until the next."""
        if not self.compiled or sp.issparse(rows):
            return pairwise_kernel(rows, self.Y, kernel=self.kernel, gamma=self.gamma)
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        K = self._buffer[:rows.shape[0]]
        rbf_block_in_threads(rows, self.YT, self.gamma, K)
        return K


def rbf_segments_inside(A: np.ndarray, B: np.ndarray, t: np.ndarray, Y: np.ndarray,
                        gamma: float, weights: np.ndarray, threshold: float) -> np.ndarray:
    """Whether :func:`rbf_sums` is at least ``threshold`` at every point ``A_i + t_k (B_i -
    A_i)`` of each segment (tried in the order of ``t``, the first point below ending the
    segment), on every core (:func:`algorithms.kernels_compiled.rbf_segments_inside`)."""
    out = np.empty(A.shape[0], dtype=np.bool_)
    rows = tuple(np.ascontiguousarray(M, dtype=np.float64) for M in (A, B))
    args = (np.ascontiguousarray(t, dtype=np.float64),
            np.ascontiguousarray(Y.T, dtype=np.float64), float(gamma),
            np.ascontiguousarray(weights, dtype=np.float64), float(threshold))
    _in_bands(compiled_rbf_segments_inside(), rows, args, out)
    return out


@dataclass(frozen=True)
class SegmentFactors:
    """The factors ``B^p`` of points ``x_i`` and sphere points ``y_j``, ``B = exp(-gamma
    |x_i - y_j|^2 / (n + 1))``, for the ``n`` samples ``t = k / (n + 1)`` of a segment: the
    kernel at a sample of a segment between two such points is a sum of products of its ends'
    factors (:func:`rbf_segments_inside_from_factors`), with no exponential.

    A power ``p = q s + r`` (``0 <= r < s``) is ``large[q] * small[r]``: about ``2 sqrt(n)``
    matrices held instead of ``n``, built by products from one exponential."""

    distances: np.ndarray
    small: np.ndarray  # small[r] = B^r, r < step
    large: np.ndarray  # large[q] = B^(q step), q <= n // step
    step: int

    @classmethod
    def of(cls, distances: np.ndarray, n_points: int, gamma: float) -> SegmentFactors:
        distances = np.ascontiguousarray(distances, dtype=np.float64)
        step = cls.step_for(n_points)
        base = np.exp(distances * (-gamma / (n_points + 1.0)))
        small = _powers(base, np.ones_like(base), step)
        large = _powers(small[-1] * base, np.ones_like(base), n_points // step + 1)
        return cls(distances, small, large, step)

    @staticmethod
    def step_for(n_points: int) -> int:
        """The step ``s`` of the powers, ``ceil(sqrt(n + 1))``."""
        return max(1, math.isqrt(n_points) + 1)

    @classmethod
    def matrices(cls, n_points: int) -> int:
        """How many ``n x m`` matrices :meth:`of` holds for ``n_points`` samples."""
        step = cls.step_for(n_points)
        return step + n_points // step + 1


def _powers(base: np.ndarray, first: np.ndarray, count: int) -> np.ndarray:
    """``first * base^e`` for ``e = 0..count-1``."""
    out = np.empty((count, *base.shape))
    out[0] = first
    for e in range(1, count):
        np.multiply(out[e - 1], base, out=out[e])
    return out


def rbf_segments_inside_from_factors(rows: np.ndarray, cols: np.ndarray,
                                     squared_lengths: np.ndarray, a: SegmentFactors,
                                     b: SegmentFactors, samples: np.ndarray, n_points: int,
                                     gamma: float, weights: np.ndarray,
                                     threshold: float) -> np.ndarray:
    """:func:`rbf_segments_inside` for the segments from the points ``rows[i]`` of ``a`` to
    the points ``cols[i]`` of ``b``, of squared lengths ``squared_lengths``, at the samples
    ``t = samples[k] / (n_points + 1)`` (integers ``1..n_points``, in the order tried): four
    products per sphere point and sample, whatever the number of features
    (:func:`algorithms.kernels_compiled.rbf_segments_inside_from_factors`)."""
    samples = np.asarray(samples, dtype=np.int64)
    out = np.empty(rows.shape[0], dtype=np.bool_)
    per_segment = (np.ascontiguousarray(rows, dtype=np.int64),
                   np.ascontiguousarray(cols, dtype=np.int64),
                   np.ascontiguousarray(squared_lengths, dtype=np.float64))
    args = (a.distances, a.small, a.large, b.distances, b.small, b.large, n_points + 1 - samples,
            samples, a.step, samples / (n_points + 1.0), float(gamma),
            np.ascontiguousarray(weights, dtype=np.float64), float(threshold))
    _in_bands(compiled_rbf_segments_inside_from_factors(), per_segment, args, out)
    return out


def rbf_sums(X: np.ndarray, Y: np.ndarray, gamma: float, weights: np.ndarray) -> np.ndarray:
    """``sum_j weights[j] exp(-gamma |X_i - Y_j|^2)`` per row of dense ``X`` with at most
    ``COMPILED_RBF_MAX_FEATURES`` features, from the row differences on every core
    (:func:`algorithms.kernels_compiled.rbf_sums`), in memory ``O(n + m)``."""
    out = np.empty(X.shape[0])
    args = (np.ascontiguousarray(Y.T, dtype=np.float64), float(gamma),
            np.ascontiguousarray(weights, dtype=np.float64))
    _in_bands(compiled_rbf_sums(), (np.ascontiguousarray(X, dtype=np.float64),), args, out)
    return out


def _in_bands(fill, rows: tuple[np.ndarray, ...], args: tuple, out: np.ndarray) -> None:
    """``fill(*rows, *args, out)`` on :func:`~algorithms.threads.compute_threads` threads: the
    compiled loops release the GIL, so threads fill bands of rows of ``out`` (from the same
    bands of ``rows``) side by side; a row's values do not depend on the bands."""
    n = out.shape[0]
    threads = compute_threads()
    bands = max(1, min(threads, n // 256))
    if bands == 1:
        fill(*rows, *args, out)
        return
    edges = np.linspace(0, n, bands + 1).astype(int)

    def band(b: int) -> None:
        part = slice(edges[b], edges[b + 1])
        fill(*(M[part] for M in rows), *args, out[part])

    list(_band_threads(os.getpid(), threads).map(band, range(bands)))


@functools.cache
def _band_threads(pid: int, threads: int) -> ThreadPoolExecutor:
    """One pool of ``threads`` for :func:`_in_bands` per process (``pid``: a forked child, whose
    copy of its parent's pool has no threads, makes its own), kept: a fit may call it thousands
    of times."""
    return ThreadPoolExecutor(threads, thread_name_prefix="kernel-band")


@functools.cache
def compiled_rbf_segments_inside():
    """:func:`algorithms.kernels_compiled.rbf_segments_inside`, loaded on first use."""
    from algorithms.kernels_compiled import rbf_segments_inside as compiled

    one = np.zeros((1, 1))
    compiled(one, one, np.ones(1), one, 1.0, np.ones(1), 0.0, np.empty(1, dtype=np.bool_))
    return compiled


@functools.cache
def compiled_rbf_segments_inside_from_factors():
    """:func:`algorithms.kernels_compiled.rbf_segments_inside_from_factors`, loaded on first
    use."""
    from algorithms.kernels_compiled import rbf_segments_inside_from_factors as compiled

    index, one, factors = np.ones(1, dtype=np.int64), np.zeros((1, 1)), np.ones((2, 1, 1))
    compiled(index * 0, index * 0, np.zeros(1), one, factors, factors, one, factors, factors,
             index, index, 1, np.ones(1) / 2, 1.0, np.ones(1), 0.0,
             np.empty(1, dtype=np.bool_))
    return compiled


@functools.cache
def compiled_rbf_sums():
    """:func:`algorithms.kernels_compiled.rbf_sums`, loaded (numba imported on first use)."""
    from algorithms.kernels_compiled import rbf_sums as compiled

    compiled(np.zeros((1, 1)), np.zeros((1, 1)), 1.0, np.ones(1), np.empty(1))
    return compiled


@functools.cache
def compiled_rbf_block():
    """:func:`algorithms.kernels_compiled.rbf_block`, loaded (numba imported on first use)."""
    from algorithms.kernels_compiled import rbf_block

    rbf_block(np.zeros((1, 1)), np.zeros((1, 1)), 1.0, np.empty((1, 1)))
    return rbf_block


@dataclass
class NystromMap:
    """Explicit feature map ``phi(x) = K(x, landmarks) @ projection`` approximating a kernel.

    Portable (plain arrays) so that models using it can be exported without pickle; it replaces a
    dense n x n kernel matrix with n x m features for the large-n paths of the algorithms.

    The factor is a pivoted Cholesky decomposition ``P W P^T = L L^T`` of the landmarks' kernel
    matrix ``W`` (LAPACK ``dpstrf``), stopped when no remaining diagonal exceeds
    ``NYSTROM_RANK_TOL`` times the largest: the landmarks kept are the pivots, and
    ``projection = L_r^{-T}``, so ``phi(pivots) = L_r`` and ``phi phi^T = W`` up to that
    tolerance. Any factor of ``W`` gives the same features up to a rotation, which the methods
    using them (linear max-margin models, k-means, PCA) do not see; Cholesky is much cheaper
    than the eigendecomposition at a few hundred landmarks, and it drops the same no-energy
    directions.
    """

    landmarks: np.ndarray
    projection: np.ndarray
    kernel: str
    gamma: float

    @classmethod
    def fit(cls, X: np.ndarray | sp.spmatrix, **options) -> NystromMap:
        """The map alone (options as :meth:`fit_transform`)."""
        return cls.fit_transform(X, **options)[0]

    @classmethod
    def fit_transform(
        cls,
        X: np.ndarray | sp.spmatrix,
        *,
        n_components: int,
        kernel: str = "rbf",
        gamma: float = 1.0,
        random_state: int | np.random.RandomState | None = None,
        dtype: type = np.float64,
        on_rows: Callable[[int, int], None] | None = None,
    ) -> tuple[NystromMap, np.ndarray]:
        """The map and the features of ``X`` (of ``dtype``): the landmarks' features are the
        Cholesky rows themselves, so only the other points are evaluated against the
        landmarks. ``on_rows(done, total)`` is called after each block of rows mapped."""
        rng = check_random_state(random_state)
        n = X.shape[0]
        m = min(n_components, n)
        index = np.sort(rng.choice(n, size=m, replace=False))
        landmarks = X[index]
        if sp.issparse(landmarks):
            landmarks = landmarks.toarray()
        W = pairwise_kernel(landmarks, kernel=kernel, gamma=gamma)
        factor, pivots = pivoted_cholesky(W, NYSTROM_RANK_TOL)
        rank = factor.shape[1]
        with small_problem_threads():
            projection = solve_triangular(factor[:rank], np.eye(rank), lower=True).T
        fmap = cls(np.asarray(landmarks[pivots[:rank]], dtype=np.float64), projection, kernel,
                   float(gamma))
        features = np.empty((n, rank), dtype=dtype)
        features[index[pivots]] = factor  # the landmarks' rows need no second kernel evaluation
        others = np.setdiff1d(np.arange(n), index, assume_unique=True)
        step = 8 * NYSTROM_CHUNK_ROWS  # rows gathered and scattered at once
        for start in range(0, others.size, step):
            rows = others[start:start + step]
            features[rows] = fmap.transform(X[rows], dtype=dtype)
            if on_rows is not None:
                on_rows(start + rows.size, others.size)
        return fmap, features

    def transform(self, X: np.ndarray | sp.spmatrix, dtype: type = np.float64) -> np.ndarray:
        """The features of ``X`` (of ``dtype``), a block of rows at a time: the kernel block is
        the only temporary, so memory stays at the features' own ``n x m`` at any ``n``. An RBF
        kernel on dense rows of at most ``COMPILED_RBF_MAX_FEATURES`` features is computed from
        the differences (:func:`compiled_rbf_block`). float32 features are a float32 product
        of the (float64) kernel block, half the memory and time of float64 ones."""
        features = np.empty((X.shape[0], self.projection.shape[1]), dtype=dtype)
        projection = self.projection.astype(dtype, copy=False)
        columns = KernelColumns(self.landmarks, self.kernel, self.gamma,
                                min(NYSTROM_CHUNK_ROWS, X.shape[0]))
        for start in range(0, X.shape[0], NYSTROM_CHUNK_ROWS):
            block = X[start:start + NYSTROM_CHUNK_ROWS]
            rows = columns.block(block)
            features[start:start + block.shape[0]] = rows.astype(dtype, copy=False) @ projection
        return features

    def to_arrays(self, prefix: str = "nystrom_") -> dict[str, np.ndarray]:
        return {f"{prefix}landmarks": self.landmarks, f"{prefix}projection": self.projection}

    def to_meta(self) -> dict:
        return {"kernel": self.kernel, "gamma": self.gamma}

    @classmethod
    def from_export(cls, meta: dict, arrays: dict[str, np.ndarray], prefix: str = "nystrom_"):
        return cls(
            arrays[f"{prefix}landmarks"],
            arrays[f"{prefix}projection"],
            meta["kernel"],
            meta["gamma"],
        )
