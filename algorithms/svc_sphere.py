"""SVC's sphere and its contours: the minimal enclosing sphere and the clusters of (19).

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
   single linkage from the contours, :func:`join_by_chain`); ``"nearest"`` takes the nearest
   labeled point (:func:`join_nearest`), and ``"outlier"`` marks them ``-1``.

The width ``q`` and ``p = 1/(NC)`` of one sphere are given here; the schedule that searches them
is :mod:`algorithms.svc_schedule`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components, minimum_spanning_tree
from scipy.spatial import cKDTree
from sklearn.svm import OneClassSVM

from algorithms.kernels import (
    COMPILED_RBF_MAX_FEATURES,
    SegmentFactors,
    pairwise_kernel,
    rbf_segments_inside,
    rbf_segments_inside_from_factors,
    rbf_sums,
    squared_distances,
)
from algorithms.params.svc import Labeling

# Kernel entries evaluated per batch of segment points: bounds the memory of a batch.
BATCH_ENTRIES = 1 << 22


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
        step = max(1, BATCH_ENTRIES // max(self.points.shape[0], 1))
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
FACTORS_MAX_ENTRIES = 1 << 25


def segment_factors(sphere: Sphere, X: np.ndarray, n_points: int) -> SegmentFactors | None:
    """The factors from which :func:`segments_inside_by_factors` tests segments that start or
    end at rows of ``X``, or None beyond the memory bound."""
    if SegmentFactors.matrices(n_points) * X.shape[0] * sphere.points.shape[0] \
            > FACTORS_MAX_ENTRIES:
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


def nearest(reference: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
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
    neighbors = nearest(X, X, n_neighbors + 1)[:, 1:]
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
        near = sv[nearest(X[sv], X[others], n_neighbors)]
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
        joined[out] = labels[labeled[nearest(X[labeled], X[out], 1)[:, 0]]]
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
