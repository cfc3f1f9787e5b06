"""iterSVR: maximum margin clustering by iterative support vector regression.

Zhang, Tsang and Kwok 2007, "Maximum Margin Clustering Made Practical" (ICML), Algorithm 2,
per binary split:

1. initial labels from k-means (k = 2) with far-apart prototypes, several restarts;
2. fix ``y``, fit SVR with the Laplacian loss (epsilon = 0), dual (6)/(7), by the compiled SMO of
   :mod:`algorithms.dual_qp`;
3. ``w`` from the KKT conditions: ``f(x) = w^T phi(x) = sum_j u_j K(x_j, x)``;
4. the bias ``b`` from problem (8) under the class balance constraint (1),
   ``-l <= e^T y <= l``, solved exactly by :func:`balanced_bias_search` in O(n log n);
5. ``y_i = sign(f(x_i) + b)``; repeat 2-5 until the labels stop changing.

Among restarts the labeling with the best MMC objective (2) is kept: as the paper's footnote 1
prescribes, the objective of a labeling is that of a hinge-loss SVM trained on it,
``1/2 ||w||^2 + C sum_i xi_i``. Two clusters from the spectral start (the default) compare their
runs by the margin omega of Xu's thesis (2007, eq. (3.1)) instead
(:mod:`algorithms.selection.margin`,
``beta = 1 / C``, the rule of GMMC and SDP MMC): that start loosens the balance (1) to its own
imbalance, and (2), whose bias lets a small group pay little, would then prefer splitting off a
handful of points to an even split. Splits inside the bisection keep (2): a split there may
separate one cluster of k (1:(k-1)), which omega, having no bias, penalises.

``n_clusters > 2`` uses recursive bisection (section 4.4, "in the same manner as Shi & Malik";
:mod:`algorithms.selection.bisection`): the leaf whose best split has the lowest objective (2) per
point is
split next, with a guide when ``init="spectral"``: CPM3C's multi-class max-margin partition
(:func:`algorithms.selection.bisection.guide_partition`).

Large n: above ``exact_max_n`` points the algorithm runs on a uniform random sample of
``exact_max_n`` points and every point is labelled by the tree of SVMs trained on the sample's
clusters (the out-of-sample classifier of section 3.2.1): O(m^2) for the clustering and
O(n n_SV) for the labels, instead of O(n^2) memory.

The defaults' scores against scikit-learn's clusterers are in ``docs/defaults.md``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.cpm3c import CPM3C
from algorithms.dual_qp import DualQPSolution, solve_dual_qp
from algorithms.inputs import (
    as_float_matrix,
)
from algorithms.kernels import distinct_rows, pairwise_kernel, resolve_gamma
from algorithms.out_of_sample import KernelExpansionClassifier
from algorithms.params.common import DEPRECATED
from algorithms.params.itersvr import (
    IterSVRParams as IterSVRParams,
)
from algorithms.progress import ProgressCallback, report
from algorithms.rounding import balance_limit
from algorithms.sampling import SampledFitAttributes, fit_sample, sampling_mode
from algorithms.selection.bisection import (
    Node,
    guided_split,
    recursive_bisection,
    tree_labels,
    tree_objective,
)
from algorithms.selection.candidates import kmeans_runs
from algorithms.selection.margin import lowest_margin_labeling

# ---------------------------------------------------------------------------------------------
# Section 3.3: the class-balanced bias search, problem (8)
# ---------------------------------------------------------------------------------------------


def _positive_count_range(n: int, limit: float) -> tuple[int, int]:
    """Numbers ``p`` of positive labels allowed by ``|2p - n| <= limit``, with both classes used."""
    low = max(1, math.ceil((n - limit) / 2))
    high = min(n - 1, math.floor((n + limit) / 2))
    if low > high:  # limit smaller than the parity gap: take the most balanced split
        low = high = n // 2
    return low, high


def _laplacian_balance_loss(sorted_f: np.ndarray, prefix: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``g(b) = sum_i ||f_i + b| - 1|`` for many ``b`` at once (labels ``sign(f + b)``).

    ``||t| - 1|`` is piecewise linear with kinks at -1, 0, 1, so each term of the sum over a
    region is a prefix-sum difference: O(log n) per ``b`` after sorting.
    """
    n = sorted_f.size
    i1 = np.searchsorted(sorted_f, -1.0 - b, side="right")
    i2 = np.searchsorted(sorted_f, -b, side="right")
    i3 = np.searchsorted(sorted_f, 1.0 - b, side="right")
    s1, s2, s3, s4 = prefix[i1], prefix[i2], prefix[i3], prefix[n]
    below = -(s1 + i1 * b) - i1  # t <= -1: -t - 1
    low = (s2 - s1) + (i2 - i1) * b + (i2 - i1)  # -1 < t <= 0: t + 1
    high = (i3 - i2) - ((s3 - s2) + (i3 - i2) * b)  # 0 < t <= 1: 1 - t
    above = (s4 - s3) + (n - i3) * b - (n - i3)  # t > 1: t - 1
    return below + low + high + above


def balanced_bias_search(f: np.ndarray, limit: float) -> tuple[np.ndarray, float, float]:
    """Solve problem (8): ``min_{y, b} sum_i |f_i + b - y_i|`` s.t. ``-l <= e^T y <= l``.

    By the paper's footnote 2 the optimal ``y`` is ``sign(f + b)``, so the problem is the 1-D
    minimisation of the piecewise-linear ``g(b)`` over the interval of ``b`` whose sign pattern
    meets the balance constraint. A piecewise-linear function attains its minimum at a kink or an
    end of the interval; all kinks are evaluated at once with sorting and cumulative sums, which is
    O(n log n) overall. Returns ``(y in {-1, +1}, b, loss)``.
    """
    n = f.size
    order = np.argsort(f, kind="stable")
    sorted_f = f[order]
    prefix = np.concatenate(([0.0], np.cumsum(sorted_f)))
    p_low, p_high = _positive_count_range(n, limit)
    # The top p sorted points are positive iff b lies in (-f_(n-p), -f_(n-p-1)].
    b_low, b_high = -sorted_f[n - p_low], -sorted_f[n - p_high - 1]
    kinks = np.concatenate((-sorted_f - 1.0, -sorted_f, -sorted_f + 1.0))
    candidates = np.concatenate(([b_low, b_high], kinks[(kinks >= b_low) & (kinks <= b_high)]))
    losses = _laplacian_balance_loss(sorted_f, prefix, candidates)
    best = int(np.argmin(losses))
    b = float(candidates[best])
    n_positive = int(np.clip(n - np.searchsorted(sorted_f, -b, side="right"), p_low, p_high))
    y = -np.ones(n)
    y[order[n - n_positive :]] = 1.0
    return y, b, float(losses[best])


# ---------------------------------------------------------------------------------------------
# The kernel matrix of the points being clustered
# ---------------------------------------------------------------------------------------------


# KKT tolerance of the SVR (6), in libsvm's units: the labels iterSVR ends with depend on it, so it
# is chosen as the loosest tolerance whose final labels almost never differ from those of a much
# tighter (1e-5) solve; looser tolerances save SMO iterations but change labels more often.
SVR_TOL = 1e-2
# SMO iterations per point of one SVR step before its labels are read off. Early steps of a run
# move many labels, and an exact solve of each (many passes over the points at the paper's
# C = 500) buys nothing the next step keeps. Each step's solve is therefore inexact,
# warm-started from the last one, so that the solves of a run add up to one converging solve
# while the labels settle (an inexact alternating minimization); the run ends, as the paper's,
# when a step moves no label.
SVR_PASSES = 20
# libsvm tolerance of the hinge-loss SVMs: they score a labeling by (2) and the kept one serves
# as the out-of-sample classifier, so it is solved as tightly as KernelExpansionClassifier.fit.
SVM_TOL = 1e-4


class _ExactKernel:
    """Precomputed kernel matrix; subsets index it, so it is computed once per fit."""

    def __init__(self, K: np.ndarray):
        self.K = K

    def subset(self, index: np.ndarray) -> _ExactKernel:
        return _ExactKernel(self.K[np.ix_(index, index)])

    def svr(self, y: np.ndarray, C: float, start: np.ndarray | None, max_iter: int
            ) -> DualQPSolution:
        """The dual (7) of the Laplacian-loss SVR (6) on labels ``y``: its ``scores`` are
        ``w^T phi(x_i)`` without the bias (found by (8)). ``start``: a dual solution for other
        labels, feasible here too (the constraints of (7) do not depend on ``y``). The solve
        stops after ``max_iter`` SMO iterations, converged or not (no warning)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return solve_dual_qp(self.K, y, -C, C, tol=SVR_TOL, u0=start, max_iter=max_iter)

    def margin_objective(self, y: np.ndarray, C: float) -> tuple[float, SVC]:
        """Objective (2) of a labeling, the hinge-loss SVM primal ``1/2 ||w||^2 + C sum xi``,
        and that SVM (it becomes the out-of-sample classifier if this labeling is kept)."""
        svm = SVC(kernel="precomputed", C=C, tol=SVM_TOL)
        svm.fit(self.K, y)
        alpha = svm.dual_coef_[0]
        K_sv = self.K[:, svm.support_]
        f = K_sv @ alpha + svm.intercept_[0]
        norm_w2 = float(alpha @ K_sv[svm.support_] @ alpha)
        return 0.5 * norm_w2 + C * float(np.maximum(0.0, 1.0 - y * f).sum()), svm


# ---------------------------------------------------------------------------------------------
# Binary iterSVR with restarts
# ---------------------------------------------------------------------------------------------


@dataclass
class BinarySplit:
    """Result of clustering one set of points into two: labels in {-1, +1}."""

    y: np.ndarray
    objective: float
    n_iter: int
    svm: SVC  # the hinge-loss SVM of objective (2) on ``y`` (kernel of the split's points)


def far_apart_prototypes(X: np.ndarray) -> np.ndarray:
    """Two far-apart points: the farthest from the mean, then the farthest from it."""
    first = int(np.argmax(((X - X.mean(axis=0)) ** 2).sum(axis=1)))
    second = int(np.argmax(((X - X[first]) ** 2).sum(axis=1)))
    return X[[first, second]]


def kmeans_initial_labelings(
    X: np.ndarray, n_init: int, rng: np.random.RandomState
) -> list[np.ndarray]:
    """Distinct 2-means labelings in {-1, +1}: far-apart prototypes first, then k-means++ starts."""
    labelings, seen = [], set()
    runs = kmeans_runs(X, 2, n_init=n_init, first_centres=far_apart_prototypes(X),
                       random_state=rng.randint(2**31 - 1))
    for _, labels, _ in runs:
        if labels.min() == labels.max():
            continue
        canonical = labels if labels[0] == 0 else 1 - labels  # the same split, either name
        key = canonical.tobytes()
        if key not in seen:
            seen.add(key)
            labelings.append(np.where(canonical == 1, 1.0, -1.0))
    return labelings


def iterate_svr(
    space: _ExactKernel,
    y: np.ndarray,
    *,
    C: float,
    limit: float,
    max_iter: int,
    visited: dict[bytes, np.ndarray] | None = None,
    on_iteration=None,
) -> tuple[np.ndarray, int]:
    """Steps 2-6 of Algorithm 2 from initial labels ``y``; returns final labels and iterations.

    Each SVR solve starts from the previous step's dual solution and stops after
    ``SVR_PASSES`` SMO iterations per point: late in a run a step moves a few labels, and the
    SMO then needs a fraction of a cold solve's iterations. A restart that
    reaches a labeling an earlier run already passed through ends where that run ended:
    ``visited`` maps each labeling seen to its run's final labels and lets later restarts stop
    there instead of refitting.
    """
    visited = {} if visited is None else visited
    trajectory: list[bytes] = []
    n_iter = 0
    dual: np.ndarray | None = None
    passes = SVR_PASSES * y.shape[0]
    for n_iter in range(1, max_iter + 1):
        key = y.tobytes()
        if key in visited:
            y = visited[key]
            break
        trajectory.append(key)
        solution = space.svr(y, C, start=dual, max_iter=passes)
        new_y, _, loss = balanced_bias_search(solution.scores, limit)
        dual = solution.u
        changed = int(np.count_nonzero(new_y != y))
        y = new_y
        if on_iteration is not None:
            on_iteration(n_iter, loss, changed)
        if changed == 0:
            break
    for key in trajectory:
        visited[key] = y
    return y, n_iter


def initial_labelings(
    X: np.ndarray, *, init: str, n_init: int, limit: float, rng: np.random.RandomState,
    guide: np.ndarray | None = None,
) -> tuple[list[np.ndarray], float]:
    """Starting labelings in {-1, +1}, and the balance limit ``l`` of every run from them.

    ``init="k-means"`` (the paper's): the k-means starts under the caller's ``l``.
    ``init="spectral"``: the spectral split (:func:`guided_split`) first, then the k-means
    starts, all under ``l = max(l, |e^T y_spectral|)``. The balance (1) exists to rule out the
    trivial all-one-class labeling; a partition found without labels is evidence of the class
    proportions, and forcing it to ``|e^T y| <= 0.03 n`` would cut its smaller cluster. One
    limit for every run keeps their objectives (2) comparable: a looser limit alone lowers the
    objective.
    """
    kmeans = kmeans_initial_labelings(X, n_init, rng)
    if init == "k-means":
        return kmeans, limit
    y0 = guided_split(X, guide, rng)
    if y0.min() == y0.max():
        return kmeans, limit
    return [y0, *kmeans], max(limit, abs(float(y0.sum())))


def cluster_binary(
    X: np.ndarray,
    space: _ExactKernel,
    *,
    C: float,
    class_balance: float,
    n_init: int,
    max_iter: int,
    rng: np.random.RandomState,
    init: str = "k-means",
    guide: np.ndarray | None = None,
    by_omega: bool = False,
    on_iteration=None,
) -> BinarySplit:
    """Binary iterSVR from several starts; keep the labeling with the best objective (2), or
    (``by_omega``) the one of smallest omega
    (:func:`algorithms.selection.margin.lowest_margin_labeling`,
    ``beta = 1 / C``)."""
    limit = balance_limit(X.shape[0], class_balance)
    best: BinarySplit | None = None
    visited: dict[bytes, np.ndarray] = {}
    finals: dict[bytes, tuple[np.ndarray, int]] = {}
    starts, limit = initial_labelings(X, init=init, n_init=n_init, limit=limit, rng=rng,
                                      guide=guide)
    for y0 in starts:
        y, n_iter = iterate_svr(space, y0, C=C, limit=limit, max_iter=max_iter, visited=visited,
                                on_iteration=on_iteration)
        finals.setdefault(y.tobytes(), (y, n_iter))
    two_sided = [(y, n_iter) for y, n_iter in finals.values() if y.min() != y.max()]
    if by_omega and len(two_sided) > 1:
        choice = lowest_margin_labeling(
            space.K, {str(j): y for j, (y, _) in enumerate(two_sided)}, 1.0 / C,
            random_state=rng)
        two_sided = [two_sided[int(choice.chosen)]]
    for y, n_iter in (two_sided if by_omega else finals.values()):
        objective, svm = space.margin_objective(y, C)
        if best is None or objective < best.objective:
            best = BinarySplit(y, objective, n_iter, svm)
    if best is None:  # k-means put everything in one cluster every time: split on the SVR alone
        y, n_iter = iterate_svr(space, np.where(np.arange(X.shape[0]) % 2 == 0, 1.0, -1.0),
                                C=C, limit=limit, max_iter=max_iter, on_iteration=on_iteration)
        objective, svm = space.margin_objective(y, C)
        best = BinarySplit(y, objective, n_iter, svm)
    return best


# ---------------------------------------------------------------------------------------------
# Recursive bisection and the out-of-sample tree
# ---------------------------------------------------------------------------------------------


def _path_margins(node_values: np.ndarray, nodes: list[dict[str, Any]], n_clusters: int):
    """Per cluster, the smallest signed node decision along the root-to-leaf path.

    The leaf a point reaches has all path decisions on its side, so ``argmax`` over clusters is
    the tree's prediction and the values are a margin-like score for every cluster.
    """
    scores = np.full((node_values.shape[0], n_clusters), np.inf)

    def walk(node_id: int, running: np.ndarray):
        node = nodes[node_id]
        if node["label"] is not None:
            scores[:, node["label"]] = running
            return
        value = node_values[:, node["svm"]]
        walk(node["left"], np.minimum(running, -value))
        walk(node["right"], np.minimum(running, value))

    walk(0, np.full(node_values.shape[0], np.inf))
    return scores


# The paper's setting (section 4): the bounding-box width and k-means starts; reproductions of the
# paper's tables run with it.
PAPER_SETTING = {"gamma": "paper", "init": "k-means", "portfolio": False}


class IterSVR(SampledFitAttributes, MMCEstimatorMixin, ClusterMixin, BaseEstimator):
    """Maximum margin clustering by iterative SVR with the Laplacian loss (iterSVR).

    Parameters
    ----------
    n_clusters : int or "auto", default=2
        Number of clusters, >= 2; more than 2 uses recursive bisection (section 4.4).
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), read ``n_clusters_``.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    kernel : {"rbf", "linear"}, default="rbf"
        Kernel of the SVR and of the SVMs.
    gamma : float or {"local_scaling", "paper", "scale"}, default="local_scaling"
        RBF width, ``exp(-gamma ||x - x'||^2)``. ``"local_scaling"`` is the shared local width of
        :func:`algorithms.kernels.local_scaling_gamma`. The paper writes
        ``exp(-||x - x'||^2 / sigma^2)``, so ``gamma = 1 / sigma^2``; ``"paper"`` is its heuristic
        ``sigma = width_factor * D`` with ``D = sqrt(sum_k (max_k - min_k)^2)`` (footnote 5).

        .. versionchanged:: 0.2 ``"local_scaling"`` replaces ``"auto"``.
    width_factor : float, default=3.0
        Multiplier of ``D`` for ``gamma="paper"``; the paper uses 2 to 5.
    init : {"spectral", "k-means"}, default="spectral"
        Starting labels of every split: the spectral split of the kNN graph
        (:func:`algorithms.selection.candidates.spectral_partition`) beside the ``n_init`` k-means
        starts, all
        under the balance of the spectral start; or the paper's k-means starts alone.
    C : float, default=500
        Regularisation of the SVR (6) and of the SVMs, > 0; 500 in the paper.
    class_balance : float, default=0.03
        ``l / n`` in the balance constraint (1) ``-l <= e^T y <= l``; 0.3 for unbalanced data.
    n_init : int, default=10
        k-means restarts; the labeling with the best objective (2) is kept.
    max_alternations : int, default=50
        Most rounds of the alternation from each start of a binary split: fit the SVR to the
        labels, relabel by the sign of its output (the paper reports about 10); a start stops
        earlier when no label changes.

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    exact_max_n : int or None, default=1500
        Largest n clustered over every point with the full kernel matrix; above it a uniform
        random sample of ``exact_max_n`` points is clustered and every point is labelled by the
        tree of SVMs trained on the sample (section 3.2.1). None: always every point.

        .. versionchanged:: 0.2 Replaces ``solver``: ``solver="exact"`` is
           ``exact_max_n=None``; ``"auto"`` and ``"sample"`` were the same.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int or None, default=None
        Seed of the k-means starts and of the sample; an int makes fits reproducible.
    guide : clustering estimator or None, default=None
        With ``init="spectral"`` and ``n_clusters > 2``, the estimator whose k-partition steers
        the bisection (:func:`algorithms.selection.bisection.guide_partition`); it is cloned and
        given ``n_clusters`` and ``random_state``. None: the portfolio's
        best candidate with ``portfolio=True`` (the splits refine it), else
        :class:`~algorithms.cpm3c.CPM3C` with its defaults. Library only (the API uses the
        default).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point, ``0..n_clusters-1``.
    objective_ : float
        Objective (2) of the final binary split (sum over splits for ``n_clusters > 2``).
    n_iter_ : int
        Total SVR iterations of the kept runs.
    gamma_ : float
        The RBF width used.
    exact_ : bool
        Whether the clustering was computed on every point (at most ``exact_max_n`` points, or
        ``exact_max_n=None``); False when it was computed on a sample of ``exact_max_n``.

        .. versionadded:: 0.2 Replaces ``solver_`` (``"exact"``, ``"sample"``), which still
           answers with a ``DeprecationWarning`` until the next release.
    n_fit_samples_ : int
        Points the clustering was computed on (``exact_max_n`` for a sample, else n).
    tree_ : list of dict
        Bisection tree: internal nodes hold the index of their SVM, leaves their cluster.
    classifiers_ : list of KernelExpansionClassifier
        Sparse SVMs trained on the final labels (section 3.2.1), one per internal node.
    n_support_ : int
        Support vectors over all node SVMs.

    References
    ----------
    K. Zhang, I. W. Tsang, J. T. Kwok. Maximum Margin Clustering Made Practical. ICML 2007.
    Algorithm 2; SVR dual (6)-(7); bias problem (8); class balance (1).

    See Also
    --------
    algorithms.cpm3c.CPM3C : linear-time multiclass maximum margin clustering.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=60, centers=2, random_state=0)
    >>> IterSVR(random_state=0).fit(X).labels_.shape
    (60,)
    """

    params_model = IterSVRParams
    portfolio_name = "itersvr"

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int = 50,
        kernel: str = "rbf",
        gamma: float | str = "local_scaling",
        width_factor: float = 3.0,
        init: str = "spectral",
        C: float = 500.0,
        class_balance: float = 0.03,
        n_init: int = 10,
        max_alternations: int = 50,
        exact_max_n: int | None = 1500,
        portfolio: bool = True,
        random_state: int | None = None,
        guide=None,
        solver: str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.width_factor = width_factor
        self.init = init
        self.C = C
        self.class_balance = class_balance
        self.n_init = n_init
        self.max_alternations = max_alternations
        self.exact_max_n = exact_max_n
        self.portfolio = portfolio
        self.random_state = random_state
        self.guide = guide
        self.solver = solver
        self.max_iter = max_iter

    # -- fitting ----------------------------------------------------------------------------------
    def _split_balance(self) -> float:
        """Balance fraction ``l / n`` used by each binary split.

        Two clusters: ``class_balance`` as in the paper. For ``k > 2`` a split may have to separate
        one cluster from the others (1/3 against 2/3 for three equal clusters), which a near-even
        balance forbids: with k-means starts each split allows an extra ``1 / k`` of imbalance;
        with spectral starts each run keeps the imbalance of its start
        (:func:`initial_labelings`), which also finds 1:3 and 1:5 splits.
        """
        if self.n_clusters_ == 2 or self._params.init == "spectral":
            return self._params.class_balance
        return min(1.0, self._params.class_balance + 1.0 / self.n_clusters_)

    def _guide(self, X: np.ndarray, rng, progress: ProgressCallback | None
               ) -> np.ndarray | None:
        """The k-partition that guides the bisection (``init="spectral"``, k > 2)."""
        if self._params.init != "spectral" or self.n_clusters_ == 2:
            return None
        return self._bisection_guide(X, CPM3C(portfolio=False), rng, progress)

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X``; ``y`` is ignored. ``progress(step, objective, message)`` is optional."""
        self._params = self._validated_params()
        self._note_fit_input(X)
        X = as_float_matrix(X)
        X = validate_data(self, X, reset=True)
        self._resolve_n_clusters(X, progress)
        rng = check_random_state(self._params.random_state)
        sample = fit_sample(X.shape[0], self._params.exact_max_n, rng)
        X_all, X = X, (X if sample is None else X[sample])
        self.exact_ = sample is None
        self.n_fit_samples_ = X.shape[0]
        rbf = self._params.kernel == "rbf"
        self.gamma_ = (resolve_gamma(X, self._params.gamma, self._params.width_factor,
                                     random_state=rng) if rbf else 0.0)
        report(progress, 0, None,
               f"computing the {self._params.kernel} kernel for {X.shape[0]} points")
        space = _ExactKernel(pairwise_kernel(X, kernel=self._params.kernel, gamma=self.gamma_))

        step = 0

        def on_iteration(n_iter: int, loss: float, changed: int):
            nonlocal step
            step += 1
            report(progress, step, loss, f"SVR iteration {n_iter}: {changed} labels changed")

        guide = self._guide(X, rng, progress)

        def split_leaf(index: np.ndarray) -> BinarySplit:
            return cluster_binary(
                X[index], space.subset(index) if index.size < X.shape[0] else space,
                C=self._params.C, class_balance=self._split_balance(), n_init=self._params.n_init,
                max_iter=self._params.max_alternations, rng=rng, init=self._params.init,
                guide=None if guide is None else guide[index],
                by_omega=self.n_clusters_ == 2 and self._params.init == "spectral",
                on_iteration=on_iteration,
            )

        def on_split(n_leaves: int, objective: float):
            report(progress, step, objective, f"{n_leaves} of {self.n_clusters_} clusters formed")

        nodes = recursive_bisection(X.shape[0], self.n_clusters_, split_leaf, guide=guide,
                                    rows=distinct_rows(X)[1], on_split=on_split)
        self.labels_ = tree_labels(nodes, X.shape[0])
        self.objective_ = tree_objective(nodes)
        self.n_iter_ = int(sum(node.split.n_iter for node in nodes if node.left is not None))
        self._fit_tree(X, nodes)
        report(progress, step + 1, self.objective_, "trained the out-of-sample SVMs")
        self._label_every_point(X_all, sample, progress, step + 1)
        self._keep_portfolio_partition(X_all, progress, step + 2)
        return self

    def _fit_tree(self, X: np.ndarray, nodes: list[Node]) -> None:
        """One sparse SVM per internal node on its final split (section 3.2.1): the hinge-loss
        SVM that scored the kept split by (2), not a second fit."""
        self.classifiers_: list[KernelExpansionClassifier] = []
        self.tree_: list[dict[str, Any]] = []
        for node in nodes:
            if node.label is not None:
                self.tree_.append({"label": node.label, "left": None, "right": None, "svm": None})
                continue
            # The split's y > 0 side is the right child, the positive class of its SVM.
            self.classifiers_.append(KernelExpansionClassifier.from_binary_svc(
                X[node.index], node.split.svm, self._params.kernel, self.gamma_))
            self.tree_.append({"label": None, "left": node.left, "right": node.right,
                               "svm": len(self.classifiers_) - 1})
        self.n_support_ = int(sum(c.n_support for c in self.classifiers_))

    # -- prediction -------------------------------------------------------------------------------
    def _node_values(self, X) -> np.ndarray:
        check_is_fitted(self, "classifiers_")
        X = validate_data(self, as_float_matrix(X), reset=False)
        return np.column_stack([c.decision_function(X) for c in self.classifiers_])

    def decision_function(self, X) -> np.ndarray:
        """SVM decision value (n,) for two clusters (positive means cluster of the right child);
        for more, an (n, k) matrix whose argmax is the predicted cluster."""
        return self.predict_with_decision(X)[1]

    def predict(self, X) -> np.ndarray:
        """Cluster of new points by the tree of SVMs trained on the final labels."""
        return self.predict_with_decision(X)[0]

    def predict_with_decision(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(predict(X), decision_function(X))`` from one evaluation of the tree's SVMs (of
        the portfolio partition's SVM where that was kept)."""
        if self.partition_model_ is not None:
            return self._partition_predict(X)
        values = self._node_values(X)
        scores = _path_margins(values, self.tree_, self.n_clusters_)
        labels = np.argmax(scores, axis=1).astype(np.int64)
        if self.n_clusters_ == 2:
            root = self.tree_[0]
            return labels, (values[:, 0] if self.tree_[root["right"]]["label"] == 1
                            else -values[:, 0])
        return labels, scores

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state: dict[str, Any] = {
            "gamma_": self.gamma_, "exact_": self.exact_,
            # For readers of the previous release's models.
            "solver_": sampling_mode(self.exact_), "objective_": self.objective_,
            "n_iter_": self.n_iter_, "n_fit_samples_": self.n_fit_samples_, "tree_": self.tree_,
            "svms": [],
        }
        arrays: dict[str, np.ndarray] = {"labels_": self.labels_}
        for i, classifier in enumerate(self.classifiers_):
            meta, node_arrays = classifier.to_export(prefix=f"svm{i}_")
            state["svms"].append(meta)
            arrays.update(node_arrays)
        return state, arrays

    def _import_state(self, state, arrays):
        self.gamma_ = float(state["gamma_"])
        self.exact_ = bool(state["exact_"]) if "exact_" in state else state["solver_"] == "exact"
        self.objective_ = float(state["objective_"])
        self.n_iter_ = int(state["n_iter_"])
        self.labels_ = arrays["labels_"]
        self.n_fit_samples_ = int(state.get("n_fit_samples_", self.labels_.size))
        self.tree_ = state["tree_"]
        self.classifiers_ = [
            KernelExpansionClassifier.from_export(meta, arrays, prefix=f"svm{i}_")
            for i, meta in enumerate(state["svms"])
        ]
        self.n_support_ = int(sum(c.n_support for c in self.classifiers_))
