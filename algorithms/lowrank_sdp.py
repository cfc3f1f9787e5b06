"""One low-rank SDP solver for the convex matrix programs of SDP MMC and the robust SVM.

Problem class::

    min_Z  f(Z)   s.t.  <A_k, Z> = b_k (k equality),  <A_k, Z> <= b_k (k inequality),  Z >= 0

with ``f`` convex and differentiable (the programs here have ``f(Z) = max_lambda`` of a function
affine in ``Z``, so Danskin gives the gradient from the inner maximiser) and ``trace(Z) <= T`` on
the feasible set (``diag(M) = e`` fixes it). Every ``A_k`` is a symmetrised outer product
``sym(a_k c_k^T)``, so ``<A_k, V V^T> = (V^T a_k) . (V^T c_k)``: diagonals, entries, row sums,
labeled blocks and cluster sizes all are of this form (:class:`BilinearConstraints`).

Method (Burer & Monteiro 2003, as SDPLR): ``Z = V V^T`` with ``V`` of ``r`` columns, the
constraints by an augmented Lagrangian (Rockafellar's form for the inequalities), each inner
problem by L-BFGS on ``V``; the multipliers ``y`` are updated after every inner solve and the
penalty grows only while the infeasibility lags. The cost per evaluation is ``O(N^2 r)`` instead
of the ``O(N^3)``-``O(N^4)`` per iteration of a conic solver on the full matrix.

Stopping rule: relative primal infeasibility ``max_k viol_k / (1 + |b_k|) <= tol`` and relative
duality gap ``<= tol`` (below). Certificate: with ``G = grad f(Z)`` the dual slack is
``S = G + sum_k y_k A_k``; for every feasible ``Z'`` (``y_k >= 0`` on inequalities),
convexity gives ``f(Z') >= f(Z) + <G, Z' - Z> >= f(Z) - <G, Z> - y^T b + T min(0, lambda_min(S))``.
That lower bound, the primal value ``f(Z)`` and ``lambda_min(S)`` are reported
(:meth:`LowRankSDPResult.certificate`). A negative ``lambda_min`` means the rank was too small:
the solver then adds the eigenvector of ``lambda_min`` as a new column (a descent direction)
and continues (when ``lambda_min < -tol`` relative, and with ``columns_on_stall`` also when the
objective has settled with the gap mostly ``lambda_min``'s term). The bound holds for any
multipliers, so ``y`` is also refitted to stationarity at the final ``V`` and the better bound
kept. ``f(Z)`` is an upper bound only at a feasible ``Z``: an iterate that violates an
inequality within the tolerance is certified, and returned, after the shortest step along the
inequalities' negative gradient that satisfies them (:func:`_restore_feasibility`); while that
point's gap stays open the penalty grows, unless the restoration's cost ``y^T (A(Z) - b)_+`` is
below a tenth of the tolerance (a rounding-level violation, which a larger penalty would only
turn into multiplier noise).

Two extensions serve the programs below:

* Smoothing (the robust SDPs). Where ``f(Z) = max_lambda h(lambda, Z)`` has a non-unique
  maximiser (an outlier's ``eta_i = 0`` frees its ``lambda_i``), ``f`` is not differentiable
  and L-BFGS stalls. ``f_s = max_lambda h - s ||lambda||^2 / 2`` (Nesterov) is smooth; the
  certificate linearises ``h`` at the smoothed maximiser, whose value differs from ``f`` by the
  smoothing's bias, and ``s`` is lowered as the gap requires (:meth:`MarginObjective.sharpen`).
  When the kernel has low rank the smoothed inner dual is solved on its factor
  (:func:`low_rank_factor`, :func:`algorithms.lowrank_compiled.smoothed_dual_newton`).
* A nonnegative factor (unsupervised multi-class (4.8)): ``V >= 0`` makes ``Z >= 0`` entrywise,
  and the certificate adds multipliers ``Psi >= 0`` of ``Z >= 0`` fitted to stationarity.

The solver's timings against SCS are in ``docs/sdp_solver.md``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.optimize import OptimizeResult, minimize
from sklearn.utils import check_random_state

from algorithms.conic import SDPSolverError
from algorithms.threads import small_problem_threads

# ---------------------------------------------------------------------------------------------
# Constraints <sym(a_k c_k^T), Z> (=|<=) b_k
# ---------------------------------------------------------------------------------------------


@dataclass
class BilinearConstraints:
    """Constraints ``a_k^T Z c_k = b_k`` (or ``<= b_k`` where ``inequality[k]``).

    ``A`` holds the vectors ``a_k`` as sparse columns (``N x m``); ``C`` likewise, or is one dense
    vector ``c`` shared by every constraint (row sums ``Z e``: no ``N x N`` block of ones).
    """

    A: sp.csc_matrix
    C: sp.csc_matrix | np.ndarray
    b: np.ndarray
    inequality: np.ndarray

    @property
    def m(self) -> int:
        return int(self.b.size)

    @property
    def _shared(self) -> bool:
        return not sp.issparse(self.C)

    # Transposed once: the solver evaluates the constraints thousands of times.
    @functools.cached_property
    def _a_transposed(self) -> sp.csr_matrix:
        return self.A.T.tocsr()

    @functools.cached_property
    def _c_transposed(self) -> sp.csr_matrix | None:
        return None if self._shared else self.C.T.tocsr()

    def values(self, V: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """``A(V V^T)`` and the projections it was computed from (reused by the adjoint)."""
        AtV = np.asarray(self._a_transposed @ V)
        CtV = (self.C @ V)[None, :] if self._shared else np.asarray(self._c_transposed @ V)
        return (AtV * CtV).sum(axis=1), (AtV, CtV)

    def adjoint_times(self, y: np.ndarray, cache) -> np.ndarray:
        """``(sum_k y_k A_k) V`` from the projections of :meth:`values`."""
        AtV, CtV = cache
        first = self.A @ (y[:, None] * CtV)
        if self._shared:
            second = self.C[:, None] * (y @ AtV)[None, :]
        else:
            second = self.C @ (y[:, None] * AtV)
        return 0.5 * np.asarray(first + second)

    def directions(self, V: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``A_k V`` for the constraints ``index``, stacked as ``N x r x len(index)``."""
        a = self.A[:, index].toarray()
        c = (np.broadcast_to(self.C[:, None], a.shape) if self._shared
             else self.C[:, index].toarray())
        return 0.5 * (np.einsum("nk,kr->nrk", a, c.T @ V) + np.einsum("nk,kr->nrk", c, a.T @ V))

    def adjoint_matrix(self, y: np.ndarray) -> np.ndarray:
        """Dense ``sum_k y_k A_k`` (for the certificate)."""
        if self._shared:
            half = np.outer(np.asarray(self.A @ y).ravel(), self.C)
        else:
            half = (self.A @ sp.diags(y) @ self.C.T).toarray()
        return 0.5 * (half + half.T)


class Constraints:
    """Several :class:`BilinearConstraints` blocks acting as one linear map ``A``."""

    def __init__(self, *blocks: BilinearConstraints):
        self.blocks = [block for block in blocks if block.m]
        self.b = np.concatenate([block.b for block in self.blocks]) if self.blocks else np.zeros(0)
        self.inequality = (np.concatenate([block.inequality for block in self.blocks])
                           if self.blocks else np.zeros(0, dtype=bool))
        self._splits = np.cumsum([block.m for block in self.blocks])[:-1]

    @property
    def m(self) -> int:
        return int(self.b.size)

    def values(self, V: np.ndarray):
        parts = [block.values(V) for block in self.blocks]
        values = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0)
        return values, [part[1] for part in parts]

    def adjoint_times(self, y: np.ndarray, caches) -> np.ndarray:
        if not self.blocks:
            return 0.0
        out = 0.0
        for block, part, cache in zip(self.blocks, np.split(y, self._splits), caches,
                                      strict=True):
            out = out + block.adjoint_times(part, cache)
        return out

    def directions(self, V: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``A_k V`` for the constraints ``index`` (over all blocks): ``N x r x len(index)``."""
        starts = np.concatenate([[0], self._splits])
        parts = []
        for block, start in zip(self.blocks, starts, strict=True):
            local = index[(index >= start) & (index < start + block.m)] - start
            if local.size:
                parts.append(block.directions(V, local))
        return np.concatenate(parts, axis=2)

    def dense(self, N: int) -> tuple[np.ndarray, np.ndarray]:
        """The vectors ``a_k`` and ``c_k`` as rows of two dense ``m x N`` arrays."""
        A, C = np.zeros((self.m, N)), np.zeros((self.m, N))
        start = 0
        for block in self.blocks:
            rows = slice(start, start + block.m)
            A[rows] = block.A.T.toarray()
            C[rows] = block.C[None, :] if block._shared else block.C.T.toarray()
            start += block.m
        return A, C

    def adjoint_matrix(self, y: np.ndarray, N: int) -> np.ndarray:
        out = np.zeros((N, N))
        if not self.blocks:
            return out
        for block, part in zip(self.blocks, np.split(y, self._splits), strict=True):
            out += block.adjoint_matrix(part)
        return out


def _columns(N: int, vectors) -> sp.csc_matrix:
    """Sparse ``N x m`` from an index array (unit vectors) or a dense/sparse ``N x m`` array."""
    if sp.issparse(vectors):
        return sp.csc_matrix(vectors)
    vectors = np.asarray(vectors)
    if vectors.ndim == 1:  # indices of unit vectors
        m = vectors.size
        return sp.csc_matrix((np.ones(m), (vectors, np.arange(m))), shape=(N, m))
    return sp.csc_matrix(vectors)


def bilinear(N: int, a, c, b, *, inequality: bool = False,
             shared_c: np.ndarray | None = None) -> BilinearConstraints:
    """``a_k^T Z c_k (=|<=) b_k``; ``a``/``c`` index arrays (unit vectors) or ``N x m`` columns;
    ``shared_c`` (dense ``N``) instead of ``c`` when every constraint has the same ``c``."""
    A = _columns(N, a)
    C = np.asarray(shared_c, dtype=np.float64) if shared_c is not None else _columns(N, c)
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), (A.shape[1],)).copy()
    return BilinearConstraints(A, C, b, np.full(b.size, inequality))


# ---------------------------------------------------------------------------------------------
# Objective protocol and the box QP the programs' objectives share
# ---------------------------------------------------------------------------------------------


class Objective(Protocol):
    """Convex ``f`` on ``N x N`` matrices, evaluated at ``Z = V V^T``."""

    def __call__(self, V: np.ndarray) -> tuple[float, np.ndarray]:
        """``(f(V V^T), G V)`` with ``G`` the (symmetric) gradient of ``f`` at ``V V^T``."""

    def gradient_matrix(self, V: np.ndarray) -> np.ndarray:
        """Dense ``G`` at ``V V^T`` (for the certificate)."""

    # Optional, for a smoothed objective (see MarginObjective): ``certificate_values(V)`` gives
    # ``(f(Z), value at the linearisation point)`` and ``sharpen(excess)`` lowers the smoothing
    # when its bias is ``excess`` times the tolerance (False when there is none left to lower).


def solve_box_qp(H: np.ndarray, p: np.ndarray, x0: np.ndarray | None = None, *,
                 tol: float = 1e-12) -> np.ndarray:
    """``argmax_{0 <= x <= 1} p^T x - x^T H x / 2`` for PSD ``H`` (an SVM dual without bias),
    from ``x0`` (a warm start: the previous evaluation's solution), by the exact active-set
    method of :func:`_active_set`; it stops when the SVM duality gap
    ``x^T H x + sum_i (p - H x)_i^+ - p^T x`` is below ``tol`` relative to the value.

    Compiled, with its Cholesky factor updated instead of recomputed, the active set is cheap
    per step even from warm starts with many free variables, so no projected-Newton phase is
    needed. Each step frees or fixes one variable, so the step budget grows with ``n``.
    """
    x = np.zeros(p.size) if x0 is None else np.clip(x0, 0.0, 1.0)
    return _active_set(H, p, x, tol=tol, max_iter=1000 + 20 * p.size)[0]


def _active_set(H: np.ndarray, p: np.ndarray, x: np.ndarray, *, tol: float,
                max_iter: int = 1000) -> tuple[np.ndarray, bool]:
    """Primal active-set method (Nocedal & Wright, Algorithm 16.3, for bounds) for
    :func:`solve_box_qp`: on the free set ``F`` (``0 < x < 1``) with the other variables at
    their bounds, the face's maximiser solves ``H_FF x_F = p_F - H_FU e``; a step that would
    cross a bound stops there and fixes that variable; at a face's maximiser the variable whose
    gradient most violates its bound is freed. If the new face's direction points that variable
    out of the box (``H_FF`` singular: more free variables than ``H`` has rank), an exact line
    search along its own coordinate ascends instead. Returns ``(x, converged)``.

    Compiled (:func:`compiled_active_set`): a step changes one variable, so a solve takes
    tens to hundreds of steps of small work each, which numpy calls would spend on dispatch.
    The free block's
    Cholesky factor is updated, not recomputed (see
    :func:`algorithms.lowrank_compiled.active_set`).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    free = (x > 0.0) & (x < 1.0)
    converged = compiled_active_set()(np.ascontiguousarray(H, dtype=np.float64),
                                       np.ascontiguousarray(p, dtype=np.float64), x, free,
                                       float(tol), int(max_iter), _ridge(H))
    return x, bool(converged)


@functools.cache
def compiled_active_set():
    """:func:`algorithms.lowrank_compiled.active_set`, loaded (numba imported on first use, as
    :func:`algorithms.dual_qp.compiled_smo`) and warmed on a tiny problem."""
    from algorithms.lowrank_compiled import active_set

    active_set(np.eye(2), np.ones(2), np.zeros(2), np.zeros(2, dtype=np.bool_), 1e-12, 10, 1e-10)
    return active_set


def _ridge(H: np.ndarray) -> float:
    """Added to the diagonal of a free block: Gram blocks of repeated points are singular."""
    return 1e-10 * max(float(np.abs(np.diag(H)).max()), 1e-300)


# ---------------------------------------------------------------------------------------------
# Result and solver
# ---------------------------------------------------------------------------------------------


@dataclass
class LowRankSDPResult:
    """Solution, multipliers and certificate of :func:`solve_lowrank_sdp`: the one status object."""

    V: np.ndarray  # factor, Z = V V^T
    y: np.ndarray  # constraint multipliers (>= 0 on inequalities)
    objective: float  # f(Z) (+ offset)
    lower_bound: float | None  # certified lower bound on the optimum (+ offset)
    gap: float | None  # relative duality gap (objective - lower_bound) / scale
    infeasibility: float  # max_k violation_k / (1 + |b_k|)
    min_eig: float | None  # lambda_min of the dual slack S, relative to max(1, |S|_max)
    rank: int
    n_iter: int  # augmented-Lagrangian (outer) iterations
    n_evals: int  # objective evaluations
    seconds: float
    status: str  # "optimal" or "inaccurate"
    tol: float
    messages: list[str] = field(default_factory=list)

    @property
    def matrix(self) -> np.ndarray:
        """``Z = V V^T``."""
        return self.V @ self.V.T

    def certificate(self) -> dict[str, Any]:
        """JSON-ready status for result extras."""
        def num(value):
            return None if value is None else float(value)

        return {
            "solver": "lowrank", "status": self.status, "objective": num(self.objective),
            "lower_bound": num(self.lower_bound), "relative_gap": num(self.gap),
            "infeasibility": num(self.infeasibility), "dual_slack_min_eig": num(self.min_eig),
            "rank": self.rank, "iterations": self.n_iter, "evaluations": self.n_evals,
            "seconds": round(self.seconds, 3), "tol": self.tol,
        }


def _violations(values: np.ndarray, cons: Constraints) -> np.ndarray:
    g = values - cons.b
    return np.where(cons.inequality, np.maximum(g, 0.0), np.abs(g)) / (1.0 + np.abs(cons.b))


def _infeasibility(V: np.ndarray, cons: Constraints) -> float:
    """The largest relative violation at ``V`` (0 without constraints)."""
    return float(_violations(cons.values(V)[0], cons).max()) if cons.m else 0.0


def _restore_feasibility(V: np.ndarray, cons: Constraints, rows: np.ndarray) -> np.ndarray:
    """``V`` moved along the inequalities' negative gradient, its unit rows renormalised, by the
    shortest step that satisfies every inequality; ``V`` itself when an (explicit) equality is
    violated or no step up to ``2^40`` times the first does it.

    Within the tolerance an iterate may still violate a constraint, and then ``f(V V^T)`` is no
    upper bound on the optimum (ROD, n = 30: 7.8e-4 below it at infeasibility 2.4e-4); at the
    restored point it is one, and it differs from ``f(V V^T)`` by about the multiplier times
    the violation. (Not for a nonnegative factor, which the step would leave.)"""
    if not cons.m:
        return V
    values, cache = cons.values(V)
    excess = values - cons.b
    if np.any(~cons.inequality & (np.abs(excess) > 0.0)) or not np.any(excess > 0.0):
        return V
    violated = excess > 0.0
    # Minus the sum of the violated constraints' gradients, 2 (sum_k A_k) V.
    direction = -2.0 * cons.adjoint_times(violated.astype(np.float64), cache)
    squared = float((direction * direction).sum())
    if squared == 0.0:
        return V

    def moved(step):
        W = V + step * direction
        W[rows] /= np.maximum(np.linalg.norm(W[rows], axis=1), 1e-300)[:, None]
        return W

    def feasible(W):
        return bool(np.all(cons.values(W)[0] - cons.b <= 0.0))

    low, high = 0.0, float(excess[violated].max()) / squared
    for _ in range(40):  # double until feasible
        if feasible(moved(high)):
            break
        low, high = high, 2.0 * high
    else:
        return V
    for _ in range(12):  # then halve the bracket: the shortest feasible step, to 2^-12
        middle = 0.5 * (low + high)
        low, high = (low, middle) if feasible(moved(middle)) else (middle, high)
    return moved(high)


def _with_eigen_column(V: np.ndarray, u: np.ndarray, nonnegative: bool) -> np.ndarray:
    """``V`` with the dual slack's eigenvector ``u`` as a small new column. A nonnegative factor
    cannot take ``u``'s mixed signs in one column; its positive and negative parts as two columns
    let the rows they separate move apart."""
    columns = (np.column_stack([np.maximum(u, 0.0), np.maximum(-u, 0.0)]) if nonnegative
               else u[:, None])
    return np.hstack([V, 1e-2 * columns])


def _min_eigenpair(S: np.ndarray) -> tuple[float, np.ndarray]:
    w, v = linalg.eigh(S, subset_by_index=[0, 0], check_finite=False, driver="evr")
    return float(w[0]), v[:, 0]


def solve_lowrank_sdp(
    objective: Objective,
    constraints: Constraints,
    N: int,
    *,
    trace_bound: float,
    rank: int = 8,
    tol: float = 1e-4,
    max_iter: int = 80,
    inner_max_iter: int = 400,
    refine_max_iter: int | None = None,
    columns_on_stall: bool = False,
    max_rank_increases: int = 3,
    offset: float = 0.0,
    V0: np.ndarray | None = None,
    y0: np.ndarray | None = None,
    random_state=None,
    on_iteration: Callable[[int, float, float], None] | None = None,
    unit_rows: np.ndarray | None = None,
    nonnegative: bool = False,
) -> LowRankSDPResult:
    """Minimise ``f(V V^T)`` under the constraints; see the module notes for the rules.

    ``offset`` is added to reported values and sets the scale of the relative gap (a program
    whose value is ``n + f``). ``refine_max_iter``: the inner iterations once the multipliers
    are being refined (default ``REFINE_MAX_ITER``). ``columns_on_stall``: when the objective
    stalls with the gap mostly ``lambda_min``'s term, add its eigenvector as a column (up to
    ``max_rank_increases``) instead of stopping. ``V0``/``y0`` warm-start (re-solves with
    nearby data).
    ``unit_rows``: indices ``i`` with ``Z_ii = 1`` kept by the parametrisation
    ``v_i = w_i / ||w_i||`` (a product of spheres, as in the mixing method) instead of by
    multipliers; their multipliers are read off stationarity for the certificate.
    ``nonnegative``: ``V >= 0`` entrywise (L-BFGS-B's bounds), so ``Z >= 0`` entrywise holds by
    construction (a nonnegative factorisation, as Zhuang et al. 2022 for the k-means SDP);
    the certificate then carries multipliers ``Psi >= 0`` for ``Z >= 0`` (see ``_certify``).
    The BLAS runs under one thread (:func:`algorithms.threads.small_problem_threads`): the
    products here are small (``N x N`` times ``N x r``) and thread hand-offs cost more than they
    save on 2 cores.
    """
    start = time.perf_counter()
    with small_problem_threads():
        result = _solve(objective, constraints, N, trace_bound=trace_bound, rank=rank, tol=tol,
                        max_iter=max_iter, inner_max_iter=inner_max_iter,
                        refine_max_iter=(REFINE_MAX_ITER if refine_max_iter is None
                                         else refine_max_iter),
                        columns_on_stall=columns_on_stall,
                        max_rank_increases=max_rank_increases, offset=offset, V0=V0, y0=y0,
                        random_state=random_state, on_iteration=on_iteration,
                        unit_rows=unit_rows, nonnegative=nonnegative)
    result.seconds = time.perf_counter() - start
    return result


# Stagnation: the primal objective has settled (to STALL_TOL x tol, relative, over STALL_WINDOW
# feasible iterations) while the certificate's gap stays open. A tiny negative lambda_min of the
# dual slack, times the trace bound n, can keep the gap open indefinitely: it is noise in the
# multipliers, not a missing direction (adding columns does not close it). The result is then
# reported "inaccurate" instead of iterating on.
STALL_WINDOW = 5
STALL_TOL = 1e-2
# L-BFGS iterations per outer iteration after two feasible iterations whose gap did not close
# (the multipliers are being refined): with the inner SVM duals solved exactly, L-BFGS keeps
# making slow progress to its full cap, which makes a stalled problem expensive before the stall
# rule stops it. The cap starts only after REFINE_AFTER such iterations because a second outer
# iteration may still need the full budget.
REFINE_MAX_ITER = 40
REFINE_AFTER = 2
# Creep: on a non-smooth Lagrangian (the inner SVM's support set changes along the path) L-BFGS
# can keep lowering it by tiny steps, reach no gtol, and spend its whole budget (a two-class
# relaxation with no clear optimum, such as two clusters asked of three blobs). An inner run
# stops once, at its pace over the last CREEP_WINDOW iterations, the rest of its budget would
# lower the Lagrangian by less than CREEP_SHARE x tol (relative): a change the certificate,
# which works to tol, does not resolve.
CREEP_WINDOW = 20
CREEP_SHARE = 0.1
# Thorough certificates (refitted multipliers, Psi) once the objective has settled: the first
# THOROUGH_FIRST such iterations, then every THOROUGH_EVERY-th. Each costs least-squares solves of
# N r rows, which would dominate the solve if every feasible iteration had one.
THOROUGH_FIRST = 2
THOROUGH_EVERY = 4


def _stop_on_creep(budget: int, tol: float) -> Callable[[OptimizeResult], None]:
    """An L-BFGS callback that ends the run (scipy's ``minimize`` stops on ``StopIteration``)
    once the rest of its ``budget``, at its pace over the last ``CREEP_WINDOW`` iterations,
    would lower the objective by less than ``CREEP_SHARE * tol`` of its value."""
    values: list[float] = []

    def callback(intermediate_result: OptimizeResult) -> None:
        values.append(float(intermediate_result.fun))
        if len(values) > CREEP_WINDOW:
            pace = (values[-CREEP_WINDOW - 1] - values[-1]) / CREEP_WINDOW
            if pace * (budget - len(values)) < CREEP_SHARE * tol * abs(values[-1]):
                raise StopIteration

    return callback


def _solve(objective, cons, N, *, trace_bound, rank, tol, max_iter, inner_max_iter,
           refine_max_iter, columns_on_stall, max_rank_increases, offset, V0, y0, random_state,
           on_iteration, unit_rows, nonnegative) -> LowRankSDPResult:
    rng = check_random_state(random_state)
    r = min(rank, N)
    if V0 is not None and V0.shape[0] == N:
        V = V0.copy()
    else:
        V = rng.standard_normal((N, r)) / np.sqrt(r)
    y = np.zeros(cons.m) if y0 is None or y0.shape != (cons.m,) else y0.copy()
    ineq = cons.inequality
    n_evals = 0

    rows = np.zeros(0, dtype=np.int64) if unit_rows is None else np.asarray(unit_rows)

    def normalise(W):
        V = W.copy()
        norms = np.maximum(np.linalg.norm(W[rows], axis=1), 1e-300)
        V[rows] = W[rows] / norms[:, None]
        return V, norms

    V = normalise(V)[0]
    f0, _ = objective(V)
    f_scale = max(abs(f0 + offset), 1e-8)
    mu = f_scale / max(cons.m, 1)  # penalty of the order of the objective at the start
    mu_max = 1e8 * mu

    def lagrangian(x, r):
        nonlocal n_evals
        n_evals += 1
        V, norms = normalise(x.reshape(N, r))
        f, GV = objective(V)
        values, cache = cons.values(V)
        g = values - cons.b
        shifted = y + mu * g
        y_hat = np.where(ineq, np.maximum(shifted, 0.0), shifted)
        penalty = np.where(ineq, (y_hat**2 - y**2) / (2 * mu), y * g + 0.5 * mu * g**2).sum()
        grad = 2.0 * (GV + cons.adjoint_times(y_hat, cache)) if cons.m else 2.0 * GV
        if rows.size:  # chain rule through w -> w / ||w||: the tangent part, over ||w||
            gr, vr = grad[rows], V[rows]
            grad[rows] = (gr - np.einsum("ij,ij->i", gr, vr)[:, None] * vr) / norms[:, None]
        # In units of the objective's scale: L-BFGS-B's ftol compares decreases against
        # max(|f|, 1), so an objective of order 1e-2 would otherwise stop it far too early.
        return (f + penalty) / f_scale, grad.ravel() / f_scale

    # A compiled inner solve (the robust SDPs: :class:`HalfSphereMarginObjective`).
    compiled = getattr(objective, "minimise_lagrangian", None)
    if compiled is not None:
        if rows.size != N or nonnegative:
            raise ValueError("a compiled inner problem needs every row a unit row, unbounded")
        compiled = functools.partial(compiled, cons)
    messages: list[str] = []
    settled: list[float] = []  # objective values at feasible iterations the gap did not close
    infeas_old, infeas = np.inf, np.inf
    n_iter, increases = 0, 0
    lower_bound = gap = min_eig = None
    f = f0
    certified = -1  # the outer iteration whose iterate the certificate below describes
    n_thorough = 0
    for n_iter in range(1, max_iter + 1):
        r = V.shape[1]
        inner_tol = max(1e-9, min(1e-3, 0.1 * infeas_old)) / max(N, 1)
        budget = (inner_max_iter if len(settled) < REFINE_AFTER
                  else min(inner_max_iter, refine_max_iter))
        f_previous = f
        if compiled is not None:
            x, evaluations = compiled(V.ravel().copy(), r, y, mu, f_scale, budget, inner_tol)
            n_evals += evaluations
        else:
            x = minimize(lagrangian, V.ravel(), args=(r,), jac=True, method="L-BFGS-B",
                         bounds=[(0.0, None)] * V.size if nonnegative else None,
                         callback=_stop_on_creep(budget, tol),
                         options={"maxiter": budget, "gtol": inner_tol, "ftol": 1e-15}).x
        V = normalise(x.reshape(N, r))[0]
        f, _ = objective(V)
        values, _ = cons.values(V)
        g = values - cons.b
        shifted = y + mu * g
        y = np.where(ineq, np.maximum(shifted, 0.0), shifted)
        infeas = float(_violations(values, cons).max()) if cons.m else 0.0
        if on_iteration is not None:
            on_iteration(n_iter, f + offset, infeas)
        if infeas <= tol:
            # The plain certificate first; the refitted multipliers (and Psi) cost least-squares
            # solves of N r rows, so they wait until the objective has settled.
            thorough = (abs(f - f_previous) <= tol * f_scale
                        and (n_thorough < THOROUGH_FIRST or n_iter % THOROUGH_EVERY == 0))
            n_thorough += thorough
            V_feasible = (_restore_feasibility(V, cons, rows) if infeas > 0.0 and not nonnegative
                          else V)
            cert = _certify(objective, cons, V_feasible, y, trace_bound, offset, rows,
                            nonnegative, tol, thorough=thorough)
            f_upper, lower_bound, gap, min_eig = cert.upper, cert.lower, cert.gap, cert.min_eig
            certified = n_iter if thorough or gap <= tol else -1
            if gap <= tol:
                if V_feasible is not V:
                    V, infeas = V_feasible, _infeasibility(V_feasible, cons)
                break
            # The violation, within tol, may be what keeps the gap open: restoring feasibility
            # raises f by about y^T (A(Z) - b)_+, so the penalty grows while that is a tenth of
            # the tolerance or more. Below, the violation is rounding (an active inequality
            # lands a few ulps either side of its bound); a larger penalty would only turn it
            # into multiplier noise (y + mu g) and an ill-conditioned inner problem, with
            # lambda_min of the dual slack, and the gap, following that noise.
            if (V_feasible is not V
                    and float(y @ np.where(ineq, np.maximum(g, 0.0), 0.0))
                    >= 0.1 * tol * f_scale):
                mu = min(4.0 * mu, mu_max)
            # Sharpen when the smoothed program is solved (the rest of the gap is the
            # smoothing's bias), or when the objective has settled and that bias, above half
            # the tolerance, is a quarter of the gap or more: refining the multipliers cannot
            # close a gap it is part of (ROD, n = 200: the gap sat at 4e-3 for ten iterations,
            # 1.65e-3 of it the bias).
            bias_share = cert.smoothing_share
            if (bias_share > 0.5 * tol
                    and (gap - bias_share <= 0.5 * tol
                         or (len(settled) >= REFINE_AFTER and bias_share >= 0.25 * gap))
                    and objective.sharpen(bias_share / tol)):
                settled.clear()
                continue
            can_widen = increases < max_rank_increases and r < N
            if min_eig < -tol and can_widen and (thorough or not nonnegative):
                # Rank too small: the eigenvector of the negative eigenvalue is a descent
                # direction for f + <y, A(.)> (Burer-Monteiro escape); add it as a column.
                increases += 1
                V = _with_eigen_column(V, cert.direction, nonnegative)
                certified = -1
                continue
            settled.append(f)
            if (len(settled) > STALL_WINDOW
                    and abs(settled[-STALL_WINDOW - 1] - f) <= STALL_TOL * tol * f_scale):
                if (columns_on_stall and cert.eigen_share >= 0.5 * gap and can_widen
                        and not nonnegative):
                    # Settled with the gap mostly lambda_min's term: a saddle of the rank-r
                    # factorisation; its eigenvector is the way out (as above).
                    increases += 1
                    V = _with_eigen_column(V, cert.direction, nonnegative)
                    certified = -1
                    settled.clear()
                    continue
                messages.append(
                    f"low-rank SDP solver: the objective moved by less than "
                    f"{STALL_TOL * tol:.0e} (relative) over {STALL_WINDOW} feasible iterations "
                    f"while the certified gap stayed at {gap:.1e}; stopped there"
                )
                break
        if infeas > tol and infeas > 0.25 * infeas_old:
            mu = min(4.0 * mu, mu_max)
        infeas_old = infeas
    status = "optimal"
    if certified != n_iter:  # the last iterate was not (thoroughly) certified or not feasible
        if 0.0 < infeas <= tol and not nonnegative:
            V = _restore_feasibility(V, cons, rows)
            infeas = _infeasibility(V, cons)
        cert = _certify(objective, cons, V, y, trace_bound, offset, rows, nonnegative, tol)
        f_upper, lower_bound, gap, min_eig = cert.upper, cert.lower, cert.gap, cert.min_eig
    if infeas > tol or gap > tol:
        status = "inaccurate"
        messages.append(
            f"low-rank SDP solver stopped after {n_iter} augmented-Lagrangian iterations with "
            f"relative gap {gap:.1e} and infeasibility {infeas:.1e} (tol {tol:.0e}, rank "
            f"{V.shape[1]})"
        )
    return LowRankSDPResult(
        V=V, y=y, objective=f_upper + offset, lower_bound=lower_bound, gap=gap,
        infeasibility=infeas, min_eig=min_eig, rank=V.shape[1], n_iter=n_iter,
        n_evals=n_evals, seconds=0.0, status=status, tol=tol, messages=messages,
    )


def certificate_values(objective, V: np.ndarray) -> tuple[float, float]:
    """``(f(Z), value at the linearisation point)`` of an objective; the two differ for a
    smoothed objective (:class:`MarginObjective` with ``smoothing``)."""
    values = getattr(objective, "certificate_values", None)
    if values is not None:
        return values(V)
    f = objective(V)[0]
    return f, f


# Multipliers of Z >= 0 in the certificate: on the entries of Z at most NONNEGATIVE_SUPPORT
# (times max |Z|; a nonnegative factor has exact zeros where two rows have disjoint supports),
# fitted by PSI_ITERATIONS projected-gradient steps (below).
NONNEGATIVE_SUPPORT = 1e-8
PSI_ITERATIONS = 200


def _nonnegativity_multipliers(S: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``Psi >= 0`` (symmetric, zero where ``Z = V V^T`` is not near 0) minimising
    ``||(S - Psi) V||_F``: the multipliers of ``Z >= 0`` that make ``S - Psi`` stationary at
    ``V``, as the KKT conditions of the nonnegative factorisation ask; by projected gradient
    steps of length ``1 / ||V||_2^2`` from ``max(S, 0)`` on that support. ``max(S, 0)`` alone
    can leave ``lambda_min(S - Psi)`` clearly negative at a point that is optimal, which would
    deny the certificate; the fitted multipliers close it to rounding level."""
    gram = V @ V.T
    support = gram <= NONNEGATIVE_SUPPORT * float(np.abs(gram).max())
    np.fill_diagonal(support, False)
    psi = np.where(support, np.maximum(S, 0.0), 0.0)
    step = 1.0 / max(np.linalg.norm(V, 2) ** 2, 1e-300)
    for _ in range(PSI_ITERATIONS):
        residual = (S - psi) @ V
        gradient = residual @ V.T
        psi = np.where(support, np.maximum(psi + step * 0.5 * (gradient + gradient.T), 0.0),
                       0.0)
    return psi


def _certify(objective, cons, V, y, trace_bound, offset, rows, nonnegative=False, tol=1e-4,
             *, thorough: bool = True):
    """Upper bound ``f(Z)``, lower bound ``h - <G, Z> - y^T b + T min(0, lambda_min(S))``
    (``h`` and ``G`` the value and gradient of the linearisation, ``f`` itself unless smoothed),
    relative gap, relative ``lambda_min(S)`` and its eigenvector. The multipliers of the unit rows
    come from stationarity, ``(S V)_i = 0``: ``y_i = -<(G V + A*(y) V)_i, v_i>``. Not
    ``thorough``: the augmented Lagrangian's ``y`` alone, no ``Psi``.

    The bound holds for any multipliers (``y_k >= 0`` on inequalities), so ``thorough`` tries
    more and keeps the best bound: the augmented Lagrangian's ``y``, and ``y`` refitted to
    stationarity at ``V`` (:func:`_refit_multipliers`; the augmented Lagrangian's estimates lag
    the primal iterate, and their error shows up as a negative ``lambda_min``).
    With ``Z >= 0`` (``nonnegative``) any symmetric ``Psi >= 0`` gives the bound with ``S - Psi``
    in place of ``S``, because ``<Psi, Z'> >= 0`` at every feasible ``Z'``; ``Psi`` from
    :func:`_nonnegativity_multipliers`."""
    f, anchor = certificate_values(objective, V)
    G = objective.gradient_matrix(V)
    GZ = float(np.einsum("ij,ij->", V, G @ V))

    def bound(y, psi):  # (lower bound, relative lambda_min, its eigenvector, its bound term)
        S, y_rows = _dual_slack(G, cons, y, psi, V, rows)
        lam, vec = _min_eigenpair(S)
        lower = (anchor - GZ - float(y @ cons.b) - float(y_rows.sum())
                 + trace_bound * min(0.0, lam))
        return lower, lam / max(1.0, float(np.abs(S).max())), vec, -trace_bound * min(0.0, lam)

    best = bound(y, 0.0)
    if thorough and (nonnegative or cons.m):
        psi = 0.0
        for attempt in range(1 + 2 * (cons.m > 0) if nonnegative else 1):
            if attempt > 0 or not nonnegative:
                y = _refit_multipliers(G - psi, cons, V, y, rows, tol)
            if nonnegative:
                psi = _nonnegativity_multipliers(_dual_slack(G, cons, y, 0.0, V, rows)[0], V)
            best = max(best, bound(y, psi), key=lambda candidate: candidate[0])
    lower, rel_eig, vec, eigen_term = best
    scale = max(abs(f + offset), 1e-12)
    gap = max(f - lower, 0.0) / scale
    return _Certificate(f, lower + offset, gap, rel_eig, vec, (f - anchor) / scale,
                        eigen_term / scale)


def _dual_slack(G, cons, y, psi, V, rows) -> tuple[np.ndarray, np.ndarray]:
    """``S = G + A*(y) - Psi + Diag(y_rows)`` with the unit rows' multipliers from stationarity
    (``Psi`` vanishes where ``Z`` does not, so it does not enter them)."""
    S = G + cons.adjoint_matrix(y, V.shape[0]) - psi
    y_rows = -np.einsum("ij,ij->i", (S @ V)[rows], V[rows])
    S[rows, rows] += y_rows
    return S, y_rows


# Constraints whose multipliers are refitted at most (the least-squares system has N r of them
# per row): beyond, the augmented Lagrangian's multipliers are used as they are.
REFIT_MAX_CONSTRAINTS = 400


def _refit_multipliers(G: np.ndarray, cons: Constraints, V: np.ndarray, y: np.ndarray,
                       rows: np.ndarray, tol: float) -> np.ndarray:
    """Multipliers of the active constraints (equalities, and inequalities with ``y_k > 0`` or
    within ``tol`` of their bound) minimising the stationarity residual
    ``||P((G + sum_k y_k A_k) V)||`` (``P`` removes each unit row's own direction, which its
    multiplier absorbs), ``y_k >= 0`` on inequalities; the others 0. By bounded least squares."""
    from scipy.optimize import lsq_linear

    values = cons.values(V)[0]
    near = values >= cons.b - tol * (1.0 + np.abs(cons.b))
    active = np.flatnonzero(~cons.inequality | (y > 0) | near)
    if active.size == 0 or active.size > REFIT_MAX_CONSTRAINTS:
        return y

    def tangent(X):  # X is N x r (x k): drop the component of each unit row along itself
        along = np.einsum("ir...,ir->i...", X[rows], V[rows])
        X = X.copy()
        X[rows] -= np.einsum("i...,ir->ir...", along, V[rows])
        return X

    design = tangent(cons.directions(V, active)).reshape(-1, active.size)
    target = -tangent(G @ V).ravel()
    lower = np.where(cons.inequality[active], 0.0, -np.inf)
    fitted = lsq_linear(design, target, bounds=(lower, np.inf)).x
    refit = np.zeros_like(y)
    refit[active] = fitted
    return refit


@dataclass
class _Certificate:
    upper: float  # f(Z), without the offset
    lower: float  # certified lower bound, with the offset
    gap: float  # relative
    min_eig: float  # relative lambda_min of the dual slack
    direction: np.ndarray  # its eigenvector
    smoothing_share: float  # the part of the gap due to smoothing, f(Z) - h(lambda_s, Z), relative
    eigen_share: float  # the part due to lambda_min of the dual slack, -T min(0, lambda), relative


# ---------------------------------------------------------------------------------------------
# The programs: thesis SDP (3.5) and the REH / ROD SDPs of chapter 6
# ---------------------------------------------------------------------------------------------


# The inner SVM dual of the robust SDPs in factored form (G / beta = F F^T with q columns, e.g.
# a linear kernel on q features) costs O(n (r q)^2) per Newton step instead of the dense active
# set's O(n^2 r) plus its free block's factor. Kernels of higher rank stay dense.
FACTORED_MAX_RANK = 32


def low_rank_factor(G: np.ndarray, max_rank: int, rtol: float = 1e-12) -> np.ndarray | None:
    """``F`` with ``G = F F^T`` up to ``rtol`` times ``G``'s largest diagonal entry, by Cholesky
    with diagonal pivoting stopped at that residual (a linear kernel on ``d`` features stops
    after ``d`` columns); None when ``G`` (PSD) needs more than ``max_rank`` columns."""
    n = G.shape[0]
    residual = np.diag(G).astype(np.float64)
    scale = float(residual.max()) if n else 0.0
    F = np.zeros((n, max_rank))
    for j in range(max_rank + 1):
        pivot = int(np.argmax(residual)) if n else 0
        if n == 0 or residual[pivot] <= rtol * scale:
            return np.ascontiguousarray(F[:, :j])
        if j == max_rank:
            return None
        column = (G[:, pivot] - F[:, :j] @ F[pivot, :j]) / np.sqrt(residual[pivot])
        F[:, j] = column
        residual -= column**2
    return None


def factored_is_cheaper(n: int, r: int, q: int) -> bool:
    """Whether the factored inner dual (a few Newton steps of ``n (r q)^2``) beats the dense one
    (``n^2 r`` for ``H``, about ``(0.6 n)^3 / 3`` for the free block's Cholesky factor).

    The rule was set against timings of both paths (``benchmarks/sdp_solver.py``): the factored
    path wins widely for few features at larger ``n``, the dense one once ``q`` grows at small
    ``n``."""
    return q > 0 and (r * q) ** 2 <= 2 * n * r + n * n / 7


class MarginObjective:
    """``f(Z) = max_{0 <= lambda <= 1} p^T lambda - lambda^T (K o M) lambda / (2 beta) + c e^T p``.

    ``M`` is the leading ``n x n`` block of ``Z``. Two-class MMC (3.5): ``p = e``, ``c = 0``, and
    ``f`` is the relaxed inverse squared margin ``omega(M)``. Robust SVM: ``Z = [[M, eta],
    [eta^T, 1]]``, ``p = eta`` (its last column), ``c = -1`` (REH, (6.10) without ``+n``) or
    ``c = 0`` (ROD). The inner maximiser ``lambda`` (an SVM dual without bias, solved by
    :func:`solve_box_qp` warm-started from the previous one) gives the gradient by Danskin's
    theorem: ``-(K o lambda lambda^T) / (2 beta)`` on ``M``, ``(lambda + c) / 2`` on ``eta``.
    With ``smoothing`` and a ``factor`` ``F`` of ``K / beta``, the smoothed dual is solved on
    ``H = B B^T + smoothing I``, ``b_i = v_i (x) F_i``
    (:func:`algorithms.lowrank_compiled.smoothed_dual_newton`).
    """

    def __init__(self, K: np.ndarray, beta: float, *, eta_column: bool = False, c: float = 0.0,
                 smoothing: float = 0.0, factor: np.ndarray | None = None,
                 weights: np.ndarray | None = None):
        self.beta, self.eta_column, self.c = float(beta), eta_column, float(c)
        self.n = K.shape[0]
        # Row i standing for weights[i] identical points: their maximiser is shared (the dual is
        # concave and symmetric in them), so lambda_i is their common value and p = weights,
        # K_ij -> w_i w_j K_ij give the same value and gradient as the expanded problem.
        self.p = np.ones(self.n) if weights is None else np.asarray(weights, dtype=np.float64)
        self.K = K if weights is None else K * np.outer(self.p, self.p)
        self.lam = np.zeros(self.n)
        self.smoothing = float(smoothing)
        self.factor = factor  # F with K / beta = F F^T (:func:`low_rank_factor`), or None
        self._exact_lam: np.ndarray | None = None  # the unsmoothed maximiser, last certificate

    def uses_factor(self, r: int) -> bool:
        """Whether the smoothed inner dual runs on :attr:`factor` at rank ``r``."""
        return (self.factor is not None and self.smoothing > 0.0
                and factored_is_cheaper(self.n, r, self.factor.shape[1]))

    def _split(self, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Vn = V[: self.n]
        p = Vn @ V[self.n] if self.eta_column else self.p
        return Vn, p

    def _hessian(self, V: np.ndarray) -> np.ndarray:
        Vn = self._split(V)[0]
        H = self.K * (Vn @ Vn.T)
        H /= self.beta
        return H

    def maximiser(self, V: np.ndarray) -> np.ndarray:
        if self.uses_factor(V.shape[1]):
            from algorithms.lowrank_compiled import NEWTON_GAP, NEWTON_STEPS, outer_rows

            Vn, p = self._split(V)
            compiled_factored_dual()(outer_rows(np.ascontiguousarray(Vn), self.factor), p,
                                     self.smoothing, self.lam, NEWTON_GAP, NEWTON_STEPS)
            return self.lam
        H = self._hessian(V)
        H.flat[:: self.n + 1] += self.smoothing
        self.lam = solve_box_qp(H, self._split(V)[1], self.lam)
        return self.lam

    def sharpen(self, excess: float) -> bool:
        """Scale the smoothing down so its bias, about linear in it, falls to a quarter of the
        tolerance (``excess``: the bias over the tolerance); False when it is already 0."""
        if self.smoothing == 0.0:
            return False
        self.smoothing *= min(0.5, max(0.01, 0.25 / excess))
        return True

    def _value_at(self, V: np.ndarray, lam: np.ndarray) -> tuple[float, np.ndarray]:
        """``h(lambda, Z)`` (unsmoothed) and ``K (lambda o V_n)``."""
        Vn, p = self._split(V)
        KLV = self.K @ (lam[:, None] * Vn)
        quad = float(np.einsum("ij,ij->", lam[:, None] * Vn, KLV))
        return float(p @ lam - quad / (2 * self.beta) + self.c * p.sum()), KLV

    def certificate_values(self, V: np.ndarray) -> tuple[float, float]:
        """``(f(Z), h(lambda_s, Z))``: the unsmoothed value (an upper bound on the optimum once
        ``Z`` is feasible) and the value at the smoothed maximiser ``lambda_s``, where the
        certificate's linearisation is taken. Equal when ``smoothing`` is 0."""
        lam = self.maximiser(V)
        anchor = self._value_at(V, lam)[0]
        if self.smoothing == 0.0:
            return anchor, anchor
        # Warm-started from the previous certificate's maximiser: its free set is small (at most
        # about the rank of K o M), the smoothed one's is most of the points, and a singular
        # free block is solved by least squares (an expensive solve when started from lam).
        start = self._exact_lam if self._exact_lam is not None else lam
        self._exact_lam = solve_box_qp(self._hessian(V), self._split(V)[1], start.copy())
        return self._value_at(V, self._exact_lam)[0], anchor

    def __call__(self, V: np.ndarray) -> tuple[float, np.ndarray]:
        Vn = V[: self.n]
        lam = self.maximiser(V)
        value, KLV = self._value_at(V, lam)
        value -= 0.5 * self.smoothing * float(lam @ lam)
        GV = np.zeros_like(V)
        GV[: self.n] = -(lam[:, None] * KLV) / (2 * self.beta)
        if self.eta_column:
            weight = (lam + self.c) / 2.0
            GV[: self.n] += weight[:, None] * V[self.n][None, :]
            GV[self.n] = weight @ Vn
        return float(value), GV

    def gradient_matrix(self, V: np.ndarray) -> np.ndarray:
        lam = self.maximiser(V)
        G = np.zeros((V.shape[0], V.shape[0]))
        G[: self.n, : self.n] = -(self.K * np.outer(lam, lam)) / (2 * self.beta)
        if self.eta_column:
            G[: self.n, self.n] = G[self.n, : self.n] = (lam + self.c) / 2.0
        return G


def raise_if_infeasible(result: LowRankSDPResult, what: str) -> None:
    """An augmented Lagrangian that ends far from feasibility (the penalty at its cap) means the
    constraints admit no solution, e.g. labels that contradict the class balance."""
    if result.infeasibility > max(100 * result.tol, 1e-2):
        raise SDPSolverError(
            f"lowrank solver: {what} is infeasible (constraints still violated by "
            f"{result.infeasibility:.2g} relative after {result.n_iter} augmented-Lagrangian "
            "iterations); check the partial labels against class_balance"
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
    """Two-class SDP (3.5) solved by :func:`solve_lowrank_sdp`."""

    M: np.ndarray
    omega: float
    result: LowRankSDPResult


def solve_two_class_lowrank(
    K: np.ndarray, *, beta: float, limit: float, y_partial: np.ndarray | None = None,
    groups: np.ndarray | None = None, weights: np.ndarray | None = None, tol: float = 1e-4,
    max_iter: int = 300, rank: int | None = None, random_state=0, on_iteration=None,
) -> TwoClassLowRank:
    """SDP (3.5) (same program as :func:`algorithms.sdp_mmc.solve_two_class_sdp`).

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
    margin objective is the expanded one (:class:`MarginObjective`), so the program is (3.5) over
    all the points with ``M`` constant on each point's copies, solved at the size of the
    distinct points.
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


class LinearObjective:
    """``f(Z) = <C, Z>`` for a fixed symmetric ``C``."""

    def __init__(self, C: np.ndarray):
        self.C = C

    def __call__(self, V: np.ndarray) -> tuple[float, np.ndarray]:
        CV = self.C @ V
        return float(np.einsum("ij,ij->", V, CV)), CV

    def gradient_matrix(self, V: np.ndarray) -> np.ndarray:
        return self.C


@dataclass
class MultiClassLowRank:
    """Unsupervised multi-class SDP (4.8), collapsed form, solved by :func:`solve_lowrank_sdp`."""

    M: np.ndarray
    d: np.ndarray
    omega: float  # n - e^T d - <K, M> / (2 beta), the relaxation's value
    result: LowRankSDPResult


def solve_multiclass_lowrank(
    K: np.ndarray, n_clusters: int, *, beta: float, balance: float, start_labels: np.ndarray,
    tol: float = 1e-3, max_iter: int = 300, random_state=0, on_iteration=None,
) -> MultiClassLowRank:
    """The program of :func:`algorithms.sdp_mmc.solve_multiclass_sdp_symmetric`:
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
    """REH / ROD SDP solved by :func:`solve_lowrank_sdp`."""

    eta: np.ndarray
    M: np.ndarray
    lam: np.ndarray
    value: float  # zeta of the scaled program (REH: without the "+ n")
    result: LowRankSDPResult


class MappedObjective:
    """``f(T W T^T)`` for a fixed sparse ``T`` (``Z = T W T^T``); the gradient is ``T^T G T``.

    Uses: tying rows (labeled points of S1 share one row up to sign, so ``M_ij = y_i y_j`` holds
    exactly instead of to the solver's tolerance) and the robust SDPs' half-sphere map.
    """

    def __init__(self, inner, T: sp.csr_matrix):
        self.inner, self.T = inner, sp.csr_matrix(T)
        self.Tt = self.T.T.tocsr()

    def to_z(self, W: np.ndarray) -> np.ndarray:
        return np.asarray(self.T @ W)

    def __call__(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        f, GV = self.inner(self.to_z(W))
        return f, np.asarray(self.Tt @ GV)

    def certificate_values(self, W: np.ndarray) -> tuple[float, float]:
        return certificate_values(self.inner, self.to_z(W))

    def sharpen(self, excess: float) -> bool:
        return self.inner.sharpen(excess)

    def gradient_matrix(self, W: np.ndarray) -> np.ndarray:
        G = self.inner.gradient_matrix(self.to_z(W))
        TtG = np.asarray(self.Tt @ G)
        return np.asarray(self.Tt @ TtG.T)  # T^T G T (G symmetric)


def map_constraints(constraints: Constraints, T: sp.csr_matrix) -> Constraints:
    """The same constraints on ``W`` with ``Z = T W T^T``: ``a^T Z c = (T^T a)^T W (T^T c)``."""
    Tt = sp.csr_matrix(T).T.tocsr()
    blocks = []
    for block in constraints.blocks:
        C = Tt @ block.C if block._shared else (Tt @ block.C).tocsc()
        blocks.append(BilinearConstraints((Tt @ block.A).tocsc(), np.asarray(C).ravel()
                                          if block._shared else C, block.b, block.inequality))
    return Constraints(*blocks)


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


def half_sphere_map(n: int) -> sp.csr_matrix:
    """``T = [[I/2, e/2], [0, 1]]``: ``Z = T W T^T`` maps ``diag(W) = e``, ``W >= 0`` one to one
    onto ``Z >= 0``, ``Z_nn = 1``, ``Z_ii = Z_in`` (``v_i = (w_i + w_n)/2`` lies on the sphere of
    radius 1/2 around ``v_n / 2``), so the robust SDPs become programs on unit rows like (3.5)."""
    rows = np.concatenate([np.arange(n), np.arange(n), [n]])
    cols = np.concatenate([np.arange(n), np.full(n, n), [n]])
    vals = np.concatenate([np.full(2 * n, 0.5), [1.0]])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n + 1, n + 1))


class HalfSphereMarginObjective(MappedObjective):
    """The robust SDPs' objective: a :class:`MarginObjective` with its eta column on
    ``Z = T W T^T`` (:func:`half_sphere_map`), every row of ``W`` a unit row. Its inner
    augmented-Lagrangian problems run compiled (:mod:`algorithms.lowrank_compiled`)."""

    def __init__(self, inner: MarginObjective):
        super().__init__(inner, half_sphere_map(inner.n))
        self._G_over_beta = None

    def minimise_lagrangian(self, cons: Constraints, x: np.ndarray, r: int, y: np.ndarray,
                            mu: float, f_scale: float, max_iter: int,
                            gtol: float) -> tuple[np.ndarray, int]:
        """The inner problem of :func:`_solve` from ``x`` by the compiled L-BFGS; returns the
        minimiser and the number of evaluations."""
        inner = self.inner
        A, C = cons.dense(inner.n + 1)
        if self._G_over_beta is None:
            self._G_over_beta = np.ascontiguousarray(inner.K / inner.beta, dtype=np.float64)
        factor = inner.factor if inner.uses_factor(int(r)) else np.zeros((inner.n, 0))
        evaluations = compiled_lbfgs()(
            x, int(max_iter), float(gtol), inner.n, int(r), self._G_over_beta, factor, inner.c,
            inner.smoothing, inner.lam, A, C, cons.b, cons.inequality, y, float(mu),
            float(f_scale))
        return x, int(evaluations)


@functools.cache
def compiled_factored_dual():
    """:func:`algorithms.lowrank_compiled.smoothed_dual_newton` as the factored inner problem
    calls it from Python (a signature of its own, besides the one inlined in the compiled
    L-BFGS), loaded and warmed on a two-point problem."""
    from algorithms.lowrank_compiled import (
        NEWTON_GAP,
        NEWTON_STEPS,
        outer_rows,
        smoothed_dual_newton,
    )

    factor = outer_rows(np.ones((2, 1)), np.ones((2, 1)))
    smoothed_dual_newton(factor, np.ones(2), 1e-3, np.zeros(2), NEWTON_GAP, NEWTON_STEPS)
    return smoothed_dual_newton


@functools.cache
def compiled_lbfgs():
    """:func:`algorithms.lowrank_compiled.lbfgs`, loaded (numba imported on first use) and
    warmed on a one-point REH problem."""
    from algorithms.lowrank_compiled import lbfgs

    no_rows = np.zeros((0, 2))
    for factor in (np.zeros((1, 0)), np.ones((1, 1))):  # the dense and the factored path
        lbfgs(np.ones(2), 2, 1e-9, 1, 1, np.ones((1, 1)), factor, -1.0, 1e-3, np.zeros(1),
              no_rows, no_rows, np.zeros(0), np.zeros(0, dtype=np.bool_), np.zeros(0), 1.0, 1.0)
    return lbfgs


def solve_robust_lowrank(
    G: np.ndarray, beta: float, *, method: str = "reh", rho: float = 0.8, tol: float = 1e-4,
    max_iter: int = 80, rank: int | None = None, random_state=0, on_iteration=None,
) -> RobustLowRank:
    """The SDP of Theorem 7 (REH) or section 6.3 (ROD) on ``Z = [[M, eta], [eta^T, 1]] >= 0``:
    ``min max_lambda lambda^T eta - lambda^T (G o M) lambda / (2 beta) - e^T eta`` (REH; ROD
    without ``- e^T eta`` and with ``e^T eta >= rho n``) over ``diag(M) = eta``, ``Z_nn = 1``.
    ``0 <= eta <= 1`` follows from ``Z >= 0`` (``eta_i^2 <= M_ii Z_nn = eta_i``). ``G = K o yy^T``
    (already scaled by the caller). The value is ``zeta``; REH's (6.9) is ``zeta + n``.

    Solved on ``W`` with ``Z = T W T^T`` (:func:`half_sphere_map`): ``diag(W) = e`` by
    unit rows, the only other constraint ROD's ``sum_i W_in >= (2 rho - 1) n`` (divided by ``n``,
    so the penalty is on the scale of the objective). The inner SVM dual is smoothed
    (:class:`MarginObjective` ``smoothing``): an ablated point has ``eta_i = 0`` and a free
    ``lambda_i``, which without it left the objective non-differentiable and the certificate
    open (relative gaps 0.03-200 on the section 6.5 data; ROD at n = 200 stopped at 19.2 where
    the optimum is 0.368). When ``G / beta`` has low rank (a linear kernel on few features,
    :func:`low_rank_factor`), that dual is solved on its factor (:func:`factored_is_cheaper`).
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
