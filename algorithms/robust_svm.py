"""Robust SVM by outlier ablation: the eta-hinge SDP (REH), outlier detection (ROD) and ramp.

Xu 2007, "Convex Large Margin Training Techniques: Unsupervised, Semi-supervised, and Robust
Support Vector Machines" (PhD thesis, University of Waterloo), chapter 6.

Every training point gets an indicator ``0 <= eta_i <= 1`` (``eta_i = 0``: outlier). With
``G = K o yy^T`` and ``beta = 1 / C``:

* REH minimises the regularised eta-hinge loss (6.5)-(6.6), which by Theorem 6 is the regularised
  robust (ramp) hinge loss (6.7). Its dual (6.8)-(6.9) depends on ``eta`` through ``eta`` and
  ``eta eta^T``; relaxing ``M = eta eta^T`` to ``M >= eta eta^T, diag(M) = eta`` gives (6.10), the
  SDP of Theorem 7 solved by :func:`solve_robust_sdp`.
* ROD (section 6.3) drops the constant ``1 - eta_i`` of the eta-hinge loss and asks that at least
  ``rho n`` points stay, ``e^T eta >= rho n`` (6.11); points with small ``eta`` are the outliers.
  The thesis prints its SDP without ``diag(M) = eta``; without it ``M`` can grow without bound and
  the objective goes to zero, so the constraint of (6.10) is kept, as "the same steps" imply.
* ramp minimises (6.7) by alternating minimisation of the eta-hinge objective (6.6) over
  ``(w, eta)``: for fixed ``w`` the best ``eta`` is ``eta_i = 1[y_i f(x_i) >= 0]`` (Proposition
  6), for fixed ``eta`` the best ``w`` is a standard soft-margin SVM (libsvm) on the points with
  ``eta_i = 1``. This is *not* the concave-convex procedure of Collobert et al. (2006) that the
  thesis compares against (section 6.4, Figure 6.8): CCCP linearises the concave part of the
  ramp, so a point with ``y f < 0`` keeps the loss ``max(1, y f)`` (minus a constant) and still
  pulls on ``w``, where here it is dropped. Both are majorise-minimise schemes on (6.7) with
  libsvm steps; this one needs no modified SVM dual. The robust objective (6.7)
  never increases and the iteration stops when ``eta`` repeats; it reaches a local minimum only,
  but scales like libsvm.

The thesis drops the offset ``b``: its dual (6.8) has no ``sum_i lambda_i eta_i y_i = 0``, which
an offset would add and which is bilinear in ``(lambda, eta)``, so no convex relaxation of the same
form carries it. With ``fit_intercept=True`` the SDP methods therefore (1) move the origin to the
coordinate-wise median of the training points (linear kernel; the RBF kernel does not see
translations), which the offset-free classifier needs and which ring outliers cannot drag (the
median breaks down at 50 % contamination, the mean at one far point); (2) solve the offset-free
SDP there; (3) set ``b`` to the exact minimiser over ``b`` of the eta-hinge loss
``sum_i eta_i [1 - y_i (f_i + b)]_+`` at the SDP's ``(w, eta)`` (the loss part of (6.6) and
(6.11) that depends on ``b``), piecewise linear in ``b`` and minimised by :func:`best_offset` at a
breakpoint. ``b`` is unregularised, as in the soft-margin SVM. For ROD this can only lower the
primal (6.11) from ``b = 0``; for REH it lowers (6.6) at the SDP's ``eta``, an upper bound on
(6.7). (The robust hinge (6.7) itself can also be minimised over ``b`` exactly, by
:func:`best_offset` without weights; it is flat over long stretches, which is why the weighted
loss is used.) Unlike the offset-free SDP, the result does not depend on where the origin lies.
A constant feature (kernel ``K + c``) would instead regularise ``b`` on the scale of ``K`` and
let the relaxation trade it against ``M``. The ramp method uses libsvm's offset.

The solver's timings are in ``docs/sdp_solver.md`` and ``docs/algorithms/robust_svm.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.svm import SVC
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.conic import SDPSolverError, check_solver_status, cvxpy_solver_name
from algorithms.inputs import (
    as_float_matrix,
)
from algorithms.kernels import pairwise_kernel, resolve_gamma
from algorithms.out_of_sample import KernelExpansionClassifier
from algorithms.params.common import DEPRECATED
from algorithms.params.robust_svm import (
    SDP_MAX_N as SDP_MAX_N,
)
from algorithms.params.robust_svm import (
    Method as Method,
)
from algorithms.params.robust_svm import (
    RobustSVMParams as RobustSVMParams,
)
from algorithms.progress import ProgressCallback, report

# solver="auto" is the shared low-rank solver (algorithms.lowrank_sdp) with its certified gap
# at LOWRANK_TOL: faster than SCS and, unlike it, certified. (A low-rank kernel, e.g. linear on
# few features, makes G / beta low rank: the inner dual runs on its factor.) 1e-3 is the gap the
# solver closes reliably: tighter gaps cost several times the time (the stationarity its
# lambda_min test needs is beyond L-BFGS on the smoothed objective). The cvxpy formulations
# stay as the reference: SCS (first-order, splitting, eps 1e-4) and the interior-point Clarabel
# (its KKT system has O(n^2) unknowns, so it is slow beyond a few dozen points).
LOWRANK_TOL = 1e-3
SCS_OPTIONS: dict[str, Any] = {"eps": 1e-4, "max_iters": 20000}

# ---------------------------------------------------------------------------------------------
# Theorem 7 (REH) and section 6.3 (ROD): the semidefinite programs
# ---------------------------------------------------------------------------------------------


@dataclass
class RobustSDPSolution:
    """Solution of the REH/ROD SDP: indicators, lifted matrix, dual weights and solver report."""

    eta: np.ndarray  # (n,) relaxed outlier indicators, 1 = inlier
    M: np.ndarray  # (n, n) relaxation of eta eta^T
    lam: np.ndarray  # (n,) inner maximiser lambda of (6.9), in [0, 1]
    objective: float  # SDP optimum: the relaxed value of (6.9) (REH) or of (6.11) (ROD)
    status: str
    solver: str
    warnings: list[str]  # reduced-accuracy notes from check_solver_status, reported with results
    certificate: dict[str, Any] | None = None  # low-rank solver: gap, infeasibility, min eig


def solve_robust_sdp(
    K: np.ndarray,
    y: np.ndarray,
    beta: float,
    *,
    method: Literal["reh", "rod"] = "reh",
    rho: float = 0.8,
    solver: str = "auto",
) -> RobustSDPSolution:
    """Solve the SDP of Theorem 7 (``method="reh"``) or of section 6.3 (``method="rod"``).

    ``min zeta`` over ``eta, M, mu >= 0, nu >= 0`` with ``[[M, eta], [eta^T, 1]] >= 0``,
    ``diag(M) = eta``, ``eta <= 1`` and

        [[G o M, eta + mu - nu], [(eta + mu - nu)^T, (2 / beta)(zeta - e^T nu + e^T eta)]] >= 0

    (REH; ROD drops ``+ e^T eta`` and adds ``e^T eta >= rho n``). It is written with
    ``s = (2 / beta)(zeta - ...)`` as the variable, so ``zeta = beta s / 2 + e^T nu - e^T eta``.

    ``lambda`` is read from the dual of the Schur-complement constraint: at the optimum that
    constraint's dual matrix is ``(beta / 2) [-lambda / beta; 1][-lambda / beta; 1]^T``, where
    ``lambda = beta (G o M)^+ (eta + mu - nu)`` is the maximiser of the inner problem of (6.10),
    so ``lambda = -2 q`` with ``q`` the last column of the dual matrix. Unlike the pseudo-inverse,
    this is well defined when ``G o M`` is singular (linear kernels, dropped points).

    Conditioning: scaling ``K`` and ``beta`` by the same ``1 / c`` leaves (6.8)-(6.10) and
    ``lambda`` unchanged, and dividing the objective by ``n`` changes only its value (the dual is
    multiplied back). ``c`` is the median of ``diag(K)``, so typical entries of ``G`` are of order
    one; the maximum would let a few far outliers shrink the inliers' entries to ~1e-2 (at R = 55),
    and SCS then needs 2-4 times the iterations and returns objectives off by up to 40x at
    eps 1e-3. With both, SCS at eps 1e-4 matches Clarabel's objective to about 1e-3 relative.

    ``solver="auto"`` (= ``"lowrank"``, see ``LOWRANK_TOL``) solves the same program on the
    factor of ``[[M, eta], [eta^T, 1]]`` (:func:`algorithms.lowrank_sdp.solve_robust_lowrank`),
    with ``lambda`` the inner maximiser itself; ``"scs"`` and ``"clarabel"`` solve the
    formulation below.

    One piece: most of its length is this derivation; the code is the scaling above and one
    cvxpy program of a few lines, with the dual read back from its Schur constraint.
    """
    if method not in ("reh", "rod"):
        raise ValueError(f"unknown SDP method {method!r}: use 'reh' or 'rod'")
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    diag = np.abs(np.diag(K))
    scale = float(np.median(diag)) or float(np.max(diag)) or 1.0
    G = (K / scale) * np.outer(y, y)
    G = (G + G.T) / 2.0
    beta_s = beta / scale
    if solver in ("auto", "lowrank"):
        return _solve_robust_lowrank(G, beta_s, method, rho)

    import cvxpy as cp  # only the general-purpose solvers need it (a slow import)

    Z = cp.Variable((n + 1, n + 1), PSD=True)  # [[M, eta], [eta^T, 1]] >= 0  <=>  M >= eta eta^T
    M, eta = Z[:n, :n], Z[:n, n]
    mu = cp.Variable(n, nonneg=True)
    nu = cp.Variable(n, nonneg=True)
    s = cp.Variable()
    v = cp.reshape(eta + mu - nu, (n, 1), order="F")
    schur = cp.bmat([[cp.multiply(G, M), v], [v.T, cp.reshape(s, (1, 1), order="F")]])
    schur_constraint = (schur + schur.T) / 2 >> 0
    constraints = [Z[n, n] == 1, cp.diag(M) == eta, eta <= 1, schur_constraint]
    if method == "reh":
        zeta = beta_s / 2 * s + cp.sum(nu) - cp.sum(eta)
        constant = float(n)  # (6.9) carries "+ n"
    elif method == "rod":
        zeta = beta_s / 2 * s + cp.sum(nu)
        constraints.append(cp.sum(eta) >= rho * n)
        constant = 0.0
    else:
        raise ValueError(f"unknown SDP method {method!r}: use 'reh' or 'rod'")
    problem = cp.Problem(cp.Minimize(zeta / n), constraints)
    name = cvxpy_solver_name(solver)
    options = dict(SCS_OPTIONS) if name == "SCS" else {}
    try:
        problem.solve(solver=name, **options)
    except cp.error.SolverError as exc:
        raise SDPSolverError(f"the {method.upper()} SDP solver {name} failed: {exc}") from None
    warnings = check_solver_status(problem.status, solver=name, what=f"the {method.upper()} SDP")
    if eta.value is None:
        raise SDPSolverError(f"the {method.upper()} SDP ended with status {problem.status!r}")
    dual = n * np.asarray(schur_constraint.dual_value)  # the objective was divided by n
    lam = np.clip(-2.0 * dual[:n, n], 0.0, 1.0)
    return RobustSDPSolution(
        eta=np.clip(np.asarray(eta.value).ravel(), 0.0, 1.0),
        M=np.asarray(M.value),
        lam=lam,
        objective=n * float(problem.value) + constant,
        status=str(problem.status),
        solver=name,
        warnings=warnings,
    )


def _solve_robust_lowrank(G: np.ndarray, beta_s: float, method: str, rho: float):
    from algorithms.lowrank_sdp import solve_robust_lowrank

    solved = solve_robust_lowrank(G, beta_s, method=method, rho=rho, tol=LOWRANK_TOL)
    result = solved.result
    return RobustSDPSolution(
        eta=solved.eta, M=solved.M, lam=np.clip(solved.lam, 0.0, 1.0),
        objective=result.objective, status=result.status, solver="lowrank",
        warnings=list(result.messages), certificate=result.certificate(),
    )


def robust_hinge_objective(f: np.ndarray, y: np.ndarray, norm_w2: float, beta: float) -> float:
    """Regularised robust hinge loss (6.7): ``beta/2 ||w||^2 + sum_i min(1, [1 - y_i f_i]_+)``."""
    return 0.5 * beta * norm_w2 + float(np.minimum(1.0, np.maximum(0.0, 1.0 - y * f)).sum())


def best_offset(f: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> float:
    """``b`` minimising ``sum_i min(1, [1 - y_i (f_i + b)]_+)`` (the loss of (6.7); ``weights``
    None) or ``sum_i weights_i [1 - y_i (f_i + b)]_+`` (the eta-hinge loss of (6.11)).

    Both are piecewise linear in ``b`` with kinks where ``y_i (f_i + b)`` is 1 or 0, i.e. at
    ``b = y_i - f_i`` and ``b = -f_i``, so a minimiser is among those breakpoints (and ``b = 0``).
    Of the minimising breakpoints the median is returned: it lies inside the flat stretch of the
    loss rather than on its edge, where the boundary would pass through a training point.
    """
    candidates = np.unique(np.concatenate(([0.0], y - f, -f)))
    candidates = np.unique(np.concatenate((candidates, (candidates[1:] + candidates[:-1]) / 2)))
    margins = y[None, :] * (f[None, :] + candidates[:, None])
    hinge = np.maximum(0.0, 1.0 - margins)
    losses = np.minimum(1.0, hinge).sum(axis=1) if weights is None else hinge @ weights
    best = candidates[losses <= losses.min() + 1e-9 * max(1.0, losses.min())]
    return float(best[(best.size - 1) // 2])


# ---------------------------------------------------------------------------------------------
# Alternating minimisation of the eta-hinge objective (6.6): each step a libsvm SVM
# ---------------------------------------------------------------------------------------------


@dataclass
class RampSolution:
    svm: SVC
    trained_on: np.ndarray  # indices of the points the final SVM was fit on
    eta: np.ndarray
    decision: np.ndarray
    objective_history: list[float]
    n_iter: int


def _alternate_from(X, y, eta, *, C, kernel, gamma, max_iter, on_iteration):
    history: list[float] = []
    seen: set[bytes] = set()
    svm, trained_on, f = None, np.arange(y.size), np.zeros(y.size)
    for _ in range(max_iter):
        keep = np.flatnonzero(eta)
        if np.unique(y[keep]).size < 2:  # every point of one class ablated: keep the last SVM
            break
        candidate = SVC(C=C, kernel=kernel, gamma=gamma if kernel == "rbf" else "scale", tol=1e-4)
        candidate.fit(X[keep], y[keep])
        svm, trained_on = candidate, keep
        f = svm.decision_function(X)
        dual = svm.dual_coef_[0]
        K_sv = pairwise_kernel(svm.support_vectors_, kernel=kernel, gamma=gamma)
        objective = robust_hinge_objective(f, y, float(dual @ K_sv @ dual), 1.0 / C)
        history.append(objective)
        seen.add(eta.tobytes())
        eta = y * f >= 0.0
        if on_iteration is not None:
            on_iteration(objective, int(np.count_nonzero(~eta)))
        if eta.tobytes() in seen:
            break
    if svm is None:
        return None
    return RampSolution(svm, trained_on, eta.astype(np.float64), f, history, len(history))


def class_centre_inliers(K_diag, K_rows, y, sample, keep_share, rounds=5):
    """Initial guess of the inliers: the ``keep_share`` of all points nearest (in feature space)
    to their class centre, each centre the mean of its class's kept points in ``sample``,
    re-estimated for a few ``rounds`` (trimmed means). Far points of the wrong class are the
    high-leverage outliers that trap an alternation started from the plain SVM.

    The share is over all points, not per class: the outliers of section 6.5 have random labels,
    so one class can hold more than its share of them, and a single far point left in can
    collapse the first SVM to a constant."""
    eta = np.ones(y.size, dtype=bool)
    n_drop = int(np.floor((1.0 - keep_share) * y.size + 1e-9))  # (1 - 0.8) * 50 is 9.99...
    if n_drop == 0:
        return eta
    for _ in range(rounds):
        distance = np.zeros(y.size)
        for label in (-1.0, 1.0):
            members = np.flatnonzero(y == label)
            centre = np.intersect1d(sample, members[eta[members]])
            if centre.size == 0:
                centre = np.intersect1d(sample, members)
            if centre.size == 0:
                continue
            cross = K_rows[:, np.searchsorted(sample, centre)]
            distance[members] = (K_diag[members] - 2.0 * cross[members].mean(axis=1)
                                 + cross[centre].mean())
        kept = np.ones(y.size, dtype=bool)
        kept[np.argsort(distance)[y.size - n_drop:]] = False
        for label in (-1.0, 1.0):  # never ablate a whole class
            if not kept[y == label].any():
                kept[y == label] = True
        if np.array_equal(kept, eta):
            break
        eta = kept
    return eta


def solve_ramp_alternating(
    X: np.ndarray,
    y: np.ndarray,
    *,
    C: float,
    kernel: str,
    gamma: float,
    max_iter: int = 50,
    keep_share: float = 0.8,
    sample_size: int = 1000,
    random_state: int = 0,
    on_iteration=None,
) -> RampSolution:
    """Minimise (6.7) by alternating over ``(w, eta)`` of (6.6) from two starts; return the run
    with the lower (6.7).

    Starts: the soft-margin SVM (all ``eta_i = 1``, Collobert et al.), and the guess of
    :func:`class_centre_inliers` (the ``keep_share`` of points nearest their class centre).
    (6.7) is non-convex and a far outlier can drag the plain SVM into a local minimum (thesis
    Figure 6.8); the second start is cheap insurance, and the objective decides.

    Step t: the libsvm SVM on the points with ``eta_i = 1`` minimises the eta-hinge objective
    (6.5) for the current ``eta``; then ``eta_i = 1[y_i f(x_i) >= 0]`` minimises it for the new
    classifier (Figure 6.2, Proposition 6). ``f_robust`` never increases:
    ``f_robust(w_t+1) <= f_hinge(w_t+1, eta_t) <= f_hinge(w_t, eta_t) = f_robust(w_t)``.
    """
    y = np.asarray(y, dtype=np.float64)
    rng = np.random.RandomState(random_state)
    sample = np.sort(rng.choice(y.size, size=min(sample_size, y.size), replace=False))
    K_rows = pairwise_kernel(X, X[sample], kernel=kernel, gamma=gamma)
    K_diag = np.ones(y.size) if kernel == "rbf" else np.einsum("ij,ij->i", X, X)
    starts = [np.ones(y.size, dtype=bool),
              class_centre_inliers(K_diag, K_rows, y, sample, keep_share)]
    best, step = None, 0
    for start in starts:
        def report_step(objective, n_ablated):
            nonlocal step
            step += 1
            if on_iteration is not None:
                on_iteration(step, objective, n_ablated)

        run = _alternate_from(X, y, start, C=C, kernel=kernel, gamma=gamma, max_iter=max_iter,
                         on_iteration=report_step)
        if run is None:
            continue
        if best is None or run.objective_history[-1] < best.objective_history[-1]:
            best = run
    if best is None:
        raise ValueError("every start ablated a whole class; check the labels")
    return best


# ---------------------------------------------------------------------------------------------
# Section 6.5 synthetic data
# ---------------------------------------------------------------------------------------------

SECTION_6_5_MEAN = np.array([3.0, -3.0])
SECTION_6_5_COVARIANCE = np.array([[20.0, 16.0], [16.0, 20.0]])


def gaussians_with_ring_outliers(
    rng: np.random.RandomState,
    *,
    radius: float,
    n_per_class: int = 20,
    n_outliers: int = 10,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training set of section 6.5: class +1 ~ N(mu, Sigma), class -1 ~ N(-mu, Sigma) and
    ``n_outliers`` points uniform on the ring ``radius <= ||x|| <= radius + 1`` labeled at random.

    Returns ``(X, y in {-1, +1}, is_outlier)``. As in the thesis' precision/recall evaluation, the
    outliers are the training points the best linear classifier ``sign(x_1 - x_2)`` misclassifies
    (both Gaussians share Sigma, whose eigenvector (1, -1) makes that the Bayes rule).
    """
    X_pos = rng.multivariate_normal(SECTION_6_5_MEAN, SECTION_6_5_COVARIANCE, n_per_class)
    X_neg = rng.multivariate_normal(-SECTION_6_5_MEAN, SECTION_6_5_COVARIANCE, n_per_class)
    angle = rng.uniform(0.0, 2.0 * np.pi, n_outliers)
    r = np.sqrt(rng.uniform(radius**2, (radius + 1.0) ** 2, n_outliers))  # uniform in area
    X_ring = np.column_stack((r * np.cos(angle), r * np.sin(angle)))
    y_ring = rng.choice([-1.0, 1.0], n_outliers)
    X = np.vstack((X_pos, X_neg, X_ring))
    y = np.concatenate((np.ones(n_per_class), -np.ones(n_per_class), y_ring))
    return X, y, y * bayes_decision(X) < 0


def gaussian_test_set(rng: np.random.RandomState, n_per_class: int = 1000):
    """Clean test points of section 6.5 (1,000 per class in the thesis)."""
    X = np.vstack((rng.multivariate_normal(SECTION_6_5_MEAN, SECTION_6_5_COVARIANCE, n_per_class),
                   rng.multivariate_normal(-SECTION_6_5_MEAN, SECTION_6_5_COVARIANCE, n_per_class)))
    return X, np.concatenate((np.ones(n_per_class), -np.ones(n_per_class)))


def bayes_decision(X: np.ndarray) -> np.ndarray:
    """``Sigma^{-1} (mu - (-mu)) . x`` for the section 6.5 Gaussians; its sign is the Bayes rule."""
    return X @ np.linalg.solve(SECTION_6_5_COVARIANCE, 2.0 * SECTION_6_5_MEAN)


def outlier_f_measure(is_outlier: np.ndarray, detected: np.ndarray) -> tuple[float, float, float]:
    """Precision, recall and F-measure of detected outliers against the true ones."""
    truth, found = np.asarray(is_outlier, bool), np.asarray(detected, bool)
    hits = int(np.count_nonzero(truth & found))
    precision = hits / found.sum() if found.any() else (1.0 if not truth.any() else 0.0)
    recall = hits / truth.sum() if truth.any() else 1.0
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return float(precision), float(recall), float(f)


# ---------------------------------------------------------------------------------------------
# Estimator
# ---------------------------------------------------------------------------------------------


class RobustSVM(MMCEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Binary SVM that ablates outliers: REH and ROD semidefinite programs, or a ramp-loss descent.

    Parameters
    ----------
    method : {"reh", "rod", "ramp"}, default="reh"
        ``"reh"``: the robust eta-hinge SDP of Theorem 7 (minimises the robust hinge loss (6.7) up
        to the relaxation (6.10)); ``"rod"``: the outlier-detection SDP of section 6.3 with at
        least ``rho n`` inliers; ``"ramp"``: alternating minimisation of (6.6) over ``(w, eta)``,
        each step a libsvm SVM, for large n (a local minimum of (6.7)).
    kernel : {"linear", "rbf"}, default="linear"
        Kernel ``K`` of ``G = K o yy^T``.
    gamma : float or {"local_scaling", "paper", "scale"}, default="scale"
        RBF width, ``exp(-gamma ||x - x'||^2)``; ``"scale"`` is scikit-learn's
        ``1 / (n_features * X.var())``, ``"local_scaling"`` the shared local width of
        :func:`algorithms.kernels.local_scaling_gamma` and ``"paper"`` ``1 / D^2`` with ``D`` the
        diagonal of the data's bounding box.

        .. versionchanged:: 0.2 ``"local_scaling"`` replaces ``"auto"``.
    C : float, default=1.0
        ``C = 1 / beta``: (6.1) is ``beta/2 ||w||^2 + sum hinge``, i.e. scikit-learn's ``SVC(C)``.
    rho : float, default=0.8
        ROD: ``e^T eta >= rho n`` (6.11); 0.8 was best in the thesis' section 6.5. Ramp: the
        share of the points, nearest their class centre, that the second start keeps.
    fit_intercept : bool, default=True
        SDP methods: the offset-free SDP is solved with the origin moved to the coordinate-wise
        median of ``X`` (linear kernel), then ``b`` is set to the exact minimiser of the
        eta-hinge loss at the SDP's ``(w, eta)`` (:func:`best_offset`).
        ``False`` is the thesis' classifier through the origin. The ramp method always fits
        libsvm's offset.
    max_alternations : int, default=50
        Ramp only: most rounds of the alternation (the SVM with ``eta`` held, then ``eta`` with
        the SVM held).

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    solver : {"auto", "lowrank", "clarabel", "scs"}, default="auto"
        ``"auto"`` (= ``"lowrank"``) is the low-rank solver of :mod:`algorithms.lowrank_sdp`
        with a certified relative duality gap of 1e-3 (``certificate_``); ``"scs"`` (eps 1e-4)
        and ``"clarabel"`` solve the cvxpy formulation (the reference).

        .. versionchanged:: 0.2 ``"cvxpy"`` is spelled ``"scs"``.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two label values; ``classes_[1]`` plays ``y = +1``.
    labels_ : ndarray of shape (n_samples,)
        Predicted label of every training point (values from ``classes_``).
    eta_ : ndarray of shape (n_samples,)
        Outlier indicators (1 = inlier, 0 = ablated): the relaxed SDP solution, or the final
        alternation's indicators (ramp).
    outlier_scores_ : ndarray of shape (n_samples,)
        ``1 - eta_``: larger means more of an outlier.
    outliers_ : ndarray of shape (n_outliers,)
        Indices of the ablated training points after rounding ``eta`` at the returned
        classifier (Proposition 6: ``eta_i = 1[y_i f(x_i) >= 0]``), i.e. the points it
        misclassifies. The relaxed ``eta_`` alone ranks outliers less sharply than the thesis
        reports (its Figure 6.10), see ``benchmarks/robust_svm.py``.
    dual_coef_ : ndarray of shape (n_samples,)
        ``lambda_i eta_i y_i / beta`` (Proposition 7): ``f(x) = sum_i dual_coef_i k(x, x_i) + b``.
    objective_ : float
        REH: SDP optimum of (6.9) relaxed, a lower bound on (6.7); ROD: relaxed optimum of
        (6.11); ramp: (6.7) at the final classifier. All in the thesis' scaling (``beta = 1/C``).
    primal_objective_ : float
        (6.7) (REH, ramp) or (6.11) with ``eta_`` (ROD) at the returned classifier.
    n_iter_ : int
        Alternation steps (ramp) or 1 (SDP).
    objective_history_ : list of float
        Ramp: (6.7) after every step (non-increasing).
    solver_ : str
        "lowrank", "CLARABEL", "SCS" or "libsvm".
    certificate_ : dict
        Low-rank SDP solves: status, objective, certified lower bound, relative gap,
        infeasibility and the dual slack's smallest eigenvalue.
    warnings_ : list of str
        Solver reports worth knowing (inaccurate SDP solutions).
    n_support_ : int

    References
    ----------
    L. Xu. Convex Large Margin Training Techniques. PhD thesis, University of Waterloo, 2007.
    Chapter 6: eta-hinge (6.5)-(6.6), Theorem 6, Proposition 7 (6.8), relaxation (6.10),
    Theorem 7 (REH SDP), section 6.3 (ROD, (6.11)), section 6.4 (Collobert et al. 2006; their
    CCCP is not the ramp method here, see the module docstring).

    See Also
    --------
    sklearn.svm.SVC : the soft-margin SVM (6.1) these methods make robust.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0, 0], [-1, 1], [-1, -1], [1, 1], [2, 0], [1, -1], [9, 9]])
    >>> y = np.array(["a", "a", "a", "b", "b", "b", "a"])
    >>> RobustSVM(method="ramp").fit(X, y).predict([[-3.0, 0.0], [3.0, 0.0]]).tolist()
    ['a', 'b']
    """

    params_model = RobustSVMParams
    _result_attributes = (
        *MMCEstimatorMixin._result_attributes, "primal_objective_", "n_outliers_",
        "certificate_",
    )

    def __init__(
        self,
        method: str = "reh",
        *,
        kernel: str = "linear",
        gamma: float | str = "scale",
        C: float = 1.0,
        rho: float = 0.8,
        fit_intercept: bool = True,
        max_alternations: int = 50,
        solver: str = "auto",
        max_iter: int | str = DEPRECATED,
    ):
        self.method = method
        self.kernel = kernel
        self.gamma = gamma
        self.C = C
        self.rho = rho
        self.fit_intercept = fit_intercept
        self.max_alternations = max_alternations
        self.solver = solver
        self.max_iter = max_iter

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # (6.1)-(6.11) are binary; y must have 2 classes
        return tags

    # -- fitting ----------------------------------------------------------------------------------
    def _signed_labels(self, y: Any, n_samples: int) -> np.ndarray:
        if y is None:  # wording as scikit-learn's check_requires_y_none expects
            raise ValueError("RobustSVM requires y to be passed, but the target y is None: y (one "
                             "label per point) is required")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)  # a column vector, as scikit-learn's classifiers take
        if y.ndim != 1 or y.shape[0] != n_samples:
            raise ValueError(f"y must be 1-D with one label per point ({n_samples}), got {y.shape}")
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity")
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind not in ("binary", "multiclass") or np.unique(y).size != 2:
            found = np.unique(y).size if kind in ("binary", "multiclass") else kind
            noun = "class" if found == 1 else "classes"
            raise ValueError(
                "Only binary classification is supported: y must hold exactly two classes, "
                f"got {found} {noun}"
            )
        self.classes_, index = np.unique(y, return_inverse=True)
        return np.where(index == 1, 1.0, -1.0)

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Train on ``X`` with labels ``y`` (two distinct values, any type)."""
        self._params = self._validated_params()
        X = as_float_matrix(X)
        X = validate_data(self, X, reset=True)
        signed = self._signed_labels(y, X.shape[0])
        self.gamma_ = resolve_gamma(X, self._params.gamma) if self._params.kernel == "rbf" else 0.0
        beta = 1.0 / self._params.C
        self.warnings_: list[str] = []
        if self._params.method == "ramp":
            self._fit_ramp(X, signed, progress)
        else:
            self._fit_sdp(X, signed, beta, progress)
        decision = self.classifier_.decision_function(X)
        self.labels_ = self.classes_[(decision > 0).astype(np.int64)]
        self.outlier_scores_ = 1.0 - self.eta_
        # Rounding by Proposition 6: at the returned w the eta minimising the eta-hinge loss is
        # eta_i = 1[y_i f(x_i) >= 0], so the ablated points are the misclassified ones.
        self.outliers_ = np.flatnonzero(signed * decision < 0)
        self.n_outliers_ = int(self.outliers_.size)
        self.n_support_ = int(self.classifier_.n_support)
        report(progress, self.n_iter_ + 1, self.objective_, f"{self.n_outliers_} points ablated")
        return self

    def _fit_sdp(self, X: np.ndarray, y: np.ndarray, beta: float, progress) -> None:
        n = X.shape[0]
        # The offset-free SDP needs the origin inside the data (module docstring); RBF kernels
        # are translation invariant, so only the linear kernel is moved.
        origin = (np.median(X, axis=0)
                  if self._params.fit_intercept and self._params.kernel == "linear"
                  else np.zeros(X.shape[1]))
        Xc = X - origin
        K = pairwise_kernel(Xc, kernel=self._params.kernel, gamma=self.gamma_)
        report(progress, 0, None, f"solving the {self._params.method.upper()} SDP for {n} points")
        solution = solve_robust_sdp(K, y, beta, method=self._params.method, rho=self._params.rho,
                                    solver=self._params.solver)
        self.warnings_.extend(solution.warnings)
        # Proposition 7: w = sum_i lambda_i eta_i y_i phi(x_i) / beta.
        coef = solution.lam * solution.eta * y / beta
        f = K @ coef
        norm_w2 = float(coef @ K @ coef)
        b = 0.0
        if self._params.fit_intercept:
            b = best_offset(f, y, solution.eta)
        if self._params.method == "reh":
            primal = robust_hinge_objective(f + b, y, norm_w2, beta)
        else:
            primal = 0.5 * beta * norm_w2 + float(solution.eta @ np.maximum(0.0, 1.0 - y * (f + b)))
        keep = np.flatnonzero(np.abs(coef) > 1e-10 * max(np.abs(coef).max(), 1e-300))
        # f(x) = sum_i coef_i k(x - origin, x_i - origin) + b; for the linear kernel that is
        # sum_i coef_i <x, x_i - origin> + b - sum_i coef_i <origin, x_i - origin>.
        intercept = b - float(coef @ (Xc @ origin)) if self._params.kernel == "linear" else b
        self.classifier_ = KernelExpansionClassifier(
            Xc[keep] if self._params.kernel == "linear" else X[keep], coef[keep, None],
            np.array([intercept]), np.array([0, 1]), self._params.kernel, self.gamma_,
        )
        self.eta_ = solution.eta
        self.dual_coef_ = coef
        self.objective_ = solution.objective
        self.primal_objective_ = primal
        self.n_iter_ = 1
        self.objective_history_ = [solution.objective]
        self.solver_ = solution.solver
        if solution.certificate is not None:
            self.certificate_ = solution.certificate
        elif hasattr(self, "certificate_"):  # a refit with a cvxpy solver
            del self.certificate_
        report(progress, 1, solution.objective, f"SDP {solution.status}")

    def _fit_ramp(self, X: np.ndarray, y: np.ndarray, progress) -> None:
        def on_iteration(step: int, objective: float, n_ablated: int):
            report(progress, step, objective,
                   f"alternation step {step}: {n_ablated} points ablated")

        solution = solve_ramp_alternating(X, y, C=self._params.C, kernel=self._params.kernel,
                                   gamma=self.gamma_, max_iter=self._params.max_alternations,
                                   keep_share=self._params.rho,
                                   on_iteration=on_iteration)
        svm = solution.svm
        coef = np.zeros(X.shape[0])
        coef[solution.trained_on[svm.support_]] = svm.dual_coef_[0]
        self.classifier_ = KernelExpansionClassifier(
            svm.support_vectors_, svm.dual_coef_[0][:, None], svm.intercept_[:1],
            np.array([0, 1]), self._params.kernel, self.gamma_,
        )
        self.eta_ = solution.eta
        self.dual_coef_ = coef
        self.objective_ = solution.objective_history[-1]
        self.primal_objective_ = self.objective_
        self.objective_history_ = solution.objective_history
        self.n_iter_ = solution.n_iter
        self.solver_ = "libsvm"
        if solution.n_iter == self._params.max_alternations:
            self.warnings_.append(f"the alternation stopped after max_alternations="
                                  f"{self._params.max_alternations} steps")

    # -- prediction -------------------------------------------------------------------------------
    def decision_function(self, X) -> np.ndarray:
        """``f(x)``; positive means ``classes_[1]``."""
        check_is_fitted(self, "classifier_")
        X = validate_data(self, as_float_matrix(X), reset=False)
        return self.classifier_.decision_function(X)

    def predict(self, X) -> np.ndarray:
        return self.predict_with_decision(X)[0]

    def predict_with_decision(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(predict(X), decision_function(X))`` from one kernel evaluation."""
        decision = self.decision_function(X)  # checks fitted first: NotFittedError
        return self.classes_[(decision > 0).astype(np.int64)], decision

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        meta, arrays = self.classifier_.to_export(prefix="svm_")
        state = {
            "classes_": self.classes_.tolist(), "gamma_": self.gamma_, "svm": meta,
            "objective_": self.objective_, "primal_objective_": self.primal_objective_,
            "n_iter_": self.n_iter_, "solver_": self.solver_, "warnings_": list(self.warnings_),
        }
        arrays.update({"eta_": self.eta_, "dual_coef_": self.dual_coef_,
                       "outliers_": self.outliers_,
                       "label_index_": (self.labels_ == self.classes_[1]).astype(np.int64)})
        return state, arrays

    def _import_state(self, state, arrays):
        self.classes_ = np.asarray(state["classes_"])
        self.gamma_ = float(state["gamma_"])
        self.classifier_ = KernelExpansionClassifier.from_export(state["svm"], arrays,
                                                                 prefix="svm_")
        self.objective_ = float(state["objective_"])
        self.primal_objective_ = float(state["primal_objective_"])
        self.n_iter_ = int(state["n_iter_"])
        self.solver_ = state["solver_"]
        self.warnings_ = list(state["warnings_"])
        self.eta_ = np.asarray(arrays["eta_"], dtype=np.float64)
        self.dual_coef_ = np.asarray(arrays["dual_coef_"], dtype=np.float64)
        self.outlier_scores_ = 1.0 - self.eta_
        self.outliers_ = np.asarray(arrays["outliers_"], dtype=np.int64)
        self.labels_ = self.classes_[np.asarray(arrays["label_index_"], dtype=np.int64)]
        self.n_outliers_ = int(self.outliers_.size)
        self.n_support_ = int(self.classifier_.n_support)


