"""GMMC: generalized maximum margin clustering with unsupervised kernel learning.

Valizadegan and Jin 2006, "Generalized Maximum Margin Clustering and Unsupervised Kernel
Learning" (NIPS). The soft-margin dual (10) is solved with a normalized graph Laplacian, its null
vector lifted, in place of ``K^{-1}`` (Remark II), in a scaled form that a Burer-Monteiro
augmented Lagrangian solves with an optimality certificate; labels are the signs of the KKT
eigenvector (section 3.1); the solvers of (10) are in :mod:`algorithms.gmmc_solver`. Kernel
learning (12) is exponentiated-gradient ascent over the weights of several Laplacians. The
reading of the paper behind these choices is in ``docs/gmmc_design.md``; the defaults' scores
against scikit-learn's clusterers in ``docs/defaults.md``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.cpm3c import CPM3C
from algorithms.gmmc_solver import (
    EXACT_SPLIT_MAX_GROUPS,
    GMMCSolution,
    relax_whole_groups,
    solve_gmmc_cvxpy,
    solve_gmmc_lowrank,
    split_from_factor,
    split_whole_groups,
)
from algorithms.inputs import (
    as_float_matrix,
)
from algorithms.kernels import (
    distinct_rows,
    local_scaling_gamma,
    normalized_laplacian,
    squared_distances,
)
from algorithms.out_of_sample import KernelExpansionClassifier, with_intercept
from algorithms.params.common import DEPRECATED, LOCAL_SCALING
from algorithms.params.gmmc import (
    GMMCParams as GMMCParams,
)
from algorithms.progress import ProgressCallback, report
from algorithms.rounding import two_cluster_labels
from algorithms.sampling import fit_sample
from algorithms.selection.bisection import (
    LeafSplit,
    keep_guide_clusters_whole,
    recursive_bisection,
    tree_labels,
    tree_objective,
)
from algorithms.selection.margin import choose_with_spectral_candidate
from algorithms.threads import small_problem_threads

# ---------------------------------------------------------------------------------------------
# Kernels and the Laplacian "inverse kernel" (Remark II, section 3.3)
# ---------------------------------------------------------------------------------------------


def distance_range(sq_dist: np.ndarray) -> float:
    """Range (max - min) of the pairwise distances between distinct points (section 4)."""
    iu = np.triu_indices_from(sq_dist, k=1)
    dist = np.sqrt(sq_dist[iu])
    return float(dist.max() - dist.min())


def width_fractions_gammas(sq_dist: np.ndarray, fractions) -> np.ndarray:
    """``gamma = 1 / (2 sigma^2)`` for ``sigma = fraction * range of pairwise distances``.

    The paper writes the RBF kernel ``exp(-||x - x'||^2 / (2 sigma^2))`` and picks ``sigma`` as a
    fraction of the range of the pairwise distances (section 4: 10 %, 20 %, ..., 100 %).
    """
    spread = distance_range(sq_dist)
    if spread <= 0:
        raise ValueError("all pairwise distances are equal: the paper's RBF widths are undefined")
    sigma = np.asarray(fractions, dtype=np.float64) * spread
    return 1.0 / (2.0 * sigma**2)


def laplacian_precision(K: np.ndarray, degree_regularization: float = 0.0) -> np.ndarray:
    """``L_sym + u u^T``: the positive definite stand-in for ``K^{-1}`` (Remark II).

    ``L_sym = I - D^{-1/2} K D^{-1/2}`` (Chung's normalization; the paper's printed
    ``I - D^{1/2} K D^{1/2}`` is indefinite and makes (10) infeasible), ``u = D^{1/2} e /
    ||D^{1/2} e||`` its null vector, lifted to the eigenvalue 1: left at 0, the bias and ``u``
    together give a degree-ordered labeling zero cost and force ``gamma = 0``.

    ``degree_regularization`` ``r > 0``: every degree plus ``tau = r * mean degree``
    (regularized spectral clustering, Amini et al. 2013; Qin & Rohe 2013 take ``r = 1``). At
    the local width a point far from all others has a degree near its own self-affinity, a
    nearly isolated vertex: splitting it off costs almost nothing, so (10) would return a
    handful of outliers as a cluster. With ``tau``, ``u`` is no longer a null vector;
    its Rayleigh quotient is lifted to 1 the same way.
    """
    degree = K.sum(axis=1)
    degree = degree + degree_regularization * degree.mean()
    if degree_regularization == 0.0:
        L = normalized_laplacian(K)
    else:
        scale = 1.0 / np.sqrt(degree)
        L = np.eye(K.shape[0]) - scale[:, None] * K * scale[None, :]
    u = np.sqrt(degree)
    u /= np.linalg.norm(u)
    return L + (1.0 - float(u @ L @ u)) * np.outer(u, u)


def eliminate_bias(M: np.ndarray) -> np.ndarray:
    """Schur complement of the bias row of ``P^T M P``: ``S = M - M e e^T M / (e^T M e)``.

    Exact: ``[[M + A, M e], [e^T M, e^T M e]] >= 0`` iff ``M + A - M e e^T M / (e^T M e) >= 0``
    for any ``A`` (here ``C_e e e^T - diag(gamma)``), since ``e^T M e > 0``. ``S e = 0``.
    """
    Me = M.sum(axis=1)
    S = M - np.outer(Me, Me) / Me.sum()
    return (S + S.T) / 2.0


def bias_map(M: np.ndarray) -> np.ndarray:
    """``c`` with ``lambda = c^T z`` the optimal bias for labels ``z`` (the eliminated row)."""
    Me = M.sum(axis=1)
    return -Me / Me.sum()


def degenerate_laplacian_labels(K: np.ndarray) -> np.ndarray:
    """Labels of (10) with the bare ``L_sym`` for ``K^{-1}``: the zero-cost degree split.

    ``w = (u - mean(u) e; mean(u))`` is in the null space of ``P^T L_sym P + C_e e0 e0^T`` for
    every ``C_e``, which forces ``gamma = 0``; its signs are what the KKT recipe then returns.
    """
    u = np.sqrt(K.sum(axis=1))
    z = u - u.mean()
    return (z < 0).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Unsupervised kernel learning (12)
# ---------------------------------------------------------------------------------------------


@dataclass
class KernelLearningResult:
    beta: np.ndarray
    solution: GMMCSolution
    S: np.ndarray
    kernel_gap: float  # max_k g_k - beta^T g: bound on phi* - phi(beta)
    n_outer: int
    history: list[float]


def learn_kernel_weights(
    Ms: list[np.ndarray],
    *,
    C_e: float,
    C_delta: float,
    rank: int | None,
    tol: float,
    max_iter: int,
    kernel_max_iter: int,
    kernel_tol: float,
    random_state,
    on_iteration=None,
) -> KernelLearningResult:
    """Maximize the concave ``phi(beta)`` of (12) on the simplex by exponentiated gradient.

    ``phi(beta)`` is (10) for ``M = sum_k beta_k M_k``; its supergradient is
    ``g_k = tr(V^T Pi^T M_k Pi V)`` with ``Pi = I + e c^T`` the bias map of ``M`` (the lifted
    ``W*`` of the paper's (n+1)-dimensional form). A step is kept only if ``phi`` does not drop.
    """
    m = len(Ms)
    beta = np.full(m, 1.0 / m)
    rng = check_random_state(random_state)

    def evaluate(beta, warm):
        M = sum(b * Mk for b, Mk in zip(beta, Ms, strict=True))
        S = eliminate_bias(M)
        sol = solve_gmmc_lowrank(
            S, C_e=C_e, C_delta=C_delta, rank=rank, tol=tol, max_iter=max_iter,
            V0=None if warm is None else warm.V, gamma0=None if warm is None else warm.gamma,
            random_state=rng, certify=False,
        )
        PiV = sol.V + np.outer(np.ones(S.shape[0]), bias_map(M) @ sol.V)
        grad = np.array([np.einsum("ij,ij->", PiV, Mk @ PiV) for Mk in Ms])
        # phi includes the C_e and C_delta terms, which do not depend on beta.
        return S, sol, grad

    S, sol, grad = evaluate(beta, None)
    history = [sol.dual]
    step = 1.0
    n_outer = 0
    kernel_gap = float(grad.max() - beta @ grad)
    for n_outer in range(1, kernel_max_iter + 1):
        kernel_gap = float(grad.max() - beta @ grad)
        if on_iteration is not None:
            on_iteration(n_outer, sol.dual, kernel_gap, beta)
        if kernel_gap <= kernel_tol * max(1.0, abs(sol.dual)):
            break
        spread = float(grad.max() - grad.min())
        accepted = False
        while step > 1e-6:
            logits = np.log(np.maximum(beta, 1e-300)) + step * (grad - grad.max()) / spread * 8.0
            trial = np.exp(logits - logits.max())
            trial /= trial.sum()
            S_t, sol_t, grad_t = evaluate(trial, sol)
            if sol_t.dual >= sol.dual - tol * max(1.0, abs(sol.dual)):
                beta, S, sol, grad = trial, S_t, sol_t, grad_t
                step = min(2.0 * step, 4.0)
                accepted = True
                break
            step /= 2.0
        history.append(sol.dual)
        if not accepted:
            break
    return KernelLearningResult(beta=beta, solution=sol, S=S, kernel_gap=kernel_gap,
                                n_outer=n_outer, history=history)


# ---------------------------------------------------------------------------------------------
# Estimator
# ---------------------------------------------------------------------------------------------


# The paper's setting (section 4): the width at 20 % of the distance range and the plain
# Laplacian; reproductions of the paper's tables run with it.
PAPER_SETTING = {"gamma": "paper", "degree_regularization": 0.0, "spectral_candidate": False,
                 "portfolio": False}


class GMMC(MMCEstimatorMixin, ClusterMixin, BaseEstimator):
    """Generalized maximum margin clustering (GMMC) with unsupervised kernel learning.

    Solves the soft-margin dual (10) over ``n`` variables with a normalized graph Laplacian in
    place of ``K^{-1}`` (Remark II), or its kernel-learning extension (12); labels are the signs of
    the KKT eigenvector (section 3.1). The Laplacian is Chung's ``I - D^{-1/2} K D^{-1/2}`` with
    its null vector lifted (:func:`laplacian_precision`); the paper's printed
    ``I - D^{1/2} K D^{1/2}`` is indefinite and makes (10) infeasible.

    Parameters
    ----------
    n_clusters : int or "auto", default=2
        Number of clusters, >= 2. Two is the paper's problem (10). More clusters come from
        recursive bisection (:meth:`_fit_bisection`), each split a solve of (10); not with
        ``kernel_learning``.
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), read ``n_clusters_``.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    kernel : {"rbf"}, default="rbf"
        RBF affinities, the paper's only kernel.
    gamma : float, "local_scaling" or "paper", default="local_scaling"
        ``exp(-gamma ||x - x'||^2)``. ``"local_scaling"``: the shared local-scaling width of
        :func:`algorithms.kernels.local_scaling_gamma`, which depends on ``X`` alone. ``"paper"``:
        the paper writes ``exp(-||x - x'||^2 / (2 sigma^2))`` with ``sigma = width_factor *
        (max - min)`` of the pairwise distances (section 4); on data with a few far points that
        width is an almost linear kernel.

        .. versionchanged:: 0.2 ``"local_scaling"`` replaces ``"auto"``.
    width_factor : float, default=0.2
        ``sigma`` as a multiple of the distance range for ``gamma="paper"``, in (0, 10]; Shi and
        Malik's 10-20 % recommendation quoted in the paper's section 2.

        .. versionchanged:: 0.2 Replaces ``width_fraction``.
    degree_regularization : float, default=1.0
        ``tau / mean degree`` of :func:`laplacian_precision`, >= 0 (0: the paper's Laplacian).
    kernel_learning : bool, default=False
        Learn ``beta`` of (12) over ``n_widths`` Laplacians from ``sigma`` = 1/m, ..., m/m of the
        distance range (section 4 uses 10 widths, 10 % to 100 %).
    n_widths : int, default=10
        Number ``m`` of kernel-learning widths, in [2, 50].
    C_e, C_delta : float, default=1e4, 1e5
        The paper's constants of (5) and (10): the weight of the balance term ``(z^T e)^2`` and
        the bound on ``gamma``.
    solver : {"lowrank", "scs"}, default="lowrank"
        The Burer-Monteiro augmented Lagrangian, or the same scaled SDP for SCS (much slower).
    rank : int or None, default=None
        Starting rank of the factor ``V`` (default ``min(sqrt(2n) + 1, 4)``), doubled while the
        certificate fails (up to three times).
    lowrank_max_iter, kernel_max_iter : int, default=50, 30
        Augmented-Lagrangian iterations per solve of ``solver="lowrank"``;
        exponentiated-gradient steps for (12).

        .. versionchanged:: 0.2 ``lowrank_max_iter`` replaces ``max_iter``.
    sdp_tol : float, default=1e-6
        Relative duality gap and residual required of ``solver="lowrank"`` for an "optimal"
        solve; worse is reported in ``warnings_`` (and as a ``ConvergenceWarning``).

        .. versionchanged:: 0.2 Replaces ``tol``.
    C_svm : float, default=100
        Regularization of the out-of-sample SVM trained on the found labels (the paper's own
        weights are ``C_e`` and ``C_delta``).

        .. versionchanged:: 0.2 Replaces ``C``.
    spectral_candidate : bool, default=True
        Two clusters without kernel learning: the labels of (10) and the spectral partition of
        the kNN graph are both scored by the soft-margin objective ``omega`` of that SVM
        (``beta = 1 / C_svm``, :mod:`algorithms.selection.margin`) and the smaller is kept. (10)'s
        splits are
        even, and its relaxed labels can order the points badly, so on unbalanced data no
        threshold of them may find the smaller cluster. False is the paper's method
        (``PAPER_SETTING``).
    exact_max_n : int or None, default=800
        Largest n solved over every point. Above it the fit solves (10) (or (12)) over a random
        sample of ``exact_max_n`` points, stratified over k-means cells of ``X``
        (:func:`algorithms.sampling.fit_sample`): (10) splits its points evenly, so a sample whose
        clusters kept a uniform draw's chance imbalance would move that many edge points to the
        smaller one. The out-of-sample SVM trained on the sample's labels then labels every
        point, in time and memory linear in n; the dense n x n Laplacians and the solver grow
        quadratically and faster. None: always every point.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int or None, default=None
        Seeds the sample, the random starting factor and the spectral partition.
    guide : clustering estimator or None, default=None
        For ``n_clusters > 2``, the estimator whose k-partition steers the bisection
        (:func:`algorithms.selection.bisection.guide_partition`); it is cloned and given
        ``n_clusters`` and ``random_state``. None: the portfolio's
        best candidate with ``portfolio=True`` (the splits refine it), else
        :class:`~algorithms.cpm3c.CPM3C` with its defaults. Library only (the API uses the
        default).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
    scores_ : ndarray of shape (n_fit_samples_,)
        The relaxed labels ``z`` (KKT eigenvector scaled by its eigenvalue); with
        ``n_clusters > 2``, of the root split (``+-1`` for a split of whole guide clusters).
    gamma_ : float
        RBF width of the single-kernel fit (the largest-weight width with kernel learning).
    gammas_ : ndarray of shape (m,)
        RBF widths behind the Laplacians (one without kernel learning).
    kernel_weights_ : ndarray of shape (m,)
        ``beta`` of (12), on the simplex (``[1.0]`` without kernel learning).
    objective_ : float
        ``sum_i gamma_i``, the optimal value of (10)/(12). With ``n_clusters > 2``, the sum over
        the splits made; a split of whole guide clusters adds the value of ``z^T (S + C_e ee^T)
        z`` at its labels, not a relaxed bound, and its term ``C_e (e^T z)^2`` dominates when the
        sides differ in size, so such values are not comparable with relaxed ones.
    dual_variables_ : ndarray of shape (n_fit_samples_,)
        ``gamma`` of (10); with ``n_clusters > 2``, of the root split (for a split of whole
        guide clusters, the multipliers at which its labels are stationary,
        :func:`algorithms.gmmc_solver.split_whole_groups`).
    duality_gap_ : float
    kernel_gap_ : float
        Bound on the suboptimality of ``beta`` (0 without kernel learning).
    solver_ : str
    solver_status_ : {"optimal", "inaccurate"}
    warnings_ : list of str
        Solver problems; empty when the solve was certified optimal.
    n_iter_ : int
    candidate_objectives_ : dict
        With ``spectral_candidate``: ``omega`` of each distinct candidate labeling,
        ``{"relaxation": ..., "spectral": ...}`` (empty when both are one partition).
    chosen_candidate_ : {"relaxation", "spectral"}
        The candidate whose labels were kept.
    classifier_ : list of KernelExpansionClassifier
        The out-of-sample SVM, one term per RBF width with nonzero weight.
    exact_ : bool
        Whether (10) (or (12)) was solved over every point (at most ``exact_max_n`` points, or
        ``exact_max_n=None``); False when it was solved over a sample of ``exact_max_n``.

        .. versionadded:: 0.2
    n_fit_samples_ : int
        Points (10) was solved over (``exact_max_n`` when the fit sampled, else n);
        ``scores_`` and ``dual_variables_`` are over these points, in the order of ``X``.

    References
    ----------
    H. Valizadegan, R. Jin. Generalized Maximum Margin Clustering and Unsupervised Kernel
    Learning. NIPS 2006. Problems (5), (7), (10), (12); Remark II; section 3.1 (labels).
    The reading of the paper used here: ``docs/gmmc_design.md``.

    See Also
    --------
    algorithms.itersvr.IterSVR : fast non-convex maximum margin clustering.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    >>> GMMC(random_state=0).fit(X).labels_.shape
    (40,)
    """

    params_model = GMMCParams
    portfolio_name = "gmmc"
    _result_attributes = (
        *MMCEstimatorMixin._result_attributes,
        "gammas_", "duality_gap_", "kernel_gap_", "solver_status_", "candidate_objectives_",
        "chosen_candidate_",
    )

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int = 50,
        kernel: str = "rbf",
        gamma: float | str = "local_scaling",
        width_factor: float = 0.2,
        degree_regularization: float = 1.0,
        kernel_learning: bool = False,
        n_widths: int = 10,
        C_e: float = 1e4,
        C_delta: float = 1e5,
        solver: str = "lowrank",
        rank: int | None = None,
        lowrank_max_iter: int = 50,
        kernel_max_iter: int = 30,
        sdp_tol: float = 1e-6,
        C_svm: float = 100.0,
        spectral_candidate: bool = True,
        exact_max_n: int | None = 800,
        portfolio: bool = True,
        random_state: int | None = None,
        guide=None,
        width_fraction: float | str = DEPRECATED,
        C: float | str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
        tol: float | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.width_factor = width_factor
        self.degree_regularization = degree_regularization
        self.kernel_learning = kernel_learning
        self.n_widths = n_widths
        self.C_e = C_e
        self.C_delta = C_delta
        self.solver = solver
        self.rank = rank
        self.lowrank_max_iter = lowrank_max_iter
        self.kernel_max_iter = kernel_max_iter
        self.sdp_tol = sdp_tol
        self.C_svm = C_svm
        self.spectral_candidate = spectral_candidate
        self.exact_max_n = exact_max_n
        self.portfolio = portfolio
        self.random_state = random_state
        self.guide = guide
        self.width_fraction = width_fraction
        self.C = C
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X`` into two clusters; ``y`` is ignored."""
        self._params = self._validated_params()
        X = as_float_matrix(X)
        X = validate_data(self, X, reset=True)
        self._resolve_n_clusters(X, progress)
        sample = fit_sample(X.shape[0], self._params.exact_max_n,
                            check_random_state(self._params.random_state), X=X)
        self.exact_ = sample is None
        self.n_fit_samples_ = X.shape[0] if sample is None else sample.size
        # Kernels, Laplacians and the solver are O(n^2) products of a few hundred rows: one thread
        # (threads spin-waiting on a busy core cost more than they gain at this size).
        with small_problem_threads():
            step = self._fit(X if sample is None else X[sample], progress)
        self._label_every_point(X, sample, progress, step + 1)
        self._keep_portfolio_partition(X, progress, step + 2)
        return self

    def _fit(self, X: np.ndarray, progress: ProgressCallback | None) -> int:
        """Fit every point of ``X``; returns the last progress step reported."""
        n = X.shape[0]
        sq_dist = squared_distances(X)
        self.gammas_ = self._widths(X, sq_dist)
        report(progress, 0, None, f"building {self.gammas_.size} Laplacian(s) for {n} points")
        kernels = [np.exp(-g * sq_dist) for g in self.gammas_]
        self.warnings_: list[str] = []
        self.solver_ = self._params.solver
        step = 0

        def on_alm(n_iter, dual, residual, gap):
            nonlocal step
            step += 1
            report(progress, step, dual,
                   f"augmented Lagrangian {n_iter}: residual {residual:.1e}, gap {gap:.1e}")

        if self.n_clusters_ == 2:
            solution, beta = self._fit_two_class(X, kernels, on_alm, progress)
        else:
            solution, beta = self._fit_bisection(X, kernels[0], on_alm, progress)
        self.warnings_.extend(solution.messages)
        for message in self.warnings_:
            warnings.warn(message, ConvergenceWarning, stacklevel=3)
        self.kernel_weights_ = beta
        self.gamma_ = float(self.gammas_[int(np.argmax(beta))])
        self.dual_variables_ = solution.gamma
        self.solver_status_ = "inaccurate" if self.warnings_ else solution.status
        report(progress, step + 1, self.objective_, "training the out-of-sample SVM")
        self.classifier_ = _mixture_svm(X, self.labels_, kernels, beta, self.gammas_,
                                        self._params.C_svm)
        self.n_support_ = int(self.classifier_[0].n_support)
        return step + 1

    def _widths(self, X: np.ndarray, sq_dist: np.ndarray) -> np.ndarray:
        """The RBF widths behind the Laplacians: ``n_widths`` fractions of the distance range
        for kernel learning (section 4), else one."""
        if self._params.kernel_learning:
            fractions = np.arange(1, self._params.n_widths + 1) / self._params.n_widths
            return width_fractions_gammas(sq_dist, fractions)
        if self._params.gamma == "paper":
            return width_fractions_gammas(sq_dist, [self._params.width_factor])
        if self._params.gamma == LOCAL_SCALING:
            return np.array([local_scaling_gamma(X, random_state=self._params.random_state)])
        return np.array([float(self._params.gamma)])

    def _solve(self, S: np.ndarray, on_alm) -> GMMCSolution:
        """Problem (10) for one bias-eliminated Laplacian ``S``."""
        if self._params.solver != "lowrank":
            return solve_gmmc_cvxpy(S, C_e=self._params.C_e, C_delta=self._params.C_delta)
        return solve_gmmc_lowrank(
            S, C_e=self._params.C_e, C_delta=self._params.C_delta, rank=self._params.rank,
            tol=self._params.sdp_tol, max_iter=self._params.lowrank_max_iter,
            random_state=self._params.random_state, on_iteration=on_alm,
        )

    def _fit_two_class(self, X: np.ndarray, kernels, on_alm, progress
                       ) -> tuple[GMMCSolution, np.ndarray]:
        """(10), or (12) with kernel learning; labels from the KKT eigenvector (section 3.1),
        or the spectral partition where its margin objective is smaller
        (``spectral_candidate``)."""
        Ms = [laplacian_precision(K, self._params.degree_regularization) for K in kernels]
        if self._params.kernel_learning:
            if self._params.solver != "lowrank":
                raise ValueError("kernel_learning is implemented with solver='lowrank' only")
            outer = 0

            def on_outer(n_outer, dual, kernel_gap, beta):
                nonlocal outer
                outer += 1
                report(progress, outer, dual,
                       f"kernel learning step {n_outer}: bound {kernel_gap:.2e}, "
                       f"largest weight {beta.max():.2f}")

            learned = learn_kernel_weights(
                Ms, C_e=self._params.C_e, C_delta=self._params.C_delta, rank=self._params.rank,
                tol=self._params.sdp_tol, max_iter=self._params.lowrank_max_iter,
                kernel_max_iter=self._params.kernel_max_iter,
                kernel_tol=max(self._params.sdp_tol, 1e-4), random_state=self._params.random_state,
                on_iteration=on_outer,
            )
            beta, S = learned.beta, learned.S
            # Certify the last inner solve (the kernel-learning loop skips the eigenvalue check).
            solution = solve_gmmc_lowrank(
                S, C_e=self._params.C_e, C_delta=self._params.C_delta, rank=self._params.rank,
                tol=self._params.sdp_tol, max_iter=self._params.lowrank_max_iter,
                V0=learned.solution.V, gamma0=learned.solution.gamma,
                random_state=self._params.random_state, on_iteration=on_alm,
            )
            self.kernel_gap_ = learned.kernel_gap
            if learned.kernel_gap > 1e-2 * max(1.0, abs(solution.dual)):
                self.warnings_.append(
                    f"kernel learning stopped after {learned.n_outer} steps with suboptimality "
                    f"bound {learned.kernel_gap:.2e} on (12)"
                )
            self.n_iter_ = int(learned.n_outer + solution.n_iter)
        else:
            beta = np.ones(1)
            solution = self._solve(eliminate_bias(Ms[0]), on_alm)
            self.kernel_gap_ = 0.0
            self.n_iter_ = int(solution.n_iter)
        labels, scores, one_cluster = split_from_factor(solution.V)
        if self._params.spectral_candidate and not self._params.kernel_learning:
            choice = choose_with_spectral_candidate(X, labels, kernels[0], 1.0 / self._params.C_svm,
                                                    check_random_state(self._params.random_state))
            one_cluster = one_cluster and choice.chosen == "relaxation"
            labels = two_cluster_labels(choice.labels)
            self.candidate_objectives_ = choice.objectives
            self.chosen_candidate_ = choice.chosen
        if one_cluster:
            self.warnings_.append("the relaxed solution put every point in one cluster")
        self.labels_ = labels
        self.scores_ = scores
        self.objective_ = float(solution.dual)
        self.duality_gap_ = float(solution.gap)
        return solution, beta

    def _fit_bisection(self, X: np.ndarray, K: np.ndarray, on_alm,
                       progress: ProgressCallback | None) -> tuple[GMMCSolution, np.ndarray]:
        """``n_clusters > 2``: recursive bisection (:mod:`algorithms.selection.bisection`) with
        (10) on the Laplacian of each cluster's points.

        The splits of (10) are even (whatever ``C_e``, the balance term dominates), so a cluster
        holding three equal groups would be cut through one of them.
        A k-partition of the data (:func:`algorithms.selection.bisection.guide_partition`, by
        default CPM3C's
        multi-class max-margin clustering) guides the splits: its clusters stay whole, and the
        leaves that still hold several of them are split first; the k clusters are therefore the
        guide's (:mod:`algorithms.selection.bisection`). A leaf of at most
        ``EXACT_SPLIT_MAX_GROUPS``
        guide clusters is split by the labeling of whole clusters that minimises the objective
        (10) relaxes (:func:`algorithms.gmmc_solver.split_whole_groups`, exact); a larger one by
        (10) restricted to labelings of whole guide clusters
        (:func:`algorithms.gmmc_solver.relax_whole_groups`, an SDP of one row per guide
        cluster). A leaf of one guide cluster (a guide with fewer than ``k`` clusters) is
        split by (10) over its points.
        """
        guide = self._bisection_guide(X, CPM3C(portfolio=False),
                                      check_random_state(self._params.random_state), progress)
        solutions: list[GMMCSolution] = []

        def split_leaf(index: np.ndarray) -> LeafSplit:
            S = eliminate_bias(laplacian_precision(K[np.ix_(index, index)],
                                                   self._params.degree_regularization))
            groups = guide[index]
            n_groups = np.unique(groups).size
            if 2 <= n_groups <= EXACT_SPLIT_MAX_GROUPS:
                solution = split_whole_groups(S, groups, self._params.C_e)
            elif n_groups > EXACT_SPLIT_MAX_GROUPS:
                solution = relax_whole_groups(S, groups, self._params.C_e, self._params.C_delta)
            else:
                solution = self._solve(S, on_alm)
            solutions.append(solution)
            labels, scores, _ = split_from_factor(solution.V)
            y = keep_guide_clusters_whole(labels == 1, groups)
            return LeafSplit(y, float(solution.dual), (solution, scores))

        nodes = recursive_bisection(X.shape[0], self.n_clusters_, split_leaf, guide=guide,
                                    rows=distinct_rows(X)[1])
        self.labels_ = tree_labels(nodes, X.shape[0])
        root, self.scores_ = nodes[0].split.detail
        self.objective_ = tree_objective(nodes)
        self.duality_gap_ = float(max(s.gap for s in solutions))
        self.kernel_gap_ = 0.0
        self.n_iter_ = int(sum(s.n_iter for s in solutions))
        for solution in solutions:
            if solution is not root:
                self.warnings_.extend(solution.messages)
        return root, np.ones(1)

    # -- prediction -------------------------------------------------------------------------------
    def decision_function(self, X) -> np.ndarray:
        """SVM decision value on the learned kernel; positive means cluster 1 (the portfolio
        partition's SVM where that was kept)."""
        check_is_fitted(self, "classifier_")
        if self.partition_model_ is not None:
            return self._partition_predict(X)[1]
        X = validate_data(self, as_float_matrix(X), reset=False)
        expansions, reaches = zip(*(term.expansion(X) for term in self.classifier_), strict=True)
        return with_intercept(sum(expansions), sum(reaches), self.classifier_[0].intercept)

    def predict(self, X) -> np.ndarray:
        """Cluster of new points by an SVM trained on the found labels with the learned kernel."""
        return self.predict_with_decision(X)[0]

    def predict_with_decision(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(predict(X), decision_function(X))`` from one kernel evaluation."""
        if self.partition_model_ is not None:
            return self._partition_predict(X)
        decision = self.decision_function(X)  # checks fitted first: NotFittedError
        return self.classifier_[0].labels_from_decision(decision).astype(np.int64), decision

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state = {
            "gamma_": self.gamma_, "objective_": self.objective_, "n_iter_": self.n_iter_,
            "solver_": self.solver_, "solver_status_": self.solver_status_,
            "duality_gap_": self.duality_gap_, "kernel_gap_": self.kernel_gap_,
            "warnings_": list(self.warnings_), "svms": [],
        }
        arrays = {"labels_": self.labels_, "scores_": self.scores_, "gammas_": self.gammas_,
                  "kernel_weights_": self.kernel_weights_}
        for i, term in enumerate(self.classifier_):
            meta, term_arrays = term.to_export(prefix=f"svm{i}_")
            state["svms"].append(meta)
            arrays.update(term_arrays)
        return state, arrays

    def _import_state(self, state, arrays):
        for name in ("gamma_", "objective_", "duality_gap_", "kernel_gap_"):
            setattr(self, name, float(state[name]))
        self.n_iter_ = int(state["n_iter_"])
        self.solver_ = state["solver_"]
        self.solver_status_ = state["solver_status_"]
        self.warnings_ = list(state["warnings_"])
        for name in ("labels_", "scores_", "gammas_", "kernel_weights_"):
            setattr(self, name, arrays[name])
        self.classifier_ = [
            KernelExpansionClassifier.from_export(meta, arrays, prefix=f"svm{i}_")
            for i, meta in enumerate(state["svms"])
        ]
        self.n_support_ = int(self.classifier_[0].n_support)


def _mixture_svm(X, labels, kernels, beta, gammas, C) -> list[KernelExpansionClassifier]:
    """SVM on the found labels with ``K = sum_k beta_k K_k``, split into one term per width.

    ``f(x) = sum_k beta_k K_k(x, S) a + b``, so each term is a :class:`KernelExpansionClassifier`
    with coefficients ``beta_k a`` (the bias on the first term): portable, numpy-only predict.
    """
    active = np.flatnonzero(beta > 1e-6 * beta.max())
    weights = beta[active] / beta[active].sum()
    K = sum(w * kernels[k] for w, k in zip(weights, active, strict=True))
    base = KernelExpansionClassifier.fit(X, labels, kernel="rbf", gamma=float(gammas[active[0]]),
                                         C=C, K=K)
    terms = []
    for i, (w, k) in enumerate(zip(weights, active, strict=True)):
        intercept = base.intercept if i == 0 else np.zeros_like(base.intercept)
        terms.append(KernelExpansionClassifier(base.support_vectors, w * base.dual_coef, intercept,
                                               base.classes, "rbf", float(gammas[k])))
    return terms
