"""A portfolio of candidate k-partitions from several families, and the margin criterion that
chooses among them.

No single clusterer wins on every kind of data: the minimum spanning tree (Genie) follows thin
and curved clusters, Gaussian mixtures unbalanced and overlapping ellipsoids, k-means compact
blobs, the kNN graph's spectral partition manifolds. Maximum margin clustering gives a criterion
that none of them optimises and that can compare their answers: the partition whose clusters are
separated by the widest soft margins. Each candidate is scored by the sum of its one-vs-rest
soft-margin objectives,

    ``score(P) = sum_c omega(c vs rest)``,

``omega`` the objective of Xu's thesis (2007, eq. (3.1)) without bias on the centred kernel
scaled to unit mean self-similarity, with the squared hinge of the L2-SVM (whose finite Newton
solver is fast whatever the overlap), computed for every candidate on one random sample of
points and one local-scaling RBF kernel, represented by its leading eigenvectors. The candidate
of the lowest score is kept. The kernel of the score is taken on the sample's columns scaled to
unit variance (:func:`unit_variance_columns`): a partition is judged by margins that weigh every
feature alike, so that on tabular data the column of the largest unit (a concentration in mg/l
beside a ratio) does not decide which partition separates best; the candidates themselves are
built on the data as given. A cluster of a few outliers is cheap to cut off by a margin, but
the rest of the data then has one cluster fewer to separate its groups with, and a cluster of
very few points costs ``||w||^2`` of its own; how the rule fares, on public and held-out data,
is measured by ``benchmarks/battery.py`` (``docs/battery.md``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn import config_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture
from sklearn.utils import check_random_state

from algorithms.kernels import local_scaling_gamma, pairwise_kernel
from algorithms.selection.candidates import (
    NearestPrototypes,
    best_kmeans_run,
    nearest_centre,
    partition_key,
    spectral_partition,
)
from algorithms.selection.genie import (
    GINI_THRESHOLDS,
    genie_labels_from_tree,
    minimum_spanning_tree,
)
from algorithms.selection.margin import margin_kernel
from algorithms.threads import small_problem_threads

# The kNN graph sizes of the spectral candidates: scikit-learn's default, and a wider graph
# that bridges gaps in sparse clusters.
SPECTRAL_NEIGHBORS = (10, 30)
# Candidates are built on at most this many points (a random sample beyond, every other point
# joining the cluster of its nearest sampled prototype or centre, candidate_partitions) and
# scored on at most SCORE_SAMPLE_SIZE.
PORTFOLIO_SAMPLE_SIZE = 5000
SCORE_SAMPLE_SIZE = 600
# The kernel's leading eigenvectors that represent it in the SVMs of the score: they hold nearly
# all of its trace on a sample of this size, at a fraction of the cost of every direction.
SCORE_RANK = 200
# The margin's trade-off, beta = 1 / C, as in the selection of the methods' own candidates.
SCORE_C = 100.0
GMM_INIT = 3
# The k-means candidate: the best of this many runs from k-means++ seeds (scikit-learn's n_init),
# by the compiled loops (on a few hundred points KMeans' per-call checks cost more than its
# arithmetic).
KMEANS_INIT = 10
# The finite Newton method of the score ends in a few steps; this bounds them.
NEWTON_MAX_ITER = 100


@dataclass
class PortfolioChoice:
    """The kept partition (labels ``0..k-1``), the name of its candidate, and the score of every
    distinct candidate (lower is better); ``repeats`` maps a candidate that repeats an earlier
    one's partition to that one's name (it was not scored again)."""

    labels: np.ndarray
    chosen: str
    scores: dict[str, float]
    repeats: dict[str, str] = field(default_factory=dict)


def gmm_labels(X: np.ndarray, n_clusters: int, random_state=None) -> np.ndarray:
    """A Gaussian mixture's labels (full covariances, ``GMM_INIT`` starts, k-means
    initialisation). The fit is on NumPy arrays whatever scikit-learn's ``array_api_dispatch``
    (under which its k-means initialisation is not available)."""
    with small_problem_threads(), warnings.catch_warnings(), config_context(
            array_api_dispatch=False):
        warnings.simplefilter("ignore", ConvergenceWarning)
        mixture = GaussianMixture(n_clusters, covariance_type="full", n_init=GMM_INIT,
                                  reg_covar=1e-6, random_state=random_state)
        return mixture.fit(X).predict(X)


def candidate_partitions(X: np.ndarray, n_clusters: int, random_state=None
                         ) -> dict[str, np.ndarray]:
    """The portfolio's k-partitions of dense ``X``, by name: Genie at each of
    ``GINI_THRESHOLDS`` (one spanning tree for all), a Gaussian mixture, k-means, and the
    spectral partition of the kNN graph at each of ``SPECTRAL_NEIGHBORS``. Above
    ``PORTFOLIO_SAMPLE_SIZE`` points Genie's and the spectral partitions are those of one
    uniform sample, every other point joining the cluster of its nearest sampled prototype (one
    search for all of them, :class:`~algorithms.selection.candidates.NearestPrototypes`): both
    follow clusters of any shape, which a cluster's centre does not describe. The mixture and
    k-means are fitted on samples of their own, every other point taking its nearest centre."""
    rng = check_random_state(random_state)
    X = np.asarray(X, dtype=np.float64)
    sample = _portfolio_sample(X.shape[0], rng)
    base = X if sample is None else X[sample]
    candidates: dict[str, np.ndarray] = {}
    tree = minimum_spanning_tree(base)
    for threshold in GINI_THRESHOLDS:
        candidates[f"genie_{threshold:g}"] = genie_labels_from_tree(tree, base.shape[0],
                                                                    n_clusters, threshold)
    candidates["gmm"] = _fitted_on_sample(X, n_clusters, rng, lambda part: gmm_labels(
        part, n_clusters, rng.randint(2**31 - 1)))
    candidates["kmeans"] = _fitted_on_sample(X, n_clusters, rng, lambda part: best_kmeans_run(
        part, n_clusters, n_init=KMEANS_INIT, random_state=rng)[1])
    for neighbors in SPECTRAL_NEIGHBORS:
        candidates[f"spectral_{neighbors}"] = spectral_partition(
            base, n_clusters, n_neighbors=neighbors, random_state=rng)
    if sample is not None:  # Genie's and the spectral partitions are of the sample
        prototypes = NearestPrototypes(X, sample, rng, X.mean(axis=0))
        for name in candidates:
            if name not in ("gmm", "kmeans"):
                candidates[name] = prototypes.extend(candidates[name])
    return candidates


def _portfolio_sample(n: int, rng: np.random.RandomState) -> np.ndarray | None:
    """Sorted indices of a uniform sample of ``PORTFOLIO_SAMPLE_SIZE`` of ``n`` points, or None
    (every point) when there are no more."""
    if n <= PORTFOLIO_SAMPLE_SIZE:
        return None
    return np.sort(rng.choice(n, PORTFOLIO_SAMPLE_SIZE, replace=False))


def _fitted_on_sample(X: np.ndarray, n_clusters: int, rng: np.random.RandomState,
                     fit: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``fit``'s partition of a sample of its own (:func:`_portfolio_sample`), extended to
    every point by nearest centre (:func:`_extend_by_centres`)."""
    sample = _portfolio_sample(X.shape[0], rng)
    return _extend_by_centres(X, sample, fit(X if sample is None else X[sample]), n_clusters)


def _extend_by_centres(X: np.ndarray, sample: np.ndarray | None, labels: np.ndarray,
                       n_clusters: int) -> np.ndarray:
    """Labels of a sample's partition for every point: a sampled point keeps its own, every
    other point takes that of its nearest cluster centre."""
    if sample is None:
        return labels
    centres = np.stack([X[sample[labels == c]].mean(axis=0) for c in range(n_clusters)])
    result = nearest_centre(X, centres)
    result[sample] = labels
    return result


def distinct_candidates(candidates: Mapping[str, np.ndarray], n_clusters: int
                        ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The candidates with ``n_clusters`` clusters, each partition once (the first name that
    gave it), and the names of those that repeated an earlier one."""
    distinct: dict[str, np.ndarray] = {}
    first_with: dict[bytes, str] = {}
    repeats: dict[str, str] = {}
    for name, labels in candidates.items():
        labels = np.asarray(labels)
        if np.unique(labels).size != n_clusters:
            continue
        key = partition_key(labels)
        if key in first_with:
            repeats[name] = first_with[key]
            continue
        first_with[key] = name
        distinct[name] = labels
    return distinct, repeats


class PartitionScorer:
    """The module's criterion, ``sum_c omega(c vs rest)``, of partitions of ``X``: one random
    sample of at most ``sample_size`` points and one RBF kernel on its unit-variance columns
    (``gamma`` by local scaling when not given) serve every partition scored, and a cluster that
    several partitions share is solved once. A partition of which the sample misses a whole
    cluster scores ``inf``: a cluster of fewer than about ``n / sample_size`` points is not one
    the margin can weigh."""

    def __init__(self, X, *, gamma: float | None = None, C: float = SCORE_C, random_state=None,
                 sample_size: int = SCORE_SAMPLE_SIZE):
        rng = check_random_state(random_state)
        n = X.shape[0]
        self.sample = np.arange(n) if n <= sample_size else np.sort(
            rng.choice(n, sample_size, replace=False))
        Xs = X[self.sample].toarray() if sp.issparse(X) else np.asarray(X)[self.sample]
        Xs = unit_variance_columns(Xs)
        if gamma is None:
            gamma = local_scaling_gamma(Xs, random_state=rng)
        Z = leading_features(margin_kernel(pairwise_kernel(Xs, kernel="rbf", gamma=gamma)),
                             SCORE_RANK)
        self._margins = ClusterMargins(Z, 1.0 / C)

    def __call__(self, labels: np.ndarray) -> float:
        labels = np.asarray(labels)
        on_sample = labels[self.sample]
        if np.unique(on_sample).size < np.unique(labels).size:
            return np.inf
        with small_problem_threads():  # products of a few hundred rows: one thread is fastest
            return self._margins.summed(on_sample)


def unit_variance_columns(X: np.ndarray) -> np.ndarray:
    """``X`` with every column of positive variance centred and divided by its standard
    deviation (constant columns centred only): the margins of an RBF kernel on it do not depend
    on the unit of any feature."""
    X = np.asarray(X, dtype=np.float64)
    spread = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(spread > 0.0, spread, 1.0)


def leading_features(K: np.ndarray, rank: int) -> np.ndarray:
    """``Z`` with ``Z Z^T`` the best rank-``rank`` approximation of the PSD ``K``."""
    values, vectors = linalg.eigh(K, subset_by_index=[max(0, K.shape[0] - rank),
                                                      K.shape[0] - 1])
    return vectors * np.sqrt(np.maximum(values, 0.0))


def squared_hinge_margin(Z: np.ndarray, y: np.ndarray, beta: float) -> float:
    """``omega(y) = min_w beta/2 ||w||^2 + sum_i max(0, 1 - y_i w^T z_i)^2`` on features ``Z``
    (no intercept), by the modified finite Newton method of Keerthi and DeCoste (2005,
    Algorithm 1): on the active set ``A`` of points inside the margin the objective is
    quadratic, with its minimum ``(beta/2 I + Z_A^T Z_A)^-1 Z_A^T y_A``; an exact line search
    towards it (:func:`_exact_step`) gives a new active set, and the minimum is reached when
    the active set no longer changes."""
    n_features = Z.shape[1]
    w = np.zeros(n_features)
    active = np.ones(Z.shape[0], dtype=bool)
    for _ in range(NEWTON_MAX_ITER):
        Z_active = Z[active]
        hessian = Z_active.T @ Z_active
        hessian.flat[:: n_features + 1] += 0.5 * beta
        direction = linalg.solve(hessian, Z_active.T @ y[active], assume_a="pos") - w
        w = w + _exact_step(Z, y, w, direction, beta) * direction
        now_active = y * (Z @ w) < 1.0
        if np.array_equal(now_active, active):
            break
        active = now_active
    slack = np.maximum(0.0, 1.0 - y * (Z @ w))
    return 0.5 * beta * float(w @ w) + float(slack @ slack)


def _exact_step(Z: np.ndarray, y: np.ndarray, w: np.ndarray, direction: np.ndarray,
                beta: float) -> float:
    """The ``t >= 0`` minimising the objective of :func:`squared_hinge_margin` at
    ``w + t d``. With slacks ``a_i - t b_i`` (``a = 1 - y Z w``, ``b = y Z d``) its derivative
    ``beta (w^T d + t d^T d) - 2 sum_{a_i - t b_i > 0} b_i (a_i - t b_i)`` is increasing and
    piecewise linear in ``t``, with breakpoints where a slack reaches 0: the root lies in the
    first piece where the derivative turns non-negative (Keerthi and DeCoste 2005, section
    3)."""
    a = 1.0 - y * (Z @ w)
    b = y * (Z @ direction)
    # Linear part: derivative(t) = slope * t + offset over the terms active in a piece.
    slope, offset = beta * float(direction @ direction), beta * float(w @ direction)
    inside = a > 0.0
    slope += 2.0 * float(b[inside] @ b[inside])
    offset -= 2.0 * float(b[inside] @ a[inside])
    # A term changes state where a_i = t b_i, t > 0: an inside term leaves (b_i > 0), an outside
    # term enters (b_i < 0).
    with np.errstate(divide="ignore", invalid="ignore"):
        breaks = a / b
    changing = (breaks > 0.0) & np.isfinite(breaks) & np.where(inside, b > 0.0, b < 0.0)
    order = np.flatnonzero(changing)[np.argsort(breaks[changing])]
    sign = np.where(inside[order], -1.0, 1.0)  # a term leaving or entering the sum
    # The slope and offset of the piece that starts at each breakpoint's left (the terms before
    # it applied), and of the last piece.
    slopes = slope + np.concatenate(([0.0], np.cumsum(sign * 2.0 * b[order] ** 2)))
    offsets = offset - np.concatenate(([0.0], np.cumsum(sign * 2.0 * b[order] * a[order])))
    reached = np.flatnonzero(slopes[:-1] * breaks[order] + offsets[:-1] >= 0.0)
    piece = reached[0] if reached.size else order.size
    slope, offset = slopes[piece], offsets[piece]
    return max(0.0, -offset / slope) if slope > 0.0 else 0.0


class ClusterMargins:
    """``omega(c vs rest)`` of clusters on features ``Z``, each cluster (a set of rows) solved
    once: candidates of one portfolio share most of their clusters where the data has clear
    groups, and a cluster and its complement have one ``omega``."""

    def __init__(self, Z: np.ndarray, beta: float):
        self.Z, self.beta = Z, beta
        self._omega: dict[bytes, float] = {}

    def one_vs_rest(self, members: np.ndarray) -> float:
        """``omega`` of the cluster of rows ``members`` (a boolean mask) against the rest."""
        if members[0]:  # a cluster and its complement are one split
            members = ~members
        key = np.packbits(members).tobytes()
        if key not in self._omega:
            self._omega[key] = squared_hinge_margin(self.Z, np.where(members, 1.0, -1.0),
                                                    self.beta)
        return self._omega[key]

    def summed(self, labels: np.ndarray) -> float:
        """``sum_c omega(c vs rest)`` over the clusters of ``labels`` (``inf`` for one)."""
        clusters = np.unique(labels)
        if clusters.size < 2:
            return np.inf
        return float(sum(self.one_vs_rest(labels == c) for c in clusters))


class Portfolio:
    """The distinct candidate k-partitions of one dataset (:func:`candidate_partitions`) and
    their scores, built once per fit: a method that refines a partition starts from
    :meth:`best`, and :meth:`choose` weighs the method's own result against the candidates on
    the same sample and kernel. ``X`` is converted to dense."""

    def __init__(self, X, n_clusters: int, random_state=None):
        self._rng = check_random_state(random_state)
        self.source = X  # the array given, which a later step of the same fit recognises
        self.X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        self.n_clusters = n_clusters
        self.candidates, self.repeats = distinct_candidates(
            candidate_partitions(self.X, n_clusters, self._rng), n_clusters)
        self._scorer: PartitionScorer | None = None
        self._scores: dict[str, float] = {}

    def score(self, name: str, labels: np.ndarray) -> float:
        """The criterion of ``labels``, kept under ``name``."""
        if name not in self._scores:
            if self._scorer is None:  # drawn on first use, after the candidates
                self._scorer = PartitionScorer(self.X, random_state=self._rng)
            self._scores[name] = self._scorer(labels)
        return self._scores[name]

    def best(self) -> tuple[str, np.ndarray]:
        """The candidate of lowest score (labels ``0..k-1``), and its name."""
        if not self.candidates:
            raise ValueError(f"no candidate partition has {self.n_clusters} clusters")
        names = list(self.candidates)
        if len(names) > 1:
            names.sort(key=lambda name: self.score(name, self.candidates[name]))
        return names[0], _renumbered(self.candidates[names[0]])

    def choose(self, extra: Mapping[str, np.ndarray] | None = None) -> PortfolioChoice:
        """The partition of lowest score among the caller's ``extra`` partitions (which come
        first and win ties; a candidate that repeats one is not scored) and the candidates."""
        distinct, repeats = distinct_candidates({**(extra or {}), **self.candidates},
                                                self.n_clusters)
        repeats = {**self.repeats, **repeats}
        if not distinct:
            raise ValueError(f"no candidate partition has {self.n_clusters} clusters")
        if len(distinct) == 1:
            name, labels = next(iter(distinct.items()))
            return PortfolioChoice(_renumbered(labels), name, {name: 0.0}, repeats)
        scores = {name: self.score(name, labels) for name, labels in distinct.items()}
        chosen = min(scores, key=scores.__getitem__)
        return PortfolioChoice(_renumbered(distinct[chosen]), chosen, scores, repeats)


def choose_partition(X, n_clusters: int, *, extra: Mapping[str, np.ndarray] | None = None,
                     random_state=None) -> PortfolioChoice:
    """The partition of lowest score among the caller's ``extra`` partitions (which win ties)
    and the :class:`Portfolio` of ``X``, each distinct partition scored once."""
    return Portfolio(X, n_clusters, random_state).choose(extra)


def _renumbered(labels: np.ndarray) -> np.ndarray:
    """Labels ``0..k-1`` numbered by first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.int64)
