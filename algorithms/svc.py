"""Support vector clustering: the minimal enclosing sphere and its contours.

Ben-Hur, Horn, Siegelmann and Vapnik 2001, "A Support Vector Method for Clustering" (NIPS).

1. The sphere. The Wolfe dual (11), ``max_beta sum_j K_jj beta_j - beta^T K beta`` subject to
   ``sum_j beta_j = 1`` (3) and ``0 <= beta_j <= C`` (9), with the Gaussian kernel (10)
   ``exp(-q ||x - x'||^2)``. Because ``K_jj = 1`` the linear term is constant and (11) is the
   one-class SVM of Schoelkopf et al. (the paper's ref. [4]) with ``nu = 1 / (N C)``; libsvm
   solves it and its ``alpha = N nu beta``, its ``rho = N nu sum_j beta_j K(x_j, x_sv)``. Points
   with ``0 < beta < C`` are support vectors (on the sphere), ``beta = C`` bounded SVs (outside).
2. The radius. ``R^2(x)`` by (13); ``R`` is ``R(x)`` on the support vectors (14), averaged. A point
   is inside the sphere, ``R(x) <= R``, exactly when ``sum_j beta_j K(x_j, x) >= rho / (N nu)``,
   which is what the segment tests evaluate (one kernel row per sampled point, no ``R`` needed).
3. Labeling. Clusters are the connected components of the graph of (19): ``A_ij = 1`` when every
   sampled point of the segment ``x_i x_j`` is inside the sphere (the paper samples 10 points).
   The segment tests are batched in numpy and the components come from
   ``scipy.sparse.csgraph.connected_components``. Which pairs are tested is the ``labeling``:

   * ``"complete"``: every pair of points that are not bounded SVs, as in the paper; O(N^2) tests.
   * ``"support_vectors"``: every pair of support vectors, plus each other point against its
     ``n_neighbors`` nearest support vectors; O(N_sv^2 + N k) tests. A point whose segment to no
     nearby support vector stays inside joins the cluster of its nearest support vector.
   * ``"knn"``: each point against its ``n_neighbors`` nearest points; O(N k) tests.

   Bounded SVs are not labeled by (19). The paper assigns them "to the cluster that they are
   closest to": by default the clusters grow outward from the contours, the bounded SV closest to
   a clustered point first, each joining the cluster of that point (``bounded_svs="chain"``,
   single linkage from the contours); ``"nearest"`` takes the nearest labeled point, and
   ``"outlier"`` marks them ``-1``.
4. The width. ``gamma`` is the paper's ``q``. ``gamma="schedule"`` runs the divisive schedule of
   section 4: start at ``q = 1 / max_ij ||x_i - x_j||^2`` (one cluster), raise ``q`` until the
   contours split into ``n_clusters`` clusters, and raise ``1/C`` (``p``) whenever single points
   break off or support vectors become too many, so a user need not guess ``q``.

Out-of-sample: a new point inside the sphere joins the cluster of a support vector it connects to
(the segment test of (19) against its ``n_neighbors`` nearest support vectors); a point outside
joins the cluster of the nearest stored point (support vectors and bounded SVs), or gets ``-1``
with ``bounded_svs="outlier"``.

The defaults' scores against scikit-learn's clusterers are in ``docs/defaults.md``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components, minimum_spanning_tree
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.svm import OneClassSVM
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.inputs import (
    as_float_matrix,
    check_clustering_input,
)
from algorithms.kernels import (
    COMPILED_RBF_MAX_FEATURES,
    SegmentFactors,
    copies_of_rows,
    pairwise_kernel,
    rbf_segments_inside,
    rbf_segments_inside_from_factors,
    rbf_sums,
    resolve_gamma,
    squared_distances,
)
from algorithms.params.common import AUTO, DEPRECATED
from algorithms.params.svc import (
    SAMPLE_SIZE as SAMPLE_SIZE,
)
from algorithms.params.svc import SCHEDULE
from algorithms.params.svc import (
    Labeling as Labeling,
)
from algorithms.params.svc import (
    SupportVectorClusteringParams as SupportVectorClusteringParams,
)
from algorithms.params.svc import (
    soft_margin_problem as soft_margin_problem,
)
from algorithms.pca import principal_directions
from algorithms.progress import ProgressCallback, report
from algorithms.sampling import SampledFitAttributes, fit_sample

# Kernel entries evaluated per batch of segment points: bounds the memory of a batch.
_BATCH_ENTRIES = 1 << 22
# Above this many points the diameter for gamma="schedule" is bounded by 2 max ||x - mean||.
_EXACT_DIAMETER_MAX_N = 5000
# gamma="schedule" stops raising p = 1/(NC) here: at p = 1 every point is a bounded SV.
_MAX_P = 0.95
# Points whose segments predict tests at once.
_PREDICT_BLOCK = 4096
_REPORT_EVERY_BLOCKS = 16  # progress while labelling a large data set: every 16 blocks


# ---------------------------------------------------------------------------------------------
# Section 2: the minimal enclosing sphere, dual (11)
# ---------------------------------------------------------------------------------------------


@dataclass
class Sphere:
    """Solution of the dual (11): ``beta`` over the points with ``beta > 0`` and the radius.

    ``inside(x)`` iff ``kernel_sum(x) = sum_j beta_j K(x_j, x) >= threshold``, the same as
    ``R(x) <= R`` by (13); ``radius**2 = 1 - 2 threshold + beta^T K beta``.
    """

    points: np.ndarray  # coordinates of the points with beta > 0 (SVs and bounded SVs)
    beta: np.ndarray
    index: np.ndarray  # their row in the training data
    bounded: np.ndarray  # bool: beta == C
    threshold: float
    beta_k_beta: float
    gamma: float
    C: float
    slack: float = 0.0  # solver tolerance in kernel-sum units: SVs lie within it of the threshold

    @property
    def radius(self) -> float:
        return math.sqrt(max(1.0 - 2.0 * self.threshold + self.beta_k_beta, 0.0))

    def kernel_sum(self, Y: np.ndarray) -> np.ndarray:
        """``sum_j beta_j K(x_j, y)`` for every row of ``Y``, in memory-bounded batches; on few
        features by the compiled loop of :func:`algorithms.kernels.rbf_sums`."""
        if Y.shape[1] <= COMPILED_RBF_MAX_FEATURES:
            return rbf_sums(Y, self.points, self.gamma, self.beta)
        out = np.empty(Y.shape[0])
        step = max(1, _BATCH_ENTRIES // max(self.points.shape[0], 1))
        points_sq = np.einsum("ij,ij->i", self.points, self.points)
        for start in range(0, Y.shape[0], step):
            block = Y[start : start + step]
            # exp(-q ||y - x||^2) from the expansion ||y||^2 + ||x||^2 - 2 y.x, in place.
            D = block @ self.points.T
            D *= -2.0
            D += points_sq[None, :]
            D += np.einsum("ij,ij->i", block, block)[:, None]
            np.maximum(D, 0.0, out=D)
            D *= -self.gamma
            np.exp(D, out=D)
            out[start : start + step] = D @ self.beta
        return out

    def squared_radius_of(self, Y: np.ndarray) -> np.ndarray:
        """``R^2(y)`` of (13)."""
        return 1.0 - 2.0 * self.kernel_sum(Y) + self.beta_k_beta


def solve_enclosing_sphere(X: np.ndarray, gamma: float, p: float, tol: float = 1e-4,
                           cache_size: float = 200.0, rows: np.ndarray | None = None) -> Sphere:
    """Minimal enclosing sphere of ``phi(X)``: dual (11) with ``C = 1 / (N p)``.

    Solved as libsvm's one-class SVM with ``nu = p``: for the Gaussian kernel ``K_jj = 1``, so
    (11) is ``min beta^T K beta`` under (3) and (9), the one-class dual with ``alpha = N p beta``.

    ``rows`` (each point's distinct row, :func:`algorithms.kernels.distinct_rows`): the dual is
    solved over the distinct rows, each weighted by its copies (libsvm's sample weights bound
    ``alpha_i`` by the weight and sum ``nu`` times the weights: the same optimum), and the
    sphere holds a row's first copy with the row's ``beta``, bounded when it reaches the copies'
    bound (:func:`label_points` then treats every copy alike). Over the copies themselves the
    dual may spread a row's weight over them arbitrarily, so copies of one point could lie both
    on and outside the sphere, and end in different clusters.
    """
    n = X.shape[0]
    ocsvm = OneClassSVM(kernel="rbf", gamma=gamma, nu=p, tol=tol, cache_size=cache_size)
    scale = n * p  # alpha = scale * beta, upper bound of alpha is 1
    if rows is None:
        ocsvm.fit(X)
        alpha = np.asarray(ocsvm.dual_coef_[0], dtype=np.float64)
        index = np.asarray(ocsvm.support_, dtype=np.int64)
        bounded = alpha >= 1.0 - 1e-9
    else:
        first = np.unique(rows, return_index=True)[1]
        copies = np.bincount(rows).astype(np.float64)
        ocsvm.fit(X[first], sample_weight=copies)
        alpha = np.asarray(ocsvm.dual_coef_[0], dtype=np.float64)
        bounded = alpha >= copies[ocsvm.support_] * (1.0 - 1e-9)
        index = first[ocsvm.support_]
    beta = alpha / scale
    points = X[index]
    K = pairwise_kernel(points, kernel="rbf", gamma=gamma)
    return Sphere(
        points=points,
        beta=beta,
        index=index,
        bounded=bounded if p * n > 1.0 else np.zeros_like(bounded),
        threshold=float(ocsvm.offset_[0]) / scale,
        beta_k_beta=float(beta @ K @ beta),
        gamma=float(gamma),
        C=1.0 / scale,
        slack=tol / scale,
    )


# ---------------------------------------------------------------------------------------------
# Section 3: cluster labeling by the adjacency (19)
# ---------------------------------------------------------------------------------------------


@functools.cache
def _bisection_order(n_points: int) -> tuple[int, ...]:
    """Sample indices ordered middle first, then the points farthest from those already tested.

    A segment that leaves the sphere usually does so near its middle, so most failing segments
    are discarded after one kernel evaluation instead of ``n_points``. Cached: every batch of
    segments uses the same order.
    """
    chosen = [(n_points - 1) // 2]
    rest = set(range(n_points)) - set(chosen)
    while rest:
        nxt = max(sorted(rest), key=lambda i: min(abs(i - c) for c in chosen))
        chosen.append(nxt)
        rest.remove(nxt)
    return tuple(chosen)


def segments_inside(sphere: Sphere, A: np.ndarray, B: np.ndarray, n_points: int = 10) -> np.ndarray:
    """Adjacency (19) for the segments ``A[i] -> B[i]``: True when all sampled points are inside.

    The ``n_points`` samples are interior, ``t = 1/(n+1), ..., n/(n+1)``; the ends are the two
    points themselves. Each sample position is evaluated for all segments still alive at once
    (one kernel product per batch), middle first, so failing segments drop out early.
    """
    n_pairs = A.shape[0]
    alive = np.arange(n_pairs)
    t = np.arange(1, n_points + 1) / (n_points + 1.0)
    if A.shape[1] <= COMPILED_RBF_MAX_FEATURES:  # the same sums, each segment in one loop
        return rbf_segments_inside(A, B, t[list(_bisection_order(n_points))], sphere.points,
                                   sphere.gamma, sphere.beta, sphere.threshold)
    for k in _bisection_order(n_points):
        if alive.size == 0:
            break
        a = A[alive]
        inside = sphere.kernel_sum(a + t[k] * (B[alive] - a)) >= sphere.threshold
        alive = alive[inside]
    connected = np.zeros(n_pairs, dtype=bool)
    connected[alive] = True
    return connected


# Largest (matrices) x (points) x (sphere points) array of :class:`SegmentFactors` a segment
# test builds (256 MB: the ten matrices of twenty samples for 1,800 points and as many sphere
# points); beyond it every sample's kernel sums are computed anew.
_FACTORS_MAX_ENTRIES = 1 << 25


def segment_factors(sphere: Sphere, X: np.ndarray, n_points: int) -> SegmentFactors | None:
    """The factors from which :func:`segments_inside_by_factors` tests segments that start or
    end at rows of ``X``, or None beyond the memory bound."""
    if SegmentFactors.matrices(n_points) * X.shape[0] * sphere.points.shape[0] \
            > _FACTORS_MAX_ENTRIES:
        return None
    return SegmentFactors.of(squared_distances(X, sphere.points), n_points, sphere.gamma)


def segments_inside_by_factors(sphere: Sphere, a: SegmentFactors, b: SegmentFactors,
                               rows: np.ndarray, cols: np.ndarray, squared_lengths: np.ndarray,
                               n_points: int) -> np.ndarray:
    """:func:`segments_inside` for the segments from the points ``rows[i]`` of ``a`` to the
    points ``cols[i]`` of ``b``, of squared lengths ``squared_lengths``: the kernel at each
    sample is a product of the two ends' factors
    (:func:`algorithms.kernels.rbf_segments_inside_from_factors`), no kernel product or
    exponential per sample."""
    samples = np.array(_bisection_order(n_points)) + 1
    return rbf_segments_inside_from_factors(rows, cols, squared_lengths, a, b, samples, n_points,
                                            sphere.gamma, sphere.beta, sphere.threshold)


def first_anchor_joined(sphere: Sphere, points: np.ndarray, near: np.ndarray, n_points: int,
                        anchor_factors: SegmentFactors | None) -> np.ndarray:
    """For each of ``points``, the column of the first of its anchors ``near[i]`` (sphere
    points, nearest first) that an inside segment joins it to, ``-1`` where none does.
    Tried nearest first: most points reach their nearest anchor, so testing all the segments
    of every point at once would multiply the kernel sums by the number of anchors.
    ``anchor_factors``: :func:`segment_factors` of the sphere points, None to test segments by
    their kernel sums."""
    point_factors = (None if anchor_factors is None
                     else segment_factors(sphere, points, n_points))
    joined = np.full(points.shape[0], -1, dtype=np.int64)
    open_ = np.arange(points.shape[0])
    for rank in range(near.shape[1]):
        if open_.size == 0:
            break
        anchor = near[open_, rank]
        ends, anchor_points = points[open_], sphere.points[anchor]
        if point_factors is None:
            ok = segments_inside(sphere, ends, anchor_points, n_points)
        else:
            ok = segments_inside_by_factors(sphere, point_factors, anchor_factors, open_, anchor,
                                            _squared_lengths(ends, anchor_points), n_points)
        joined[open_[ok]] = rank
        open_ = open_[~ok]
    return joined


def _squared_lengths(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``|A_i - B_i|^2`` from the differences (exact where the ends are close)."""
    difference = A - B
    return np.einsum("ij,ij->i", difference, difference)


# Largest (segment ends) x (sphere points) matrix the first-sample screen of
# :func:`first_sample_may_be_inside` builds; beyond it the screen is skipped to bound memory.
_SCREEN_MAX_ENTRIES = 1 << 26
# The screen trusts its product only where exp(q t (1 - t) |a - b|^2) stays far from overflow.
_SCREEN_MAX_EXPONENT = 600.0


def first_sample_may_be_inside(sphere: Sphere, ends: np.ndarray, squared_lengths: np.ndarray,
                               n_points: int) -> np.ndarray | None:
    """For every pair of rows ``a, b`` of ``ends``: False where the first point that
    :func:`segments_inside` samples on the segment ``a -> b`` is outside the sphere.

    At ``x = a + t (b - a)``, ``|x - y|^2 = (1 - t)|a - y|^2 + t|b - y|^2 - t(1 - t)|a - b|^2``,
    so the kernel sum at ``x`` is ``exp(q t (1 - t)|a - b|^2)`` times
    ``sum_j beta_j exp(-q (1 - t)|a - x_j|^2) exp(-q t |b - x_j|^2)``: one matrix product for
    all pairs, against one kernel row per pair and sample. Nearly every segment between two
    clusters fails at that sample, and testing those one by one dominates SVC's time on
    high-dimensional data. Only pairs clearly outside (by a relative 1e-6 in the log)
    and short enough for the product not to underflow are marked False; the rest are tested
    one by one, so the components do not change. None when the matrices would be too large.
    """
    n_ends, n_sphere = ends.shape[0], sphere.points.shape[0]
    if n_ends * n_sphere > _SCREEN_MAX_ENTRIES:
        return None
    t = (_bisection_order(n_points)[0] + 1) / (n_points + 1.0)
    q = sphere.gamma
    to_sphere = squared_distances(ends, sphere.points)
    first = np.exp(-q * (1.0 - t) * to_sphere) * sphere.beta[None, :]
    second = np.exp(-q * t * to_sphere)
    with np.errstate(divide="ignore"):
        log_sum = np.log(first @ second.T)
    exponent = q * t * (1.0 - t) * squared_lengths
    outside = log_sum + exponent < math.log(sphere.threshold) - 1e-6
    return ~(outside & (exponent < _SCREEN_MAX_EXPONENT))


def _components(n: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    graph = coo_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n, n)).tocsr()
    return connected_components(graph, directed=False)[1]


def _neighbours(reference: np.ndarray, queries: np.ndarray, k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices (into ``reference``) of the ``k`` nearest reference points of each
    query, nearest first, each of shape ``(n_queries, min(k, n_reference))``."""
    k = min(k, reference.shape[0])
    distances, index = cKDTree(reference).query(queries, k=k)
    return distances.reshape(queries.shape[0], k), index.reshape(queries.shape[0], k)


def _nearest(reference: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Indices (into ``reference``) of the ``k`` nearest reference points of each query."""
    return _neighbours(reference, queries, k)[1]


class SegmentGraph:
    """Connected components of the adjacency (19), built from batches of candidate segments.

    A candidate is tested only when its two ends are still in different components: an edge
    inside a component changes no component, so the result equals testing every candidate, at a
    fraction of the cost once the first batches have joined most points. Batches are vectorized
    (:func:`segments_inside`); components come from ``scipy.sparse.csgraph``.
    """

    def __init__(self, sphere: Sphere, X: np.ndarray, n_points: int):
        self.sphere, self.X, self.n_points = sphere, X, n_points
        self.labels = np.arange(X.shape[0])
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []

    @functools.cached_property
    def factors(self) -> SegmentFactors | None:
        """:func:`segment_factors` of the points, None beyond the memory bound."""
        return segment_factors(self.sphere, self.X, self.n_points)

    def add_edges(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Join without a test (nearest assignment)."""
        if rows.size:
            self._rows.append(rows)
            self._cols.append(cols)
            self.labels = _components(self.X.shape[0], np.concatenate(self._rows),
                                      np.concatenate(self._cols))

    def offer(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Test the candidates whose ends are not yet connected; keep those inside the sphere."""
        open_ = np.flatnonzero(self.labels[rows] != self.labels[cols])
        if open_.size == 0:
            return
        rows, cols = rows[open_], cols[open_]
        inside = self._inside(rows, cols)
        self.add_edges(rows[inside], cols[inside])

    def _inside(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        if self.factors is None:
            return segments_inside(self.sphere, self.X[rows], self.X[cols], self.n_points)
        return segments_inside_by_factors(self.sphere, self.factors, self.factors, rows, cols,
                                          _squared_lengths(self.X[rows], self.X[cols]),
                                          self.n_points)


def _complete_pairs(n: int, block: int):
    """All pairs ``i < j`` of ``n`` points, about ``block`` pairs at a time."""
    start = 0
    while start < n - 1:
        stop = start + 1
        total = n - 1 - start
        while stop < n - 1 and total + (n - 1 - stop) <= block:
            total += n - 1 - stop
            stop += 1
        i = np.arange(start, stop)
        counts = n - 1 - i
        rows = np.repeat(i, counts)
        offsets = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
        yield rows, rows + 1 + offsets
        start = stop


def label_complete(sphere: Sphere, X: np.ndarray, n_points: int = 10) -> np.ndarray:
    """The paper's labeling: components of (19) over all pairs of ``X`` (points not bounded SVs)."""
    graph = SegmentGraph(sphere, X, n_points)
    for rows, cols in _complete_pairs(X.shape[0], 1 << 16):
        graph.offer(rows, cols)
    return graph.labels


def label_knn(sphere: Sphere, X: np.ndarray, n_neighbors: int = 10,
              n_points: int = 10) -> np.ndarray:
    """Components of (19) restricted to the ``n_neighbors`` nearest neighbours of each point,
    offered nearest first (one batch per neighbour rank)."""
    n = X.shape[0]
    graph = SegmentGraph(sphere, X, n_points)
    if n == 1:
        return graph.labels
    neighbors = _nearest(X, X, n_neighbors + 1)[:, 1:]
    for rank in range(neighbors.shape[1]):
        graph.offer(np.arange(n), neighbors[:, rank])
    return graph.labels


def label_support_vector_graph(sphere: Sphere, X: np.ndarray, is_sv: np.ndarray,
                               n_neighbors: int = 10, n_points: int = 10) -> np.ndarray:
    """Components of (19) over SV-SV pairs plus each other point to its nearest SVs.

    ``is_sv`` marks the support vectors among the rows of ``X``. SV pairs are offered shortest
    first. A point none of whose tested segments stays inside joins its nearest support vector.
    """
    n = X.shape[0]
    sv = np.flatnonzero(is_sv)
    if sv.size == 0:
        return label_knn(sphere, X, n_neighbors, n_points)
    graph = SegmentGraph(sphere, X, n_points)
    i, j = np.triu_indices(sv.size, k=1)
    lengths = squared_distances(X[sv])
    # With the factors a segment's first sample costs what the screen's product does.
    may_be_inside = (first_sample_may_be_inside(sphere, X[sv], lengths, n_points)
                     if graph.factors is None else None)
    if may_be_inside is not None:
        keep = may_be_inside[i, j]
        i, j = i[keep], j[keep]
    # The order only saves tests (the components do not depend on it): lengths from one Gram
    # product, not an (n_sv^2 / 2) x d array of differences.
    order = np.argsort(lengths[i, j], kind="stable")
    sv_rows, sv_cols = sv[i[order]], sv[j[order]]
    # Every open pair of a chunk is tested in full, also those a shorter pair of the same chunk
    # has joined meanwhile: smaller chunks test fewer, larger ones vectorize better.
    chunk = max(sv.size // 4, 256)
    for start in range(0, sv_rows.size, chunk):
        graph.offer(sv_rows[start : start + chunk], sv_cols[start : start + chunk])
    others = np.flatnonzero(~is_sv)
    if others.size:
        near = sv[_nearest(X[sv], X[others], n_neighbors)]
        for rank in range(near.shape[1]):
            graph.offer(others, near[:, rank])
        # Others connect only through SVs, so a lone point reached no SV: nearest assignment.
        lone = np.bincount(graph.labels, minlength=n)[graph.labels[others]] == 1
        graph.add_edges(others[lone], near[lone, 0])
    return graph.labels


def relabel_by_size(components: np.ndarray) -> np.ndarray:
    """Cluster ids ``0..k-1`` in order of decreasing size (ties: first point first)."""
    ids, first, counts = np.unique(components, return_index=True, return_counts=True)
    order = np.lexsort((first, -counts))
    mapping = np.empty(ids.size, dtype=np.int64)
    mapping[order] = np.arange(ids.size)
    return mapping[np.searchsorted(ids, components)]


def label_points(sphere: Sphere, X: np.ndarray, labeling: Labeling, n_neighbors: int = 10,
                 n_points: int = 10, rows: np.ndarray | None = None) -> np.ndarray:
    """Cluster of every training point by (19), ``-1`` at the bounded SVs (outside the sphere).

    Cluster ids are ordered by decreasing size. When every point is a bounded SV nothing is
    inside, and all are ``-1``. With ``rows`` (a sphere solved over distinct rows,
    :func:`solve_enclosing_sphere`) every copy of a bounded SV is outside too.
    """
    n = X.shape[0]
    bounded = np.zeros(n, dtype=bool)
    bounded[sphere.index[sphere.bounded]] = True
    if rows is not None:
        bounded = bounded[np.unique(rows, return_index=True)[1]][rows]
    inner = np.flatnonzero(~bounded)
    labels = np.full(n, -1, dtype=np.int64)
    if inner.size == 0:
        return labels
    Xin = X[inner]
    if labeling == "complete":
        comps = label_complete(sphere, Xin, n_points)
    elif labeling == "knn":
        comps = label_knn(sphere, Xin, n_neighbors, n_points)
    elif labeling == "support_vectors":
        is_sv = np.zeros(n, dtype=bool)
        is_sv[sphere.index[~sphere.bounded]] = True
        comps = label_support_vector_graph(sphere, Xin, is_sv[inner], n_neighbors, n_points)
    else:
        raise ValueError(f"unknown labeling {labeling!r}")
    labels[inner] = relabel_by_size(comps)
    return labels


def join_nearest(X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``labels`` with every ``-1`` replaced by the cluster of its nearest labeled point."""
    joined = labels.copy()
    out = np.flatnonzero(labels < 0)
    labeled = np.flatnonzero(labels >= 0)
    if labeled.size == 0:
        joined[:] = 0  # nothing inside the sphere: one cluster by convention
    elif out.size:
        joined[out] = labels[labeled[_nearest(X[labeled], X[out], 1)[:, 0]]]
    return joined


def join_by_chain(X: np.ndarray, labels: np.ndarray, n_neighbors: int = 10) -> np.ndarray:
    """``labels`` with every ``-1`` replaced by growing the clusters outward, nearest first.

    The unlabeled points join one at a time, the one closest to a point already in a cluster
    first, and each takes the cluster of that point (Prim's algorithm started from all labeled
    points at once). A bounded SV thus follows the chain of points outside the contours that
    leads to a cluster, not the straight line to the nearest labeled point, which on sparse
    high-dimensional data (where most points are bounded SVs) often crosses to another
    cluster's core.

    Computed as a minimum spanning tree over the unlabeled points' ``n_neighbors``-nearest
    neighbour graph plus a root joined to each unlabeled point by its distance to the nearest
    labeled point; every point takes the cluster through which its branch meets the root.
    O(m k log m) for ``m`` unlabeled points; the kNN graph approximates the tree over all
    pairs.
    """
    out = np.flatnonzero(labels < 0)
    labeled = np.flatnonzero(labels >= 0)
    if labeled.size == 0 or out.size == 0:
        return join_nearest(X, labels)
    m = out.size
    to_labeled, nearest_labeled = _neighbours(X[labeled], X[out], 1)
    to_labeled, nearest_labeled = to_labeled[:, 0], nearest_labeled[:, 0]
    rows, cols, weights = [np.arange(m)], [np.full(m, m)], [to_labeled]
    k = min(n_neighbors, m - 1)
    if k > 0:
        distances, neighbours = _neighbours(X[out], X[out], k + 1)
        rows.append(np.repeat(np.arange(m), k))
        cols.append(neighbours[:, 1:].ravel())
        weights.append(distances[:, 1:].ravel())
    weights = np.concatenate(weights)
    # Sparse graphs drop explicit zeros (duplicate points): one constant on every edge keeps them
    # and changes no spanning tree's rank.
    weights += 1e-12 * weights.max() + np.finfo(float).tiny
    graph = coo_matrix((weights, (np.concatenate(rows), np.concatenate(cols))),
                       shape=(m + 1, m + 1)).tocsr()
    tree = minimum_spanning_tree(graph)
    _, parent = breadth_first_order(tree, m, directed=False, return_predecessors=True)
    # Pointer jumping up to the child of the root: the point whose root edge the branch uses.
    branch = parent[:m].copy()
    at_root = branch == m
    branch[at_root] = np.flatnonzero(at_root)
    while True:
        hop = branch[branch]
        if np.array_equal(hop, branch):
            break
        branch = hop
    joined = labels.copy()
    joined[out] = labels[labeled[nearest_labeled[branch]]]
    return joined


# ---------------------------------------------------------------------------------------------
# Section 4: the divisive schedule for q and C
# ---------------------------------------------------------------------------------------------


def max_squared_distance(X: np.ndarray) -> float:
    """``max_ij ||x_i - x_j||^2``: exact up to 5,000 points, else ``(2 max ||x - mean||)^2``."""
    n = X.shape[0]
    if n > _EXACT_DIAMETER_MAX_N:
        return float(4.0 * ((X - X.mean(axis=0)) ** 2).sum(axis=1).max())
    best = 0.0
    step = max(1, _BATCH_ENTRIES // n)
    for start in range(0, n, step):
        best = max(best, float(squared_distances(X[start : start + step], X).max()))
    return best


@dataclass
class _Fit:
    gamma: float
    p: float
    sphere: Sphere
    labels: np.ndarray  # -1 at bounded SVs
    # False when the schedule found no sphere with n_clusters clusters of at least the small size
    # and this fit is its fallback (fewer clusters, or the largest groups of the fullest sphere).
    substantial: bool = True

    def cluster_sizes(self) -> np.ndarray:
        return np.bincount(self.labels[self.labels >= 0])

    @property
    def n_groups(self) -> int:
        """Clusters once the bounded SVs join them (one when nothing is inside the sphere)."""
        return max(int(self.labels.max()) + 1, 1)


def fit_svc(X, gamma, p, labeling, n_neighbors, n_points, tol, cache_size, rows=None) -> _Fit:
    """One run of SVC at fixed ``q = gamma`` and ``p = 1/(NC)``: sphere, then labeling
    (``rows``: see :func:`solve_enclosing_sphere`)."""
    sphere = solve_enclosing_sphere(X, gamma, p, tol, cache_size, rows)
    return _Fit(gamma, p, sphere,
                label_points(sphere, X, labeling, n_neighbors, n_points, rows))


def keep_largest_clusters(fit: _Fit, X: np.ndarray, n_keep: int) -> _Fit:
    """``fit`` with its ``n_keep`` largest clusters kept and every other cluster joined to the
    cluster of its points' nearest point in a kept one (as bounded SVs join the nearest
    cluster). Cluster ids are ordered by decreasing size (:func:`label_points`)."""
    labels = fit.labels.copy()
    labeled = np.flatnonzero(labels >= 0)
    kept = labeled[labels[labeled] < n_keep]
    others = labeled[labels[labeled] >= n_keep]
    if others.size and kept.size:
        labels[others] = labels[kept[_nearest(X[kept], X[others], 1)[:, 0]]]
    labels[labeled] = relabel_by_size(labels[labeled])
    return _Fit(fit.gamma, fit.p, fit.sphere, labels)


def divisive_schedule(X, n_clusters, p, labeling, n_neighbors, n_points, tol, cache_size, *,
                      min_cluster_fraction=0.05, growth=1.1, p_step=0.05, max_sv_fraction=0.5,
                      max_iter=200, on_step=None) -> tuple[_Fit, list[dict[str, Any]], list[str]]:
    """Section 4: raise ``q`` from ``1 / max ||x_i - x_j||^2`` until ``n_clusters`` clusters appear.

    At each ``q``: when small groups break off (clusters of fewer than
    :func:`smallest_cluster_size` points, the paper's "single point clusters") or the support
    vectors exceed :func:`most_support_vectors` (overfitting, Figure 2a), ``p = 1/(NC)`` is
    raised by ``p_step`` and the sphere is solved again at the same ``q``; otherwise ``q`` is
    multiplied by ``growth``. When one step jumps past ``n_clusters``, ``q`` is bisected
    (geometrically) between the last two values. Returns the chosen fit, the schedule (one record
    per solved sphere) and warnings.

    When no clean split is reached (small groups keep breaking off at the largest ``p``, a jump
    that bisection cannot resolve, or ``max_iter``), the first sphere that had exactly
    ``n_clusters`` clusters of at least the small size is kept, its small groups joined to the
    nearest of them (:func:`keep_largest_clusters`): on some data the contours never split
    without fragments at any ``p``, and the last clean split is one cluster. When no sphere had
    ``n_clusters`` clusters of that size, the sphere whose ``n_clusters``-th largest group was
    largest is kept the same way and the fit is marked not ``substantial``: a caller who asks for
    ``n_clusters`` gets them whenever any contours had that many groups. When none did, the
    estimator retries on principal components (``n_components="auto"``).
    """
    n = X.shape[0]
    rows = copies_of_rows(X)
    min_size = smallest_cluster_size(n, n_clusters, min_cluster_fraction)
    max_support = most_support_vectors(n, n_clusters, max_sv_fraction)
    q = 1.0 / max_squared_distance(X)
    history: list[dict[str, Any]] = []
    warnings: list[str] = []
    q_low = None  # last q with fewer clusters than wanted and no small ones
    best: _Fit | None = None
    first_with_fragments: _Fit | None = None  # first fit with n_clusters big clusters + small
    # The fit with the most groups (at least two, up to n_clusters) and, among those, the largest
    # smallest one; one group is no split, and the last clean split answers that case.
    fullest: _Fit | None = None
    fullest_key = (1, 0)  # (groups kept, size of the smallest kept)
    step = 0

    def solve(q_value: float, p_value: float) -> tuple[_Fit, int, int]:
        nonlocal step, first_with_fragments, fullest, fullest_key
        step += 1
        fit = fit_svc(X, q_value, p_value, labeling, n_neighbors, n_points, tol, cache_size,
                      rows)
        sizes = fit.cluster_sizes()
        n_big = int(np.count_nonzero(sizes >= min_size))
        n_small = int(sizes.size - n_big)
        history.append({"gamma": q_value, "p": p_value, "n_clusters": int(sizes.size),
                        "n_small": n_small, "n_support": int(np.count_nonzero(~fit.sphere.bounded)),
                        "n_bounded": int(np.count_nonzero(fit.sphere.bounded))})
        if on_step is not None:
            on_step(step, q_value, p_value, sizes.size, n_small)
        if n_big == n_clusters and n_small > 0 and first_with_fragments is None:
            first_with_fragments = fit
        # Cluster ids run by decreasing size (label_points): sizes[kept - 1] is the smallest kept.
        kept = min(sizes.size, n_clusters)
        if kept >= 2 and (kept, int(sizes[kept - 1])) > fullest_key:
            fullest, fullest_key = fit, (kept, int(sizes[kept - 1]))
        return fit, n_big, n_small

    def with_fragments_merged(fallback: _Fit, what: str) -> _Fit:
        if first_with_fragments is not None:
            warnings.append(
                f"kept the first sphere with {n_clusters} clusters of at least {min_size} points "
                f"(q={first_with_fragments.gamma:.4g}, p={first_with_fragments.p:.3g}); its "
                "smaller groups joined the nearest of them"
            )
            return keep_largest_clusters(first_with_fragments, X, n_clusters)
        if fullest is not None:
            kept, smallest = fullest_key
            warnings.append(
                f"no sphere had {n_clusters} clusters of at least {min_size} points; kept the "
                f"one with the most groups up to {n_clusters} and the largest smallest group "
                f"(q={fullest.gamma:.4g}, p={fullest.p:.3g}: {kept} groups, the smallest "
                f"{smallest} point{'' if smallest == 1 else 's'}), the other groups joined the "
                "nearest of them"
            )
            return replace(keep_largest_clusters(fullest, X, kept),
                           substantial=fullest_key >= (n_clusters, min_size))
        warnings.append(f"returning {what}")
        return replace(fallback, substantial=fallback.n_groups >= n_clusters)

    fit = None
    while step < max_iter:
        fit, n_big, n_small = solve(q, p)
        n_sv = int(np.count_nonzero(~fit.sphere.bounded))
        if n_small > 0 or n_sv > max_support:
            if p < _MAX_P:
                p = min(_MAX_P, p + p_step)
                continue
            warnings.append(
                f"gamma='schedule' could not reach {n_clusters} clusters: small groups keep "
                f"breaking off at q={q:.4g} even with p={p:.3g}"
            )
            return (with_fragments_merged(best if best is not None else fit,
                                          "the last clean split"), history, warnings)
        if n_big == n_clusters and n_small == 0:
            return fit, history, warnings
        if n_big > n_clusters and q_low is not None:
            found = _bisect(solve, q_low, q, p, n_clusters, max_iter - step)
            if found is None:
                warnings.append(f"gamma='schedule' jumped from fewer than {n_clusters} clusters to "
                                f"{n_big} between q={q_low:.4g} and q={q:.4g}")
                found = with_fragments_merged(fit, f"the split into {n_big}")
            return found, history, warnings
        if n_big >= n_clusters:
            warnings.append(
                f"gamma='schedule' found {n_big} clusters where {n_clusters} were asked for "
                f"(q={q:.4g}, p={p:.3g})"
            )
            return fit, history, warnings
        q_low = q
        best = fit
        q *= growth
    warnings.append(
        f"gamma='schedule' stopped after {max_iter} spheres without reaching {n_clusters} clusters"
    )
    return (with_fragments_merged(best if best is not None else fit, "the last clean split"),
            history, warnings)


def smallest_cluster_size(n: int, n_clusters: int, fraction: float) -> int:
    """Size below which a group of the contours is a fragment, not a cluster: ``fraction`` of the
    points (the paper's "single point clusters", grown with ``n``), but at most half the mean
    cluster size ``n / (2 n_clusters)``, and single points only when the clusters asked for
    average fewer than four points. Without the cap, many small clusters asked for would all
    count as fragments, and a handful of points could never be split."""
    return max(1, min(max(2, math.ceil(fraction * n)), n // (2 * n_clusters)))


def most_support_vectors(n: int, n_clusters: int, fraction: float) -> float:
    """Support vectors above which a sphere overfits (Figure 2a): ``fraction`` of the points, but
    never fewer than two per cluster asked for, the fewest that outline ``n_clusters``
    contours; otherwise on a handful of points ``p`` would rise to its limit before any split
    is tried."""
    return max(fraction * n, 2.0 * n_clusters)


def _bisect(solve, q_low: float, q_high: float, p: float, n_clusters: int, budget: int):
    """Geometric bisection of ``q`` between too few and too many clusters (at most 8 steps)."""
    for _ in range(min(8, budget)):
        q_mid = math.sqrt(q_low * q_high)
        fit, n_big, n_small = solve(q_mid, p)
        if n_big == n_clusters and n_small == 0:
            return fit
        if n_big < n_clusters:
            q_low = q_mid
        else:
            q_high = q_mid
    return None


# ---------------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------------


class SupportVectorClustering(SampledFitAttributes, MMCEstimatorMixin, ClusterMixin,
                              BaseEstimator):
    """Support vector clustering (SVC): clusters are the connected pieces of the sphere's contour.

    Parameters
    ----------
    n_clusters : int, "auto" or None, default=None
        Only used by ``gamma="schedule"`` (where ``None`` means 2): the schedule stops when the
        contours split into this many clusters. With a numeric ``gamma`` the number of clusters is
        whatever the contours give and may differ from ``n_clusters``; read ``n_clusters_``.
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), the target of the schedule.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    gamma : float or {"schedule", "scale"}, default="schedule"
        The paper's width ``q`` of the kernel (10), ``exp(-q ||x - x'||^2)``: ``gamma = q``.
        ``q`` depends on the units of ``X``: the paper's Table 1 values apply to iris projected on
        its principal components in the original centimetres (centred, not whitened or scaled).
        ``"schedule"`` runs the divisive schedule of section 4 (see :func:`divisive_schedule`),
        which searches ``q`` for ``n_clusters`` clusters; ``"scale"`` is scikit-learn's
        ``1 / (n_features * X.var())``.

        .. versionchanged:: 0.2 ``"schedule"`` replaces ``"auto"``.
    C : float or None, default=None
        Soft-margin constant of (9). ``C >= 1`` allows no bounded SVs; ``C`` must be at least
        ``1/N``. Give ``C`` or ``p``; with neither, ``C = 1``.
    p : float or None, default=None
        ``p = 1/(N C)`` in (0, 1], the paper's ``1/(NC)``; an upper bound on the share of bounded
        SVs (16). Under ``gamma="schedule"`` it is the starting value, raised by the schedule.
    labeling : {"complete", "support_vectors", "knn"}, default="support_vectors"
        Which segments of the adjacency (19) are tested (see the module docstring).
    n_neighbors : int, default=10
        Neighbours tested per point by ``"knn"``, ``"support_vectors"`` and ``predict``.
    n_segment_points : int, default=20
        Points sampled on each segment. The paper uses 10; more samples keep a long segment from
        skipping over a narrow gap between two clusters, at a proportional cost per test.
    bounded_svs : {"chain", "nearest", "outlier"}, default="chain"
        Bounded SVs (outside the sphere) join the cluster they are closest to, as in the paper's
        examples. ``"chain"``: the clusters grow outward one point at a time, the point closest
        to a clustered one first, each joining the cluster of that point
        (:func:`join_by_chain`); ``"nearest"``: the cluster of the nearest point inside the
        contours; ``"outlier"``: ``-1``.
    n_components : int, "auto" or None, default="auto"
        Fit the sphere on the leading ``n_components`` principal components of the centred data (not
        whitened), as the paper does on iris (section 5, Table 1: "if the data is sparse, it is
        better to use SVC on a low dimensional representation, obtained, e.g. by principal component
        analysis"). ``"auto"``: the input space; with ``gamma="schedule"``, when its contours never
        give ``n_clusters`` clusters of 5 % of the points, the schedule runs again on the leading
        ``n_clusters`` components (``k`` clusters in ``k`` dimensions, as spectral clustering embeds
        them) and the fit with more clusters is kept (with as many, the one whose clusters all hold
        5 % of the points). ``None``: always the input space.
    tol : float, default=1e-4
        libsvm stopping tolerance for the dual (11).
    max_spheres : int, default=200
        Most spheres (one per ``q``) solved by ``gamma="schedule"`` in one space.

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    exact_max_n : int or None, default=2000
        Largest n whose sphere and contours are fitted on every point; above it they are fitted
        on a uniform random sample of ``exact_max_n`` points, and every point is then labelled by
        :meth:`predict` (the segment test against the sample's support vectors). ``p`` is the
        same share of points either way. None: always every point.

        .. versionchanged:: 0.2 Replaces ``solver``: ``solver="exact"`` is
           ``exact_max_n=None``; ``"auto"`` and ``"sample"`` were the same.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int, RandomState or None, default=None
        Draws the sample.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each point, ``0..n_clusters_-1`` by decreasing size; ``-1`` marks bounded SVs
        when ``bounded_svs="outlier"``.
    n_clusters_ : int
        Number of clusters found.
    gamma_ : float
        The ``q`` used (chosen by the schedule for ``gamma="schedule"``).
    p_ : float
        The ``1/(NC)`` used; ``C_ = 1 / (N p_)``.
    C_ : float
    radius_ : float
        ``R`` of (14): ``R(x)`` on the support vectors.
    support_ : ndarray
        Indices of the support vectors, ``0 < beta < C``. A repeated row is solved once, for
        all its copies (:func:`solve_enclosing_sphere`): its first copy stands for it here and
        in ``support_vectors_``, with the copies' summed ``beta`` (at most ``C`` times their
        number).
    bounded_ : ndarray
        Indices of the bounded SVs, ``beta = C`` (outside the sphere), with every copy.
    n_support_ : int
        Number of support vectors (the paper's ``n_sv``).
    n_bounded_ : int
        Number of bounded SVs (the paper's ``n_bsv``).
    outliers_ : ndarray
        The points outside the sphere: ``bounded_``, and with a sample (``exact_`` False)
        every point outside.
    support_vectors_ : ndarray of shape (n_sv + n_bsv, n_features)
        Every point with ``beta > 0`` (the sphere's centre (4) is their combination), minus
        ``center_``.
    center_ : ndarray of shape (n_features,)
        Mean of the training points, subtracted before every kernel evaluation.
    components_ : ndarray of shape (n_components, n_features) or None
        The principal directions the sphere was fitted in (rows, unit length), or ``None`` when
        it was fitted in the input space. ``support_vectors_`` are in those coordinates.
    dual_coef_ : ndarray
        Their ``beta``.
    objective_ : float
        The dual value (11), ``1 - beta^T K beta``.
    n_iter_ : int
        Spheres solved (1 for a numeric ``gamma``).
    schedule_ : list of dict
        For ``gamma="schedule"``: ``q``, ``p``, clusters, singletons and SV counts at each step.
    warnings_ : list of str
        Schedule problems (the wanted number of clusters was not reached exactly).
    exact_ : bool
        Whether the sphere was fitted on every point (at most ``exact_max_n`` points, or
        ``exact_max_n=None``); False when it was fitted on a sample of ``exact_max_n``.

        .. versionadded:: 0.2 Replaces ``solver_`` (``"exact"``, ``"sample"``), which still
           answers with a ``DeprecationWarning`` until the next release.
    n_fit_samples_ : int
        Points the sphere was fitted on (``exact_max_n`` for a sample, else n).

    References
    ----------
    A. Ben-Hur, D. Horn, H. T. Siegelmann, V. Vapnik. A Support Vector Method for Clustering.
    NIPS 2001. Dual (11), kernel (10), R(x) (13), R (14), adjacency (19), schedule of section 4.

    See Also
    --------
    sklearn.svm.OneClassSVM : the same quadratic program (nu = 1/(N C)), without the clustering.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=60, centers=[[0, 0], [6, 6]], random_state=0)
    >>> SupportVectorClustering(gamma=0.5).fit(X).n_clusters_
    2
    """

    params_model = SupportVectorClusteringParams
    portfolio_name = "svc"
    _result_attributes = (
        *MMCEstimatorMixin._result_attributes,
        "n_clusters_", "p_", "C_", "radius_", "n_bounded_", "schedule_",
    )

    def __init__(
        self,
        n_clusters: int | str | None = None,
        *,
        max_clusters: int = 50,
        gamma: float | str = "schedule",
        C: float | None = None,
        p: float | None = None,
        labeling: str = "support_vectors",
        n_neighbors: int = 10,
        n_segment_points: int = 20,
        bounded_svs: str = "chain",
        n_components: int | str | None = "auto",
        tol: float = 1e-4,
        max_spheres: int = 200,
        exact_max_n: int | None = SAMPLE_SIZE,
        portfolio: bool = True,
        random_state: int | np.random.RandomState | None = None,
        solver: str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.gamma = gamma
        self.C = C
        self.p = p
        self.labeling = labeling
        self.n_neighbors = n_neighbors
        self.n_segment_points = n_segment_points
        self.bounded_svs = bounded_svs
        self.n_components = n_components
        self.tol = tol
        self.max_spheres = max_spheres
        self.exact_max_n = exact_max_n
        self.portfolio = portfolio
        self.random_state = random_state
        self.solver = solver
        self.max_iter = max_iter

    def _start_p(self, n: int) -> float:
        if self._params.p is not None:
            return float(self._params.p)
        if problem := soft_margin_problem(self._params.C, n):
            raise ValueError(problem)
        return 1.0 / (n * (1.0 if self._params.C is None else float(self._params.C)))

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X``; ``y`` is ignored. ``progress(step, objective, message)`` is optional."""
        self._params = self._validated_params()
        X = as_float_matrix(X)
        X = validate_data(self, X, reset=True)
        # libsvm expands ||x - x'||^2 = |x|^2 + |x'|^2 - 2 x.x', which loses every digit of a
        # small distance far from the origin (1e8 + N(0, 1)); the sphere does not move under a
        # shift, so fit and predict work on X - center_.
        X_input = X
        self.center_ = X.mean(axis=0)
        X = X - self.center_
        if self._params.n_clusters == AUTO and self._params.gamma == SCHEDULE:
            k = self._resolve_n_clusters(X, progress)
        else:
            self._forget_n_clusters_choice()
            k = 2 if self._params.n_clusters in (None, AUTO) else int(self._params.n_clusters)
            check_clustering_input(X, k if self._params.gamma == SCHEDULE else 2)
        # p = 1/(NC) is the share of points outside the sphere: a sample keeps the caller's share.
        p = self._start_p(X.shape[0])
        sample = fit_sample(X.shape[0], self._params.exact_max_n,
                            check_random_state(self._params.random_state))
        self.exact_ = sample is None
        if sample is not None:
            X = X[sample]
        self.n_fit_samples_ = X.shape[0]
        self.components_ = None
        if isinstance(self._params.n_components, int) and self._params.n_components < X.shape[1]:
            self.components_ = principal_directions(X, self._params.n_components)
            X = X @ self.components_.T
        n = X.shape[0]
        args = (self._params.labeling, self._params.n_neighbors, self._params.n_segment_points,
                self._params.tol, 200.0)
        self.warnings_: list[str] = []
        if self._params.gamma == SCHEDULE:
            fit, self.schedule_, self.warnings_ = self._schedule(X, k, p, args, progress)
            if self._params.n_components == "auto" and not fit.substantial and k < X.shape[1]:
                fit, X = self._retry_on_components(X, k, p, args, progress, fit)
        else:
            q = resolve_gamma(X, self._params.gamma)
            report(progress, 0, None, f"solving the enclosing sphere for {n} points, q={q:.4g}")
            fit = fit_svc(X, q, p, *args, copies_of_rows(X))
            self.schedule_ = []
        self._store(X, fit)
        report(progress, max(len(self.schedule_), 1), self.objective_,
               f"{self.n_clusters_} clusters, {self.n_support_} SVs, {self.n_bounded_} bounded SVs")
        if sample is not None:
            report(progress, max(len(self.schedule_), 1), self.objective_,
                   f"labelling all {X_input.shape[0]} points by the sample's contours")
            self.support_ = sample[self.support_]
            self.bounded_ = sample[self.bounded_]
            self._sphere = replace(self._sphere, index=sample[self._sphere.index])
            step = max(len(self.schedule_), 1)
            self.labels_, inside = self._labels_and_inside(
                X_input, on_rows=lambda done, total: report(
                    progress, step, self.objective_,
                    f"labelled {done:,} of {total:,} points inside the contours"))
            self.outliers_ = np.flatnonzero(~inside)
        if self._params.n_clusters is not None:  # a k asked for: the candidates' k
            self._keep_portfolio_partition(X_input, progress, max(len(self.schedule_), 1) + 1,
                                           n_clusters=k)
        return self

    def _schedule(self, X, k, p, args, progress, first_step: int = 0):
        def on_step(step, q, p_value, n_found, n_small):
            report(progress, first_step + step, None, f"q={q:.4g}, 1/(NC)={p_value:.3g}: "
                   f"{n_found} clusters, {n_small} small ones")

        return divisive_schedule(X, k, p, *args, max_iter=self._params.max_spheres, on_step=on_step)

    def _retry_on_components(self, X, k, p, args, progress, fit):
        """The schedule again on the leading ``k`` principal components (``n_components="auto"``);
        the fit with more clusters is kept, and between two with as many the one whose clusters all
        hold the small size (:attr:`_Fit.substantial`). Returns it and the points it was fitted
        on."""
        components = principal_directions(X, k)
        Z = X @ components.T
        reduced, schedule, warnings = self._schedule(Z, k, p, args, progress,
                                                     first_step=len(self.schedule_))
        for record in schedule:
            record["n_components"] = k
        self.schedule_ += schedule
        if (reduced.n_groups, reduced.substantial) <= (fit.n_groups, fit.substantial):
            self.warnings_.append(f"the leading {k} principal components gave no better split; "
                                  "kept the fit in the input space")
            return fit, X
        self.components_ = components
        self.warnings_ = [*self.warnings_, *warnings, (
            f"fitted on the leading {k} principal components (no sphere in the input space had "
            f"{k} clusters of at least 5 % of the points)")]
        return reduced, Z

    def _store(self, X: np.ndarray, fit: _Fit) -> None:
        sphere = fit.sphere
        self.gamma_ = float(fit.gamma)
        self.p_ = float(fit.p)
        self.C_ = float(sphere.C)
        self.radius_ = float(sphere.radius)
        self.threshold_ = float(sphere.threshold)
        self.support_ = np.sort(sphere.index[~sphere.bounded])
        # Outside the sphere: the bounded SVs and, on a sphere over distinct rows, their copies.
        self.bounded_ = np.flatnonzero(fit.labels < 0)
        self.outliers_ = self.bounded_
        self.n_support_ = int(self.support_.size)
        self.n_bounded_ = int(self.bounded_.size)
        self.support_vectors_ = sphere.points
        self.dual_coef_ = sphere.beta
        self.objective_ = float(1.0 - sphere.beta_k_beta)
        self.n_iter_ = max(len(self.schedule_), 1)
        # With "outlier" the chained clusters still label the stored bounded SVs for predict.
        join = join_nearest if self._params.bounded_svs == "nearest" else join_by_chain
        joined = join(X, fit.labels)
        self.labels_ = fit.labels if self._params.bounded_svs == "outlier" else joined
        self.n_clusters_ = fit.n_groups
        # Stored for prediction: every point with beta > 0 and its cluster (joined for bounded).
        self._sphere = sphere
        self._point_labels = joined[sphere.index]

    # -- prediction -------------------------------------------------------------------------------
    def _centered(self, X) -> np.ndarray:
        """``X`` in the coordinates of the sphere: centred, and projected on ``components_``."""
        check_is_fitted(self, "support_vectors_")
        X = validate_data(self, as_float_matrix(X), reset=False) - self.center_
        return X if self.components_ is None else X @ self.components_.T

    def decision_function(self, X) -> np.ndarray:
        """``R^2 - R^2(x)`` by (13)-(14): positive inside the sphere (inside a cluster contour).
        Where the portfolio's partition was kept, the decision values of its SVM instead."""
        if self.partition_model_ is not None:
            check_is_fitted(self, "support_vectors_")
            return self._partition_predict(X)[1]
        X = self._centered(X)
        return self._sphere.radius**2 - self._sphere.squared_radius_of(X)

    def predict(self, X) -> np.ndarray:
        """Inside the sphere: the cluster of a support vector joined by an inside segment (19)
        among the ``n_neighbors`` nearest; outside: the nearest stored point's cluster, or -1
        with ``bounded_svs="outlier"``. Where the portfolio's partition was kept, its SVM's
        labels."""
        if self.partition_model_ is not None:
            check_is_fitted(self, "support_vectors_")
            return self._partition_predict(X)[0]
        return self._labels_and_inside(X)[0]

    def _labels_and_inside(self, X, on_rows: Callable[[int, int], None] | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict`'s labels, and whether each point is inside the sphere;
        ``on_rows(done, total)`` after each block of the points inside."""
        X = self._centered(X)
        sphere = self._sphere
        # A point counts as inside when within the solver's tolerance of the contour, so the
        # support vectors themselves (on the contour) are inside.
        inside = sphere.kernel_sum(X) >= sphere.threshold - sphere.slack
        labels = self._point_labels[_nearest(sphere.points, X, 1)[:, 0]]
        if self._params.bounded_svs == "outlier":
            labels[~inside] = -1
        free = np.flatnonzero(~sphere.bounded)
        anchors = free if free.size else np.arange(sphere.points.shape[0])
        inside_rows = np.flatnonzero(inside)
        n_points = self._params.n_segment_points
        # Half the factors' memory bound for the anchors' and half for a block's.
        m = sphere.points.shape[0]
        matrices = SegmentFactors.matrices(n_points)
        anchor_factors = (segment_factors(sphere, sphere.points, n_points)
                          if 2 * matrices * m * m <= _FACTORS_MAX_ENTRIES else None)
        block = _PREDICT_BLOCK if anchor_factors is None else max(
            1, min(_PREDICT_BLOCK, _FACTORS_MAX_ENTRIES // (2 * matrices * m)))
        for number, start in enumerate(range(0, inside_rows.size, block)):
            rows = inside_rows[start : start + block]
            near = anchors[_nearest(sphere.points[anchors], X[rows], self._params.n_neighbors)]
            joined = first_anchor_joined(sphere, X[rows], near, n_points, anchor_factors)
            reached = np.flatnonzero(joined >= 0)
            labels[rows[reached]] = self._point_labels[near[reached, joined[reached]]]
            if on_rows is not None and number % _REPORT_EVERY_BLOCKS == 0:
                on_rows(start + rows.size, inside_rows.size)
        return labels, inside

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state = {
            "gamma_": self.gamma_, "p_": self.p_, "C_": self.C_, "radius_": self.radius_,
            "threshold_": self.threshold_, "beta_k_beta": self._sphere.beta_k_beta,
            "slack": self._sphere.slack,
            "objective_": self.objective_, "n_iter_": self.n_iter_,
            "n_clusters_": self.n_clusters_, "schedule_": self.schedule_,
            "warnings_": self.warnings_,
        }
        arrays = {
            "labels_": self.labels_, "support_vectors_": self.support_vectors_,
            "dual_coef_": self.dual_coef_, "sv_index": self._sphere.index,
            "sv_bounded": self._sphere.bounded, "sv_labels": self._point_labels,
            "support_": self.support_, "bounded_": self.bounded_, "center_": self.center_,
        }
        if self.components_ is not None:
            arrays["components_"] = self.components_
        return state, arrays

    def _import_state(self, state, arrays):
        for name in ("gamma_", "p_", "C_", "radius_", "threshold_", "objective_"):
            setattr(self, name, float(state[name]))
        self.n_iter_ = int(state["n_iter_"])
        self.n_clusters_ = int(state["n_clusters_"])
        self.schedule_ = list(state["schedule_"])
        self.warnings_ = list(state["warnings_"])
        self.labels_ = np.asarray(arrays["labels_"], dtype=np.int64)
        self.support_vectors_ = np.asarray(arrays["support_vectors_"], dtype=np.float64)
        # Models exported before the centering have their support vectors in input coordinates.
        self.center_ = np.asarray(
            arrays.get("center_", np.zeros(self.support_vectors_.shape[1])), dtype=np.float64
        )
        components = arrays.get("components_")
        self.components_ = None if components is None else np.asarray(components, np.float64)
        self.dual_coef_ = np.asarray(arrays["dual_coef_"], dtype=np.float64)
        self.support_ = np.asarray(arrays["support_"], dtype=np.int64)
        self.bounded_ = np.asarray(arrays["bounded_"], dtype=np.int64)
        self.outliers_ = self.bounded_
        self.n_support_ = int(self.support_.size)
        self.n_bounded_ = int(self.bounded_.size)
        self._sphere = Sphere(
            points=self.support_vectors_, beta=self.dual_coef_,
            index=np.asarray(arrays["sv_index"], dtype=np.int64),
            bounded=np.asarray(arrays["sv_bounded"], dtype=bool),
            threshold=self.threshold_, beta_k_beta=float(state["beta_k_beta"]),
            gamma=self.gamma_, C=self.C_, slack=float(state["slack"]),
        )
        self._point_labels = np.asarray(arrays["sv_labels"], dtype=np.int64)
