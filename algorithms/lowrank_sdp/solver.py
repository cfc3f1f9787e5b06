"""The low-rank SDP solver of the convex matrix programs of SDP MMC and the robust SVM, and its
certificate.

Problem class::

    min_Z  f(Z)   s.t.  <A_k, Z> = b_k (k equality),  <A_k, Z> <= b_k (k inequality),  Z >= 0

with ``f`` convex and differentiable (the programs here have ``f(Z) = max_lambda`` of a function
affine in ``Z``, so Danskin gives the gradient from the inner maximiser) and ``trace(Z) <= T`` on
the feasible set (``diag(M) = e`` fixes it). Every ``A_k`` is a symmetrised outer product
``sym(a_k c_k^T)``, so ``<A_k, V V^T> = (V^T a_k) . (V^T c_k)``: diagonals, entries, row sums,
labeled blocks and cluster sizes all are of this form
(:class:`~algorithms.lowrank_sdp.BilinearConstraints`).

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

Two extensions serve the programs (:mod:`algorithms.lowrank_sdp.programs`):

* Smoothing (the robust SDPs). Where ``f(Z) = max_lambda h(lambda, Z)`` has a non-unique
  maximiser (an outlier's ``eta_i = 0`` frees its ``lambda_i``), ``f`` is not differentiable
  and L-BFGS stalls. ``f_s = max_lambda h - s ||lambda||^2 / 2`` (Nesterov) is smooth; the
  certificate linearises ``h`` at the smoothed maximiser, whose value differs from ``f`` by the
  smoothing's bias, and ``s`` is lowered as the gap requires
  (:meth:`~algorithms.lowrank_sdp.MarginObjective.sharpen`). When the kernel has low rank the
  smoothed inner dual is solved on its factor (:func:`~algorithms.lowrank_sdp.low_rank_factor`,
  :func:`algorithms.lowrank_compiled.smoothed_dual_newton`).
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
from scipy import linalg
from scipy.optimize import OptimizeResult, minimize
from sklearn.utils import check_random_state

from algorithms.augmented_lagrangian import PenaltyPolicy
from algorithms.conic import SDPSolverError
from algorithms.lowrank_sdp.constraints import Constraints
from algorithms.threads import small_problem_threads


class Objective(Protocol):
    """Convex ``f`` on ``N x N`` matrices, evaluated at ``Z = V V^T``."""

    def __call__(self, V: np.ndarray) -> tuple[float, np.ndarray]:
        """``(f(V V^T), G V)`` with ``G`` the (symmetric) gradient of ``f`` at ``V V^T``."""

    def gradient_matrix(self, V: np.ndarray) -> np.ndarray:
        """Dense ``G`` at ``V V^T`` (for the certificate)."""

    # Optional, for a smoothed objective (see MarginObjective): ``certificate_values(V)`` gives
    # ``(f(Z), value at the linearisation point)`` and ``sharpen(excess)`` lowers the smoothing
    # when its bias is ``excess`` times the tolerance (False when there is none left to lower).



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
        program = _Program(
            objective, constraints, N, trace_bound=trace_bound, offset=offset,
            rows=np.zeros(0, dtype=np.int64) if unit_rows is None else np.asarray(unit_rows),
            nonnegative=nonnegative)
        options = _SolverOptions(
            tol=tol, max_iter=max_iter, inner_max_iter=inner_max_iter,
            refine_max_iter=REFINE_MAX_ITER if refine_max_iter is None else refine_max_iter,
            columns_on_stall=columns_on_stall, max_rank_increases=max_rank_increases)
        V = _initial_factor(N, rank, V0, random_state)
        y = np.zeros(constraints.m) if y0 is None or y0.shape != (constraints.m,) else y0.copy()
        result = _AugmentedLagrangian(program, options, V, y, on_iteration).run()
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


# The inner tolerance (divided by N) and the penalty's growth, as in GMMC's solver.
PENALTY_POLICY = PenaltyPolicy(inner_floor=1e-9)

# What a step of an outer iteration tells the loop of _AugmentedLagrangian.run: end the solve,
# or go on to the next iteration at once (leaving the penalty and infeas_old as they are).
_STOP, _NEXT = "stop", "next"


@dataclass(frozen=True)
class _Program:
    """The program of a :func:`solve_lowrank_sdp` run: ``min f(V V^T) + offset`` under the
    constraints, with ``trace(Z) <= trace_bound`` on the feasible set, the unit ``rows`` kept by
    the parametrisation ``v_i = w_i / ||w_i||`` and, with ``nonnegative``, ``V >= 0``."""

    objective: Objective
    cons: Constraints
    N: int
    trace_bound: float
    offset: float
    rows: np.ndarray
    nonnegative: bool


@dataclass(frozen=True)
class _SolverOptions:
    """The limits and rules of the augmented Lagrangian of :func:`solve_lowrank_sdp` (see
    there): ``tol`` of the certificate and the infeasibility, outer and inner iterations, the
    inner iterations once the multipliers are refined, and when and how often the factor may
    take a column."""

    tol: float
    max_iter: int
    inner_max_iter: int
    refine_max_iter: int
    columns_on_stall: bool
    max_rank_increases: int


def _initial_factor(N: int, rank: int, V0: np.ndarray | None, random_state) -> np.ndarray:
    """``V0`` where it has ``N`` rows (a warm start), else a random ``N x min(rank, N)`` factor
    with rows of about unit norm."""
    rng = check_random_state(random_state)
    r = min(rank, N)
    if V0 is not None and V0.shape[0] == N:
        return V0.copy()
    return rng.standard_normal((N, r)) / np.sqrt(r)


class _AugmentedLagrangian:
    """One run of :func:`solve_lowrank_sdp`: the factor ``V`` (``Z = V V^T``), the multipliers
    ``y`` and the penalty ``mu`` of the augmented Lagrangian (Rockafellar's form for the
    inequalities), and what the stopping rules count, with a method for each step of an outer
    iteration (:meth:`run`). ``program`` is what is solved, ``options`` how; ``V`` and ``y``
    are the start. The program's unit rows are kept by the parametrisation
    ``v_i = w_i / ||w_i||`` (:meth:`normalise`)."""

    def __init__(self, program: _Program, options: _SolverOptions, V: np.ndarray, y: np.ndarray,
                 on_iteration: Callable[[int, float, float], None] | None):
        self.objective, self.cons, self.N = program.objective, program.cons, program.N
        self.trace_bound, self.offset = program.trace_bound, program.offset
        self.rows, self.nonnegative = program.rows, program.nonnegative
        self.options, self.tol, self.on_iteration = options, options.tol, on_iteration
        self.y = y
        self.n_evals = 0
        self.V = self.normalise(V)[0]
        self.f, _ = self.objective(self.V)
        self.f_scale = max(abs(self.f + self.offset), 1e-8)
        # The penalty of the order of the objective at the start.
        self.mu = self.f_scale / max(self.cons.m, 1)
        self.mu_max = 1e8 * self.mu
        self.compiled = self._compiled_inner()
        self.messages: list[str] = []
        # Objective values at feasible iterations whose gap did not close.
        self.settled: list[float] = []
        self.infeas_old = self.infeas = np.inf
        self.n_iter = self.increases = 0
        self.f_upper = self.lower_bound = self.gap = self.min_eig = None
        self.certified = -1  # the outer iteration whose iterate the certificate describes
        self.n_thorough = 0

    def normalise(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``W`` with its unit rows divided by their norms, and those norms."""
        V = W.copy()
        norms = np.maximum(np.linalg.norm(W[self.rows], axis=1), 1e-300)
        V[self.rows] = W[self.rows] / norms[:, None]
        return V, norms

    def lagrangian(self, x: np.ndarray, r: int) -> tuple[float, np.ndarray]:
        """The augmented Lagrangian at ``V = normalise(x)`` (``N x r``) and its gradient in
        ``x``, at the current ``y`` and ``mu``."""
        self.n_evals += 1
        cons, rows, y, mu = self.cons, self.rows, self.y, self.mu
        ineq = cons.inequality
        V, norms = self.normalise(x.reshape(self.N, r))
        f, GV = self.objective(V)
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
        return (f + penalty) / self.f_scale, grad.ravel() / self.f_scale

    def _compiled_inner(self):
        """The objective's compiled inner solve on these constraints (the robust SDPs:
        :meth:`~algorithms.lowrank_sdp.HalfSphereMarginObjective.minimise_lagrangian`), or
        None."""
        compiled = getattr(self.objective, "minimise_lagrangian", None)
        if compiled is None:
            return None
        if self.rows.size != self.N or self.nonnegative:
            raise ValueError("a compiled inner problem needs every row a unit row, unbounded")
        return functools.partial(compiled, self.cons)

    def run(self) -> LowRankSDPResult:
        """Outer iterations until the certificate closes, the objective stalls, or
        ``max_iter``; then the result, certified at its last iterate."""
        for n_iter in range(1, self.options.max_iter + 1):
            self.n_iter = n_iter
            if self._iterate() == _STOP:
                break
        return self._result()

    def _iterate(self) -> str | None:
        """One outer iteration: the inner problem from ``V``, the multiplier step, and where
        the iterate is feasible within ``tol`` its certificate (:meth:`_on_feasible`); the
        penalty grows while the infeasibility falls by less than 4 times."""
        inner_tol = PENALTY_POLICY.inner_tolerance(self.infeas_old) / max(self.N, 1)
        budget = (self.options.inner_max_iter if len(self.settled) < REFINE_AFTER
                  else min(self.options.inner_max_iter, self.options.refine_max_iter))
        f_previous = self.f
        self._minimise(budget, inner_tol)
        g = self._update_multipliers()
        if self.on_iteration is not None:
            self.on_iteration(self.n_iter, self.f + self.offset, self.infeas)
        if self.infeas <= self.tol:
            outcome = self._on_feasible(f_previous, g)
            if outcome is not None:
                return outcome
        if PENALTY_POLICY.lags(self.infeas, self.infeas_old, self.tol):
            self._grow_penalty()
        self.infeas_old = self.infeas
        return None

    def _minimise(self, budget: int, inner_tol: float) -> None:
        """``V`` := the minimiser of the augmented Lagrangian from ``V``, by the compiled inner
        solve or L-BFGS-B (at most ``budget`` iterations, gradient tolerance ``inner_tol``,
        stopped early on creep)."""
        r = self.V.shape[1]
        if self.compiled is not None:
            x, evaluations = self.compiled(self.V.ravel().copy(), r, self.y, self.mu,
                                           self.f_scale, budget, inner_tol)
            self.n_evals += evaluations
        else:
            x = minimize(self.lagrangian, self.V.ravel(), args=(r,), jac=True, method="L-BFGS-B",
                         bounds=[(0.0, None)] * self.V.size if self.nonnegative else None,
                         callback=_stop_on_creep(budget, self.tol),
                         options={"maxiter": budget, "gtol": inner_tol, "ftol": 1e-15}).x
        self.V = self.normalise(x.reshape(self.N, r))[0]

    def _update_multipliers(self) -> np.ndarray:
        """``f`` and the infeasibility at ``V``, and the multiplier step ``y := y + mu g``
        (projected on ``y >= 0`` for the inequalities); returns ``g = A(Z) - b``."""
        self.f, _ = self.objective(self.V)
        values, _ = self.cons.values(self.V)
        g = values - self.cons.b
        shifted = self.y + self.mu * g
        self.y = np.where(self.cons.inequality, np.maximum(shifted, 0.0), shifted)
        self.infeas = float(_violations(values, self.cons).max()) if self.cons.m else 0.0
        return g

    def _grow_penalty(self) -> None:
        self.mu = PENALTY_POLICY.grown(self.mu, self.mu_max)

    def _on_feasible(self, f_previous: float, g: np.ndarray) -> str | None:
        """Certify a feasible iterate (after :func:`_restore_feasibility` where it violates an
        inequality within ``tol``): _STOP when the gap closed, else what :meth:`_refine` says."""
        tol = self.tol
        # The plain certificate first; the refitted multipliers (and Psi) cost least-squares
        # solves of N r rows, so they wait until the objective has settled.
        thorough = (abs(self.f - f_previous) <= tol * self.f_scale
                    and (self.n_thorough < THOROUGH_FIRST or self.n_iter % THOROUGH_EVERY == 0))
        self.n_thorough += thorough
        V_feasible = (_restore_feasibility(self.V, self.cons, self.rows)
                      if self.infeas > 0.0 and not self.nonnegative else self.V)
        cert = self._certificate(V_feasible, thorough=thorough)
        self.certified = self.n_iter if thorough or self.gap <= tol else -1
        if self.gap <= tol:
            if V_feasible is not self.V:
                self.V, self.infeas = V_feasible, _infeasibility(V_feasible, self.cons)
            return _STOP
        # The violation, within tol, may be what keeps the gap open: restoring feasibility
        # raises f by about y^T (A(Z) - b)_+, so the penalty grows while that is a tenth of
        # the tolerance or more. Below, the violation is rounding (an active inequality
        # lands a few ulps either side of its bound); a larger penalty would only turn it
        # into multiplier noise (y + mu g) and an ill-conditioned inner problem, with
        # lambda_min of the dual slack, and the gap, following that noise.
        if (V_feasible is not self.V
                and float(self.y @ np.where(self.cons.inequality, np.maximum(g, 0.0), 0.0))
                >= 0.1 * tol * self.f_scale):
            self._grow_penalty()
        return self._refine(cert, thorough)

    def _certificate(self, V: np.ndarray, *, thorough: bool = True) -> _Certificate:
        """:func:`_certify` at ``V`` with the current multipliers; keeps its bounds."""
        cert = _certify(self.objective, self.cons, V, self.y, self.trace_bound, self.offset,
                        self.rows, self.nonnegative, self.tol, thorough=thorough)
        self.f_upper, self.lower_bound = cert.upper, cert.lower
        self.gap, self.min_eig = cert.gap, cert.min_eig
        return cert

    def _refine(self, cert: _Certificate, thorough: bool) -> str | None:
        """With the gap open at a feasible iterate: lower the smoothing, add the dual slack's
        eigenvector as a column, or count the iterate towards the stall rule
        (:meth:`_on_stall`)."""
        tol, gap = self.tol, self.gap
        # Sharpen when the smoothed program is solved (the rest of the gap is the
        # smoothing's bias), or when the objective has settled and that bias, above half
        # the tolerance, is a quarter of the gap or more: refining the multipliers cannot
        # close a gap it is part of (ROD, n = 200: the gap sat at 4e-3 for ten iterations,
        # 1.65e-3 of it the bias).
        bias_share = cert.smoothing_share
        if (bias_share > 0.5 * tol
                and (gap - bias_share <= 0.5 * tol
                     or (len(self.settled) >= REFINE_AFTER and bias_share >= 0.25 * gap))
                and self.objective.sharpen(bias_share / tol)):
            self.settled.clear()
            return _NEXT
        can_widen = self.increases < self.options.max_rank_increases and self.V.shape[1] < self.N
        if self.min_eig < -tol and can_widen and (thorough or not self.nonnegative):
            # Rank too small: the eigenvector of the negative eigenvalue is a descent
            # direction for f + <y, A(.)> (Burer-Monteiro escape); add it as a column.
            self._widen(cert.direction)
            return _NEXT
        self.settled.append(self.f)
        if (len(self.settled) > STALL_WINDOW and abs(self.settled[-STALL_WINDOW - 1] - self.f)
                <= STALL_TOL * tol * self.f_scale):
            return self._on_stall(cert, can_widen)
        return None

    def _on_stall(self, cert: _Certificate, can_widen: bool) -> str:
        """The objective has settled while the gap stays open: widen the factor where the gap
        is mostly ``lambda_min``'s term (with ``columns_on_stall``), else stop with a note."""
        if (self.options.columns_on_stall and cert.eigen_share >= 0.5 * self.gap and can_widen
                and not self.nonnegative):
            # Settled with the gap mostly lambda_min's term: a saddle of the rank-r
            # factorisation; its eigenvector is the way out (as in _refine).
            self._widen(cert.direction)
            self.settled.clear()
            return _NEXT
        self.messages.append(
            f"low-rank SDP solver: the objective moved by less than "
            f"{STALL_TOL * self.tol:.0e} (relative) over {STALL_WINDOW} feasible iterations "
            f"while the certified gap stayed at {self.gap:.1e}; stopped there"
        )
        return _STOP

    def _widen(self, direction: np.ndarray) -> None:
        """Add the dual slack's eigenvector ``direction`` to ``V`` as a column."""
        self.increases += 1
        self.V = _with_eigen_column(self.V, direction, self.nonnegative)
        self.certified = -1

    def _result(self) -> LowRankSDPResult:
        """The result at ``V``, certified again unless the last iteration (thoroughly)
        certified it; "inaccurate" with a message when the gap or the infeasibility is above
        ``tol``."""
        if self.certified != self.n_iter:  # not (thoroughly) certified, or not feasible
            if 0.0 < self.infeas <= self.tol and not self.nonnegative:
                self.V = _restore_feasibility(self.V, self.cons, self.rows)
                self.infeas = _infeasibility(self.V, self.cons)
            self._certificate(self.V)
        status = "optimal"
        if self.infeas > self.tol or self.gap > self.tol:
            status = "inaccurate"
            self.messages.append(
                f"low-rank SDP solver stopped after {self.n_iter} augmented-Lagrangian "
                f"iterations with relative gap {self.gap:.1e} and infeasibility "
                f"{self.infeas:.1e} (tol {self.tol:.0e}, rank {self.V.shape[1]})"
            )
        return LowRankSDPResult(
            V=self.V, y=self.y, objective=self.f_upper + self.offset,
            lower_bound=self.lower_bound, gap=self.gap, infeasibility=self.infeas,
            min_eig=self.min_eig, rank=self.V.shape[1], n_iter=self.n_iter,
            n_evals=self.n_evals, seconds=0.0, status=status, tol=self.tol,
            messages=self.messages,
        )


def certificate_values(objective, V: np.ndarray) -> tuple[float, float]:
    """``(f(Z), value at the linearisation point)`` of an objective; the two differ for a
    smoothed objective (:class:`~algorithms.lowrank_sdp.MarginObjective` with ``smoothing``)."""
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


def raise_if_infeasible(result: LowRankSDPResult, what: str) -> None:
    """An augmented Lagrangian that ends far from feasibility (the penalty at its cap) means the
    constraints admit no solution, e.g. labels that contradict the class balance."""
    if result.infeasibility > max(100 * result.tol, 1e-2):
        raise SDPSolverError(
            f"lowrank solver: {what} is infeasible (constraints still violated by "
            f"{result.infeasibility:.2g} relative after {result.n_iter} augmented-Lagrangian "
            "iterations); check the partial labels against class_balance"
        )
