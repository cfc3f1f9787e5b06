"""SDP MMC's programs: the thesis's SDPs (3.5) and (4.8) for cvxpy, and the labels from (4.8).

Xu 2007, "Convex Large Margin Training Techniques: Unsupervised, Semi-supervised, and Robust
Support Vector Machines" (PhD thesis, University of Waterloo), chapters 3 and 4. The reference
formulations of :class:`algorithms.sdp_mmc.SDPMMC` for a conic solver (SCS or Clarabel): the
two-class SDP (3.5) with the semi-supervised constraints S1/S2 of section 3.5
(:func:`solve_two_class_sdp`); the multi-class SDP (4.8) with those of section 4.3
(:func:`solve_multiclass_sdp`) and the small program unsupervised (4.8) collapses to
(:func:`solve_multiclass_sdp_symmetric`); the margin objective of Theorem 2 at hard labels
(:func:`multiclass_margin_objective`); and the labels recovered from a relaxed ``(M, D)`` of
(4.8) (:func:`labels_from_assignment`). The low-rank solver's forms of the same programs are in
:mod:`algorithms.lowrank_sdp.programs`.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from algorithms.conic import ConicSolver, SDPSolverError, check_solver_status, solve_conic
from algorithms.rounding import labels_from_label_matrix, psd_factor

# ---------------------------------------------------------------------------------------------
# Two-class: SDP (3.5) with S1/S2 (section 3.5)
# ---------------------------------------------------------------------------------------------


def solve_two_class_sdp(
    K: np.ndarray,
    *,
    beta: float,
    limit: float,
    y_partial: np.ndarray | None = None,
    solver: ConicSolver = "scs",
    tol: float = 1e-3,
    max_iter: int = 20000,
) -> tuple[np.ndarray, float, list[str], int]:
    """SDP (3.5): ``min zeta`` s.t. ``diag(M) = e``, ``M >= 0``, ``|M e| <= limit``,
    ``mu, nu >= 0``, ``[[M o K, e + mu - nu], [., 2/beta (zeta - nu^T e)]] >= 0``.

    ``y_partial`` (``+1``/``-1`` known, ``0`` unknown) adds S1 and S2 of section 3.5.
    Returns ``(M, omega, warnings, solver iterations)``; ``omega`` is the relaxed inverse
    squared margin.
    """
    import cvxpy as cp

    n = K.shape[0]
    M = cp.Variable((n, n), symmetric=True)
    mu = cp.Variable(n, nonneg=True)
    nu = cp.Variable(n, nonneg=True)
    zeta = cp.Variable()
    u = cp.reshape(1.0 + mu - nu, (n, 1), order="F")
    corner = cp.reshape((2.0 / beta) * (zeta - cp.sum(nu)), (1, 1), order="F")
    constraints = [
        cp.diag(M) == 1.0,
        M >> 0,
        cp.bmat([[cp.multiply(M, K), u], [u.T, corner]]) >> 0,
        cp.sum(M, axis=1) <= limit,
        cp.sum(M, axis=1) >= -limit,
    ]
    if y_partial is not None:
        known = np.flatnonzero(y_partial != 0)
        unknown = np.flatnonzero(y_partial == 0)
        if known.size:
            signs = y_partial[known].astype(np.float64)
            constraints.append(M[known, :][:, known] == np.outer(signs, signs))  # S1
            if unknown.size:
                constraints.append(  # S2
                    cp.sum(M[known, :][:, unknown], axis=0) >= 2.0 - known.size
                )
    problem = cp.Problem(cp.Minimize(zeta), constraints)
    notes, n_iter = solve_conic(problem, solver, tol, max_iter,
                                f"the two-class MMC SDP (3.5), n={n}")
    if M.value is None:
        raise SDPSolverError(f"{solver} returned no solution for the two-class SDP (3.5)")
    return np.asarray(M.value), float(problem.value), notes, n_iter


# ---------------------------------------------------------------------------------------------
# Multi-class: SDP (4.8) with the section 4.3 constraints
# ---------------------------------------------------------------------------------------------


def solve_multiclass_sdp(
    K: np.ndarray,
    n_clusters: int,
    *,
    beta: float,
    balance: float,
    labels: np.ndarray | None = None,
    ridge: float = 1e-6,
    solver: ConicSolver = "scs",
    tol: float = 1e-3,
    max_iter: int = 20000,
) -> tuple[np.ndarray, np.ndarray, float, list[str], int]:
    """SDP (4.8) in the scaled variables ``q = beta p``, ``V' = beta V``, ``a = beta alpha``:

    ``min zeta'`` s.t. ``sum_r ||L^{-1} q_r||^2 <= 2 zeta' + <K, M> + 2 a^T e`` with
    ``q_r = K d_r - beta d_r + v'_r + a``, ``[[I, D^T], [D, M]] >= 0``, ``diag(M) = e``,
    ``0 <= M, D <= 1``, ``V' >= 0``, ``(1/k - balance) n <= M e <= (1/k + balance) n``;
    ``omega = zeta' / beta``. This is (4.8) multiplied by ``beta^2``: the block
    ``[[I (x) K, p], [p^T, s]] >= 0`` is ``s >= p^T (I (x) K)^{-1} p`` by the Schur complement.
    ``K`` gets ``ridge * trace(K)/n`` on its diagonal so ``L`` exists (footnote 2 of chapter 4).
    ``labels`` (``-1`` unknown, else ``0..k-1``) add ``M_ij = delta``, ``D_ir = delta`` (4.3).
    Returns ``(M, D, omega, warnings, solver iterations)``.
    """
    import cvxpy as cp

    n, k = K.shape[0], n_clusters
    K = K + ridge * float(np.trace(K)) / n * np.eye(n)
    eigvals, eigvecs = np.linalg.eigh(K)
    L_inv = (eigvecs / np.sqrt(np.maximum(eigvals, eigvals.max() * 1e-12))[None, :]).T
    M = cp.Variable((n, n), symmetric=True)
    D = cp.Variable((n, k))
    V = cp.Variable((n, k), nonneg=True)
    a = cp.Variable(n)
    zeta = cp.Variable()
    Q = K @ D - beta * D + V + cp.reshape(a, (n, 1), order="F") @ np.ones((1, k))
    constraints = [
        cp.sum_squares(L_inv @ Q) <= 2.0 * zeta + cp.sum(cp.multiply(K, M)) + 2.0 * cp.sum(a),
        cp.bmat([[np.eye(k), D.T], [D, M]]) >> 0,
        cp.diag(M) == 1.0,
        M >= 0.0, M <= 1.0, D >= 0.0, D <= 1.0,
        cp.sum(M, axis=1) >= (1.0 / k - balance) * n,
        cp.sum(M, axis=1) <= (1.0 / k + balance) * n,
    ]
    if labels is not None:
        known = np.flatnonzero(labels >= 0)
        if known.size:
            Y = (labels[known][:, None] == np.arange(k)[None, :]).astype(np.float64)
            constraints += [D[known, :] == Y, M[known, :][:, known] == Y @ Y.T]
    problem = cp.Problem(cp.Minimize(zeta), constraints)
    notes, n_iter = solve_conic(problem, solver, tol, max_iter,
                      f"the multi-class MMC SDP (4.8), n={n}, k={k}")
    if M.value is None or D.value is None:
        raise SDPSolverError(f"{solver} returned no solution for the multi-class SDP (4.8)")
    return np.asarray(M.value), np.asarray(D.value), float(problem.value) / beta, notes, n_iter


def solve_multiclass_sdp_symmetric(
    K: np.ndarray,
    n_clusters: int,
    *,
    beta: float,
    balance: float,
    solver: ConicSolver = "scs",
    tol: float = 1e-3,
    max_iter: int = 20000,
) -> tuple[np.ndarray, np.ndarray, float, list[str], int]:
    """Unsupervised (4.8), solved in the form it collapses to.

    Why it collapses. (4.7) is convex and unchanged by permuting the class columns of ``D`` (and
    ``V``), so the average of an optimum over the k! permutations is an optimum whose columns are
    equal: ``D = d e^T``. There, with ``Lambda e = e`` (4.6) and a centred kernel (``K e = 0``),
    ``<Lambda, D> = e^T d`` and ``<K, D Lambda^T> = e^T K d = 0``, and the inner maximum of the
    dual of Theorem 2 is attained at uniform ``Lambda`` (``L^T e = 0``), so

        ``omega(M, d e^T) = n - e^T d - <K, M> / (2 beta)``,

    subject to ``[[I, D^T], [D, M]] >= 0``, i.e. ``M >= k d d^T``. The relaxation is
    "maximise ``<K, M>`` (plus ``2 beta e^T d``)" over balanced ``M``: ``beta`` only weighs the
    tiny ``e^T d`` term, so it barely moves the solution, and ``omega`` is large and negative,
    no inverse squared margin. On the general program the columns of ``D`` indeed agree.

    So this solves the equivalent small program: ``M`` (n x n) and ``d`` (n) with
    ``[[1/k, d^T], [d, M]] >= 0`` (the Schur complement ``M - k d d^T >= 0``) and the constraints
    of (4.8) on ``M``, instead of the n x k ``D``, the n x k ``V`` and the nk-long cone: the same
    labels, and SCS iterations are cheaper but their count varies, so the gain is clarity, not
    speed.
    Returns ``(M, D = d e^T, omega, warnings, solver iterations)`` with ``omega`` the relaxed
    value above.
    """
    import cvxpy as cp

    n, k = K.shape[0], n_clusters
    M = cp.Variable((n, n), symmetric=True)
    d = cp.Variable(n)
    block = cp.bmat([[np.array([[1.0 / k]]), cp.reshape(d, (1, n), order="F")],
                     [cp.reshape(d, (n, 1), order="F"), M]])
    constraints = [
        block >> 0,
        cp.diag(M) == 1.0,
        M >= 0.0, M <= 1.0, d >= 0.0, d <= 1.0,
        cp.sum(M, axis=1) >= (1.0 / k - balance) * n,
        cp.sum(M, axis=1) <= (1.0 / k + balance) * n,
    ]
    # min omega = n - e^T d - <K, M> / (2 beta), times 2 beta / n for entries of order one
    problem = cp.Problem(cp.Minimize(-(cp.sum(cp.multiply(K, M)) + 2.0 * beta * cp.sum(d)) / n),
                         constraints)
    notes, n_iter = solve_conic(problem, solver, tol, max_iter,
                           f"the multi-class MMC SDP (4.8), symmetric form, n={n}, k={k}")
    if M.value is None or d.value is None:
        raise SDPSolverError(f"{solver} returned no solution for the multi-class SDP (4.8)")
    M_value, d_value = np.asarray(M.value), np.asarray(d.value)
    omega = n - float(d_value.sum()) - float(np.sum(K * M_value)) / (2.0 * beta)
    return M_value, np.repeat(d_value[:, None], k, axis=1), omega, notes, n_iter


def multiclass_margin_objective(K: np.ndarray, labels: np.ndarray, n_clusters: int,
                                beta: float) -> float:
    """``omega(YY^T, Y)`` of Theorem 2 at hard labels: the inverse squared margin of the
    multi-class SVM (4.1) on them, whose dual is

        ``max_{Lambda >= 0, Lambda e = e} n - <Lambda, Y> - ||L^T (Y - Lambda)||^2 / (2 beta)``

    with ``K = L L^T`` (the three kernel terms of Theorem 2 combine into one square). This is the
    number the relaxation was meant to approximate; at the relaxation's own optimum it reads as
    in :func:`solve_multiclass_sdp_symmetric`.

    Solved in the primal: (4.3) without bias is Crammer & Singer's multi-class SVM on the features
    ``L`` with ``C = 1 / beta``, which liblinear solves (``LinearSVC``); the value is ``beta/2 sum_r
    ||w_r||^2 + sum_i xi_i`` at its ``W``: the dual QP's value, to the solvers' tolerance, at a
    small fraction of a generic QP solver's time. A cluster without points keeps ``w_r = 0``; with
    fewer than three clusters present (scikit-learn then fits a binary model) the dual QP is solved
    by Clarabel.
    """
    from sklearn.svm import LinearSVC

    if np.unique(labels).size < 3:
        return _margin_objective_by_qp(K, labels, n_clusters, beta)
    features = psd_factor(K)
    svm = LinearSVC(multi_class="crammer_singer", C=1.0 / beta, fit_intercept=False,
                    tol=1e-6, max_iter=100_000)
    with warnings.catch_warnings():  # a ConvergenceWarning leaves an upper bound: still valid
        warnings.simplefilter("ignore", ConvergenceWarning)
        svm.fit(features, labels)
    W = np.zeros((n_clusters, features.shape[1]))
    W[svm.classes_] = svm.coef_
    scores = features @ W.T
    rows = np.arange(labels.size)
    slack = 1.0 - scores[rows, labels][:, None] + scores
    slack[rows, labels] = 0.0
    return float(0.5 * beta * np.sum(W * W) + np.maximum(slack, 0.0).max(axis=1).sum())


def _margin_objective_by_qp(K: np.ndarray, labels: np.ndarray, n_clusters: int,
                            beta: float) -> float:
    """The dual QP of :func:`multiclass_margin_objective` (n k unknowns), by Clarabel."""
    import cvxpy as cp

    n, k = K.shape[0], n_clusters
    Y = (labels[:, None] == np.arange(k)[None, :]).astype(np.float64)
    L = psd_factor(K)
    lam = cp.Variable((n, k), nonneg=True)
    value = n - cp.sum(cp.multiply(lam, Y)) - cp.sum_squares(L.T @ (Y - lam)) / (2.0 * beta)
    problem = cp.Problem(cp.Maximize(value), [cp.sum(lam, axis=1) == 1.0])
    try:
        problem.solve(solver="CLARABEL")
    except cp.error.SolverError as exc:
        raise SDPSolverError(f"CLARABEL failed on the multi-class margin QP: {exc}") from None
    check_solver_status(problem.status, solver="CLARABEL", what="the multi-class margin QP")
    return float(problem.value)


def labels_from_assignment(D: np.ndarray, M: np.ndarray, labels: np.ndarray | None,
                           n_clusters: int, random_state, K: np.ndarray | None = None
                           ) -> np.ndarray:
    """Multi-class labels from the relaxed ``(M, D)`` of (4.8).

    Unsupervised, ``D = d e^T`` carries no class (see :func:`solve_multiclass_sdp_symmetric`), so
    labels are k-means clusters of the rank-k factor of ``M``. With partial labels naming every
    class, the relaxation does not tie unlabeled points to classes either: solved accurately,
    ``M`` between an unlabeled point and the labeled classes is nearly flat (and ``D``'s
    unlabeled rows alike), because the unlabeled block can still permute the classes. It does
    cluster the unlabeled points (its block ``M_uu``), so: k-means on the factor of ``M_uu``,
    then each cluster gets the class whose labeled points have the largest mean kernel affinity
    ``K`` to it, one class per cluster (Hungarian). The result does not depend on the solver's
    tolerance, unlike k-means started at the labeled class means in ``M``'s factor, which
    relies on the tilt of an inaccurate early iterate. With a class unlabeled, the argmax of
    ``D_ir + mean_{j labeled r} M_ij`` is kept.
    """
    if labels is None or not np.any(labels >= 0):
        return labels_from_label_matrix(M, n_clusters, random_state)
    known = np.flatnonzero(labels >= 0)
    unknown = np.flatnonzero(labels < 0)
    if (np.unique(labels[known]).size == n_clusters and K is not None
            and unknown.size >= n_clusters):  # k-means needs k unlabeled points
        return _cluster_then_label(M, K, labels, n_clusters, random_state)
    Y = (labels[known][:, None] == np.arange(n_clusters)[None, :]).astype(np.float64)
    affinity = (M[:, known] @ Y) / np.maximum(Y.sum(axis=0), 1.0)[None, :]
    return np.argmax(D + affinity, axis=1).astype(np.int64)


def _cluster_then_label(M: np.ndarray, K: np.ndarray, labels: np.ndarray, n_clusters: int,
                        random_state) -> np.ndarray:
    """Clusters of the unlabeled points by ``M_uu``, matched one-to-one to the labeled classes
    by mean kernel affinity (see :func:`labels_from_assignment`)."""
    from scipy.optimize import linear_sum_assignment

    unknown = np.flatnonzero(labels < 0)
    clusters = labels_from_label_matrix(M[np.ix_(unknown, unknown)], n_clusters, random_state)
    members = np.eye(n_clusters)[clusters]  # unlabeled point x cluster
    classes = np.eye(n_clusters)[np.where(labels >= 0, labels, 0)] * (labels >= 0)[:, None]
    affinity = classes.T @ K[:, unknown] @ members  # class x cluster sums
    affinity /= np.maximum(classes.sum(axis=0), 1.0)[:, None]
    affinity /= np.maximum(members.sum(axis=0), 1.0)[None, :]
    class_of, cluster_of = linear_sum_assignment(-affinity)
    mapping = np.empty(n_clusters, dtype=np.int64)
    mapping[cluster_of] = class_of
    found = labels.astype(np.int64).copy()
    found[unknown] = mapping[clusters]
    return found
