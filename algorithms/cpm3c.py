"""CPM3C: cutting-plane multiclass maximum margin clustering.

Zhao, Wang and Zhang 2008, "Efficient Multiclass Maximum Margin Clustering" (ICML).

The multiclass MMC problem (2), Crammer-Singer form, is rewritten with one slack and one
constraint per ``c = (c_1..c_n)``, ``c_i in {0, e_1..e_k}`` (problem (11), Theorems 1-2)::

    min_{w, xi >= 0}  (beta/2) sum_p ||w_p||^2 + xi
    s.t. (1/n) sum_i [(c_i.1) sum_p z_ip w_p.x_i + sum_p c_ip (z_ip - w_p.x_i)]
             >= (1/n) sum_i c_i.1 - xi      for every c,

with ``z_ip = 1`` iff ``p = argmax_q w_q.x_i``. For the current ``w`` the most violated ``c``
is closed-form (14): with ``p*`` the argmax and ``r*`` the runner-up of ``w_p.x_i``,
``c_i = e_{r*}`` if ``w_{p*}.x_i - w_{r*}.x_i < 1``, else ``c_i = 0``.

Algorithm 1 (cutting planes over (11)) with Algorithm 2 (CCCP on the working set, QP (20)) is
:func:`algorithms.cpm3c_solver.solve_cpm3c`; the constraints it works on, their closed-form most
violated member (14), their linearization (18)-(20) and the implicit centring that keeps CSR
input sparse (linear in ``n``, Theorems 5-7) are in :mod:`algorithms.cpm3c_constraints`. This
module is the estimator: the kernel coordinates, the starting partitions, the runs from them and
the choice among the runs.

Nonlinear kernels work, as the paper says (section 2.1), on kernel-PCA coordinates: Nystrom
coordinates of the RBF kernel (exact with every point a landmark), optionally truncated to the
leading principal components (``kpca_components``), with the width taken from the paper's grid
``{0.1 sigma_0, ..., sigma_0}``, ``sigma_0`` the largest pairwise distance
(``width_reference="max_distance"``, section 4.2).

Two forms:

* ``n_clusters = 2``: the binary cutting-plane MMC the paper generalizes, one weight vector and a
  bias, ``f(x) = w.x + b``, constraints ``(1/n) sum_i c_i |f(x_i)| >= (1/n) sum_i c_i - xi``,
  linearized by ``sign(f_t(x_i)) f(x_i)``; labels ``f > 0``.
* ``n_clusters > 2``: Crammer-Singer scores ``f_p(x) = w_p.x + b_p``, labels ``argmax_p``.

Data are centered and scaled to unit mean squared norm inside the solver and a bias ``b_p`` is
added (regularized with ``w``). The paper has no bias and uncentered data, where
``sum_i w_p.x_i = w_p.(n mean)`` acts as one; making it explicit keeps the class balance (16),
``-l <= sum_i (f_p(x_i) - f_q(x_i)) <= l``, meaningful for any data (for centered data without a
bias it would be vacuous): with centering it reads ``|b_p - b_q| <= l / n = score_balance``.

The defaults' scores against scikit-learn's clusterers are in ``docs/defaults.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.preprocessing import normalize as normalize_rows
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.cpm3c_constraints import (
    ScaledData,
    best_and_rival,
    centre_in_place,
    labels_from_scores,
    row_products,
)
from algorithms.cpm3c_solver import CuttingPlaneResult, solve_cpm3c
from algorithms.inputs import (
    as_float_matrix,
)
from algorithms.kernels import NystromMap, distinct_rows, resolve_gamma
from algorithms.params.common import (
    DEPRECATED,
    LOCAL_SCALING,
)
from algorithms.params.cpm3c import WIDE_LOCAL_SCALING
from algorithms.params.cpm3c import (
    CPM3CParams as CPM3CParams,
)
from algorithms.pca import PrincipalComponents
from algorithms.progress import ProgressCallback, report
from algorithms.sampling import fit_sample
from algorithms.selection.candidates import (
    kmeans_partitions,
    partition_key,
    spectral_partition,
)

# gamma="wide_local_scaling": the shared local width sigma (kernels.local_scaling_gamma) times
# this. CPM3C's classifier is a norm-regularized linear one on Nystrom coordinates; at sigma itself
# the kernel between points of one cluster a few neighbours apart is ~0, so many labelings have
# nearly the same margin and the descent drifts from a correct start. A wider kernel keeps a
# cluster's points correlated at the cost of blurring close clusters.
WIDE_LOCAL_SCALING_MULTIPLE = 2.0
# The paper's setting: linear kernel (the bounding-box width where "rbf" is asked for) and k-means
# starts; reproductions of the paper's tables run with it.
PAPER_SETTING = {"kernel": "linear", "gamma": "paper", "init": "k-means", "supervised_start": False,
                 "portfolio": False}


# ---------------------------------------------------------------------------------------------
# Runs that empty a cluster (class elimination)
# ---------------------------------------------------------------------------------------------


def _eliminated_clusters(labels: np.ndarray, n_clusters: int,
                         first_rows: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """Clusters holding fewer than a tenth of an even share ``n / k`` (at least one point):
    what class elimination leaves behind (an emptied class keeps a stray point or two).

    With ``first_rows`` (the first occurrence of each distinct row,
    :func:`algorithms.kernels.distinct_rows`, asked for only when some cluster is small, since
    finding them costs a pass over the rows) a cluster must also be that small in distinct rows
    (a tenth of ``n_distinct / k``): otherwise one point repeated many times beside a few others
    makes every partition "eliminate" the cluster of the few, and the fallback to the starting
    partition's classifier never applies. A cluster of copies alone is large in points."""
    small = _small_clusters(labels, n_clusters)
    if first_rows is None or small.size == 0:
        return small
    return np.intersect1d(small, _small_clusters(labels[first_rows()], n_clusters))


@dataclass
class _HeldFit:
    """A run's held-labels phase (the supervised SVM of its starting partition), its argmax
    labels and the clusters those leave (nearly) empty."""

    fit: CuttingPlaneResult
    labels: np.ndarray
    eliminated: np.ndarray

    @classmethod
    def of(cls, fit: CuttingPlaneResult, data: ScaledData, n_clusters: int,
           first_rows: Callable[[], np.ndarray]) -> _HeldFit:
        labels = labels_from_scores(data.scores(fit.w, fit.b))
        return cls(fit, labels, _eliminated_clusters(labels, n_clusters, first_rows))

    @property
    def key(self) -> tuple[int, float]:
        """Fewer emptied clusters first, then the lower objective (11)."""
        return self.eliminated.size, float(self.fit.objective)


def _small_clusters(labels: np.ndarray, n_clusters: int) -> np.ndarray:
    sizes = np.bincount(labels, minlength=n_clusters)
    return np.flatnonzero(sizes < max(1.0, 0.1 * labels.size / n_clusters))


# ---------------------------------------------------------------------------------------------
# Coordinates, starting partitions and the initial iterate
# ---------------------------------------------------------------------------------------------


# From this many Nystrom coordinates (points x landmarks) on, they are kept as float32: half the
# memory, and the passes over them (a score per point after each QP, a sum per new constraint)
# take about half the time. Sums over points are still accumulated in float64 (row_products).
FLOAT32_MIN_COORDINATES = 30_000_000


def coordinates_dtype(n_samples: int, n_landmarks: int) -> type:
    """float32 for the Nystrom coordinates of large data, float64 otherwise."""
    return np.float32 if n_samples * n_landmarks >= FLOAT32_MIN_COORDINATES else np.float64


def class_sums(X: np.ndarray | sp.csr_matrix, labels: np.ndarray, n_classes: int
               ) -> np.ndarray:
    """Sum of each class's rows (dense ``n_classes x s``), by one sparse indicator product (CSR
    stays CSR)."""
    indicator = sp.csr_matrix(
        (np.ones(labels.size), (labels, np.arange(labels.size))), shape=(n_classes, labels.size)
    )
    return row_products(indicator, X)


def cluster_means(X: np.ndarray | sp.csr_matrix, labels: np.ndarray,
                  n_clusters: int) -> np.ndarray:
    """Mean of each cluster's rows (dense)."""
    sums = class_sums(X, labels, n_clusters)
    return sums / np.maximum(np.bincount(labels, minlength=n_clusters), 1)[:, None]


def initial_weights(
    data: ScaledData, centroids: np.ndarray, binary: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2's ``w^(0)`` from k-means centroids: the linear scores whose argmax is the
    nearest centroid, ``f_p(x') = c'_p.x' - ||c'_p||^2 / 2``, scaled so that the median margin
    ``f_p* - f_r*`` is 1 (about half the points then enter the first constraint (14)).
    """
    c = (centroids - data.mean[None, :]) / data.radius
    w, b = c, -0.5 * np.einsum("ij,ij->i", c, c)
    if binary:
        w, b = w[1:] - w[:1], b[1:] - b[:1]
        margin = np.abs(data.scores(w, b)[:, 0])
    else:
        margin = best_and_rival(data.scores(w, b))[2]
    median = float(np.median(margin))
    scale = 1.0 / median if median > 0 else 1.0
    return w * scale, b * scale


def _gamma(X, params: CPM3CParams, rng: np.random.RandomState) -> float:
    """The RBF width of ``params.gamma`` on ``X``: the shared rules of
    :func:`algorithms.kernels.resolve_gamma`, and ``"wide_local_scaling"``, the local-scaling
    ``sigma`` times ``WIDE_LOCAL_SCALING_MULTIPLE``."""
    wide = params.gamma == WIDE_LOCAL_SCALING
    gamma = resolve_gamma(X, LOCAL_SCALING if wide else params.gamma, params.width_factor,
                          width_reference=params.width_reference, random_state=rng)
    return gamma / WIDE_LOCAL_SCALING_MULTIPLE**2 if wide else gamma


# ---------------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------------


@dataclass
class _BestRun:
    """The run kept so far among a fit's starts: its result, argmax labels, (nearly) emptied
    clusters, its key (whether it emptied any, its objective (11)) and, when it emptied some, its
    held-labels phase."""

    fit: CuttingPlaneResult
    labels: np.ndarray
    eliminated: np.ndarray
    key: tuple[bool, float]
    held: _HeldFit | None

    def beaten_by(self, key: tuple[bool, float]) -> bool:
        """Whether a run of ``key`` is kept instead: it empties no cluster where this one does,
        or as few and its objective is lower by more than rounding (sparse and dense agree
        then)."""
        return key[0] < self.key[0] or (key[0] == self.key[0]
                                        and key[1] < self.key[1] * (1 - 1e-6))


class CPM3C(MMCEstimatorMixin, ClusterMixin, BaseEstimator):
    """Cutting-plane multiclass maximum margin clustering (CPM3C).

    Parameters
    ----------
    n_clusters : int or "auto", default=2
        Number of clusters ``k``, >= 2; 2 uses the binary form (one ``w`` and a bias), more the
        Crammer-Singer form (one ``w_p`` and ``b_p`` per cluster).
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), read ``n_clusters_``.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    kernel : {"rbf", "linear"}, default="rbf"
        "rbf" runs the linear algorithm on ``n_landmarks`` Nystrom coordinates of
        ``exp(-gamma ||x - x'||^2)``, the paper's route to nonlinear kernels (section 2.1);
        "linear" is the setting of the paper's experiments.
    gamma : float or {"wide_local_scaling", "local_scaling", "paper", "scale"}, \
default="wide_local_scaling"
        RBF width. "wide_local_scaling": the local width of
        :func:`algorithms.kernels.local_scaling_gamma` with ``sigma`` times
        ``WIDE_LOCAL_SCALING_MULTIPLE`` (2); "local_scaling": that width itself; "paper":
        ``1 / (width_factor * D)^2``; "scale": scikit-learn's ``1 / (n_features * X.var())``.

        .. versionchanged:: 0.2 ``"wide_local_scaling"`` replaces ``"auto"``.
    width_factor : float, default=1.0
        Multiplier of ``D`` for ``gamma="paper"``, in (0, 100]. The paper's grid (section 4.2)
        is 0.1 to 1 with ``width_reference="max_distance"``.
    init : {"spectral", "k-means"}, default="spectral"
        Start of the first run: the class means of the kNN graph's spectral partition
        (:func:`algorithms.selection.candidates.spectral_partition`); later runs, and all runs with
        "k-means" (the paper's start), start from k-means centroids. With ``portfolio=True``
        the first run starts from the portfolio's best candidate instead (the spectral
        partition is one of them).
    n_landmarks : int, default=300
        Nystrom landmarks, in [10, 5000]; at least ``n`` reproduces the kernel exactly.
    width_reference : {"diameter", "max_distance"}, default="diameter"
        ``D`` for ``gamma="paper"``: the bounding-box diagonal or the largest pairwise distance,
        the paper's ``sigma_0`` (over a random sample of 2,000 points above that size).
    kpca_components : int or None, default=None
        Keep the top principal components of the kernel coordinates (kernel PCA, section 2.1),
        dropping trailing components that are mostly noise. None keeps all.
    C : float, default=100
        Weight of the slack ``xi`` against ``1/2 sum_p ||(w_p, b_p)||^2``, the paper's
        ``1 / beta`` in (11). Data are centered and scaled to unit mean squared norm, so ``C``
        does not depend on the units of ``X``. With ``k > 2`` a large ``C`` lets a cluster vanish.
    score_balance : float, default=0.03
        ``l / n`` in (16), >= 0: the largest difference between two clusters' mean scores.
        0 forces equal mean scores; too loose a balance lets one cluster take every point.
    cutting_plane_tol : float, default=0.01
        Cutting-plane precision, the paper's ``epsilon``: the iterations stop when no constraint
        is violated by more than this; the paper finds 0.01 enough (Fig. 2).

        .. versionchanged:: 0.2 Replaces ``epsilon``.
    cccp_tol : float, default=0.01
        CCCP stops when the objective improves by less than this fraction (the paper's value).
    max_cutting_plane_iter : int, default=200
        Most cutting-plane iterations (one most violated constraint added each).

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    max_cccp_iter : int, default=30
        CCCP steps per cutting-plane iteration.
    n_init : int, default=10
        k-means runs in the one pool the starting partitions come from.
    n_restarts : int, default=1
        Distinct k-means partitions of the pool (lowest inertia first) to run from, besides the
        spectral partition. The run of lowest objective (11) is kept, but one that ends with an
        empty cluster only if every run does: for ``k > 2`` the balance (16) cannot stop a
        cluster from never being the argmax. Lower objectives are not always better clusters.
    supervised_start : bool, default=True
        Each run first solves Algorithm 1 with its starting labels held fixed (the supervised
        Crammer-Singer SVM of that partition), then frees the labels. The paper's one-constraint
        first QP weighs each class by its size and moves most labels away from the start. If
        every run then empties a cluster, the held phase's classifier is kept instead when it
        empties fewer. ``PAPER_SETTING`` turns it off.
    exact_max_n : int or None, default=1_000_000
        Largest n clustered over every point. Above it a uniform random sample of
        ``exact_max_n`` points is clustered and every point is labelled by the paper's rule,
        ``argmax_p w_p.x + b_p``, a block of rows at a time: the cutting planes then hold the
        sample's Nystrom coordinates (``exact_max_n x n_landmarks``), not every point's. None:
        always every point.

        .. versionadded:: 0.2
    normalize : {"none", "l2"}, default="none"
        Row preprocessing before the kernel map: "l2" scales every point to unit norm.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int or None, default=None
        Seeds the k-means runs, the Nystrom landmarks and the sampled ``sigma_0``.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point, ``0..n_clusters-1``.
    coef_ : ndarray of shape (n_rows, n_features_model)
        Weights in the input (or Nystrom) coordinates; one row in the binary form.
    intercept_ : ndarray of shape (n_rows,)
        Biases ``b_p``.
    objective_, objective_history_ : float, list of float
        ``1/2 sum_p ||(w_p, b_p)||^2 + C xi`` at the end and after each cutting-plane iteration.
    n_iter_, n_cccp_iter_, n_constraints_ : int
        Cutting-plane iterations, QP (20) solves, and the size of the final working set.
    warnings_ : list of str
        Non-empty when every run left a cluster (nearly) empty; also a ``UserWarning``.
    gamma_ : float
        The RBF width used (0 for the linear kernel).
    exact_ : bool
        Whether the clustering was computed on every point; False when it was computed on a
        sample of ``exact_max_n`` (``n_fit_samples_``) points.
    n_fit_samples_ : int
        Points the clustering was computed on (``exact_max_n`` for a sample, else n).
    nystrom_, kpca_ : NystromMap or None, PrincipalComponents or None
        The feature map of ``kernel="rbf"`` and the kept kernel principal directions.

    References
    ----------
    B. Zhao, F. Wang, C. Zhang. Efficient Multiclass Maximum Margin Clustering. ICML 2008.
    Problem (2) and its one-slack form (11) (Theorems 1-2); most violated constraint (14)
    (Theorem 3); class balance (16); working-set problem (17); CCCP linearization (18)-(19) and
    QP (20); Algorithms 1-2; O(s n k) per iteration (Theorem 5).

    See Also
    --------
    algorithms.itersvr.IterSVR : binary MMC by iterative SVR.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=90, centers=3, random_state=0)
    >>> CPM3C(n_clusters=3, random_state=0).fit(X).labels_.shape
    (90,)
    """

    params_model = CPM3CParams
    portfolio_name = "cpm3c"
    _result_attributes = (
        *MMCEstimatorMixin._result_attributes, "n_cccp_iter_", "n_constraints_",
    )

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int = 50,
        kernel: str = "rbf",
        gamma: float | str = "wide_local_scaling",
        width_factor: float = 1.0,
        init: str = "spectral",
        n_landmarks: int = 300,
        width_reference: str = "diameter",
        kpca_components: int | None = None,
        C: float = 100.0,
        score_balance: float = 0.03,
        cutting_plane_tol: float = 0.01,
        cccp_tol: float = 0.01,
        max_cutting_plane_iter: int = 200,
        max_cccp_iter: int = 30,
        n_init: int = 10,
        supervised_start: bool = True,
        n_restarts: int = 1,
        exact_max_n: int | None = 1_000_000,
        normalize: str = "none",
        portfolio: bool = True,
        random_state: int | None = None,
        n_components: int | str = DEPRECATED,
        class_balance: float | str = DEPRECATED,
        epsilon: float | str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.width_factor = width_factor
        self.init = init
        self.n_landmarks = n_landmarks
        self.width_reference = width_reference
        self.kpca_components = kpca_components
        self.C = C
        self.score_balance = score_balance
        self.cutting_plane_tol = cutting_plane_tol
        self.cccp_tol = cccp_tol
        self.max_cutting_plane_iter = max_cutting_plane_iter
        self.max_cccp_iter = max_cccp_iter
        self.n_init = n_init
        self.supervised_start = supervised_start
        self.n_restarts = n_restarts
        self.exact_max_n = exact_max_n
        self.normalize = normalize
        self.portfolio = portfolio
        self.random_state = random_state
        self.n_components = n_components
        self.class_balance = class_balance
        self.epsilon = epsilon
        self.max_iter = max_iter

    # -- fitting ----------------------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR is kept sparse through the cutting planes
        return tags

    def _starts(self, X, first: Mapping[str, np.ndarray], rng
                ) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Starting partitions, none twice, each with its origin and centres: the partitions of
        ``first`` by origin (the portfolio's best candidate and the spectral partition, where
        they are used), then the ``n_restarts`` best distinct partitions of one pool of
        ``n_init`` k-means runs (:func:`algorithms.selection.candidates.kmeans_partitions`)."""
        starts, seen = [], set()
        kmeans = kmeans_partitions(X, self.n_clusters_, n_init=self._params.n_init,
                                   n_partitions=self._params.n_restarts,
                                   random_state=rng.randint(2**31 - 1))
        pool = [(origin, labels, None) for origin, labels in first.items()]
        pool += [("a k-means", labels, centres) for labels, centres in kmeans]
        for origin, labels, centres in pool:
            if partition_key(labels) not in seen:
                seen.add(partition_key(labels))
                if centres is None:
                    centres = cluster_means(X, labels, self.n_clusters_)
                starts.append((origin, labels, centres))
        return starts

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X`` (dense or CSR); ``y`` is ignored."""
        self._params = self._validated_params()
        self._note_fit_input(X)
        X = as_float_matrix(X, accept_sparse=True)
        X = validate_data(self, X, reset=True, accept_sparse="csr")
        self._resolve_n_clusters(X, progress)
        rng = check_random_state(self._params.random_state)
        sample = fit_sample(X.shape[0], self._params.exact_max_n, rng)
        X_all, X = X, (X if sample is None else X[sample])
        self.exact_ = sample is None
        self.n_fit_samples_ = X.shape[0]
        given = X  # X is normalized and mapped below; copies are copies in the input
        first_rows = cache(lambda: distinct_rows(given)[0])
        if self._params.normalize == "l2":
            X = normalize_rows(X)
        first_starts = self._first_starts(given, X, rng, progress)
        X, shift = self._coordinates(X, rng, progress)
        data = ScaledData.of(X)
        report(progress, 0, None, f"{self._params.n_init} k-means runs for starting partitions")
        starts = self._starts(X, first_starts, rng)
        best, fewest_emptied, step = self._run_from_each(data, starts, first_rows, progress)
        result, labels = self._kept_result(best, fewest_emptied, len(starts))
        # Back to input coordinates: f_p(x) = w_p.(x - mean)/radius + b_p.
        self.coef_ = result.w / data.radius
        self.intercept_ = result.b - self.coef_ @ data.mean
        if shift is not None:
            self.intercept_ -= self.coef_ @ shift
        self.labels_ = labels
        self.objective_ = float(result.objective)
        self.objective_history_ = [float(v) for v in result.history]
        self.n_iter_ = int(result.n_iter)
        self.n_cccp_iter_ = int(result.n_cccp)
        self.n_constraints_ = int(result.n_constraints)
        # The scores that gave labels_ are their decision values: kept, not recomputed through
        # the feature map.
        decision = self._pair_form(data.scores(result.w, result.b)) if sample is None else None
        del data, X  # the coordinates: the points beyond a sample are labelled without them
        self._label_every_point(X_all, sample, progress, step + 1)
        if decision is not None:
            self._keep_fit_decision(X_all, decision)
        self._keep_portfolio_partition(X_all, progress, step + 1)
        report(progress, step + 1, self.objective_, "done")
        return self

    def _first_starts(self, given, X, rng, progress: ProgressCallback | None
                      ) -> dict[str, np.ndarray]:
        """The partitions tried before the k-means ones, by origin: the portfolio's best
        candidate, which the cutting planes refine, or else with ``init="spectral"`` the spectral
        partition of ``X`` (the portfolio's candidates include it)."""
        first_starts: dict[str, np.ndarray] = {}
        best_candidate = self._portfolio_start(given, check_random_state(self._params.random_state),
                                               progress, 0, "is the first start")
        if best_candidate is not None:
            first_starts["the portfolio's best"] = best_candidate
        elif self._params.init == "spectral":
            report(progress, 0, None, "spectral partition of the kNN graph")
            first_starts["the spectral"] = spectral_partition(
                X, self.n_clusters_, random_state=rng,
                on_stage=lambda message: report(progress, 0, None,
                                                f"spectral partition: {message}"))
        return first_starts

    def _coordinates(self, X, rng, progress: ProgressCallback | None):
        """The coordinates the cutting planes run on, and the shift subtracted from them (float32
        coordinates are centred in place, :func:`algorithms.cpm3c_constraints.centre_in_place`;
        None otherwise): ``X`` itself for the linear kernel, else its Nystrom coordinates,
        optionally on their leading principal components (kernel PCA, section 2.1). Sets
        ``gamma_``, ``nystrom_`` and ``kpca_``."""
        self.nystrom_ = None
        self.kpca_ = None
        shift = None
        self.gamma_ = 0.0
        if self._params.kernel != "rbf":
            return X, shift
        self.gamma_ = _gamma(X, self._params, rng)
        n_landmarks = self._params.n_landmarks
        report(progress, 0, None, f"{n_landmarks} Nystrom coordinates of the rbf kernel")
        self.nystrom_, X = NystromMap.fit_transform(
            X, n_components=n_landmarks, kernel="rbf", gamma=self.gamma_,
            random_state=rng, dtype=coordinates_dtype(X.shape[0], n_landmarks),
            on_rows=lambda done, total: report(
                progress, 0, None, f"Nystrom coordinates of {done:,} of {total:,} points"))
        if X.dtype == np.float32:  # fitted on centred coordinates; the shift folded back
            shift = centre_in_place(X)
        if self._params.kpca_components is not None:
            self.kpca_ = PrincipalComponents.fit(X, self._params.kpca_components)
            X = self.kpca_.transform(X)
            if shift is not None:
                self.kpca_.mean = self.kpca_.mean + shift
                shift = None
        return X, shift

    def _run_from_each(self, data: ScaledData, starts, first_rows: Callable[[], np.ndarray],
                       progress: ProgressCallback | None
                       ) -> tuple[_BestRun, _HeldFit | None, int]:
        """Algorithms 1-2 from each start: the run of lowest objective (11), but one that
        eliminated a class only if all did (the score-sum balance (16) cannot stop class
        elimination, see the class docstring); the held phase that kept the most clusters among
        the runs that emptied one; and the last progress step."""
        binary = self.n_clusters_ == 2
        step = 0
        best: _BestRun | None = None
        fewest_emptied: _HeldFit | None = None
        for restart, (origin, start_labels, centroids) in enumerate(starts):
            report(progress, step, None, f"run {restart + 1} of {len(starts)}: from {origin} "
                   "partition")
            w0, b0 = initial_weights(data, centroids, binary)

            def on_iteration(n_iter: int, objective: float, violation: float, _first=step):
                report(progress, _first + n_iter, objective,
                       f"cutting-plane iteration {n_iter}: most violated constraint exceeds the "
                       f"working set by {violation:.4g}")

            run = self._solve(data, w0, b0, start_labels, on_iteration)
            step += run.n_iter
            run_labels = labels_from_scores(data.scores(run.w, run.b))
            run_eliminated = _eliminated_clusters(run_labels, self.n_clusters_, first_rows)
            key = (bool(run_eliminated.size), float(run.objective))
            run_held = None
            if run_eliminated.size and run.held is not None:
                run_held = _HeldFit.of(run.held, data, self.n_clusters_, first_rows)
                if fewest_emptied is None or run_held.key < fewest_emptied.key:
                    fewest_emptied = run_held
            if best is None or best.beaten_by(key):
                best = _BestRun(run, run_labels, run_eliminated, key, run_held)
        return best, fewest_emptied, step

    def _kept_result(self, best: _BestRun, fewest_emptied: _HeldFit | None, n_runs: int
                     ) -> tuple[CuttingPlaneResult, np.ndarray]:
        """The result and labels the fit keeps: the best run's, or, when every run emptied a
        cluster, a held phase's that empties fewer; sets ``warnings_`` (and warns) when clusters
        stay empty."""
        result, labels, eliminated = best.fit, best.labels, best.eliminated
        self.warnings_ = []
        if eliminated.size and best.held is not None:
            # Every run lost a class once its labels were free. The supervised SVM of the best
            # run's starting partition (its held-labels phase) is kept when it keeps every
            # cluster; otherwise the held phase of any run that empties fewer clusters than the
            # free labels do, since runs differ in which clusters their held phases keep.
            held, whose = best.held, "the best"
            if held.eliminated.size and fewest_emptied.key < held.key:
                held, whose = fewest_emptied, "the fewest-emptying"
            if held.eliminated.size < eliminated.size:
                self.warnings_.append(
                    f"class elimination: every one of the {n_runs} runs emptied a cluster once "
                    f"its labels were free; kept the max-margin classifier of {whose} run's "
                    "starting partition")
                result, labels, eliminated = held.fit, held.labels, held.eliminated
        if eliminated.size:
            # Every run lost a class: say so in the result instead of handing back fewer
            # clusters than asked for without a word.
            sizes = np.bincount(labels, minlength=self.n_clusters_)
            message = (
                f"class elimination: {eliminated.size} of {self.n_clusters_} clusters are empty "
                f"or nearly so in all {n_runs} runs (cluster sizes {sizes.tolist()}); "
                "the balance (16) bounds score sums, not cluster sizes. Try more n_restarts, "
                "another C, or itersvr (recursive bisection) for this data"
            )
            self.warnings_.append(message)
            warnings.warn(message, UserWarning, stacklevel=3)
        return result, labels

    def _solve(self, data: ScaledData, w0, b0, start_labels, on_iteration) -> CuttingPlaneResult:
        return solve_cpm3c(
            data, w0, b0, C=self._params.C, score_balance=self._params.score_balance,
            epsilon=self._params.cutting_plane_tol,
            cccp_tol=self._params.cccp_tol, max_iter=self._params.max_cutting_plane_iter,
            max_cccp_iter=self._params.max_cccp_iter,
            on_iteration=on_iteration,
            start_labels=start_labels if self._params.supervised_start else None,
        )

    # -- prediction -------------------------------------------------------------------------------
    def _scores(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = as_float_matrix(X, accept_sparse=True)
        X = validate_data(self, X, reset=False, accept_sparse="csr")
        if self._params.normalize == "l2":
            X = normalize_rows(X)
        if self.nystrom_ is not None:
            X = self.nystrom_.transform(X)
        if self.kpca_ is not None:
            X = self.kpca_.transform(X)
        return np.asarray(X @ self.coef_.T) + self.intercept_[None, :]

    def decision_function(self, X) -> np.ndarray:
        """The ``k`` scores ``f_p(x)``, shape (n, n_clusters); the predicted cluster is the argmax.

        For two clusters (binary form, ``f = w.x + b``) the scores are ``(-f/2, f/2)``, the
        Crammer-Singer pair with ``w_1 = -w_0`` that has the same labels and margins.
        """
        if self.partition_model_ is not None:
            return self._partition_predict(X)[1]
        return self._pair_form(self._scores(X))

    def _decision_form(self, values: np.ndarray) -> np.ndarray:
        return self._pair_form(values[:, None] if values.ndim == 1 else values)

    @staticmethod
    def _pair_form(F: np.ndarray) -> np.ndarray:
        return np.hstack([-F / 2, F / 2]) if F.shape[1] == 1 else F

    def predict(self, X) -> np.ndarray:
        """``argmax_p w_p.x + b_p`` (binary: ``w.x + b > 0``), the paper's rule (the portfolio
        partition's SVM where that was kept)."""
        return self.predict_with_decision(X)[0]

    def predict_with_decision(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(predict(X), decision_function(X))`` from one evaluation of the scores."""
        if self.partition_model_ is not None:
            return self._partition_predict(X)
        F = self._scores(X)
        return labels_from_scores(F), self._pair_form(F)

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state: dict[str, Any] = {
            "gamma_": self.gamma_, "exact_": self.exact_, "n_fit_samples_": self.n_fit_samples_,
            "objective_": self.objective_, "n_iter_": self.n_iter_,
            "n_cccp_iter_": self.n_cccp_iter_, "n_constraints_": self.n_constraints_,
            "objective_history_": self.objective_history_,
            "nystrom": None if self.nystrom_ is None else self.nystrom_.to_meta(),
        }
        arrays = {"coef_": self.coef_, "intercept_": self.intercept_, "labels_": self.labels_}
        if self.nystrom_ is not None:
            arrays.update(self.nystrom_.to_arrays())
        if self.kpca_ is not None:
            arrays.update(kpca_mean=self.kpca_.mean, kpca_components=self.kpca_.components)
        return state, arrays

    def _import_state(self, state, arrays):
        self.gamma_ = float(state["gamma_"])
        self.objective_ = float(state["objective_"])
        self.n_iter_ = int(state["n_iter_"])
        self.n_cccp_iter_ = int(state["n_cccp_iter_"])
        self.n_constraints_ = int(state["n_constraints_"])
        self.objective_history_ = [float(v) for v in state["objective_history_"]]
        self.coef_ = np.asarray(arrays["coef_"], dtype=np.float64)
        self.intercept_ = np.asarray(arrays["intercept_"], dtype=np.float64)
        self.labels_ = np.asarray(arrays["labels_"], dtype=np.int64)
        # Models stored before exact_max_n clustered every point.
        self.exact_ = bool(state.get("exact_", True))
        self.n_fit_samples_ = int(state.get("n_fit_samples_", self.labels_.size))
        self.nystrom_ = (
            None if state["nystrom"] is None else NystromMap.from_export(state["nystrom"], arrays)
        )
        self.kpca_ = (
            PrincipalComponents(
                np.asarray(arrays["kpca_mean"], dtype=np.float64),
                np.asarray(arrays["kpca_components"], dtype=np.float64),
            )
            if "kpca_components" in arrays else None
        )
