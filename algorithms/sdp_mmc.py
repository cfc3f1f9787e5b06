"""SDP maximum margin clustering: two-class, multi-class and semi-supervised.

Xu 2007, "Convex Large Margin Training Techniques: Unsupervised, Semi-supervised, and Robust
Support Vector Machines" (PhD thesis, University of Waterloo), chapters 3 and 4.

* Two-class, SDP (3.5): relax the label matrix ``M = yy^T`` to ``M >= 0`` (PSD), ``diag(M) = e``,
  class balance ``-eps e <= M e <= eps e``, and minimise the inverse soft margin
  ``omega(M) = max_{0<=lambda<=1} lambda^T e - 1/(2 beta) lambda^T (K o M) lambda`` through its
  Schur-complement form. The thesis drops the bias and centres the kernel (section 3.1), so ``K``
  is ``H K H``. Labels come from ``sqrt(alpha_1) v_1`` of ``M`` (Theorem 1) or, optionally, from
  randomized hyperplane rounding that keeps the labeling of smallest ``omega(yy^T)`` (footnote 3).
* More than two clusters, default (``multiclass="bisection"``): recursive bisection with (3.5)
  on one cluster's points per split, guided by CPM3C's multi-class max-margin k-partition
  (:mod:`algorithms.selection.bisection`, as iterSVR's section 4.4).
* Multi-class, SDP (4.8) (``multiclass="joint"``): ``M_ij = delta(y_i, y_j)``,
  ``D_ir = delta(y_i, r)``, relaxed to
  ``[[I, D^T], [D, M]] >= 0``, ``0 <= M, D <= 1``, ``diag(M) = e``, cluster sizes
  ``(1/k - eps) n <= M e <= (1/k + eps) n``. The ``(nk+1)``-square block
  ``[[I (x) K, p], [p^T, .]]`` is, by the Schur complement,
  ``p^T (I (x) K)^{-1} p = sum_r ||L^{-1} p_r||^2`` with ``K = L L^T`` fixed data, so it is
  imposed as one second-order cone instead of a large PSD block. Unsupervised, the problem is
  symmetric in the class columns and collapses to "maximise ``<K, M>``" over balanced ``M``
  (derivation and numbers in :func:`algorithms.sdp_mmc_programs.solve_multiclass_sdp_symmetric`,
  which solves that form);
  labels are recovered from ``M`` (k-means on its rank-k factor, started from the labeled class
  means when partial labels are given), and ``objective_`` is the margin objective at the labels.
* Semi-supervised: two-class adds S1 ``M_ij = y_i y_j`` (labeled pairs) and S2
  ``sum_{labeled i} M_ij >= 2 - t`` (each unlabeled point shares a class with a labeled one),
  section 3.5; multi-class adds ``M_ij = delta(y_i, y_j)`` and ``D_ir = delta(y_i, r)``
  (section 4.3).
* Out-of-sample: a soft-margin SVM (``C = 1 / beta``) on the recovered labels with the same kernel.
* Repeated rows (low-rank solver, no partial labels): (3.5) with ``M_ij = 1`` on a point's
  copies is (3.5) over the distinct rows, each weighted by its copies in the balance and in the
  margin's dual (:func:`algorithms.lowrank_sdp.solve_two_class_lowrank`), and the copies share a
  label; the balance allows the imbalance of the largest row against the rest when it must.
  Over the copies themselves the solver stalls on the flat kernel of a repeated point and may
  split its copies, and the problem is as large as the number of points, not of distinct rows.

Conditioning: ``omega`` depends on ``K / beta`` only, so the kernel is scaled to unit mean
self-similarity (``trace(K) = n``) and ``beta`` is interpreted on that scale: the same ``beta``
means the same trade-off for any feature scale, and SCS sees entries of order one. The
multi-class cone is written for ``beta * p``, which keeps ``1 / beta^2`` out of the data.

Solver: ``"lowrank"`` (default; every solve of (3.5)) is the Burer-Monteiro augmented Lagrangian
of :mod:`algorithms.lowrank_sdp` on ``M = V V^T`` with a certified duality gap (reported as
``certificate_``), and unsupervised (4.8) in its collapsed form on a nonnegative factor of
``[[1, sqrt(k) d^T], [sqrt(k) d, M]]`` (:func:`algorithms.lowrank_sdp.solve_multiclass_lowrank`);
(4.8) with partial labels goes to SCS. ``"scs"`` and ``"clarabel"`` are the reference
formulations of :mod:`algorithms.sdp_mmc_programs`: cvxpy with SCS (first-order) or Clarabel
(interior point), whose dense n^2 x n^2 KKT system rules it out beyond about n = 100. Labels
need only the leading structure of ``M``, so SCS runs at a loose tolerance (1e-3), which needs
several times fewer iterations than its default and gives the same labels. Each fit is a single
solve, so there is nothing to warm-start from. Every solve's status is
checked: inaccurate -> ``warnings_``, anything else -> :class:`~algorithms.conic.SDPSolverError`
with the solver's status.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.conic import SDPSolverError
from algorithms.cpm3c import CPM3C
from algorithms.inputs import (
    as_float_matrix,
    check_partial_labels,
)
from algorithms.kernels import (
    copies_of_rows,
    distinct_rows,
    pairwise_kernel,
    resolve_gamma,
    squared_distances,
)
from algorithms.out_of_sample import KernelExpansionClassifier
from algorithms.params.common import (
    AUTO,
    DEPRECATED,
)
from algorithms.params.sdp_mmc import (
    LOWRANK_TWO_CLASS_MAX_N as LOWRANK_TWO_CLASS_MAX_N,
)
from algorithms.params.sdp_mmc import (
    MULTICLASS_MAX_N as MULTICLASS_MAX_N,
)
from algorithms.params.sdp_mmc import (
    TWO_CLASS_MAX_N as TWO_CLASS_MAX_N,
)
from algorithms.params.sdp_mmc import (
    SDPMMCParams as SDPMMCParams,
)
from algorithms.params.sdp_mmc import (
    SolverParam as SolverParam,
)
from algorithms.params.sdp_mmc import (
    label_balance_problem as label_balance_problem,
)
from algorithms.params.sdp_mmc import (
    label_range_problem as label_range_problem,
)
from algorithms.params.sdp_mmc import (
    partial_labels_problem as partial_labels_problem,
)
from algorithms.progress import ProgressCallback, report
from algorithms.rounding import (
    balance_limit,
    balanced_signs,
    labels_from_label_matrix,
    psd_factor,
    randomized_rounding,
    two_cluster_labels,
)
from algorithms.sampling import fit_sample
from algorithms.sdp_mmc_programs import (
    labels_from_assignment,
    multiclass_margin_objective,
    solve_multiclass_sdp,
    solve_multiclass_sdp_symmetric,
    solve_two_class_sdp,
)
from algorithms.selection.bisection import (
    LeafSplit,
    guided_split,
    keep_guide_clusters_whole,
    recursive_bisection,
    tree_labels,
    tree_objective,
)
from algorithms.selection.margin import (
    choose_with_spectral_candidate,
    margin_kernel,
    two_class_margin_objective,
)

# ---------------------------------------------------------------------------------------------
# Kernel preparation
# ---------------------------------------------------------------------------------------------


def median_heuristic_gamma(X: np.ndarray) -> float:
    """``gamma = 1 / median ||x_i - x_j||^2`` over pairs ``i != j``: the width "related to the
    scale of the problem" the thesis searches around (section 3.4)."""
    D = squared_distances(X)
    off = D[~np.eye(D.shape[0], dtype=bool)]
    median = float(np.median(off[off > 0])) if np.any(off > 0) else 0.0
    if median <= 0:
        raise ValueError("gamma='paper' needs points that are not all identical")
    return 1.0 / median


# ---------------------------------------------------------------------------------------------
# Estimator
# ---------------------------------------------------------------------------------------------


@dataclass
class _TwoClassFit:
    """One solve of SDP (3.5) and the labels rounded from it."""

    labels: np.ndarray
    M: np.ndarray
    omega: float
    scores: np.ndarray
    notes: list[str]
    n_iter: int
    certificate: dict | None
    rounded_objective: float | None


# The thesis's setting: its median-distance width and the multi-class SDP (4.8); reproductions of
# the thesis's tables run with it.
PAPER_SETTING = {"gamma": "paper", "multiclass": "joint", "spectral_candidate": False,
                 "portfolio": False}


# Fitted attributes only some fits set (solver, rounding, k); reported with the result.
_OPTIONAL_RESULTS = ("rounded_objective_", "relaxation_objective_", "certificate_",
                     "candidate_objectives_", "chosen_candidate_")


class SDPMMC(MMCEstimatorMixin, ClusterMixin, BaseEstimator):
    """Maximum margin clustering by semidefinite programming (Xu, thesis chapters 3-4).

    Parameters
    ----------
    n_clusters : int or "auto", default=2
        2 solves SDP (3.5); more solves SDP (3.5) per split or SDP (4.8) (``multiclass``).
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), read ``n_clusters_``.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    kernel : {"rbf", "linear"}, default="rbf"
    gamma : float or {"local_scaling", "paper", "scale"}, default="local_scaling"
        RBF width ``exp(-gamma ||x - x'||^2)``; the thesis writes ``exp(-||x-x'||^2 / sigma^2)``,
        so ``gamma = 1 / sigma^2``. ``"local_scaling"``: the shared local-scaling width
        (:func:`algorithms.kernels.local_scaling_gamma`); ``"scale"``: scikit-learn's
        ``1 / (n_features * X.var())``. ``"paper"``: the thesis's width "related
        to the scale of the problem", ``1 / median ||x_i - x_j||^2`` (section 3.4); the paper
        rows run with it (``PAPER_SETTING``).

        .. versionchanged:: 0.2 ``"local_scaling"`` replaces ``"auto"``.
    C : float, default=100
        Weight of the slacks in the soft margin, ``1/2 ||w||^2 + C sum xi``; the thesis writes
        ``beta/2 ||w||^2 + sum xi`` with ``beta = 1 / C`` = 0.01 ("no significant effect",
        footnote 4 of chapter 3). Applied to the kernel scaled to unit mean self-similarity.

        .. versionchanged:: 0.2 Replaces ``beta`` (``C = 1 / beta``).
    class_balance : float, default=0.1
        ``-l <= e^T y <= l`` of (3.5) with ``l = class_balance * n``: two clusters, and every
        split of ``multiclass="bisection"``.
    size_band : float, default=0.1
        ``multiclass="joint"``: cluster sizes within ``(1/k -+ size_band) n`` (4.8).

        .. versionadded:: 0.2 Before, ``class_balance`` also set this band.
    multiclass : {"bisection", "joint"}, default="bisection"
        ``n_clusters > 2``. ``"bisection"``: recursive bisection with SDP (3.5) per split on the
        low-rank solver (:meth:`_fit_bisection`), much faster than (4.8) on SCS. ``"joint"``: the
        thesis's multi-class SDP (4.8), the only route for partial labels with k > 2.
    rounding : {"eigenvector", "randomized"}, default="eigenvector"
        Two-class recovery. "randomized" draws ``n_rounding`` random hyperplanes from the factor
        of ``M`` and keeps the balanced labeling with the smallest ``omega(yy^T)``. With RBF kernels
        and small ``beta`` the margin objective can prefer splits that cut through classes, so the
        eigenvector (Theorem 1) is the default.
    n_rounding : int, default=50
        Random hyperplanes drawn by ``rounding="randomized"`` (footnote 3).
    spectral_candidate : bool, default=True
        Two clusters without partial labels: the rounding of (3.5) and the spectral partition of
        the kNN graph are both scored by ``omega(yy^T)`` and the smaller is kept
        (:func:`algorithms.selection.margin.choose_with_spectral_candidate`). The relaxation is not
        tight,
        and on curved clusters its rounding can have a far larger ``omega`` than the spectral
        partition. False is the thesis's method (``PAPER_SETTING``).
    exact_max_n : int or None, default=800
        Largest n whose relaxation is solved over every point. Above it the fit solves it over a
        random sample of ``exact_max_n`` points, stratified over k-means cells of ``X`` so that
        its clusters keep the data's proportions (:func:`algorithms.sampling.fit_sample`), with
        every partially labelled point among them. The out-of-sample SVM trained on the
        sample's labels (section 3.4) then labels every point, in time and memory linear in n.
        The low-rank solver's cost grows steeply with n (at the local width nearly every point
        is a support vector of the inner SVM dual), so the default keeps one solve to seconds.
        None: always every point.
    solver : {"lowrank", "scs", "clarabel"}, default="lowrank"
        ``"lowrank"``: :func:`algorithms.lowrank_sdp.solve_two_class_lowrank` (every solve of
        (3.5)) and :func:`algorithms.lowrank_sdp.solve_multiclass_lowrank` (unsupervised (4.8));
        (4.8) with partial labels runs SCS. ``"scs"`` and ``"clarabel"`` solve the cvxpy
        formulation, the reference.
    sdp_tol : float, default=1e-3
        Stopping tolerance of the SDP solver; labels come from the leading structure of ``M``
        and do not need more.

        .. versionchanged:: 0.2 Replaces ``tol``.
    sdp_max_iter : int, default=20000
        Iteration limit of the cvxpy solver (SCS or Clarabel).

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int or None, default=None
        Seeds randomized rounding and the k-means of multi-class recovery.
    guide : clustering estimator or None, default=None
        ``multiclass="bisection"`` with ``n_clusters > 2``: the estimator whose k-partition
        steers the bisection (:func:`algorithms.selection.bisection.guide_partition`); it is
        cloned and given ``n_clusters`` and ``random_state``. None: the portfolio's
        best candidate with ``portfolio=True`` (the splits refine it), else
        :class:`~algorithms.cpm3c.CPM3C` with its defaults. Library only (the API uses the
        default).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point, ``0..k-1``; with partial labels, known points keep theirs
        and cluster ``r`` is class ``r``.
    label_matrix_ : ndarray of shape (n_fit_samples_, n_fit_samples_)
        The relaxed ``M`` of (3.5) (entries in [-1, 1]) or (4.8) (entries in [0, 1]).
    assignment_ : ndarray of shape (n_fit_samples_, n_clusters)
        The relaxed ``D`` of (4.8) (multi-class only).
    scores_ : ndarray of shape (n_fit_samples_,)
        Two-class relaxed labels ``sqrt(alpha_1) v_1`` (bisection: those of the first split).
    objective_ : float
        Two-class: optimal value of the SDP (3.5), the relaxed inverse squared margin ``omega``.
        Multi-class: ``omega`` of Theorem 2 at the recovered labels
        (:func:`algorithms.sdp_mmc_programs.multiclass_margin_objective`); the relaxed value of
        (4.8) is not a margin.
    relaxation_objective_ : float
        Multi-class: the optimal value of the relaxation, ``n - e^T d - <K, M> / (2 beta)``
        unsupervised (:func:`algorithms.sdp_mmc_programs.solve_multiclass_sdp_symmetric`).
    rounded_objective_ : float
        Two-class with randomized rounding: ``omega(yy^T)`` of the labeling the rounding kept
        (``labels_`` unless the portfolio kept another partition, ``candidate_``).
    candidate_objectives_ : dict
        Two-class with ``spectral_candidate``: ``omega(yy^T)`` of each distinct candidate,
        ``{"relaxation": ..., "spectral": ...}`` (empty when both are one partition).
    chosen_candidate_ : {"relaxation", "spectral"}
        The candidate whose labels were kept.
    gamma_ : float
    solver_ : str
        The solver that ran: "lowrank", "scs" or "clarabel" (SCS for (4.8) with partial
        labels under ``solver="lowrank"``).

        .. versionchanged:: 0.2 Spelled as the ``solver`` values (was "SCS", "CLARABEL").
    certificate_ : dict
        Low-rank solver only: status, objective, certified lower bound, relative gap,
        infeasibility and the dual slack's smallest eigenvalue (bisection: the split with the
        largest gap).
    warnings_ : list of str
        Solver reports worth knowing (inaccurate solutions), returned with job results.
    classifier_ : KernelExpansionClassifier
        Out-of-sample SVM on the recovered labels (section 3.4).
    n_iter_ : int
        Solver iterations of the SDP.
    exact_ : bool
        Whether the relaxation was solved over every point (at most ``exact_max_n`` points, or
        ``exact_max_n=None``); False when it was solved over a sample of ``exact_max_n``.

        .. versionadded:: 0.2
    n_fit_samples_ : int
        Points the relaxation was solved over (``exact_max_n`` when the fit sampled, else n);
        the relaxed matrices and ``scores_`` are over these points, in the order of ``X``.
    n_support_ : int

    References
    ----------
    L. Xu. Convex Large Margin Training Techniques: Unsupervised, Semi-supervised, and Robust
    Support Vector Machines. PhD thesis, University of Waterloo, 2007. SDP (3.5), Theorem 1,
    S1/S2 of section 3.5; Theorem 2 (4.2), SDP (4.8), section 4.3.

    See Also
    --------
    algorithms.itersvr.IterSVR : fast two-class MMC for large n.
    algorithms.cpm3c.CPM3C : linear-time multi-class MMC.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    >>> SDPMMC(random_state=0).fit(X).labels_.shape
    (30,)
    """

    params_model = SDPMMCParams
    portfolio_name = "sdp_mmc"
    _result_attributes = (*MMCEstimatorMixin._result_attributes, *_OPTIONAL_RESULTS)

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int = 50,
        kernel: str = "rbf",
        gamma: float | str = "local_scaling",
        C: float = 100.0,
        class_balance: float = 0.1,
        size_band: float = 0.1,
        multiclass: str = "bisection",
        rounding: str = "eigenvector",
        n_rounding: int = 50,
        spectral_candidate: bool = True,
        exact_max_n: int | None = 800,
        solver: str = "lowrank",
        sdp_tol: float = 1e-3,
        sdp_max_iter: int = 20000,
        portfolio: bool = True,
        random_state: int | None = None,
        guide=None,
        beta: float | str = DEPRECATED,
        tol: float | str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.C = C
        self.class_balance = class_balance
        self.size_band = size_band
        self.multiclass = multiclass
        self.rounding = rounding
        self.n_rounding = n_rounding
        self.spectral_candidate = spectral_candidate
        self.exact_max_n = exact_max_n
        self.solver = solver
        self.sdp_tol = sdp_tol
        self.sdp_max_iter = sdp_max_iter
        self.portfolio = portfolio
        self.random_state = random_state
        self.guide = guide
        self.beta = beta
        self.tol = tol
        self.max_iter = max_iter

    def _partial_labels(self, y, n: int) -> np.ndarray | None:
        labels = check_partial_labels(y, n)
        if labels is None or not np.any(labels >= 0):
            return None
        return labels

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X``; ``y`` optional partial labels (``-1`` = unknown) for semi-supervision."""
        self._params = self._validated_params()
        for name in _OPTIONAL_RESULTS:  # a refit must not report the previous fit's extras
            if hasattr(self, name):
                delattr(self, name)
        X = as_float_matrix(X)
        X = validate_data(self, X, reset=True)
        given = self._partial_labels(y, X.shape[0])
        if given is not None and self._params.n_clusters == AUTO:
            raise ValueError(partial_labels_problem(
                AUTO, self._params.multiclass, given, self._params.class_balance,
                self._params.size_band))
        self._resolve_n_clusters(X, progress)
        problem = partial_labels_problem(self.n_clusters_, self._params.multiclass, given,
                                         self._params.class_balance, self._params.size_band,
                                         self._params.exact_max_n)
        if problem:
            raise ValueError(problem)
        X_all, sample = X, fit_sample(
            X.shape[0], self._params.exact_max_n, check_random_state(self._params.random_state),
            keep=None if given is None else np.flatnonzero(given >= 0), X=X)
        X, labels = ((X, given) if sample is None else
                     (X[sample], None if given is None else given[sample]))
        n, k = X.shape[0], self.n_clusters_
        self.exact_ = sample is None
        self.n_fit_samples_ = n
        if self._params.kernel == "rbf":
            self.gamma_ = (median_heuristic_gamma(X) if self._params.gamma == "paper"
                           else resolve_gamma(X, self._params.gamma,
                                              random_state=self._params.random_state))
        else:
            self.gamma_ = 0.0
        joint = k > 2 and (self._params.multiclass == "joint" or labels is not None)
        # Partial labels with k > 2 break (4.8)'s symmetry: that program stays on cvxpy.
        on_cvxpy = self._params.solver != "lowrank" or (joint and labels is not None)
        self.solver_ = ((self._params.solver if self._params.solver != "lowrank" else "scs")
                        if on_cvxpy else "lowrank")
        self.warnings_: list[str] = []
        kind = ("two-class SDP (3.5)" if k == 2 else f"multi-class SDP (4.8), k={k}" if joint
                else f"two-class SDP (3.5) by recursive bisection, k={k}")
        report(progress, 0, None, f"building the {kind} for {n} points")
        K_raw = pairwise_kernel(X, kernel=self._params.kernel, gamma=self.gamma_)
        report(progress, 1, None, f"solving the {kind} with {self.solver_}")
        last_step = 2
        if k == 2:
            self._fit_two_class(X, K_raw, labels, progress)
            last_step = 3
        elif joint:
            self._fit_multiclass(K_raw, labels, progress)
        else:
            last_step = self._fit_bisection(X, K_raw, progress)
        if np.unique(self.labels_).size < 2:
            raise SDPSolverError("the relaxed solution put every point in one cluster")
        self.classifier_ = KernelExpansionClassifier.fit(
            X, self.labels_, kernel=self._params.kernel, gamma=self.gamma_, C=self._params.C,
            K=K_raw)
        self.n_support_ = self.classifier_.n_support
        report(progress, last_step + 1, self.objective_, "trained the out-of-sample SVM")
        self._label_every_point(X_all, sample, progress, last_step + 2)
        if sample is not None and given is not None:  # given labels stand, as in an exact fit
            known = given >= 0
            self.labels_[known] = given[known]
        self._keep_portfolio_partition(X_all, progress, last_step + 3,
                                       partial_labels=given is not None)
        return self

    def _fit_two_class(self, X: np.ndarray, K_raw: np.ndarray, labels, progress) -> None:
        signs = None
        if labels is not None:
            signs = np.where(labels < 0, 0.0, np.where(labels == 1, 1.0, -1.0))
        copies = None
        if signs is None and self.solver_ == "lowrank":
            copies = copies_of_rows(X)
        limit = balance_limit(K_raw.shape[0], self._params.class_balance)
        fit = self._two_class(K_raw, signs, limit, progress, copies=copies)
        self.warnings_ += fit.notes
        self.label_matrix_, self.objective_, self.scores_ = fit.M, fit.omega, fit.scores
        self.n_iter_ = fit.n_iter
        if fit.certificate is not None:
            self.certificate_ = fit.certificate
        if fit.rounded_objective is not None:
            self.rounded_objective_ = fit.rounded_objective
        self.labels_ = fit.labels
        if labels is None and self._params.spectral_candidate:
            report(progress, 3, fit.omega, "scoring the spectral partition by omega")
            choice = choose_with_spectral_candidate(X, fit.labels, K_raw, self._beta,
                                                    check_random_state(self._params.random_state))
            self.labels_ = two_cluster_labels(choice.labels)
            self.candidate_objectives_ = choice.objectives
            self.chosen_candidate_ = choice.chosen

    def _two_class(self, K_raw: np.ndarray, signs: np.ndarray | None, limit: float,
                   progress, groups: np.ndarray | None = None,
                   copies: np.ndarray | None = None) -> _TwoClassFit:
        """SDP (3.5) on ``K_raw`` under ``|e^T y| <= limit``, and its labels (Theorem 1);
        ``groups``: the low-rank solver keeps each group on one side (a cvxpy solver ignores
        them, the caller then moves whole groups); ``copies`` (low-rank solver): the index of
        each point's distinct row (:func:`algorithms.kernels.copies_of_rows`), the program then
        solved over the distinct rows, each weighted by its number of copies (and ``groups``
        read on them), and the copies labelled alike."""
        K = margin_kernel(K_raw)  # no bias in (3.5): centre in feature space (section 3.1)
        certificate = rounded = None
        if copies is not None and groups is None:
            # Copies share a side, so a row with more copies than (n + limit) / 2 would leave
            # (3.5) infeasible: allow the imbalance of that row alone against the rest (whole
            # groups already carry the imbalance their caller allows).
            limit = max(limit, 2.0 * np.bincount(copies).max() - K_raw.shape[0])
        if copies is not None:
            first = np.unique(copies, return_index=True)[1]
            M, omega, notes, n_iter, certificate = self._solve_two_class_lowrank(
                K[np.ix_(first, first)], limit, None, progress,
                None if groups is None else groups[first], weights=np.bincount(copies))
            M = M[np.ix_(copies, copies)]
        elif self.solver_ == "lowrank":
            M, omega, notes, n_iter, certificate = self._solve_two_class_lowrank(
                K, limit, signs, progress, groups)
        else:
            M, omega, notes, n_iter = solve_two_class_sdp(
                K, beta=self._beta, limit=limit, y_partial=signs, solver=self.solver_,
                tol=self._params.sdp_tol, max_iter=self._params.sdp_max_iter,
            )
        report(progress, 2, omega, f"rounding the label matrix ({self._params.rounding})")
        scores = psd_factor(M, rank=1)[:, 0]
        if signs is not None:  # orient the eigenvector to agree with the known labels
            if scores[signs != 0] @ signs[signs != 0] < 0:
                scores = -scores
        elif scores[0] < 0:
            scores = -scores
        if self._params.rounding == "randomized":
            Z = psd_factor(K)
            y_pm, rounded, _ = randomized_rounding(
                M, lambda y_: two_class_margin_objective(Z, y_, self._beta), limit=limit,
                n_trials=self._params.n_rounding, random_state=self._params.random_state,
            )
        else:
            y_pm = balanced_signs(scores, limit)
        if signs is not None:
            known = signs != 0
            if y_pm[known] @ signs[known] < 0:
                y_pm = -y_pm
            y_pm[known] = signs[known]
            labels = (y_pm > 0).astype(np.int64)
        else:
            if copies is not None:  # a tie of scores on a row's copies may straddle the cut
                y_pm = keep_guide_clusters_whole(y_pm > 0, copies)
            labels = two_cluster_labels(y_pm)
        return _TwoClassFit(labels, M, omega, scores, list(notes), int(n_iter), certificate,
                            rounded)

    def _fit_bisection(self, X: np.ndarray, K_raw: np.ndarray, progress) -> int:
        """``multiclass="bisection"``: recursive bisection
        (:mod:`algorithms.selection.bisection`), each split the two-class SDP (3.5) on one
        cluster's points.

        The balance of (3.5) (``|e^T y| <= class_balance n``) would cut one of three equal
        clusters in half at the first split. Each split therefore allows the imbalance of its
        spectral start (:func:`algorithms.selection.bisection.guided_split`, keeping the clusters
        of the
        guide, :func:`algorithms.selection.bisection.guide_partition`, whole), as iterSVR does. On
        the
        low-rank solver the SDP itself keeps each guide cluster on one side (``M`` constant on
        pairs of guide clusters: one factor row per cluster, a far smaller problem); with a
        cvxpy solver its labels are moved so that no cluster of the guide is cut.
        """
        rng = check_random_state(self._params.random_state)
        guide = self._bisection_guide(X, CPM3C(portfolio=False), rng, progress, step=1)
        splits: list[_TwoClassFit] = []

        events = 1  # after step 1, "solving"

        def split_leaf(index: np.ndarray) -> LeafSplit:
            def leaf_progress(step, objective, message):  # one running count over the splits
                nonlocal events
                events += 1
                report(progress, events, objective, f"{index.size} points: {message}")

            leaf_guide = guide[index]
            start = guided_split(X[index], leaf_guide, rng)
            limit = max(balance_limit(index.size, self._params.class_balance),
                        abs(float(start.sum())))
            groups = leaf_guide if np.unique(leaf_guide).size >= 2 else None
            copies = None
            if self.solver_ == "lowrank":  # a point's copies in its guide cluster
                copies = copies_of_rows(np.column_stack([X[index], leaf_guide]))
            fit = self._two_class(K_raw[np.ix_(index, index)], None, limit, leaf_progress,
                                  groups, copies)
            splits.append(fit)
            y = keep_guide_clusters_whole(fit.labels == 1, leaf_guide)
            return LeafSplit(y, fit.omega, fit)

        nodes = recursive_bisection(X.shape[0], self.n_clusters_, split_leaf, guide=guide,
                                    rows=distinct_rows(X)[1])
        self.labels_ = tree_labels(nodes, X.shape[0])
        self.objective_ = tree_objective(nodes)
        self.n_iter_ = int(sum(fit.n_iter for fit in splits))
        self.scores_ = splits[0].scores
        for fit in splits:
            self.warnings_ += fit.notes
        certificates = [fit.certificate for fit in splits if fit.certificate is not None]
        if certificates:  # the weakest of the splits' certificates
            self.certificate_ = max(certificates, key=lambda c: c["relative_gap"] or 0.0)
        return events

    def _solve_two_class_lowrank(self, K, limit, signs, progress, groups=None, weights=None):
        from algorithms.lowrank_sdp import solve_two_class_lowrank

        def on_iteration(step, objective, infeasibility):
            report(progress, 1, objective,
                   f"augmented-Lagrangian iteration {step}: infeasibility {infeasibility:.1e}")

        solved = solve_two_class_lowrank(
            K, beta=self._beta, limit=limit, y_partial=signs, groups=groups, weights=weights,
            tol=self._params.sdp_tol,
            random_state=self._params.random_state if self._params.random_state is not None else 0,
            on_iteration=on_iteration,
        )
        result = solved.result
        return solved.M, solved.omega, list(result.messages), result.n_iter, result.certificate()

    def _solve_multiclass_lowrank(self, K: np.ndarray, progress):
        """Unsupervised (4.8) in its collapsed form on the low-rank solver, started from the
        k-partition of the kernel's leading eigenvectors (a spectral relaxation)."""
        from algorithms.lowrank_sdp import solve_multiclass_lowrank

        def on_iteration(step, objective, infeasibility):
            report(progress, 1, objective,
                   f"augmented-Lagrangian iteration {step}: infeasibility {infeasibility:.1e}")

        random_state = self._params.random_state if self._params.random_state is not None else 0
        solved = solve_multiclass_lowrank(
            K, self.n_clusters_, beta=self._beta, balance=self._params.size_band,
            start_labels=labels_from_label_matrix(K, self.n_clusters_, random_state),
            tol=self._params.sdp_tol, random_state=random_state, on_iteration=on_iteration,
        )
        result = solved.result
        self.certificate_ = result.certificate()
        D = np.repeat(solved.d[:, None], self.n_clusters_, axis=1)
        return solved.M, D, solved.omega, list(result.messages), result.n_iter

    def _fit_multiclass(self, K_raw: np.ndarray, labels, progress) -> None:
        K = margin_kernel(K_raw)
        # Unsupervised (4.8) collapses to a program in (M, d): solve that one (same labels).
        if self.solver_ == "lowrank":
            M, D, omega, notes, self.n_iter_ = self._solve_multiclass_lowrank(K, progress)
        else:
            solve = solve_multiclass_sdp_symmetric if labels is None else solve_multiclass_sdp
            extra = {} if labels is None else {"labels": labels}
            M, D, omega, notes, self.n_iter_ = solve(
                K, self.n_clusters_, beta=self._beta, balance=self._params.size_band,
                solver=self.solver_, tol=self._params.sdp_tol,
                max_iter=self._params.sdp_max_iter, **extra,
            )
        self.warnings_ += notes
        self.label_matrix_, self.assignment_, self.relaxation_objective_ = M, D, omega
        report(progress, 2, omega, "rounding: k-means on the factor of M" if labels is None
               else "rounding: clusters of the unlabeled block of M, matched to the classes")
        found = labels_from_assignment(D, M, labels, self.n_clusters_, self._params.random_state, K)
        if labels is not None:
            known = labels >= 0
            found[known] = labels[known]
        self.labels_ = found
        self.objective_ = multiclass_margin_objective(K, found, self.n_clusters_, self._beta)

    # -- prediction -------------------------------------------------------------------------------
    def decision_function(self, X) -> np.ndarray:
        """SVM decision values: (n,) for two clusters (positive = cluster 1), else (n, k)."""
        check_is_fitted(self, "classifier_")
        if self.partition_model_ is not None:
            return self._partition_predict(X)[1]
        X = validate_data(self, as_float_matrix(X), reset=False)
        return self.classifier_.decision_function(X)

    def predict(self, X) -> np.ndarray:
        """Cluster of new points by the SVM trained on the recovered labels (section 3.4)."""
        return self.predict_with_decision(X)[0]

    def predict_with_decision(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(predict(X), decision_function(X))`` from one kernel evaluation."""
        if self.partition_model_ is not None:
            return self._partition_predict(X)
        decision = self.decision_function(X)
        return self.classifier_.labels_from_decision(decision).astype(np.int64), decision

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        meta, arrays = self.classifier_.to_export(prefix="svm_")
        state = {"gamma_": self.gamma_, "solver_": self.solver_, "objective_": self.objective_,
                 "n_iter_": self.n_iter_, "warnings_": list(self.warnings_), "svm": meta}
        arrays = {**arrays, "labels_": self.labels_}
        return state, arrays

    def _import_state(self, state, arrays):
        self.gamma_ = float(state["gamma_"])
        self.solver_ = state["solver_"]
        self.objective_ = float(state["objective_"])
        self.n_iter_ = int(state["n_iter_"])
        self.warnings_ = list(state["warnings_"])
        self.labels_ = arrays["labels_"]
        self.classifier_ = KernelExpansionClassifier.from_export(state["svm"], arrays,
                                                                 prefix="svm_")
        self.n_support_ = self.classifier_.n_support


