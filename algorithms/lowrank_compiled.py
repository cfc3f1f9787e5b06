"""The low-rank solver's compiled kernels (numba): the box QP's active set and the robust SDPs'
inner problem.

:func:`active_set` is the loop of :func:`algorithms.lowrank_sdp.solve_box_qp`, the SVM dual
every margin objective solves per evaluation.

:func:`algorithms.lowrank_sdp.solve_robust_lowrank` minimises, per augmented-Lagrangian
iteration, ``L(W) = f(T U U^T T^T) + penalty(U U^T)`` with ``U`` the rows of ``W`` scaled to
unit length, ``T`` the half-sphere map and ``f`` the smoothed margin objective with its eta
column (:class:`algorithms.lowrank_sdp.MarginObjective`). At small ``n`` one evaluation is a
few ``n^2 r`` products and a warm-started box QP, and in Python the dozens of numpy and scipy
calls around them (the sparse map, the constraint blocks, L-BFGS-B's wrapper) cost more than
the work, over thousands of evaluations per solve. Here the evaluation
(:func:`robust_lagrangian`) and the quasi-Newton loop (:func:`lbfgs`) run compiled, with
:func:`active_set` called in place. When ``G / beta = F F^T`` has few columns (a linear kernel
on few features, as the thesis's section 6.5 data) the smoothed dual is solved on that factor
instead (:func:`smoothed_dual_newton`), whose cost grows with the factor's width, not ``n^2``.

Imported on first use (numba's import is slow); compiled functions are cached on disk. They
live in one file because numba's disk cache is keyed on the file of each function: a caller
cached in another file would keep running an edited callee's old code.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Updates of the active set's Cholesky factor between refactorisations (rounding accumulates).
REFACTOR_EVERY = 100

# L-BFGS: the memory of scipy's L-BFGS-B (maxcor 10) and the weak Wolfe conditions of its line
# search (sufficient decrease 1e-3, curvature 0.9), found by bisection with doubling
# (Lewis & Overton 2013), which does not need the objective to be smooth between its pieces.
MEMORY = 10
ARMIJO = 1e-3
CURVATURE = 0.9
LINE_SEARCH_STEPS = 30

# The factored smoothed dual: Newton steps at most (it ends in finitely many, usually few), and
# the relative duality gap that also stops it, at rounding level: its value error
# is the objective's, and the outer L-BFGS's line search compares values 1e-12 apart.
NEWTON_STEPS = 50
NEWTON_GAP = 1e-15

EPSILON = float(np.finfo(np.float64).eps)


@njit(cache=True, nogil=True)
def _move_gradient(g, H, i, delta):
    """``g = p - H x`` after ``x_i`` moved by ``delta`` (``H`` symmetric: its row ``i``)."""
    if delta != 0.0:
        for r in range(g.size):
            g[r] -= delta * H[i, r]


@njit(cache=True, nogil=True)
def active_set(H, p, x, free, tol, max_iter, ridge):
    """The loop of :func:`algorithms.lowrank_sdp.box_qp._active_set` on ``x`` and ``free`` in place;
    True when converged.

    The free set's Cholesky factor ``L L^T = H_FF + ridge I`` is kept across steps: a freed
    variable appends a row (one triangular solve), a fixed one leaves by a rank-one update of
    the rows after it, so a step costs ``O(|F|^2)``, not a factorisation's ``O(|F|^3)``. The sum
    of ``H``'s columns at the upper bound is kept the same way. When an appended pivot is not
    positive (``H_FF`` singular), that step refactors, or solves by least squares.

    One piece: every step reads and updates the same factor, free-set order, upper-bound sum and
    ascent direction in place, and numba compiles the loop as one kernel; compiled helpers per
    step would pass all of that state on every step of the loop."""
    n = p.size
    order = np.empty(n, np.int64)  # the free variables in the factor's row order
    member = np.zeros(n, np.bool_)
    m = 0
    updates = 0
    L = np.empty((n, n))
    valid = True  # L factors H_FF + ridge I for order[:m]
    in_upper = np.zeros(n, np.bool_)
    upper_sum = np.zeros(n)  # sum of H's columns over the variables at the upper bound
    abs_p = np.abs(p).sum()
    g = p - H @ x  # ascent direction, kept up to date as x moves (refreshed with the factor)
    for _ in range(max_iter):
        for i in range(n):
            at_upper = (not free[i]) and x[i] >= 1.0
            if at_upper != in_upper[i]:
                sign = 1.0 if at_upper else -1.0
                for r in range(n):  # H is symmetric: its row i, read contiguously
                    upper_sum[r] += sign * H[i, r]
                in_upper[i] = at_upper
        # Variables that left the free set: delete their rows (last first).
        for k in range(m - 1, -1, -1):
            if free[order[k]]:
                continue
            if valid:  # L[k+1:, k+1:] absorbs column k: a rank-one Cholesky update
                for j in range(k + 1, m):
                    diagonal = L[j, j]
                    v_j = L[j, k]
                    radius = np.sqrt(diagonal * diagonal + v_j * v_j)
                    c, s = radius / diagonal, v_j / diagonal
                    L[j, j] = radius
                    for i in range(j + 1, m):
                        L[i, j] = (L[i, j] + s * L[i, k]) / c
                        L[i, k] = c * L[i, k] - s * L[i, j]
                for i in range(k + 1, m):  # shift rows up and columns left past k
                    for j in range(k):
                        L[i - 1, j] = L[i, j]
                    for j in range(k + 1, i + 1):
                        L[i - 1, j - 1] = L[i, j]
            member[order[k]] = False
            for a in range(k + 1, m):
                order[a - 1] = order[a]
            m -= 1
            updates += 1
        # Variables that entered it: append their rows (one at a time; several at once, as at
        # the warm start, are cheaper to factor afresh).
        entering = 0
        for i in range(n):
            entering += free[i] and not member[i]
        if entering > 1:
            valid = False
        for i in range(n):
            if not free[i] or member[i]:
                continue
            order[m] = i
            member[i] = True
            updates += 1
            if valid:
                squared = H[i, i] + ridge
                for a in range(m):  # L[m, :m] solves L[:m, :m] l = H[F, i]
                    total = H[order[a], i]
                    for b in range(a):
                        total -= L[a, b] * L[m, b]
                    L[m, a] = total / L[a, a]
                    squared -= L[m, a] * L[m, a]
                if squared > 0.0:
                    L[m, m] = np.sqrt(squared)
                else:
                    valid = False
            m += 1
        if updates >= REFACTOR_EVERY:  # rounding in the updates: refactor now and then
            valid, updates = False, 0
            g = p - H @ x
        if m:
            rhs = np.empty(m)
            for a in range(m):
                rhs[a] = p[order[a]] - upper_sum[order[a]]
            if not valid:  # refactor; least squares when H_FF + ridge I is not definite
                A = np.empty((m, m))
                for a in range(m):
                    for b in range(m):
                        A[a, b] = H[order[a], order[b]]
                    A[a, a] += ridge
                try:
                    factor = np.linalg.cholesky(A)
                    for a in range(m):
                        for b in range(a + 1):
                            L[a, b] = factor[a, b]
                    valid = True
                except Exception:  # numba's LinAlgError
                    solution = _symmetric_lstsq(A, rhs)
            if valid:
                solution = _cholesky_solve(L, rhs)  # its leading m x m block
            d = np.empty(m)
            outward = -1
            for a in range(m):
                i = order[a]
                d[a] = solution[a] - x[i]
                if outward < 0 and ((x[i] <= 0.0 and d[a] < 0.0) or (x[i] >= 1.0 and d[a] > 0.0)):
                    outward = a
            if outward >= 0:  # only the variable just freed sits at a bound
                i = order[outward]
                before = x[i]
                if H[i, i] > 0:
                    x[i] = min(max(x[i] + g[i] / H[i, i], 0.0), 1.0)
                else:
                    x[i] = 1.0 if g[i] > 0 else 0.0
                free[i] = 0.0 < x[i] < 1.0
                _move_gradient(g, H, i, x[i] - before)
                continue
            blocking, room_min = 0, np.inf
            for a in range(m):
                i = order[a]
                room = np.inf
                if d[a] > 0:
                    room = (1.0 - x[i]) / d[a]
                elif d[a] < 0:
                    room = -x[i] / d[a]
                if room < room_min:
                    room_min, blocking = room, a
            step = min(room_min, 1.0)
            before = np.empty(m)
            for a in range(m):
                i = order[a]
                before[a] = x[i]
                x[i] = min(max(x[i] + step * d[a], 0.0), 1.0)
            if step < 1.0:  # blocked: fix the variable at the bound it reached
                x[order[blocking]] = 0.0 if d[blocking] < 0 else 1.0
            for a in range(m):
                _move_gradient(g, H, order[a], x[order[a]] - before[a])
            if step < 1.0:
                for a in range(m):
                    free[order[a]] = 0.0 < x[order[a]] < 1.0
                continue
        most, most_violation = 0, -np.inf
        for i in range(n):
            violation = 0.0 if free[i] else (g[i] if x[i] <= 0.0 else -g[i])
            if violation > most_violation:
                most, most_violation = i, violation
        # The stopping rule of solve_box_qp: the SVM duality gap within tol of the value.
        px, xHx, positive = 0.0, 0.0, 0.0
        for i in range(n):
            px += p[i] * x[i]
            xHx += x[i] * (p[i] - g[i])
            positive += max(g[i], 0.0)
        value = px - 0.5 * xHx
        if most_violation <= 0.0 or xHx + positive - px <= tol * max(abs(value), 1e-12 * abs_p):
            return True
        free[most] = True
    return False


@njit(cache=True, nogil=True)
def outer_rows(Vn, F):
    """``B`` with rows ``b_i = V_i (x) F_i`` (``r q`` long): ``(V V^T) o (F F^T) = B B^T``."""
    n, r = Vn.shape
    q = F.shape[1]
    B = np.empty((n, r * q))
    for i in range(n):
        for a in range(r):
            for c in range(q):
                B[i, a * q + c] = Vn[i, a] * F[i, c]
    return B


@njit(cache=True, nogil=True)
def _smoothed_primal(B, p, smoothing, w, t):
    """``J(w) = |w|^2 / 2 + sum_i phi(p_i - b_i^T w)`` with the residuals written to ``t``;
    ``phi(t) = max_{0 <= l <= 1} l t - smoothing l^2 / 2`` (0, ``t^2 / 2s``, ``t - s / 2``)."""
    total = 0.5 * _dot(w, w)
    for i in range(p.size):
        t[i] = p[i] - _dot(B[i], w)
        if t[i] >= smoothing:
            total += t[i] - 0.5 * smoothing
        elif t[i] > 0.0:
            total += 0.5 * t[i] * t[i] / smoothing
    return total


@njit(cache=True, nogil=True)
def smoothed_dual_newton(B, p, smoothing, lam, tol, max_iter):
    """``lam`` (in place) maximising ``p^T l - |B^T l|^2 / 2 - smoothing |l|^2 / 2`` over
    ``0 <= l <= 1``, the smoothed SVM dual with ``H = B B^T + smoothing I``, when ``B`` has few
    columns; returns the Newton steps taken, negative when it stopped at ``max_iter``.

    Solved in its primal ``min_w J(w)`` (:func:`_smoothed_primal`, ``w`` of ``B``'s width, convex
    and piecewise quadratic) by the finite Newton method of L2-SVMs (Mangasarian 2002; Keerthi &
    DeCoste 2005): Newton directions with an exact line search, from ``w = B^T lam`` (the
    optimum's relation, so the previous maximiser is the warm start); then ``l_i = clip((p_i -
    b_i^T w) / smoothing, 0, 1)``. A full step that keeps every point's piece (``l_i`` at 0, at
    1 or between) lands on the exact minimiser, as the active set's solves do; the duality gap
    within ``tol`` (relative) also stops it. A step costs ``O(n q^2)`` for ``q`` columns, against
    ``O(n^2)`` and a Cholesky factor of the free block for the active set."""
    n, q = B.shape
    w = B.T @ lam
    t = np.empty(n)
    delta = np.empty(n)
    piece = np.empty(n, np.int8)
    value = _smoothed_primal(B, p, smoothing, w, t)
    full_step = False
    for step_count in range(max_iter + 1):
        grad = w.copy()  # J'(w) = w - B^T l(w)
        lam_sq, linear = 0.0, 0.0
        same_pieces = full_step
        for i in range(n):
            lam[i] = min(max(t[i] / smoothing, 0.0), 1.0)
            if lam[i] > 0.0:
                _axpy(-lam[i], B[i], grad)
            lam_sq += lam[i] * lam[i]
            linear += p[i] * lam[i]
            now = 0 if lam[i] <= 0.0 else (2 if lam[i] >= 1.0 else 1)
            same_pieces = same_pieces and now == piece[i]
            piece[i] = now
        if same_pieces:
            return step_count
        w_lam = w - grad  # B^T l(w)
        dual = linear - 0.5 * _dot(w_lam, w_lam) - 0.5 * smoothing * lam_sq
        if value - dual <= tol * max(abs(dual), 1e-300) or step_count == max_iter:
            return step_count if step_count < max_iter else -max_iter
        hessian = np.eye(q)
        for i in range(n):
            if piece[i] == 1:
                for a in range(q):
                    scaled = B[i, a] / smoothing
                    for c in range(a + 1):
                        hessian[a, c] += scaled * B[i, c]
        for a in range(q):
            for c in range(a):
                hessian[c, a] = hessian[a, c]
        try:  # I + B_F^T B_F / s is definite, but entries far apart in scale can break Cholesky
            direction = -_cholesky_solve(np.linalg.cholesky(hessian), grad)
        except Exception:  # numba's LinAlgError: the least-squares direction instead
            direction = -_symmetric_lstsq(hessian, grad)
        for i in range(n):
            delta[i] = _dot(B[i], direction)
        step = _exact_step(t, delta, smoothing, _dot(w, direction), _dot(direction, direction))
        if step <= 0.0:
            return step_count  # no descent along the direction: stationary to rounding
        full_step = abs(step - 1.0) <= 1e-9
        for a in range(q):
            w[a] += step * direction[a]
        value = _smoothed_primal(B, p, smoothing, w, t)
    return -max_iter


@njit(cache=True, nogil=True)
def _exact_step(t, delta, smoothing, w_d, d_d):
    """The minimiser over ``a >= 0`` of ``J(w + a d)`` (``t`` the residuals at ``w``, ``delta``
    ``= B d``, ``w_d = w^T d``, ``d_d = d^T d``): the root of its derivative ``w_d + a d_d -
    sum_i delta_i clip((t_i - a delta_i) / smoothing, 0, 1)``, increasing and piecewise linear in
    ``a``, by Newton steps on it kept inside a bracket (bisection when one leaves it)."""
    low, high = 0.0, np.inf
    step = 1.0
    for _ in range(100):
        slope, curvature = w_d + step * d_d, d_d
        for i in range(t.size):
            residual = t[i] - step * delta[i]
            if residual >= smoothing:
                slope -= delta[i]
            elif residual > 0.0:
                slope -= delta[i] * residual / smoothing
                curvature += delta[i] * delta[i] / smoothing
        if slope == 0.0:
            return step
        if slope < 0.0:
            low = step
        else:
            high = step
        proposal = step - slope / curvature
        if not low < proposal < high:
            proposal = 2.0 * low + 1.0 if high == np.inf else 0.5 * (low + high)
        if abs(proposal - step) <= 1e-14 * step:  # the root of this linear piece, to rounding
            return proposal
        step = proposal
    return low


@njit(cache=True, nogil=True)
def robust_lagrangian(w, n, r, G_over_beta, factor, c, smoothing, lam, A, C, b, inequality, y,
                      mu, f_scale, grad):
    """``L(W) / f_scale`` with its gradient written to ``grad`` (both flat, ``(n + 1) r``).

    ``f``: ``max_{0 <= lambda <= 1} p^T lambda - lambda^T (G o V_n V_n^T) lambda / (2 beta)
    + c e^T p - smoothing |lambda|^2 / 2`` (``G_over_beta``: ``G / beta``) with ``V = T U``
    (``v_i = (u_i + u_n) / 2``, ``v_n = u_n``) and ``p = V_n v_n`` (eta); ``lam`` holds the
    warm start and is overwritten by the maximiser. Constraints ``a_k^T U U^T c_k (<=|=) b_k``
    (rows of ``A``, ``C``) with multipliers ``y`` and penalty ``mu``, in Rockafellar's form for
    the inequalities, as :meth:`algorithms.lowrank_sdp.solver._AugmentedLagrangian.lagrangian`.

    One piece: the value and the gradient are computed in one compiled pass from the same
    intermediates (the normalized factor, the inner maximiser, the constraint values), which
    L-BFGS asks for together at every point."""
    N = n + 1
    W = w.reshape((N, r))
    U = np.empty((N, r))
    norms = np.empty(N)
    for i in range(N):
        total = 0.0
        for j in range(r):
            total += W[i, j] * W[i, j]
        norms[i] = max(np.sqrt(total), 1e-300)
        for j in range(r):
            U[i, j] = W[i, j] / norms[i]
    Vn = np.empty((n, r))
    p = np.zeros(n)
    for i in range(n):
        for j in range(r):
            Vn[i, j] = 0.5 * (U[i, j] + U[n, j])
            p[i] += Vn[i, j] * U[n, j]
    if factor.shape[1]:
        B = outer_rows(Vn, factor)
        # np.int64: a plain global would be typed Literal[int](50), a second signature that
        # numba compiles besides the one the Python caller uses.
        smoothed_dual_newton(B, p, smoothing, lam, NEWTON_GAP, np.int64(NEWTON_STEPS))
    else:
        H = Vn @ Vn.T
        largest = 0.0
        for i in range(n):
            for j in range(n):
                H[i, j] *= G_over_beta[i, j]
            H[i, i] += smoothing
            largest = max(largest, abs(H[i, i]))
        free = (lam > 0.0) & (lam < 1.0)
        active_set(H, p, lam, free, 1e-12, 1000 + 20 * n, 1e-10 * max(largest, 1e-300))
    LV = np.empty((n, r))
    for i in range(n):
        for j in range(r):
            LV[i, j] = lam[i] * Vn[i, j]
    # With G / beta = F F^T: F (F^T LV), O(n r q) instead of O(n^2 r).
    KLV = factor @ (factor.T @ LV) if factor.shape[1] else G_over_beta @ LV
    quad, linear, eta_sum, squares = 0.0, 0.0, 0.0, 0.0
    for i in range(n):
        for j in range(r):
            quad += LV[i, j] * KLV[i, j]
        linear += p[i] * lam[i]
        eta_sum += p[i]
        squares += lam[i] * lam[i]
    value = linear - 0.5 * quad + c * eta_sum - 0.5 * smoothing * squares
    # G V (Danskin), then T^T G V, doubled: the gradient in U of f(T U U^T T^T).
    GU = np.zeros((N, r))
    for i in range(n):
        weight = 0.5 * (lam[i] + c)
        for j in range(r):
            row = -0.5 * lam[i] * KLV[i, j] + weight * U[n, j]
            GU[i, j] = row  # (T^T G V)_i = (G V)_i / 2, doubled
            GU[n, j] += row + 2.0 * weight * Vn[i, j]
    penalty = 0.0
    for k in range(b.size):
        Ua = A[k] @ U
        Uc = C[k] @ U
        g = Ua @ Uc - b[k]
        shifted = y[k] + mu * g
        if inequality[k]:
            y_hat = max(shifted, 0.0)
            penalty += (y_hat * y_hat - y[k] * y[k]) / (2.0 * mu)
        else:
            y_hat = shifted
            penalty += y[k] * g + 0.5 * mu * g * g
        for i in range(N):
            for j in range(r):
                GU[i, j] += y_hat * (A[k, i] * Uc[j] + C[k, i] * Ua[j])
    # Chain rule through w -> w / ||w||: the part tangent to the sphere, over ||w||.
    out = grad.reshape((N, r))
    for i in range(N):
        radial = 0.0
        for j in range(r):
            radial += GU[i, j] * U[i, j]
        for j in range(r):
            out[i, j] = (GU[i, j] - radial * U[i, j]) / (norms[i] * f_scale)
    return (value + penalty) / f_scale


@njit(cache=True, nogil=True)
def lbfgs(x, max_iter, gtol, n, r, G_over_beta, factor, c, smoothing, lam, A, C, b, inequality,
          y, mu, f_scale):
    """Minimise :func:`robust_lagrangian` from ``x`` (updated in place) by L-BFGS (Nocedal &
    Wright, Algorithm 7.5); stops when ``max |grad| <= gtol`` (L-BFGS-B's ``pgtol``) or after
    ``max_iter`` iterations. Returns the number of evaluations."""
    size = x.size
    g = np.empty(size)
    f = robust_lagrangian(x, n, r, G_over_beta, factor, c, smoothing, lam, A, C, b,
                          inequality, y, mu, f_scale, g)
    evaluations = 1
    S = np.zeros((MEMORY, size))
    Y = np.zeros((MEMORY, size))
    rho = np.zeros(MEMORY)
    alpha = np.zeros(MEMORY)
    stored, newest = 0, -1
    d = np.empty(size)  # every vector preallocated: an iteration costs tens of microseconds
    x_new = np.empty(size)
    g_new = np.empty(size)
    s_k = np.empty(size)
    y_k = np.empty(size)
    for _ in range(max_iter):
        if np.abs(g).max() <= gtol:
            break
        # Two-loop recursion: d = -H g, H scaled by s.y / y.y of the newest pair.
        for i in range(size):
            d[i] = -g[i]
        for k in range(stored):
            slot = (newest - k) % MEMORY
            alpha[slot] = rho[slot] * _dot(S[slot], d)
            _axpy(-alpha[slot], Y[slot], d)
        if stored:
            scale = 1.0 / (rho[newest] * _dot(Y[newest], Y[newest]))
            for i in range(size):
                d[i] *= scale
        for k in range(stored - 1, -1, -1):
            slot = (newest - k) % MEMORY
            _axpy(alpha[slot] - rho[slot] * _dot(Y[slot], d), S[slot], d)
        slope = _dot(g, d)
        if slope >= 0.0:  # not a descent direction (rounding): restart from the gradient
            for i in range(size):
                d[i] = -g[i]
            slope = _dot(g, d)
            stored = 0
        step = 1.0 if stored else min(1.0, 1.0 / max(np.sqrt(_dot(g, g)), 1e-300))
        low, high = 0.0, np.inf
        f_new = f
        accepted = False
        for _ in range(LINE_SEARCH_STEPS):
            for i in range(size):
                x_new[i] = x[i] + step * d[i]
            f_new = robust_lagrangian(x_new, n, r, G_over_beta, factor, c, smoothing, lam, A,
                                      C, b, inequality, y, mu, f_scale, g_new)
            evaluations += 1
            if not f_new <= f + ARMIJO * step * slope:  # (also NaN)
                high = step
            elif _dot(g_new, d) < CURVATURE * slope:
                low = step
            else:
                accepted = True
                break
            step = 2.0 * low if high == np.inf else 0.5 * (low + high)
        if not accepted and not f_new < f:
            break  # no decrease along d at any step tried: stationary to rounding
        for i in range(size):
            s_k[i] = x_new[i] - x[i]
            y_k[i] = g_new[i] - g[i]
            x[i] = x_new[i]
            g[i] = g_new[i]
        f = f_new
        sy = _dot(s_k, y_k)
        if sy > 1e-12 * np.sqrt(_dot(s_k, s_k) * _dot(y_k, y_k)):
            newest = (newest + 1) % MEMORY
            for i in range(size):  # element by element: a row assignment compiles for seconds
                S[newest, i] = s_k[i]
                Y[newest, i] = y_k[i]
            rho[newest] = 1.0 / sy
            stored = min(stored + 1, MEMORY)
    return evaluations


@njit(cache=True, nogil=True)
def _dot(u, v):
    total = 0.0
    for i in range(u.size):
        total += u[i] * v[i]
    return total


@njit(cache=True, nogil=True)
def _axpy(a, u, v):
    """``v += a u`` in place."""
    for i in range(u.size):
        v[i] += a * u[i]


# numba compiles np.linalg.solve and np.linalg.lstsq in several seconds each, per caller; these
# two small routines replace them where the matrix is symmetric.


@njit(cache=True, nogil=True)
def _cholesky_solve(L, rhs):
    """``x`` with ``L L^T x = rhs``, ``L`` the leading ``rhs.size`` rows and columns of a lower
    triangular factor (the whole array, not a slice: one compiled signature for every caller):
    two triangular solves."""
    m = rhs.size
    x = np.empty(m)
    for a in range(m):
        total = rhs[a]
        for b in range(a):
            total -= L[a, b] * x[b]
        x[a] = total / L[a, a]
    for a in range(m - 1, -1, -1):
        total = x[a]
        for b in range(a + 1, m):
            total -= L[b, a] * x[b]
        x[a] = total / L[a, a]
    return x


@njit(cache=True, nogil=True)
def _symmetric_lstsq(A, rhs):
    """The minimum-norm least-squares solution of ``A x = rhs`` for symmetric ``A``, as
    ``np.linalg.lstsq`` gives it: the pseudo-inverse from the eigendecomposition, with the
    eigenvalues below machine precision times the largest (in absolute value) taken as zero."""
    values, vectors = np.linalg.eigh(A)
    cutoff = EPSILON * max(np.abs(values).max(), 1e-300) if values.size else 0.0
    coefficients = vectors.T @ rhs
    for a in range(values.size):
        coefficients[a] = coefficients[a] / values[a] if abs(values[a]) > cutoff else 0.0
    return vectors @ coefficients
