"""GMMC's SDP (10): its solvers, its splits over whole groups, and the labels of a solution.

Valizadegan and Jin 2006, "Generalized Maximum Margin Clustering and Unsupervised Kernel
Learning" (NIPS). (10) for one bias-eliminated ``S`` (:func:`algorithms.gmmc.eliminate_bias`) is
solved in a scaled dual form by a Burer-Monteiro augmented Lagrangian with an optimality
certificate (:func:`solve_gmmc_lowrank`), or by a conic solver through cvxpy
(:func:`solve_gmmc_cvxpy`, the reference); restricted to labelings constant on given groups it is
enumerated (:func:`split_whole_groups`) or relaxed over the groups (:func:`relax_whole_groups`).
Labels are the signs of the KKT eigenvector (section 3.1, :func:`labels_from_factor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg
from scipy.optimize import minimize
from sklearn.utils import check_random_state

from algorithms.augmented_lagrangian import PenaltyPolicy
from algorithms.conic import (
    ConicSolver,
    SDPSolverError,
    check_solver_status,
    cvxpy_solver_name,
    solve_conic,
)
from algorithms.rounding import labels_from_leading_eigenvector, psd_factor
from algorithms.threads import small_problem_threads

# ---------------------------------------------------------------------------------------------
# The SDP (10): low-rank augmented Lagrangian solver
# ---------------------------------------------------------------------------------------------


@dataclass
class GMMCSolution:
    """Solution of (10) for one ``S``: factor ``V`` (``X = V V^T``), multipliers ``gamma``."""

    V: np.ndarray
    gamma: np.ndarray
    primal: float  # <S + C_e ee^T, X> + C_delta sum (1 - X_ii)_+
    dual: float  # sum gamma: the objective of (10)
    gap: float  # relative duality gap
    infeasibility: float  # largest violation of the complementarity/feasibility conditions
    min_eig: float | None  # smallest eigenvalue of the KKT matrix, relative (>= -tol certifies)
    n_iter: int
    status: str  # "optimal" or "inaccurate"
    messages: list[str] = field(default_factory=list)
    rank_too_small: bool = False  # the certificate failed: a higher rank may reach the optimum


# Starting factor rank. Pataki's bound sqrt(2 m) for m = n constraints guarantees a rank-r
# optimum exists, but clustering solutions are of rank 1-3: starting low keeps the O(n^2 r)
# products and the L-BFGS state small, and the certificate raises the rank when it was too small.
START_RANK = 4
# Rank doublings after a failed certificate before the solution is returned as "inaccurate"
# (rank 4 doubled three times reaches 32, past Pataki's bound up to n = 480).
MAX_RANK_RAISES = 3


def _default_rank(n: int) -> int:
    return int(min(np.ceil(np.sqrt(2 * n)) + 1, START_RANK))


def kkt_min_eigenvalue(S: np.ndarray, gamma: np.ndarray, C_e: float) -> float:
    """Smallest eigenvalue of ``S + C_e e e^T - diag(gamma)`` (the dual slack of (10)).

    Dense (LAPACK ``evr``, one eigenvalue): Lanczos converges poorly here because ``C_e n`` sits
    at the top of the spectrum, far from the O(1) eigenvalues of interest.
    """
    Z = S - np.diag(gamma)
    Z += C_e
    return float(linalg.eigh(Z, eigvals_only=True, subset_by_index=[0, 0],
                             overwrite_a=True, check_finite=False)[0])


def solve_gmmc_lowrank(
    S: np.ndarray,
    *,
    C_e: float = 1e4,
    C_delta: float = 1e5,
    rank: int | None = None,
    tol: float = 1e-6,
    max_iter: int = 50,
    inner_max_iter: int = 500,
    V0: np.ndarray | None = None,
    gamma0: np.ndarray | None = None,
    random_state: int | np.random.RandomState | None = None,
    certify: bool = True,
    on_iteration=None,
) -> GMMCSolution:
    """Solve (10) in its scaled dual form by a Burer-Monteiro augmented Lagrangian.

    ``min tr(W^T S W) + ||a||^2 + C_delta sum_i (1 - ||v_i||^2)_+`` with
    ``v_i = (W - mean W)_i + a / (n sqrt(C_e))``. The multiplier of ``||v_i||^2 >= 1`` is the
    paper's ``gamma_i``; clipping it to ``[0, C_delta]`` gives the soft margin of (10).
    ``V0``/``gamma0`` warm-start the solve (kernel learning re-solves with nearby ``S``).

    With ``certify``, the dual slack ``S + C_e e e^T - diag(gamma)`` must be positive
    semidefinite; its smallest eigenvalue ``lambda`` lowers the certified dual bound to
    ``sum gamma + n min(0, lambda)``, which the reported gap uses. A factor rank too small for
    the optimum shows as ``lambda < 0``: the rank is then doubled (warm-started from the factor)
    up to ``MAX_RANK_RAISES`` times.

    The loop is many small products and L-BFGS-B steps: it runs under one BLAS thread
    (:func:`algorithms.threads.small_problem_threads`), since threads spin-waiting on a busy core
    cost more than such products gain.
    """
    rng = check_random_state(random_state)
    r = rank or _default_rank(S.shape[0])
    with small_problem_threads():
        for raises in range(MAX_RANK_RAISES + 1):
            solution = _solve_at_rank(S, C_e=C_e, C_delta=C_delta, r=r, tol=tol,
                                      max_iter=max_iter, inner_max_iter=inner_max_iter, V0=V0,
                                      gamma0=gamma0, rng=rng, certify=certify,
                                      on_iteration=on_iteration)
            if not solution.rank_too_small or r >= S.shape[0] or raises == MAX_RANK_RAISES:
                return solution
            # Warm start at twice the rank: the factor, plus small random columns (zero columns
            # would be a stationary point of the new directions).
            V0 = np.hstack([solution.V, 1e-3 * rng.standard_normal((S.shape[0], r))])
            gamma0, r = solution.gamma, 2 * r
    return solution


def _solve_at_rank(S, *, C_e, C_delta, r, tol, max_iter, inner_max_iter, V0, gamma0, rng,
                   certify, on_iteration) -> GMMCSolution:
    """One augmented-Lagrangian solve of :func:`solve_gmmc_lowrank` at factor rank ``r``: L-BFGS-B
    on :func:`_lagrangian` for the factor, then the multiplier step, until the residual and the
    gap are within ``tol``; then, with ``certify``, :func:`_certificate`."""
    n = S.shape[0]
    s = 1.0 / (n * np.sqrt(C_e))
    if V0 is not None and V0.shape == (n, r):
        W = V0.copy()
    else:
        W = rng.standard_normal((n, r))
        W -= W.mean(axis=0)
        W /= np.linalg.norm(W, axis=1, keepdims=True)
    a = np.zeros(r)
    y = np.zeros(n) if gamma0 is None else np.clip(gamma0, 0.0, C_delta).copy()
    scale_S = max(float(np.trace(S)) / n, 1e-12)
    mu = 10.0 * scale_S
    mu_max = 1e5 * scale_S
    policy = PenaltyPolicy(inner_floor=1e-3 * tol)
    x = np.concatenate([W.ravel(), a])
    residual_old = np.inf
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        # Inexact inner solves: the gradient tolerance follows the outer residual.
        inner_tol = scale_S * policy.inner_tolerance(residual_old)
        result = minimize(_lagrangian, x, args=(S, r, s, y, mu, C_delta), jac=True,
                          method="L-BFGS-B",
                          options={"maxiter": inner_max_iter, "gtol": inner_tol, "ftol": 1e-15})
        x = result.x
        W, a, V, g = _factor_and_constraints(x, n, r, s)
        y = np.clip(y + mu * g, 0.0, C_delta)
        # Natural residual of the complementarity conditions, in units of the constraint.
        residual = float(np.max(np.abs(np.clip(y + g, 0.0, C_delta) - y)) / max(1.0, y.max()))
        quad = float(np.einsum("ij,ij->", W, S @ W) + a @ a)
        # A feasible primal value: either pay C_delta for the (tiny) violations, or scale X up
        # until every X_ii >= 1; both bound the optimum of the scaled problem from above.
        shortfall = 1.0 - float(g.max())
        primal = min(quad + C_delta * float(np.maximum(g, 0.0).sum()),
                     quad / shortfall if shortfall > 0 else np.inf)
        dual = float(y.sum())
        gap = abs(primal - dual) / max(1.0, abs(primal), abs(dual))
        if on_iteration is not None:
            on_iteration(n_iter, dual, residual, gap)
        if residual < tol and gap < tol:
            break
        if policy.lags(residual, residual_old, tol):
            mu = policy.grown(mu, mu_max)
        residual_old = residual
    messages = []
    status = "optimal"
    if not (residual < tol and gap < tol):
        status = "inaccurate"
        messages.append(
            f"low-rank GMMC solver stopped after {n_iter} augmented-Lagrangian iterations with "
            f"duality gap {gap:.2e} and residual {residual:.2e} (tol {tol:.0e})"
        )
    min_eig = None
    rank_too_small = False
    if certify:
        min_eig, dual, gap, rank_too_small = _certificate(S, y, C_e, primal, dual, tol)
        if rank_too_small:
            status = "inaccurate"
            messages.append(
                f"KKT matrix has eigenvalue {min_eig:.2e} < 0: rank {r} may be too small for a "
                "global optimum of (10)"
            )
    return GMMCSolution(V=V, gamma=y, primal=primal, dual=dual, gap=gap, infeasibility=residual,
                        min_eig=min_eig, n_iter=n_iter, status=status, messages=messages,
                        rank_too_small=rank_too_small)


def _factor_and_constraints(x: np.ndarray, n: int, r: int, s: float
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The variables ``x = (W, a)`` of :func:`solve_gmmc_lowrank`, the factor
    ``V = (W - mean W) + s a`` and the constraints ``g_i = 1 - ||v_i||^2 <= 0``."""
    W, a = x[: n * r].reshape(n, r), x[n * r:]
    V = W - W.mean(axis=0) + s * a
    return W, a, V, 1.0 - np.einsum("ij,ij->i", V, V)


def _lagrangian(x: np.ndarray, S: np.ndarray, r: int, s: float, y: np.ndarray, mu: float,
                C_delta: float) -> tuple[float, np.ndarray]:
    """The augmented Lagrangian of the scaled problem at ``x = (W, a)`` for the multipliers
    ``y`` (clipped to ``[0, C_delta]``, the soft margin of (10)) and the penalty ``mu``, and its
    gradient."""
    n = S.shape[0]
    W, a = x[: n * r].reshape(n, r), x[n * r:]
    SW = S @ W
    V = W - W.mean(axis=0) + s * a
    g = 1.0 - np.einsum("ij,ij->i", V, V)  # constraint g_i <= 0
    lam = np.clip(y + mu * g, 0.0, C_delta)
    value = np.einsum("ij,ij->", W, SW) + a @ a + lam @ g - np.sum((lam - y) ** 2) / (2 * mu)
    G = -2.0 * lam[:, None] * V
    grad_W = 2.0 * SW + G - G.mean(axis=0)
    grad_a = 2.0 * a + s * G.sum(axis=0)
    return value, np.concatenate([grad_W.ravel(), grad_a])


def _certificate(S: np.ndarray, y: np.ndarray, C_e: float, primal: float, dual: float,
                 tol: float) -> tuple[float, float, float, bool]:
    """The smallest eigenvalue of the dual slack ``S + C_e e e^T - diag(y)`` relative to ``S``,
    the certified dual bound and gap, and whether the eigenvalue says the rank was too small."""
    eigenvalue = kkt_min_eigenvalue(S, y, C_e)
    min_eig = eigenvalue / max(1.0, float(np.abs(S).max()))
    # Shifting gamma by lambda makes the slack PSD: a certified lower bound on (10).
    dual = dual + S.shape[0] * min(0.0, eigenvalue)
    gap = abs(primal - dual) / max(1.0, abs(primal), abs(dual))
    rank_too_small = not np.isfinite(min_eig) or min_eig < -max(100 * tol, 1e-5)
    return min_eig, dual, gap, rank_too_small


# Up to this many guide clusters in a cluster to split, the split that keeps them whole is found
# exactly among the 2^(m-1) - 1 labelings of whole clusters (about half a million at 20).
EXACT_SPLIT_MAX_GROUPS = 20
# Labelings scored per block of the enumeration: bounds the memory of the block of m-vectors.
_LABELINGS_PER_BLOCK = 1 << 16
# The conic solver of (10) over more whole groups than enumeration reaches (m x m, m > 20).
GROUP_SDP_SOLVER = "clarabel"


def _group_form(S: np.ndarray, groups: np.ndarray, C_e: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A = G^T (S + C_e ee^T) G`` for the group indicator ``G`` (``z = G zeta`` gives
    ``z^T (S + C_e ee^T) z = zeta^T A zeta``), each point's group, and the group sizes."""
    ids, group_of = np.unique(groups, return_inverse=True)
    indicator = np.zeros((ids.size, S.shape[0]))
    indicator[group_of, np.arange(S.shape[0])] = 1.0
    sizes = indicator.sum(axis=1)
    return indicator @ S @ indicator.T + C_e * np.outer(sizes, sizes), group_of, sizes


def _labels_solution(S: np.ndarray, C_e: float, z: np.ndarray, value: float, dual: float,
                     messages: list[str] | None = None) -> GMMCSolution:
    """Labels ``z`` as a solution of (10) at ``X = z z^T``: ``gamma_i = z_i ((S + C_e ee^T)
    z)_i``, the multipliers of the stationarity condition ``(S + C_e ee^T - diag(gamma)) z = 0``,
    which sum to ``value``; ``dual`` is the best lower bound known."""
    gamma = z * (S @ z + C_e * z.sum())
    gap = (value - dual) / max(1.0, abs(value))
    return GMMCSolution(V=z[:, None], gamma=gamma, primal=value, dual=dual, gap=gap,
                        infeasibility=0.0, min_eig=None, n_iter=0,
                        status="inaccurate" if messages else "optimal",
                        messages=list(messages or []))


def split_whole_groups(S: np.ndarray, groups: np.ndarray, C_e: float) -> GMMCSolution:
    """The labels ``z`` in ``{-1, +1}^n``, constant on each group, that minimise
    ``z^T (S + C_e ee^T) z``: the problem whose relaxation (10) is (its dual is
    ``min <S + C_e ee^T, X>`` over ``X >= 0`` with ``X_ii >= 1``, and ``X = z z^T`` for labels).

    With ``m`` groups the quadratic form is ``zeta^T A zeta`` for ``A = G^T (S + C_e ee^T) G``
    (``G`` the group indicator), minimised by enumeration of ``zeta`` with ``zeta_0 = +1``. This is
    the problem exactly where (10) would relax it over every point: with guide clusters kept whole
    (:func:`algorithms.selection.bisection.keep_guide_clusters_whole`) only these labelings can
    come out,
    and ``m`` is far smaller than ``n``.
    """
    A, group_of, _ = _group_form(S, groups, C_e)
    m = A.shape[0]
    best_value, best_signs = np.inf, None
    # Code 0 would put every group on one side; group 0 is always on the + side (symmetry).
    for start in range(1, 2 ** (m - 1), _LABELINGS_PER_BLOCK):
        codes = np.arange(start, min(start + _LABELINGS_PER_BLOCK, 2 ** (m - 1)))
        free_signs = 1.0 - 2.0 * ((codes[:, None] >> np.arange(m - 1)) & 1)
        zetas = np.hstack([np.ones((codes.size, 1)), free_signs])
        values = np.einsum("ij,ij->i", zetas @ A, zetas)
        if values.min() < best_value:
            best_value, best_signs = float(values.min()), zetas[int(np.argmin(values))]
    return _labels_solution(S, C_e, best_signs[group_of], best_value, best_value)


def relax_whole_groups(S: np.ndarray, groups: np.ndarray, C_e: float, C_delta: float
                       ) -> GMMCSolution:
    """:func:`split_whole_groups` for more groups than enumeration reaches: (10) restricted to
    ``X = G Z G^T`` (``X`` constant on each pair of groups, as every labeling of whole groups
    is), which is ``min <A, Z> + C_delta sum_g |g| (1 - Z_gg)_+`` over ``m x m`` PSD ``Z``,
    solved by ``GROUP_SDP_SOLVER``; labels from the signs of ``Z``'s leading eigenvector
    (section 3.1's rounding), then single groups moved to the other side while that lowers
    ``zeta^T A zeta``.

    An ``m x m`` program instead of the ``n x n`` relaxation over the points, whose rounding
    would then have to be forced onto whole groups. ``dual`` is the relaxation's value, a lower
    bound on every labeling of whole groups.
    """
    import cvxpy as cp

    A, group_of, sizes = _group_form(S, groups, C_e)
    scale = max(float(np.abs(A).max()), 1e-300)  # O(1) entries: the tolerances are absolute
    Z = cp.Variable(A.shape, PSD=True)
    slack = cp.Variable(A.shape[0], nonneg=True)
    problem = cp.Problem(
        cp.Minimize(cp.trace(A / scale @ Z) + (C_delta / scale) * (sizes @ slack)),
        [cp.diag(Z) >= 1 - slack])
    messages, _ = solve_conic(problem, GROUP_SDP_SOLVER, 1e-7, 10_000,
                              "(10) over whole groups")
    _, vectors = np.linalg.eigh(Z.value)
    zeta = np.where(vectors[:, -1] >= 0, 1.0, -1.0)
    while True:  # flipping group g changes the value by -4 zeta_g (A zeta)_g + 4 A_gg
        change = -4.0 * zeta * (A @ zeta) + 4.0 * np.diag(A)
        g = int(np.argmin(change))
        if change[g] >= -1e-12 * scale:
            break
        zeta[g] = -zeta[g]
    value = float(zeta @ A @ zeta)
    return _labels_solution(S, C_e, zeta[group_of], value, min(value, scale * problem.value),
                            messages)


# ---------------------------------------------------------------------------------------------
# The same scaled SDP for a generic conic solver
# ---------------------------------------------------------------------------------------------


def solve_gmmc_cvxpy(
    S: np.ndarray, *, C_e: float = 1e4, C_delta: float = 1e5, solver: ConicSolver = "scs",
    eps: float = 1e-7,
) -> GMMCSolution:
    """(10) in the scaled dual form for cvxpy: ``X = B Z B^T``, ``B = [e / (n sqrt(C_e)), Q]``.

    ``Q`` is an orthonormal basis of ``e^perp``; the objective ``<S + C_e ee^T, X>`` becomes
    ``Z_00 + <Q^T S Q, Z_11>`` with O(1) coefficients. ``C_delta`` enters only when it can bind
    (below ``C_e + max S_ii``), through slacks scaled by ``1 / C_delta``.
    Raises :class:`SDPSolverError` when the solver fails; "optimal_inaccurate" is reported.
    """
    import cvxpy as cp

    n = S.shape[0]
    ones = np.ones((n, 1)) / np.sqrt(n)
    Q = np.linalg.svd(np.eye(n) - ones @ ones.T)[0][:, : n - 1]
    B = np.hstack([ones / np.sqrt(C_e * n), Q])
    C = np.zeros((n, n))
    C[0, 0] = 1.0
    C[1:, 1:] = Q.T @ S @ Q
    Z = cp.Variable((n, n), PSD=True)
    diag_X = cp.sum(cp.multiply(B @ Z, B), axis=1)
    soft = C_delta < C_e + float(np.max(np.diag(S)))
    if soft:
        xi = cp.Variable(n, nonneg=True)  # C_delta * (1 - X_ii)_+
        constraints = [diag_X >= 1 - xi / C_delta]
        objective = cp.trace(C @ Z) + cp.sum(xi)
    else:
        constraints = [diag_X >= 1]
        objective = cp.trace(C @ Z)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    name = cvxpy_solver_name(solver)
    kwargs = {"eps": eps, "max_iters": 200_000} if name == "SCS" else {}
    try:
        problem.solve(solver=name, **kwargs)
    except cp.error.SolverError as exc:
        raise SDPSolverError(f"cvxpy/{name} failed on the GMMC SDP (10): {exc}") from None
    messages = check_solver_status(problem.status, solver=f"cvxpy/{name}",
                                   what="the GMMC SDP (10)")
    V = psd_factor(B @ Z.value @ B.T)
    gamma = np.asarray(constraints[0].dual_value, dtype=np.float64).ravel()
    primal = float(problem.value)
    dual = float(gamma.sum())
    gap = abs(primal - dual) / max(1.0, abs(primal), abs(dual))
    status = "inaccurate" if messages else "optimal"
    return GMMCSolution(V=V, gamma=gamma, primal=primal, dual=dual, gap=gap, infeasibility=0.0,
                        min_eig=None, n_iter=int(problem.solver_stats.num_iters or 0),
                        status=status, messages=messages)


def labels_from_factor(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels from the leading eigenvector of ``X = V V^T`` (section 3.1's KKT eigenvector)."""
    if V.shape[0] <= 2000:
        return labels_from_leading_eigenvector(V @ V.T)
    U, sv, _ = np.linalg.svd(V, full_matrices=False)  # same vector, O(n r^2)
    scores = sv[0] * U[:, 0]
    if scores[0] < 0:
        scores = -scores
    return (scores < 0).astype(np.int64), scores


def split_from_factor(V: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`labels_from_factor`, or, when its signs put every point in one cluster, the split
    at the median of the relaxed labels; the flag says the fallback was taken."""
    labels, scores = labels_from_factor(V)
    if np.unique(labels).size >= 2:
        return labels, scores, False
    return (scores < np.median(scores)).astype(np.int64), scores, True
