"""The box QP ``max_{0 <= x <= 1} p^T x - x^T H x / 2`` (an SVM dual without bias) that the
margin objectives solve at every evaluation."""

from __future__ import annotations

import functools

import numpy as np


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

