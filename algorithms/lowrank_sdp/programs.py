"""The programs: thesis SDP (3.5), the multi-class SDP (4.8) and the REH / ROD SDPs of chapter 6
(Xu 2007), each set up for :func:`~algorithms.lowrank_sdp.solve_lowrank_sdp`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn.utils import check_random_state

from algorithms.lowrank_sdp.constraints import Constraints, bilinear, map_constraints
from algorithms.lowrank_sdp.objectives import (
    FACTORED_MAX_RANK,
    HalfSphereMarginObjective,
    LinearObjective,
    MappedObjective,
    MarginObjective,
    low_rank_factor,
)
from algorithms.lowrank_sdp.solver import (
    LowRankSDPResult,
    raise_if_infeasible,
    solve_lowrank_sdp,
)


def _unit_rows(V: np.ndarray) -> np.ndarray:
    return V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-300)


def spectral_start(K: np.ndarray, r: int, rng) -> np.ndarray:
    """Unit rows of the leading ``r`` eigenvectors of ``K`` (plus a little noise, so no row
    is zero): the label matrix of a spectral relaxation, close to the optimum of (3.5). From a
    random start the first inner SVM duals are far from their optimum and cost many
    active-set steps each; from here they take few."""
    from scipy.sparse.linalg import eigsh

    n = K.shape[0]
    if n <= 4 * r + 10:
        vectors = linalg.eigh(K, subset_by_index=[n - r, n - 1])[1]
    else:
        vectors = eigsh(K, k=r, which="LA", v0=rng.standard_normal(n))[1]
    V = vectors * np.sqrt(n) + 1e-3 * rng.standard_normal((n, r))
    return _unit_rows(V)


def default_rank(n: int, n_constraints_hint: int = 0) -> int:
    """Columns of ``V``: the optima here have rank 1-3 (labels, indicators); Pataki's bound
    ``sqrt(2 m)`` is far larger and costs ``O(n^2 r)`` per evaluation, so a small cap is used
    and the certificate's eigenvalue test adds columns when it was too small."""
    return int(min(max(4, np.ceil(np.sqrt(2 * max(n_constraints_hint, 1)) / 4)), 8, n))


@dataclass
class TwoClassLowRank:
    """Two-class SDP (3.5) solved by :func:`~algorithms.lowrank_sdp.solve_lowrank_sdp`."""

    M: np.ndarray
    omega: float
    result: LowRankSDPResult


def solve_two_class_lowrank(
    K: np.ndarray, *, beta: float, limit: float, y_partial: np.ndarray | None = None,
    groups: np.ndarray | None = None, weights: np.ndarray | None = None, tol: float = 1e-4,
    max_iter: int = 300, rank: int | None = None, random_state=0, on_iteration=None,
) -> TwoClassLowRank:
    """SDP (3.5) (same program as :func:`algorithms.sdp_mmc_programs.solve_two_class_sdp`).

    ``max_iter`` is generous: with the inner SVM duals solved to their tolerance the outer loop
    usually closes in one or two iterations, but inexact inner solves make L-BFGS's line
    searches stop early and need many restarts.

    ``min_M omega(M)`` over ``diag(M) = e``, ``-limit <= M e <= limit``, ``M >= 0``; with
    ``y_partial`` (``+-1`` known, 0 unknown) S1 ``M_ij = y_i y_j`` on the labeled block (by
    construction: the labeled rows of the factor are ``y_i`` times one shared row) and S2
    ``sum_{labeled i} M_ij >= 2 - t`` for each unlabeled ``j``.

    With ``groups`` (one id per point; not with ``y_partial``) ``M`` is held constant on each
    pair of groups, ``M_ij = 1`` within one: the relaxation of the labelings that keep every
    group whole, as recursive bisection asks of its guide's clusters. The factor then has one
    row per group (``Z = T W T^T`` as for S1), a far smaller problem than one row per point.

    With ``weights`` (not with ``y_partial``) row ``i`` of ``K`` stands for ``weights[i]``
    identical points, labelled alike: the balance reads ``-limit <= M w <= limit`` and the
    margin objective is the expanded one (:class:`~algorithms.lowrank_sdp.MarginObjective`), so
    the program is (3.5) over all the points with ``M`` constant on each point's copies, solved
    at the size of the distinct points.
    """
    n = K.shape[0]
    if weights is not None and y_partial is not None:
        raise ValueError("give partial labels or weights, not both")
    counts = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    everyone = np.arange(n)
    blocks = [  # diag(M) = e: unit rows of the factor
        bilinear(n, everyone, None, limit, inequality=True, shared_c=counts),  # M w <= l
        bilinear(n, everyone, None, limit, inequality=True, shared_c=-counts),  # -M w <= l
    ]
    # S1: v_i = y_i v_anchor for the labeled points, i.e. Z = T W T^T with T mapping W's
    # rows (the anchor, then each unlabeled point) onto all n points.
    free = everyone
    T = sp.identity(n, format="csr")
    if y_partial is not None:
        known = np.flatnonzero(y_partial != 0)
        unknown = np.flatnonzero(y_partial == 0)
        if known.size and unknown.size:  # S2: -sum_{i known} M_ij <= t - 2
            indicator = np.zeros(n)
            indicator[known] = -1.0
            blocks.append(bilinear(n, unknown, None, known.size - 2.0, inequality=True,
                                   shared_c=indicator))
        if known.size > 1:
            free = np.concatenate([known[:1], unknown])
            column = np.empty(n, dtype=np.int64)
            column[free] = np.arange(free.size)
            column[known] = 0
            sign = np.where(y_partial == 0, 1.0, y_partial * y_partial[known[0]])
            T = sp.csr_matrix((sign, (everyone, column)), shape=(n, free.size))
    if groups is not None:
        if y_partial is not None:
            raise ValueError("give partial labels or groups, not both")
        _, free, group_of = np.unique(groups, return_index=True, return_inverse=True)
        T = sp.csr_matrix((np.ones(n), (everyone, group_of)), shape=(n, free.size))
    constraints = map_constraints(Constraints(*blocks), T)
    r = min(rank or default_rank(n, n), free.size)
    rng = check_random_state(random_state)
    W0 = spectral_start(K, r, rng)[free]
    objective = MappedObjective(MarginObjective(K, beta, weights=weights), T)
    result = solve_lowrank_sdp(objective, constraints, free.size, trace_bound=float(free.size),
                               rank=r, tol=tol, max_iter=max_iter, V0=W0, random_state=rng,
                               on_iteration=on_iteration, unit_rows=np.arange(free.size))
    raise_if_infeasible(result, f"the two-class MMC SDP (3.5), n={n}")
    V = objective.to_z(result.V)
    return TwoClassLowRank(M=V @ V.T, omega=result.objective, result=result)


@dataclass
class MultiClassLowRank:
    """Unsupervised multi-class SDP (4.8), collapsed form, solved by
    :func:`~algorithms.lowrank_sdp.solve_lowrank_sdp`."""

    M: np.ndarray
    d: np.ndarray
    omega: float  # n - e^T d - <K, M> / (2 beta), the relaxation's value
    result: LowRankSDPResult


def solve_multiclass_lowrank(
    K: np.ndarray, n_clusters: int, *, beta: float, balance: float, start_labels: np.ndarray,
    tol: float = 1e-3, max_iter: int = 300, random_state=0, on_iteration=None,
) -> MultiClassLowRank:
    """The program of :func:`algorithms.sdp_mmc_programs.solve_multiclass_sdp_symmetric`:
    ``max <K, M> + 2 beta e^T d`` over ``[[1/k, d^T], [d, M]] >= 0``, ``diag(M) = e``,
    ``M >= 0``, ``d >= 0`` and ``(1/k - balance) n <= M e <= (1/k + balance) n``.

    Solved on ``Z = [[1, s^T], [s, M]]``, ``s = sqrt(k) d`` (the same PSD condition, rows
    rescaled): unit rows, ``Z >= 0`` by a nonnegative factor (``d <= 1`` and ``M <= 1`` follow),
    and the 2n row sums as inequalities (divided by n). ``d = e / k`` and ``M`` the partition
    matrix of a k-partition is feasible and is the start: one-hot rows for ``start_labels``,
    row 0 ``e / sqrt(k)`` over the k columns, two more columns and a little positive noise.
    """
    n, k = K.shape[0], n_clusters
    N = n + 1
    C = np.zeros((N, N))
    C[1:, 1:] = -K / n  # minimise -(<K, M> + 2 beta e^T d) / n
    C[0, 1:] = C[1:, 0] = -beta / (np.sqrt(k) * n)
    points = np.arange(1, N)
    share = np.zeros(N)
    share[1:] = 1.0 / n
    constraints = Constraints(
        bilinear(N, points, None, 1.0 / k + balance, inequality=True, shared_c=share),
        bilinear(N, points, None, balance - 1.0 / k, inequality=True, shared_c=-share),
    )
    rng = check_random_state(random_state)
    r = min(k + 2, N)
    V0 = 1e-2 * np.abs(rng.standard_normal((N, r)))
    V0[0, :k] += 1.0 / np.sqrt(k)
    V0[points, np.asarray(start_labels, dtype=np.int64)] += 1.0
    result = solve_lowrank_sdp(LinearObjective(C), constraints, N, trace_bound=float(N), rank=r,
                               tol=tol, max_iter=max_iter, V0=_unit_rows(V0), random_state=rng,
                               on_iteration=on_iteration, unit_rows=np.arange(N),
                               nonnegative=True)
    raise_if_infeasible(result, f"the multi-class MMC SDP (4.8), n={n}, k={k}")
    Z = result.V @ result.V.T
    d = Z[0, 1:] / np.sqrt(k)
    M = Z[1:, 1:]
    omega = n - float(d.sum()) - float(np.sum(K * M)) / (2.0 * beta)
    return MultiClassLowRank(M=M, d=d, omega=omega, result=result)


@dataclass
class RobustLowRank:
    """REH / ROD SDP solved by :func:`~algorithms.lowrank_sdp.solve_lowrank_sdp`."""

    eta: np.ndarray
    M: np.ndarray
    lam: np.ndarray
    value: float  # zeta of the scaled program (REH: without the "+ n")
    result: LowRankSDPResult


# The robust SDPs' smoothing at the start, times the median diagonal of the inner Hessian
# G / beta (MarginObjective.sharpen lowers it as the gap requires), and REH's starting eta (ROD
# starts at rho). A smoother start costs a sharpening later but fewer evaluations before it;
# too smooth a start leaves the smoothing's bias above the gap the certificate must close, too
# sharp a one makes the first solves crawl.
SMOOTHING_START = 4e-3
START_ETA = 0.8
# L-BFGS iterations per outer iteration for the robust SDPs, refining included (no
# REFINE_MAX_ITER cap): their gaps stay open on multiplier noise when the inner problems stop
# early, so the REFINE_MAX_ITER cap would leave them uncertified; problems that never refine
# are unaffected. A larger budget slows problems whose inner solves do not converge anyway.
ROBUST_INNER_MAX_ITER = 400


def solve_robust_lowrank(
    G: np.ndarray, beta: float, *, method: str = "reh", rho: float = 0.8, tol: float = 1e-4,
    max_iter: int = 80, rank: int | None = None, random_state=0, on_iteration=None,
) -> RobustLowRank:
    """The SDP of Theorem 7 (REH) or section 6.3 (ROD) on ``Z = [[M, eta], [eta^T, 1]] >= 0``:
    ``min max_lambda lambda^T eta - lambda^T (G o M) lambda / (2 beta) - e^T eta`` (REH; ROD
    without ``- e^T eta`` and with ``e^T eta >= rho n``) over ``diag(M) = eta``, ``Z_nn = 1``.
    ``0 <= eta <= 1`` follows from ``Z >= 0`` (``eta_i^2 <= M_ii Z_nn = eta_i``). ``G = K o yy^T``
    (already scaled by the caller). The value is ``zeta``; REH's (6.9) is ``zeta + n``.

    Solved on ``W`` with ``Z = T W T^T`` (:func:`~algorithms.lowrank_sdp.half_sphere_map`):
    ``diag(W) = e`` by unit rows, the only other constraint ROD's
    ``sum_i W_in >= (2 rho - 1) n`` (divided by ``n``, so the penalty is on the scale of the
    objective). The inner SVM dual is smoothed (:class:`~algorithms.lowrank_sdp.MarginObjective`
    ``smoothing``): an ablated point has ``eta_i = 0`` and a free ``lambda_i``, which without it
    left the objective non-differentiable and the certificate open (relative gaps 0.03-200 on
    the section 6.5 data; ROD at n = 200 stopped at 19.2 where the optimum is 0.368). When
    ``G / beta`` has low rank (a linear kernel on few features,
    :func:`~algorithms.lowrank_sdp.low_rank_factor`), that dual is solved on its factor
    (:func:`~algorithms.lowrank_sdp.factored_is_cheaper`).
    """
    if method not in ("reh", "rod"):
        raise ValueError(f"unknown SDP method {method!r}: use 'reh' or 'rod'")
    n = G.shape[0]
    N = n + 1
    blocks = []
    if method == "rod":  # e^T eta = sum_i (1 + W_in) / 2 >= rho n
        minus = np.zeros(N)
        minus[:n] = -1.0 / n
        blocks.append(bilinear(N, np.array([n]), None, 1.0 - 2.0 * rho, inequality=True,
                               shared_c=minus))
    constraints = Constraints(*blocks)
    r = rank or default_rank(n, n)
    rng = check_random_state(random_state)
    # Start with every eta_i = rho (ROD's constraint holds with equality): w_n = e_1 and
    # w_i = c e_1 + sqrt(1 - c^2) g_i with c = 2 rho - 1 and g_i random unit vectors orthogonal
    # to e_1. Near eta = e (w_i = w_n) the map w -> eta is flat (eta_i = (1 + w_i . w_n) / 2 is
    # at its maximum), so a start there barely moves.
    c = 2.0 * START_ETA - 1.0 if method == "reh" else 2.0 * rho - 1.0
    g = rng.standard_normal((n, r - 1))
    W0 = np.zeros((N, r))
    W0[:, 0] = 1.0
    W0[:n, 0] = c
    W0[:n, 1:] = np.sqrt(1.0 - c * c) * _unit_rows(g)
    inner = MarginObjective(G, beta, eta_column=True, c=-1.0 if method == "reh" else 0.0,
                            smoothing=SMOOTHING_START * float(np.median(np.diag(G))) / beta,
                            factor=low_rank_factor(G / beta, FACTORED_MAX_RANK))
    objective = HalfSphereMarginObjective(inner)
    offset = float(n) if method == "reh" else 0.0
    result = solve_lowrank_sdp(objective, constraints, N, trace_bound=float(N), rank=r, tol=tol,
                               max_iter=max_iter, inner_max_iter=ROBUST_INNER_MAX_ITER,
                               refine_max_iter=ROBUST_INNER_MAX_ITER, columns_on_stall=True,
                               V0=W0, random_state=rng, offset=offset,
                               on_iteration=on_iteration, unit_rows=np.arange(N))
    raise_if_infeasible(result, f"the {method.upper()} SDP, n={n}")
    V = objective.to_z(result.V)
    lam = inner.maximiser(V).copy()
    eta = np.clip(V[:n] @ V[n], 0.0, 1.0)
    return RobustLowRank(eta=eta, M=V[:n] @ V[:n].T, lam=lam, value=result.objective - offset,
                         result=result)
