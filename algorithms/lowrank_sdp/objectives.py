"""The objectives of the low-rank programs: the relaxed margin (an SVM dual inside), a linear
objective, and objectives on a mapped factor ``Z = T W T^T``."""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from algorithms.lowrank_sdp.box_qp import solve_box_qp
from algorithms.lowrank_sdp.constraints import Constraints
from algorithms.lowrank_sdp.solver import certificate_values

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
    :func:`~algorithms.lowrank_sdp.solve_box_qp` warm-started from the previous one) gives the
    gradient by Danskin's theorem: ``-(K o lambda lambda^T) / (2 beta)`` on ``M``,
    ``(lambda + c) / 2`` on ``eta``. With ``smoothing`` and a ``factor`` ``F`` of ``K / beta``,
    the smoothed dual is solved on ``H = B B^T + smoothing I``, ``b_i = v_i (x) F_i``
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



class LinearObjective:
    """``f(Z) = <C, Z>`` for a fixed symmetric ``C``."""

    def __init__(self, C: np.ndarray):
        self.C = C

    def __call__(self, V: np.ndarray) -> tuple[float, np.ndarray]:
        CV = self.C @ V
        return float(np.einsum("ij,ij->", V, CV)), CV

    def gradient_matrix(self, V: np.ndarray) -> np.ndarray:
        return self.C


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
        """The inner problem of :func:`~algorithms.lowrank_sdp.solve_lowrank_sdp` from ``x`` by
        the compiled L-BFGS; returns the minimiser and the number of evaluations."""
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
