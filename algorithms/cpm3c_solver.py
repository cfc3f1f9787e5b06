"""CPM3C's optimisation: the cutting-plane Algorithm 1 with the CCCP Algorithm 2 inside.

Zhao, Wang and Zhang 2008, "Efficient Multiclass Maximum Margin Clustering" (ICML), over the
constraints of :mod:`algorithms.cpm3c_constraints`.

* Algorithm 1 (cutting plane): keep a working set ``Omega``; solve (17) = (11) over ``Omega``
  plus the class balance (16); add the most violated constraint of (11), given in closed form by
  (14); stop when it is violated by at most ``epsilon`` more than the working set.
* Algorithm 2 (CCCP): each constraint of (17) is "convex >= affine" because of the
  ``max_p w_p.x_i = sum_p z_ip w_p.x_i`` term; replacing it by its linearization at the current
  iterate ``w^(t)`` (subgradient ``z_ip^(t) x_i``, (18)-(19)) gives the QP (20). Its dual has one
  variable per constraint of ``Omega`` plus the balance multipliers: a tiny dense QP, solved here
  by :func:`solve_cutting_plane_dual`, a primal active-set method warm-started from the previous
  solution, since successive QPs differ by one constraint. CCCP stops when the objective
  improves by less than ``cccp_tol`` (0.01 in the paper).

:func:`solve_cpm3c` runs both from an initial iterate; :class:`_CuttingPlaneRun` holds the state
they share (the iterate, the working set, the balance rows in force, the last dual solution).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from algorithms.cpm3c_constraints import (
    BalanceRows,
    ConstraintSums,
    ScaledData,
    constraint_slacks,
    first_constraint,
    keeps_sums,
    labels_from_scores,
    linearized_constraints,
    most_violated_constraint,
)

# ---------------------------------------------------------------------------------------------
# The dual of the QP (20): a small dense QP over the working set
# ---------------------------------------------------------------------------------------------


def solve_cutting_plane_dual(
    Q: np.ndarray,
    q: np.ndarray,
    n_alpha: int,
    C: float,
    v0: np.ndarray | None = None,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> np.ndarray:
    """Solve ``min 1/2 v'Qv - q'v`` s.t. ``v >= 0`` and ``sum(v[:n_alpha]) <= C``.

    This is the dual of (20): ``v = (alpha, mu)``, ``alpha`` one multiplier per working constraint
    (their sum is bounded by the weight ``C`` of the slack), ``mu`` the balance multipliers (16).
    Primal active-set method with a tiny ridge on ``Q`` (Gram matrices are often singular);
    ``v0``, the previous solution padded with zeros, makes a warm start that usually needs a
    handful of steps.

    One function, one loop: each step solves the current face (with or without the sum bound
    active), then either frees the most negative multiplier or takes the longest feasible step
    towards the face's minimizer. The steps share the free set, the iterate and whether the sum
    bound is active, and on these tiny problems the cost is the number of numpy calls per step,
    so the steps are not split into functions of their own.
    """
    m = q.size
    if m == 0:
        return np.zeros(0)
    # Small dense problems (|Omega| + a few): the cost is numpy call overhead, so the loop sticks
    # to few calls per step (take instead of ix_, a sorted free set instead of masks on s).
    # The ridge is added to the blocks solved and to the gradient, not to a copy of Q: with many
    # clusters Q is large, and copying it every QP would cost more than the warm-started solve.
    Q = np.asarray(Q, dtype=np.float64)
    ridge = 1e-12 * max(float(np.trace(Q)) / m, 1e-300)
    s = np.zeros(m)
    s[:n_alpha] = 1.0
    v = np.zeros(m) if v0 is None else np.maximum(np.asarray(v0, dtype=np.float64), 0.0)
    total = float(v[:n_alpha].sum())
    if total > C:
        v *= C / total
    free = v > 0
    sum_active = n_alpha > 0 and float(v[:n_alpha].sum()) >= C * (1 - 1e-12)
    limit = max_iter if max_iter is not None else 20 * m + 100
    for _ in range(limit):
        F = np.flatnonzero(free)
        lam = 0.0
        x = np.zeros(m)
        if F.size:
            QF = Q.take(F, axis=0).take(F, axis=1)
            QF.flat[:: F.size + 1] += ridge
            # F is sorted, so it holds an alpha exactly when its first entry is one.
            if sum_active and F[0] < n_alpha:
                sF = s.take(F)
                kkt = np.empty((F.size + 1, F.size + 1))
                kkt[:-1, :-1] = QF
                kkt[:-1, -1] = sF
                kkt[-1, :-1] = sF
                kkt[-1, -1] = 0.0
                sol = np.linalg.solve(kkt, np.append(q.take(F), C))
                x[F], lam = sol[:-1], float(sol[-1])
            else:
                sum_active = False
                x[F] = np.linalg.solve(QF, q.take(F))
        p = x - v
        if np.abs(p).max() <= 1e-12 * (1.0 + np.abs(v).max()):
            # At the minimizer of the current face: check the multipliers and free one.
            grad = Q @ v + ridge * v - q + lam * s
            bound = np.where(free, np.inf, grad)
            i = int(np.argmin(bound))
            worst = float(bound[i])
            if sum_active and lam < min(worst, 0.0) - tol:
                sum_active = False
            elif worst < -tol:
                free[i] = True
            else:
                return v
            continue
        step, blocking = 1.0, None
        decreasing = F[p[F] < 0]
        if decreasing.size:
            ratios = v[decreasing] / -p[decreasing]
            j = int(np.argmin(ratios))
            if ratios[j] < step:
                step, blocking = float(ratios[j]), int(decreasing[j])
        growth = float(p[:n_alpha].sum())
        if not sum_active and growth > 0:
            room = (C - float(v[:n_alpha].sum())) / growth
            if room < step:
                step, blocking = max(room, 0.0), -1
        v = v + step * p
        if blocking is not None and blocking >= 0:
            v[blocking] = 0.0
            free[blocking] = False
        elif blocking == -1:
            sum_active = True
        np.maximum(v, 0.0, out=v)
    return v


# ---------------------------------------------------------------------------------------------
# Algorithms 1 and 2
# ---------------------------------------------------------------------------------------------


@dataclass
class CuttingPlaneResult:
    w: np.ndarray  # (n_rows, n_features) in the centered, scaled coordinates
    b: np.ndarray  # (n_rows,)
    objective: float
    n_iter: int  # cutting-plane iterations (constraints added)
    n_cccp: int  # QP solves
    n_constraints: int  # final |Omega|
    history: list[float] = field(default_factory=list)
    # With start_labels: the iterate when the held-labels phase ended (the supervised SVM of
    # the starting partition).
    held: CuttingPlaneResult | None = None


def _dual_system(GG: np.ndarray, G_bias: np.ndarray, P: np.ndarray, d: np.ndarray,
                 score_balance: float) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, q)`` of the dual of the QP (20) over ``(alpha, mu)``: ``alpha`` the multipliers of
    the working set's constraints (Gram matrix ``GG = G G^T``, right-hand sides ``d``), ``mu``
    those of the balance rows ``P`` in force (16), which act on the bias coordinates
    ``G_bias`` only (Zhao, Wang and Zhang 2008, (16) and (20))."""
    n_alpha = GG.shape[0]
    Q = np.empty((n_alpha + P.shape[0],) * 2)
    Q[:n_alpha, :n_alpha] = GG
    Q[:n_alpha, n_alpha:] = -(G_bias @ P.T)
    Q[n_alpha:, :n_alpha] = Q[:n_alpha, n_alpha:].T
    Q[n_alpha:, n_alpha:] = P @ P.T
    return Q, np.concatenate([d, -np.full(P.shape[0], score_balance)])


@dataclass(frozen=True)
class _CCCPOptions:
    """The constants of a :func:`solve_cpm3c` run (see there)."""

    C: float
    score_balance: float
    epsilon: float
    cccp_tol: float
    max_cccp_iter: int


class _CuttingPlaneRun:
    """One run of :func:`solve_cpm3c`: the iterate ``W`` (the blocks ``(w_p, b_p)``, flattened)
    and its scores ``F``, the working set ``Omega`` of (17) with its kept sums, the balance rows
    in force, the last dual solution (the warm start of the next QP) and what the result counts.
    :meth:`cutting_plane` is Algorithm 1, :meth:`cccp` Algorithm 2, :meth:`qp_step` one QP (20)
    (Zhao, Wang and Zhang 2008)."""

    def __init__(self, data: ScaledData, w0: np.ndarray, b0: np.ndarray, options: _CCCPOptions,
                 start_labels: np.ndarray | None,
                 on_iteration: Callable[[int, float, float], None] | None):
        self.data, self.options, self.on_iteration = data, options, on_iteration
        self.n_rows, n_features = w0.shape
        self.width = n_features + 1
        self.balance = BalanceRows(self.n_rows)
        self.bias = np.arange(self.n_rows) * self.width + n_features  # the coordinates of b in W
        self.W = np.hstack([w0, b0[:, None]]).ravel()
        self.F = data.scores(w0, b0)
        self.constraints = [first_constraint(self.F, start_labels)]
        self.sums = (ConstraintSums(data, self.n_rows) if keeps_sums(data, self.n_rows)
                     else None)
        self.v: np.ndarray | None = None
        self.history: list[float] = []
        self.n_cccp = self.n_iter = 0

    def slack(self, W: np.ndarray, F: np.ndarray, clamp: np.ndarray | None) -> float:
        """``xi``: the largest slack the working set needs at ``(W, F)``, at least 0."""
        return max(0.0, float(constraint_slacks(F, self.constraints, clamp, self.sums, W).max()))

    def objective(self, W: np.ndarray, F: np.ndarray, clamp: np.ndarray | None) -> float:
        """``1/2 ||W||^2 + C xi``, the objective of (17) over the working set."""
        return 0.5 * float(W @ W) + self.options.C * self.slack(W, F, clamp)

    def qp_step(self, F: np.ndarray, clamp: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """One QP (20) linearized at the labels of ``F`` (or ``clamp``): ``(W, F)`` after it.

        The dual is solved again with the most violated balance row (16) added while the
        solution breaks one (:class:`BalanceRows`); ``W = G^T alpha - P^T mu`` on the biases."""
        G, d = linearized_constraints(self.data, F, self.constraints, self.n_rows, clamp,
                                      self.sums)
        n_alpha = len(self.constraints)
        G_bias = G[:, self.bias]
        GG = G @ G.T
        self._warm_start(n_alpha)
        while True:
            P = self.balance.rows
            Q, q = _dual_system(GG, G_bias, P, d, self.options.score_balance)
            self.v = solve_cutting_plane_dual(Q, q, n_alpha, self.options.C, self.v)
            alpha, mu = self.v[:n_alpha], self.v[n_alpha:]
            if not self.balance.add_most_violated(G_bias.T @ alpha - P.T @ mu,
                                                  self.options.score_balance):
                break
            self.v = np.append(self.v, 0.0)
        self.n_cccp += 1
        W_new = G.T @ alpha
        W_new[self.bias] -= P.T @ mu
        blocks = W_new.reshape(self.n_rows, self.width)
        return W_new, self.data.scores(blocks[:, :-1], blocks[:, -1])

    def _warm_start(self, n_alpha: int) -> None:
        """The previous dual solution for a working set of ``n_alpha`` constraints: the old
        alphas, a zero for the new constraint, the old balance multipliers."""
        if self.v is not None:
            n_old = self.v.size - self.balance.rows.shape[0]
            self.v = np.concatenate([self.v[:n_old], np.zeros(n_alpha - n_old), self.v[n_old:]])

    def cccp(self, labels_at: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, float]:
        """Algorithm 2 on (17) for the current working set, from ``(W, F)``: QPs (20) until the
        objective improves by less than ``cccp_tol`` (relative) or the labels ``labels_at(F)``
        stop changing. Returns those labels and the objective."""
        clamp = labels_at(self.F)
        current = self.objective(self.W, self.F, clamp)
        for _ in range(self.options.max_cccp_iter):
            W_new, F_new = self.qp_step(self.F, clamp)
            clamp_new = labels_at(F_new)
            new = self.objective(W_new, F_new, clamp_new)
            improved = current - new
            # The linearization (18)-(20) depends on the scores only through the labels: when
            # none changed, the next QP is this one again and CCCP has converged.
            same_labels = np.array_equal(clamp, clamp_new)
            self.W, self.F, clamp = W_new, F_new, clamp_new
            current = new
            if same_labels or improved < self.options.cccp_tol * max(current + improved, 1e-12):
                break
        return clamp, current

    def cutting_plane(self, labels_at: Callable[[np.ndarray], np.ndarray],
                      iterations: int) -> None:
        """Algorithm 1 with the labels ``labels_at(F)`` (the argmax, or held ones; with held
        labels the linearization never changes and each CCCP is one QP): CCCP on the working
        set, then the most violated constraint (14) is added unless it is within ``epsilon``."""
        for _ in range(iterations):
            self.n_iter += 1
            clamp, current = self.cccp(labels_at)
            self.history.append(current)
            candidate, violation = most_violated_constraint(self.F, clamp)
            xi = self.slack(self.W, self.F, clamp)
            if self.on_iteration is not None:
                self.on_iteration(self.n_iter, current, violation - xi)
            if violation <= xi + self.options.epsilon:
                break
            self.constraints.append(candidate)

    def result(self) -> CuttingPlaneResult:
        """The current iterate and the counts so far."""
        blocks = self.W.reshape(self.n_rows, self.width)
        return CuttingPlaneResult(blocks[:, :-1].copy(), blocks[:, -1].copy(), self.history[-1],
                                  self.n_iter, self.n_cccp, len(self.constraints),
                                  list(self.history))


def solve_cpm3c(
    data: ScaledData,
    w0: np.ndarray,
    b0: np.ndarray,
    *,
    C: float,
    score_balance: float,
    epsilon: float,
    cccp_tol: float,
    max_iter: int,
    max_cccp_iter: int,
    start_labels: np.ndarray | None = None,
    on_iteration: Callable[[int, float, float], None] | None = None,
) -> CuttingPlaneResult:
    """Algorithm 1 (cutting plane over (11)/(17)) with Algorithm 2 (CCCP on (17) via (20)).

    ``w0, b0`` is the initial iterate (Algorithm 2's ``w^(0)``). The objective is
    ``1/2 sum_p ||(w_p, b_p)||^2 + C xi`` (the paper's (11) with ``C = 1 / beta``).

    ``start_labels``: Algorithm 1 first runs with these labels held fixed (the same cutting
    planes, linearized at the given labels instead of the argmax: the supervised SVM of the
    starting partition), then goes on with the argmax labels from that iterate and working set.
    Without it the first QP (20) has one constraint, whose solution weighs each class by its
    number of points: with many clusters that first step moves most labels away from a good
    start, and small clusters can vanish.
    """
    options = _CCCPOptions(C, score_balance, epsilon, cccp_tol, max_cccp_iter)
    run = _CuttingPlaneRun(data, w0, b0, options, start_labels, on_iteration)
    held = None
    if start_labels is not None:
        run.cutting_plane(lambda F: start_labels, max_iter)
        held = run.result()
    # The argmax labels as the "clamp": the same linearization as reading them off F.
    run.cutting_plane(labels_from_scores, max(max_iter - run.n_iter, 1))
    final = run.result()
    final.held = held
    return final
