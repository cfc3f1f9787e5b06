"""Unsupervised max-margin Markov networks: discriminative clustering of sequence positions.

Xu 2007, "Convex Large Margin Training Techniques: Unsupervised, Semi-supervised, and Robust
Support Vector Machines" (PhD thesis, University of Waterloo), chapter 5, built on the supervised
M3N of section 2.3.2. An HMM scores a labeling linearly, ``w . phi(x, y)`` (2.44)-(2.45), with
emission weights ``E`` (``k x V``) and transition weights ``T`` (``k x k``). For given labels the
M3N margin loss is the structured SVM (2.47)/(5.1)

    omega(y) = min_w  beta/2 ||w||^2 + sum_i max_u [Delta(u, y_i) + w.phi(x_i, u)] - w.phi(x_i, y_i)

with the Hamming loss ``Delta``. Unsupervised training looks for the labels with the smallest
margin loss under the class-balance constraint (5.25). Two methods:

``method="alternating"`` (ACDHMM, section 5.4)
    Initial labels from the Viterbi path of an EM-trained HMM (Baum-Welch, section 2.3.3), then
    coordinate descent on ``omega``: train the supervised M3N on the labels (1-slack cutting
    plane with loss-augmented Viterbi as the separation oracle), relabel by Viterbi under the
    balance constraint (Proposition 2), until the labels stop changing. Each restart is a new EM
    run; the labeling with the smallest margin loss is kept.

``method="exact"`` (CDHMM, sections 5.2-5.3)
    The convex relaxation (5.28) over the equivalence matrices ``M, N`` and indicators ``C, D``
    (5.5) with the balance (5.25), semidefinite (5.26) and pair (5.27) constraints; see
    :func:`solve_cdhmm_relaxation` for how the min-max is solved. Labels are recovered from the
    relaxed indicators and the M3N trained on them is the model.

New sequences are labeled by Viterbi under the learned ``(E, T)`` (the M3N's own decoder).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from algorithms.base import MMCEstimatorMixin
from algorithms.conic import ConicSolver, SDPSolverError, solve_conic
from algorithms.hmm import (
    SequenceBatch,
    as_symbol_sequences,
    baum_welch,
    emission_scores,
    feature_counts,
    loss_augmented_viterbi,
    sequence_scores,
    viterbi,
)
from algorithms.metrics import clustering_error
from algorithms.params.common import (
    DEPRECATED,
)
from algorithms.params.m3n import (
    NStates as NStates,
)
from algorithms.params.m3n import (
    UnsupervisedM3NParams as UnsupervisedM3NParams,
)
from algorithms.params.m3n import (
    exact_relaxation_problem as exact_relaxation_problem,
)
from algorithms.progress import ProgressCallback, report

# ---------------------------------------------------------------------------------------------
# Supervised M3N (2.47): 1-slack cutting plane with loss-augmented Viterbi
# ---------------------------------------------------------------------------------------------


def _solve_working_set_qp(G: np.ndarray, deltas: np.ndarray, beta: float) -> np.ndarray:
    """``min_w beta/2 ||w||^2 + xi`` s.t. ``xi >= delta_c - g_c . w``, ``xi >= 0``: the
    cutting-plane master problem over the working set, solved by Clarabel's interior point.
    The variables are the ``kV + k^2`` weights and ``xi``, so it is small whatever the data size.
    """
    import clarabel
    import scipy.sparse as sp

    n_constraints, d = G.shape
    P = sp.diags(np.append(np.full(d, beta), 0.0)).tocsc()
    q = np.append(np.zeros(d), 1.0)
    A = sp.csc_matrix(np.vstack((
        np.hstack((-G, -np.ones((n_constraints, 1)))),
        np.append(np.zeros(d), -1.0)[None, :],
    )))
    b = np.append(-deltas, 0.0)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solution = clarabel.DefaultSolver(
        P, q, A, b, [clarabel.NonnegativeConeT(n_constraints + 1)], settings
    ).solve()
    return np.asarray(solution.x[:d])


@dataclass
class M3NSolution:
    """Weights of a trained M3N and its margin loss (the primal objective (2.47))."""

    emission: np.ndarray  # (k, V)
    transition: np.ndarray  # (k, k)
    objective: float
    n_iter: int


def m3n_objective(
    batch: SequenceBatch,
    labels: np.ndarray,
    emission: np.ndarray,
    transition: np.ndarray,
    beta: float,
) -> float:
    """Primal (2.47)/(5.1): ``beta/2 ||w||^2 + sum_i max_u [Delta + w.phi(u)] - w.phi(y_i)``."""
    u = loss_augmented_viterbi(batch, emission, transition, labels)
    hinge = (
        np.bincount(batch.sequence_of, weights=(u != labels).astype(float),
                    minlength=batch.n_sequences)
        + sequence_scores(batch, emission, transition, u)
        - sequence_scores(batch, emission, transition, labels)
    )
    norm2 = float((emission**2).sum() + (transition**2).sum())
    return 0.5 * beta * norm2 + float(np.maximum(hinge, 0.0).sum())


def solve_m3n(
    batch: SequenceBatch,
    labels: np.ndarray,
    n_states: int,
    n_symbols: int,
    *,
    beta: float,
    tol: float = 1e-3,
    max_iter: int = 500,
) -> M3NSolution:
    """Supervised M3N training (2.47) for fixed labels by the 1-slack cutting-plane method.

    The n-slack problem (2.47) equals ``min beta/2 ||w||^2 + xi`` subject to one constraint per
    joint relabeling ``(u_1..u_n)``: ``w . sum_i (phi(x_i, y_i) - phi(x_i, u_i)) >= sum_i
    Delta(u_i, y_i) - xi``. The most violated one is the loss-augmented Viterbi path of every
    sequence; the master problem over the working set is a small QP in ``w`` (its dual is the
    counterpart of (2.48) with one variable per constraint). Stops when no constraint is violated
    by more than ``tol`` per position.
    """
    k, V = n_states, n_symbols
    target_e, target_t = feature_counts(batch, labels, k, V)
    target = np.concatenate((target_e.ravel(), target_t.ravel()))
    epsilon = tol * batch.n_positions
    G = np.zeros((0, target.size))
    deltas = np.zeros(0)
    w = np.zeros(target.size)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        emission, transition = w[: k * V].reshape(k, V), w[k * V :].reshape(k, k)
        u = loss_augmented_viterbi(batch, emission, transition, labels)
        ue, ut = feature_counts(batch, u, k, V)
        g = target - np.concatenate((ue.ravel(), ut.ravel()))
        delta = float(np.count_nonzero(u != labels))
        xi = max(0.0, float(np.max(deltas - G @ w))) if deltas.size else 0.0
        if delta - g @ w <= xi + epsilon:
            break
        G = np.vstack((G, g))
        deltas = np.append(deltas, delta)
        w = _solve_working_set_qp(G, deltas, beta)
    emission, transition = w[: k * V].reshape(k, V), w[k * V :].reshape(k, k)
    objective = m3n_objective(batch, labels, emission, transition, beta)
    return M3NSolution(emission.copy(), transition.copy(), objective, n_iter)


# ---------------------------------------------------------------------------------------------
# Relabeling under the class-balance constraint (5.25)
# ---------------------------------------------------------------------------------------------


def balance_bounds(n_positions: int, n_states: int, size_band: float) -> tuple[int, int]:
    """Allowed positions per state by (5.25): ``(1/k - eps) p1 <= count <= (1/k + eps) p1``."""
    low = max(0, math.ceil((1.0 / n_states - size_band) * n_positions - 1e-9))
    high = min(n_positions, math.floor((1.0 / n_states + size_band) * n_positions + 1e-9))
    if low > high:
        low = high = n_positions // n_states
    return low, high


def _violation(counts: np.ndarray, low: int, high: int) -> np.ndarray:
    return np.maximum(counts - high, 0) - np.maximum(low - counts, 0)


def balanced_viterbi(
    batch: SequenceBatch,
    emission: np.ndarray,
    transition: np.ndarray,
    size_band: float,
    max_rounds: int = 60,
) -> np.ndarray:
    """Viterbi labeling whose state counts satisfy (5.25), by Lagrangian offsets per state.

    Adding ``b_s`` to the node scores of state ``s`` prices its positions; the count of a state
    in the best path is non-decreasing in its own offset, so for two states the offset is found
    by bisection, and for more by subgradient steps on the offsets. Returns the feasible path
    found, or the least violating one when the rounds run out.
    """
    k = emission.shape[0]
    low, high = balance_bounds(batch.n_positions, k, size_band)
    node = emission_scores(batch, emission)

    def decode(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        path = viterbi(batch, node + offsets[None, :], transition)
        return path, _violation(np.bincount(path, minlength=k), low, high)

    offsets = np.zeros(k)
    path, violation = decode(offsets)
    if not violation.any():
        return path
    best, best_total = path, int(np.abs(violation).sum())
    scale = float(np.ptp(emission) + np.ptp(transition) + 1.0) * 2.0
    if k == 2:
        lo_b, hi_b = -scale, scale  # offset of state 1 relative to state 0
        while decode(np.array([0.0, hi_b]))[1][1] < 0:
            hi_b *= 2.0
        while decode(np.array([0.0, lo_b]))[1][1] > 0:
            lo_b *= 2.0
        for _ in range(max_rounds):
            mid = 0.5 * (lo_b + hi_b)
            path, violation = decode(np.array([0.0, mid]))
            total = int(np.abs(violation).sum())
            if total < best_total:
                best, best_total = path, total
            if total == 0:
                return path
            if violation[1] > 0:
                hi_b = mid
            else:
                lo_b = mid
        return best
    steps = np.full(k, scale / 4.0)
    last_sign = np.sign(violation)
    for _ in range(max_rounds):
        sign = np.sign(violation)
        steps = np.where(sign * last_sign < 0, steps / 2.0, steps)  # overshot: halve
        last_sign = np.where(sign != 0, sign, last_sign)
        offsets -= steps * sign
        path, violation = decode(offsets)
        total = int(np.abs(violation).sum())
        if total < best_total:
            best, best_total = path, total
        if total == 0:
            break
    return best


# ---------------------------------------------------------------------------------------------
# CDHMM: the convex relaxation (5.28)
# ---------------------------------------------------------------------------------------------


@dataclass
class CDHMMRelaxation:
    """Solution of the relaxed problem: indicators, equivalence matrices and M3N weights."""

    C: np.ndarray  # (p1, k) singleton indicators, relaxed
    D: np.ndarray  # (p2, k*k) pair indicators, column u_prev * k + u_cur
    M: np.ndarray  # (p1, p1)
    N: np.ndarray  # (p2, p2)
    emission: np.ndarray
    transition: np.ndarray
    objective: float
    status: str
    warnings: list[str]  # reduced-accuracy notes from check_solver_status


def solve_cdhmm_relaxation(
    batch: SequenceBatch,
    n_states: int,
    n_symbols: int,
    *,
    beta: float,
    size_band: float,
    pair_size_band: float,
    solver: ConicSolver = "scs",
    tol: float = 1e-3,
    max_iter: int = 3000,
) -> CDHMMRelaxation:
    """Minimise the relaxed margin loss (5.24) over ``M, N, C, D`` s.t. (5.25)-(5.27).

    The thesis solves ``min_Z max_{mu,nu} omega(Z; mu, nu)`` by constraint generation (5.28):
    alternately an M3N QP in ``(mu, nu)`` and an SDP over ``Z = (M, N, C, D)`` with one cut per
    QP solution. Its fixed point is the saddle point, which is computed here in one conic
    program by dualising the inner maximisation instead of sampling it with cuts:

    * with ``f(C, D)`` the relaxed feature counts (emission ``C' onehot(x)``, transition column
      sums of ``D``), the inner terms of (5.24) are
      ``-<mu, C> + (1/beta) s.f - (1/(2 beta)) ||s||^2`` for ``s = phi(mu, nu)``; conjugating the
      square gives ``min_w (1/(2 beta)) ||f - beta w||^2 + max_{mu,nu} [-<mu, C> + w.s]``,
      jointly convex in ``(C, D, w)``;
    * the maximum over the marginal polytope of a chain is attained at a labeling (the local
      polytope of a tree is integral), i.e. it is loss-augmented Viterbi, whose epigraph is
      linear: value variables ``m_t(u) >= -C_t(u) + E[u, x_t] + T[u', u] + m_{t-1}(u')``.

    So the relaxed loss is ``p1 - (1/(2 beta)) (<M, K> + <N, E>) + (1/(2 beta)) ||f - beta w||^2
    + sum_i max_u m_{L_i}(u)`` with ``K = onehot(x) onehot(x)'`` and ``E`` all ones (Theorem 5).

    Constraints besides (5.25)-(5.27): each position has exactly one state and each pair agrees
    with its two positions (``C e = e``, ``D e = e``, marginals of ``D`` equal ``C``), all valid
    for labelings. Without ``C e = e`` the relaxation is unbounded below relative to every
    labeling (``C = 0`` removes the loss terms while ``<M, K>`` stays free), and the second
    marginalisation, missing from (2.49) as printed, is the one Taskar et al. (2003) impose.

    ``tol`` and ``max_iter`` are the solver's (SCS: ``eps_abs = eps_rel = tol``); the status is
    checked as for every SDP of the package: inaccurate -> ``warnings``, anything else ->
    :class:`~algorithms.conic.SDPSolverError`.

    One piece: the variables, the constraints above and the objective make one cvxpy program,
    written in the order of the derivation; split up, its parts would pass the variables back
    and forth.
    """
    import cvxpy as cp

    k, V = n_states, n_symbols
    p1, p2 = batch.n_positions, batch.cur.size
    onehot = np.zeros((p1, V))
    onehot[np.arange(p1), batch.flat] = 1.0
    K = onehot @ onehot.T

    M = cp.Variable((p1, p1), symmetric=True)
    C = cp.Variable((p1, k), nonneg=True)
    We = cp.Variable((k, V))
    Wt = cp.Variable((k, k))
    m = cp.Variable((p1, k))
    t = cp.Variable(batch.n_sequences)
    constraints = [
        cp.bmat([[np.eye(k), C.T], [C, M]]) >> 0,
        cp.diag(M) == 1, M >= 0, M <= 1,
        cp.sum(C, axis=1) == 1,
    ]
    low = (1.0 / k - size_band) * p1
    high = (1.0 / k + size_band) * p1
    constraints += [cp.sum(M, axis=1) >= low, cp.sum(M, axis=1) <= high]

    node = -C + onehot @ We.T  # (p1, k): -C_t(u) + E[u, x_t]
    first = batch.first
    constraints.append(m[first, :] >= node[first, :])
    ones_row = np.ones((1, k))
    quadratic = [cp.sum_squares(onehot.T @ C - beta * We.T)]
    linear = -cp.sum(cp.multiply(M, K))
    if p2 > 0:
        N = cp.Variable((p2, p2), symmetric=True)
        D = cp.Variable((p2, k * k), nonneg=True)
        prev, cur = batch.prev, batch.cur
        D_by_prev = [D[:, a * k : (a + 1) * k] for a in range(k)]  # columns (a, :)
        constraints += [
            cp.bmat([[np.eye(k * k), D.T], [D, N]]) >> 0,
            cp.diag(N) == 1, N >= 0, N <= 1,
            sum(D_by_prev) == C[cur, :],  # sum over u_prev: the current state's indicator
            cp.hstack([cp.sum(block, axis=1, keepdims=True) for block in D_by_prev])
            == C[prev, :],
        ]
        pair_low = (1.0 / k**2 - pair_size_band) * p2
        pair_high = (1.0 / k**2 + pair_size_band) * p2
        constraints += [cp.sum(N, axis=1) >= pair_low, cp.sum(N, axis=1) <= pair_high]
        M_cur = M[cur, :][:, cur]
        M_prev = M[prev, :][:, prev]
        constraints += [M_cur >= N, M_prev >= N, M_cur + M_prev - 1 <= N]  # (5.27)
        for a in range(k):  # value recursion of loss-augmented Viterbi
            constraints.append(
                m[cur, :] >= node[cur, :]
                + np.ones((p2, 1)) @ cp.reshape(Wt[a, :], (1, k), order="C")
                + cp.reshape(m[prev, a], (p2, 1), order="C") @ ones_row
            )
        transition_counts = cp.reshape(cp.sum(D, axis=0), (k, k), order="C")
        quadratic.append(cp.sum_squares(transition_counts - beta * Wt))
        linear = linear - cp.sum(N)
    t_column = cp.reshape(t, (batch.n_sequences, 1), order="C")
    constraints.append(t_column @ ones_row >= m[batch.last, :])
    objective = p1 + linear / (2.0 * beta) + sum(quadratic) / (2.0 * beta) + cp.sum(t)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    what = f"the CDHMM relaxation (5.28), {p1} positions"
    notes, _ = solve_conic(problem, solver, tol, max_iter, what)
    if C.value is None:
        raise SDPSolverError(f"{solver} returned no solution for {what}")
    D_value = D.value if p2 > 0 else np.zeros((0, k * k))
    N_value = N.value if p2 > 0 else np.zeros((0, 0))
    return CDHMMRelaxation(
        C.value, D_value, M.value, N_value, We.value, Wt.value, float(problem.value),
        str(problem.status), notes,
    )


def sample_switching_hmm(
    stay_probability: float,
    n_sequences: int = 10,
    length: int = 8,
    random_state: Any = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The synthetic data of section 5.3: a 2-state HMM whose states emit 0 or 1.

    The chain stays in its state with ``stay_probability`` (Data1-4: 0.05, 0.10, 0.20, 0.30) and
    the emission noise equals the switch probability: state ``s`` emits ``s`` with probability
    ``stay_probability`` and ``1 - s`` otherwise. The first state is uniform.
    Returns ``(sequences, states)``.
    """
    rng = check_random_state(random_state)
    switch = 1.0 - stay_probability
    sequences, states = [], []
    for _ in range(n_sequences):
        y = np.empty(length, dtype=np.int64)
        y[0] = rng.randint(2)
        for position in range(1, length):
            y[position] = 1 - y[position - 1] if rng.rand() < switch else y[position - 1]
        noise = rng.rand(length) < switch
        sequences.append(np.where(noise, 1 - y, y))
        states.append(y)
    return sequences, states


# ---------------------------------------------------------------------------------------------
# ACDHMM: alternating margin-loss descent (section 5.4)
# ---------------------------------------------------------------------------------------------


@dataclass
class AlternatingRun:
    labels: np.ndarray
    solution: M3NSolution
    n_iter: int
    history: list[float]


def alternate_m3n(
    batch: SequenceBatch,
    labels: np.ndarray,
    n_states: int,
    n_symbols: int,
    *,
    beta: float,
    size_band: float,
    max_iter: int,
    tol: float,
    on_iteration=None,
) -> AlternatingRun:
    """Coordinate descent on the margin loss (Proposition 2): train the M3N on the labels,
    relabel by balanced Viterbi, until the labels stop changing."""
    history = []
    n_iter = 0
    solution = solve_m3n(batch, labels, n_states, n_symbols, beta=beta, tol=tol)
    for n_iter in range(1, max_iter + 1):
        history.append(solution.objective)
        new_labels = balanced_viterbi(batch, solution.emission, solution.transition, size_band)
        changed = int(np.count_nonzero(new_labels != labels))
        if on_iteration is not None:
            on_iteration(n_iter, solution.objective, changed)
        if changed == 0:
            break
        candidate = solve_m3n(batch, new_labels, n_states, n_symbols, beta=beta, tol=tol)
        # Viterbi relabeling under the balance constraint is not an exact minimiser of the
        # loss, so the descent can cycle: stop once the margin loss no longer decreases. The
        # first relabeling is always taken, since the EM labels need not meet (5.25).
        if n_iter > 1 and candidate.objective >= solution.objective - tol:
            break
        labels, solution = new_labels, candidate
    return AlternatingRun(labels, solution, n_iter, history)


def recover_labels(M: np.ndarray, n_states: int, random_state: Any = None) -> np.ndarray:
    """Labels from a relaxed equivalence matrix ``M ~ C C'``: k-means (k states) on the rows of
    its leading rank-k factor ``V_k sqrt(Lambda_k)``, as in chapters 3-4 for label recovery."""
    from sklearn.cluster import KMeans

    values, vectors = np.linalg.eigh((M + M.T) / 2.0)
    factor = vectors[:, -n_states:] * np.sqrt(np.maximum(values[-n_states:], 0.0))
    km = KMeans(n_clusters=n_states, n_init=10, random_state=random_state)
    return km.fit_predict(factor).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Estimator
# ---------------------------------------------------------------------------------------------


class UnsupervisedM3N(MMCEstimatorMixin, ClusterMixin, BaseEstimator):
    """Unsupervised max-margin Markov network: label the positions of integer sequences.

    Parameters
    ----------
    n_states : int, default=2
        Number of hidden states ``k``.
    method : {"alternating", "exact"}, default="alternating"
        ``"alternating"``: ACDHMM (section 5.4), EM initialisation then coordinate descent on
        the margin loss; linear in the number of positions per iteration. ``"exact"``: CDHMM
        (sections 5.2-5.3), the convex relaxation (5.28) as one SDP; its matrices are
        ``positions x positions``, so it is meant for the thesis's sizes (about 100 positions).
    C : float, default=100
        Weight of the margin loss of the M3N (2.47), which the thesis writes with
        ``beta = 1 / C`` (0.01 in its synthetic runs).

        .. versionchanged:: 0.2 Replaces ``beta`` (``C = 1 / beta``).
    size_band : float, default=0.1
        ``epsilon`` of the balance constraint (5.25): every state labels between
        ``(1/k - epsilon)`` and ``(1/k + epsilon)`` of the positions.

        .. versionchanged:: 0.2 Replaces ``class_balance``.
    pair_size_band : float, default=0.3
        ``epsilon`` of the pair-balance constraint (5.25) (exact method only).

        .. versionchanged:: 0.2 Replaces ``pair_balance``.
    n_restarts : int, default=5
        Runs of the alternating method, each from a new EM run; the smallest margin loss is
        kept.

        .. versionchanged:: 0.2 Replaces ``n_init``.
    em_iter : int, default=100
        Baum-Welch iterations per EM run.
    max_alternations : int, default=50
        Most rounds of the alternation (train the M3N on the labels, relabel by balanced
        Viterbi); it stops earlier when no label changes or the margin loss decreases by less
        than ``cutting_plane_tol``.

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    cutting_plane_tol : float, default=1e-3
        Cutting-plane precision (per position) of the supervised M3N solver: it stops when no
        constraint is violated by more than this times the number of positions. The alternation
        also stops when the margin loss decreases by less.

        .. versionchanged:: 0.2 Replaces ``tol``.
    solver : {"scs", "clarabel"}, default="scs"
        Exact method: the cvxpy solver of the relaxation.

        .. versionchanged:: 0.2 Replaces ``sdp_solver`` (values ``"SCS"``, ``"CLARABEL"``).
    sdp_tol : float, default=1e-3
        Exact method: solver tolerance (SCS ``eps_abs = eps_rel``). Labels come from the leading
        structure of ``M``; Table 5.1's errors do not move between 1e-3 and 1e-5.
    sdp_max_iter : int, default=3000
        Exact method: solver iteration limit. A solve stopped there is reported in
        ``warnings_`` (status optimal_inaccurate) or, without a usable solution, raises
        :class:`~algorithms.conic.SDPSolverError` with the status.
    random_state : int or None

    Attributes
    ----------
    labels_ : list of ndarray of int64
        State of every position of every training sequence, ``0..n_states-1``.
    emission_ : ndarray of shape (n_states, n_symbols)
        Emission weights ``E`` of the learned M3N.
    transition_ : ndarray of shape (n_states, n_states)
        Transition weights ``T``: ``T[a, b]`` scores state ``a`` followed by ``b``.
    n_symbols_ : int
        Vocabulary size ``V`` (largest training symbol + 1).
    objective_ : float
        Margin loss (2.47) of the final labels under the learned weights.
    objective_history_ : list of float
        Margin loss after every M3N training of the kept run (alternating method).
    relaxation_objective_ : float
        Optimal value of the relaxed problem (exact method).
    warnings_ : list of str
        Solver reports worth knowing (exact method: an inaccurate relaxation), returned with
        job results.
    n_iter_ : int
        Alternations of the kept run (1 for the exact method).

    References
    ----------
    L. Xu. Convex Large Margin Training Techniques: Unsupervised, Semi-supervised, and Robust
    Support Vector Machines. PhD thesis, University of Waterloo, 2007. Supervised M3N (2.44)-(2.49);
    unsupervised M3N (5.1)-(5.6), class balance (5.25), relaxations (5.26)-(5.27), constraint
    generation (5.28); alternating method, Propositions 1-2 (section 5.4); experiments Tables
    5.1-5.2.

    See Also
    --------
    algorithms.hmm : Viterbi, forward-backward and Baum-Welch used here.

    Examples
    --------
    >>> from algorithms.m3n import sample_switching_hmm
    >>> sequences, states = sample_switching_hmm(0.05, random_state=0)
    >>> model = UnsupervisedM3N(n_states=2, random_state=0).fit(sequences)
    >>> len(model.labels_), model.emission_.shape, model.transition_.shape
    (10, (2, 2), (2, 2))
    """

    params_model = UnsupervisedM3NParams
    _result_attributes = (*MMCEstimatorMixin._result_attributes, "relaxation_objective_")

    def __init__(
        self,
        n_states: int = 2,
        *,
        method: str = "alternating",
        C: float = 100.0,
        size_band: float = 0.1,
        pair_size_band: float = 0.3,
        n_restarts: int = 5,
        em_iter: int = 100,
        max_alternations: int = 50,
        cutting_plane_tol: float = 1e-3,
        solver: str = "scs",
        sdp_tol: float = 1e-3,
        sdp_max_iter: int = 3000,
        random_state: int | None = None,
        beta: float | str = DEPRECATED,
        class_balance: float | str = DEPRECATED,
        pair_balance: float | str = DEPRECATED,
        sdp_solver: str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
        tol: float | str = DEPRECATED,
        n_init: int | str = DEPRECATED,
    ):
        self.n_states = n_states
        self.method = method
        self.C = C
        self.size_band = size_band
        self.pair_size_band = pair_size_band
        self.n_restarts = n_restarts
        self.em_iter = em_iter
        self.max_alternations = max_alternations
        self.cutting_plane_tol = cutting_plane_tol
        self.solver = solver
        self.sdp_tol = sdp_tol
        self.sdp_max_iter = sdp_max_iter
        self.random_state = random_state
        self.beta = beta
        self.class_balance = class_balance
        self.pair_balance = pair_balance
        self.sdp_solver = sdp_solver
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # X is a list of integer sequences of any lengths, not a samples x features matrix:
        # scikit-learn's estimator checks, which feed matrices, skip it for this tag.
        tags.input_tags.two_d_array = False
        return tags

    # -- fitting ----------------------------------------------------------------------------------
    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Learn states for the positions of ``X``, a list of 1-D integer sequences.

        ``y`` is ignored. ``progress(step, objective, message)`` is optional.
        """
        self._params = self._validated_params()
        sequences = as_symbol_sequences(X)
        batch = SequenceBatch(sequences)
        if batch.n_positions < self._params.n_states:
            raise ValueError(
                f"the sequences have {batch.n_positions} positions in all, fewer than "
                f"n_states={self._params.n_states}"
            )
        self.n_symbols_ = int(batch.flat.max()) + 1
        rng = check_random_state(self._params.random_state)
        self.warnings_: list[str] = []
        if self._params.method == "exact":
            labels, solution, n_iter, history = self._fit_exact(batch, rng, progress)
        else:
            labels, solution, n_iter, history = self._fit_alternating(batch, rng, progress)
        self.emission_ = solution.emission
        self.transition_ = solution.transition
        self.objective_ = float(solution.objective)
        self.objective_history_ = [float(v) for v in history]
        self.n_iter_ = int(n_iter)
        self.labels_ = batch.split(labels)
        report(progress, n_iter + 1, self.objective_, "done")
        return self

    def _fit_alternating(self, batch: SequenceBatch, rng, progress):
        k, V = self._params.n_states, self.n_symbols_
        best: AlternatingRun | None = None
        step = 0
        for restart in range(self._params.n_restarts):
            hmm = baum_welch(batch, k, V, rng=rng, max_iter=self._params.em_iter)
            report(progress, step, None, f"restart {restart + 1}: EM log-likelihood "
                   f"{hmm.loglik:.3f}")

            def on_iteration(n_iter: int, objective: float, changed: int, restart=restart):
                nonlocal step
                step += 1
                report(progress, step, objective,
                       f"restart {restart + 1}, alternation {n_iter}: {changed} labels changed")

            run = alternate_m3n(
                batch, hmm.decode(batch), k, V, beta=self._beta, size_band=self._params.size_band,
                max_iter=self._params.max_alternations, tol=self._params.cutting_plane_tol,
                on_iteration=on_iteration,
            )
            if best is None or run.solution.objective < best.solution.objective:
                best = run
        return best.labels, best.solution, best.n_iter, best.history

    def _fit_exact(self, batch: SequenceBatch, rng, progress):
        k, V = self._params.n_states, self.n_symbols_
        if problem := exact_relaxation_problem(batch.n_positions, batch.prev.size, k,
                                               self._params.size_band,
                                               self._params.pair_size_band):
            raise ValueError(problem)
        report(progress, 0, None, f"solving the CDHMM relaxation over {batch.n_positions} "
               "positions")
        relaxation = solve_cdhmm_relaxation(
            batch, k, V, beta=self._beta, size_band=self._params.size_band,
            pair_size_band=self._params.pair_size_band,
            solver=self._params.solver, tol=self._params.sdp_tol,
            max_iter=self._params.sdp_max_iter,
        )
        self.warnings_ += relaxation.warnings
        self.relaxation_objective_ = relaxation.objective
        report(progress, 1, relaxation.objective, f"relaxation solved ({relaxation.status})")
        recovered = recover_labels(relaxation.M, k, random_state=rng.randint(2**31 - 1))
        # The model is the M3N trained on the recovered labels (as the SVM trained on the found
        # labels in section 3.4); the thesis relabels the sequences by its Viterbi decoding.
        solution = solve_m3n(batch, recovered, k, V, beta=self._beta,
                             tol=self._params.cutting_plane_tol)
        labels = viterbi(batch, emission_scores(batch, solution.emission), solution.transition)
        solution.objective = m3n_objective(batch, labels, solution.emission,
                                           solution.transition, self._beta)
        return labels, solution, 1, [solution.objective]

    # -- prediction -------------------------------------------------------------------------------
    def _check_sequences(self, X) -> SequenceBatch:
        check_is_fitted(self, "emission_")
        sequences = as_symbol_sequences(X)
        for i, seq in enumerate(sequences):
            if seq.max() >= self.n_symbols_:
                raise ValueError(
                    f"sequences[{i}] contains symbol {int(seq.max())}, outside the vocabulary "
                    f"0..{self.n_symbols_ - 1} seen in training"
                )
        return SequenceBatch(sequences)

    def predict(self, X) -> list[np.ndarray]:
        """Viterbi state paths of new sequences under the learned weights."""
        batch = self._check_sequences(X)
        path = viterbi(batch, emission_scores(batch, self.emission_), self.transition_)
        return batch.split(path)

    def fit_predict(self, X, y=None, **kwargs) -> list[np.ndarray]:
        return self.fit(X, y, **kwargs).labels_

    def decision_function(self, X) -> list[float]:
        """Score ``w . phi(x, y*)`` of every sequence's Viterbi path."""
        batch = self._check_sequences(X)
        path = viterbi(batch, emission_scores(batch, self.emission_), self.transition_)
        return sequence_scores(batch, self.emission_, self.transition_, path).tolist()

    def score(self, X, y) -> float:
        """Position accuracy ``1 - clustering_error`` of the Viterbi paths against states ``y``."""
        predicted = np.concatenate(self.predict(X))
        return 1.0 - clustering_error(np.concatenate([np.asarray(s) for s in y]), predicted)

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state = {
            "n_symbols_": self.n_symbols_, "objective_": self.objective_, "n_iter_": self.n_iter_,
            "objective_history_": self.objective_history_, "warnings_": list(self.warnings_),
        }
        arrays = {
            "emission_": self.emission_, "transition_": self.transition_,
            "labels_flat": np.concatenate(self.labels_),
            "labels_lengths": np.array([len(s) for s in self.labels_], dtype=np.int64),
        }
        return state, arrays

    def _import_state(self, state, arrays):
        self.n_symbols_ = int(state["n_symbols_"])
        self.objective_ = float(state["objective_"])
        self.n_iter_ = int(state["n_iter_"])
        self.objective_history_ = list(state.get("objective_history_", []))
        self.warnings_ = list(state.get("warnings_", []))
        self.emission_ = np.asarray(arrays["emission_"], dtype=np.float64)
        self.transition_ = np.asarray(arrays["transition_"], dtype=np.float64)
        ends = np.cumsum(arrays["labels_lengths"])
        self.labels_ = np.split(np.asarray(arrays["labels_flat"], dtype=np.int64), ends[:-1])
