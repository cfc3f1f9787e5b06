"""SMO for the dual QP of a kernel machine: ``min 1/2 u^T K u - y^T u``, ``lo <= u <= hi``,
``sum u = 0``.

With ``lo = -C``, ``hi = C`` this is the dual of the Laplacian-loss SVR (epsilon = 0) of Zhang,
Tsang and Kwok 2007, (6)/(7) with ``u = alpha - alpha*``. The solver is sequential minimal
optimization with libsvm's second-order working-set selection (Fan, Chen & Lin, JMLR 2005) and
libsvm's stopping rule (the largest KKT violation ``max G_j - min G_i`` over the feasible directions
<= ``tol``), so ``tol`` means what scikit-learn's ``SVR(tol=...)`` means. It is compiled with numba
and works on the kernel matrix in place: the same iterations as libsvm without libsvm's copy of a
kernel row per fetch on its precomputed-kernel path, and it can be warm-started. It starts from
``u = 0`` or from a given feasible point (iterSVR passes the previous step's solution).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

# A pair whose kernel curvature is this small is moved as if it were this much curved (libsvm's
# TAU): the step stays finite on duplicate points.
MIN_CURVATURE = 1e-12


@dataclass
class DualQPSolution:
    u: np.ndarray  # the dual variables
    scores: np.ndarray  # K u: the decision values without a bias
    n_iter: int
    converged: bool


def _smo(K, y, lo, hi, u, scores, tol, max_iter):
    """The SMO loop, compiled by :func:`compiled_smo`: updates ``u`` in place, writes ``K u`` to
    ``scores`` and returns ``(n_iter, converged)``. Only scalars come back: boxing a new array
    calls into Python, where a signal handler's exception (RQ's job timeout) would turn into a
    SystemError. The gradient is a local array, which the compiler knows aliases no argument,
    so the update loop vectorizes. Three plain passes per iteration: fusing the gradient update
    with the next selection would stop its vectorization."""
    n = y.shape[0]
    G = K @ u - y  # gradient of the objective
    diagonal = np.empty(n)  # contiguous: each strided K[t, t] would cost a cache line
    for t in range(n):
        diagonal[t] = K[t, t]
    n_iter = 0
    converged = False
    while n_iter < max_iter:
        # i: the variable that can grow with the smallest gradient.
        i = -1
        g_min = np.inf
        for t in range(n):
            if u[t] < hi[t] and G[t] < g_min:
                g_min = G[t]
                i = t
        # j: a variable that can shrink with G_j > G_i, by the second-order gain
        # (G_j - G_i)^2 / curvature; g_max - g_min is the KKT violation.
        j = -1
        g_max = -np.inf
        best_gain = -np.inf
        if i >= 0:
            K_i = K[i]
            K_ii = diagonal[i]
            for t in range(n):
                if u[t] > lo[t]:
                    d = G[t] - g_min
                    if d > 0.0:
                        g_max = max(g_max, G[t])
                        gain = d * d / max(K_ii + diagonal[t] - 2.0 * K_i[t], MIN_CURVATURE)
                        if gain > best_gain:
                            best_gain = gain
                            j = t
        if j < 0 or g_max - g_min <= tol:
            converged = True
            break
        curvature = max(diagonal[i] + diagonal[j] - 2.0 * K[i, j], MIN_CURVATURE)
        step = min((G[j] - G[i]) / curvature, hi[i] - u[i], u[j] - lo[j])
        u[i] += step
        u[j] -= step
        K_i, K_j = K[i], K[j]
        for t in range(n):
            G[t] += step * (K_i[t] - K_j[t])
        n_iter += 1
    for t in range(n):
        scores[t] = G[t] + y[t]
    return n_iter, converged


@functools.cache
def compiled_smo():
    """:func:`_smo` compiled (cached on disk by numba). numba is imported here, on first use:
    its import takes over a second that the API process, which never fits, need not pay; the
    worker calls this before its work horses fork, so jobs inherit the compiled code."""
    from numba import njit

    smo = njit(cache=True, nogil=True)(_smo)
    # Compile (or load from the disk cache) the one signature used, now.
    ones, y = np.ones(2), np.array([1.0, -1.0])
    smo(np.eye(2), y, -ones, ones, np.zeros(2), np.empty(2), 1e-3, 10)
    return smo


def solve_dual_qp(
    K: np.ndarray,
    y: np.ndarray,
    lo: float | np.ndarray,
    hi: float | np.ndarray,
    *,
    tol: float = 1e-3,
    max_iter: int = 10_000_000,
    u0: np.ndarray | None = None,
) -> DualQPSolution:
    """Solve ``min 1/2 u^T K u - y^T u`` s.t. ``lo <= u <= hi``, ``sum u = 0`` by SMO.

    ``K`` is a symmetric positive semidefinite matrix and ``lo <= 0 <= hi`` (the start ``u = 0``
    is feasible). ``u0``, if given, is the start instead and must be feasible (within the
    bounds, summing to zero). A run that reaches ``max_iter`` warns and returns its iterate.
    """
    n = y.shape[0]
    K = np.ascontiguousarray(K, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    # Writable copies: a read-only view (broadcast_to of an array) is another numba signature,
    # compiled anew on first use instead of the one compiled_smo loads.
    lo = np.array(np.broadcast_to(lo, (n,)), dtype=np.float64)
    hi = np.array(np.broadcast_to(hi, (n,)), dtype=np.float64)
    u = np.zeros(n) if u0 is None else np.array(u0, dtype=np.float64)
    scores = np.empty(n)
    n_iter, converged = compiled_smo()(K, y, lo, hi, u, scores, float(tol), int(max_iter))
    if not converged:
        warnings.warn(f"SMO stopped at max_iter={max_iter} before its KKT tolerance {tol:g}",
                      ConvergenceWarning, stacklevel=2)
    return DualQPSolution(u=u, scores=scores, n_iter=n_iter, converged=bool(converged))
