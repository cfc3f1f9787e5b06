"""The kernel module's compiled loop (numba): RBF kernel blocks on few features.

:func:`rbf_block` fills ``exp(-gamma |x_i - y_j|^2)`` from the differences of the rows. On a few
features that is a handful of operations per entry, where the expansion ``|x|^2 + |y|^2 - 2 x.y``
of :func:`algorithms.kernels.squared_distances` costs more in its ``n x m`` temporaries (the
distances, the clipping, the check for round-off, the exponential) than in arithmetic, and the
differences are exact where the expansion loses the digits of a short distance.

Imported on first use (numba's import is slow); compiled once and cached on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Below this exponent exp() is subnormal (under 2.2e-308) or 0, and libm's exp takes a slow path
# there (tens of times slower): such kernel entries are taken as 0, a difference below 2.2e-308.
EXP_UNDERFLOW = -708.0


@njit(cache=True, nogil=True, inline="always")
def _kernel_entry(exponent):
    """``exp(exponent)``, or 0 at or below ``EXP_UNDERFLOW``. The exponential is evaluated at
    every entry, clamped to ``EXP_UNDERFLOW``, and the 0 chosen after it: a branch around it
    would be mispredicted along every row that mixes near and far points (twice the time per
    entry at the widths of local scaling), where the choice compiles to a select."""
    value = np.exp(max(exponent, EXP_UNDERFLOW))
    return value if exponent > EXP_UNDERFLOW else 0.0


@njit(cache=True, nogil=True)
def _squared_distances(x, YT, row):
    """``row[j] = |x - Y_j|^2``, summed in feature order along the contiguous ``row``."""
    for j in range(row.size):
        row[j] = 0.0
    for k in range(x.size):
        for j in range(row.size):
            difference = x[k] - YT[k, j]
            row[j] += difference * difference


@njit(cache=True, nogil=True)
def _weighted_kernel_sum(row, gamma, weights):
    """``sum_j weights[j] exp(-gamma row[j])`` for squared distances ``row``."""
    total = 0.0
    for j in range(row.size):
        total += weights[j] * _kernel_entry(-gamma * row[j])
    return total


@njit(cache=True, nogil=True)
def rbf_block(X, YT, gamma, out):
    """``out[i, j] = exp(-gamma |X_i - Y_j|^2)`` in place, ``YT`` holding the rows ``Y_j`` as
    columns: the innermost loops run along a row of ``out`` (contiguous, so they vectorize),
    each entry summing its squared differences in feature order."""
    for i in range(X.shape[0]):
        row = out[i]
        _squared_distances(X[i], YT, row)
        for j in range(row.size):
            row[j] = _kernel_entry(-gamma * row[j])


@njit(cache=True, nogil=True)
def rbf_sums(X, YT, gamma, weights, out):
    """``out[i] = sum_j weights[j] exp(-gamma |X_i - Y_j|^2)`` in place (``YT`` as in
    :func:`rbf_block`), without the kernel block: one row of it at a time."""
    row = np.empty(YT.shape[1])
    for i in range(X.shape[0]):
        _squared_distances(X[i], YT, row)
        out[i] = _weighted_kernel_sum(row, gamma, weights)


@njit(cache=True, nogil=True)
def rbf_segments_inside(A, B, t, YT, gamma, weights, threshold, out):
    """``out[i]``: whether ``sum_j weights[j] exp(-gamma |p - Y_j|^2) >= threshold`` at every
    point ``p = A_i + t_k (B_i - A_i)``, tried in the order of ``t`` and given up at the first
    point below it. Each sum is computed as :func:`rbf_sums` computes it."""
    point = np.empty(A.shape[1])
    row = np.empty(YT.shape[1])
    for i in range(A.shape[0]):
        inside = True
        for k in range(t.size):
            for f in range(point.size):
                point[f] = A[i, f] + t[k] * (B[i, f] - A[i, f])
            _squared_distances(point, YT, row)
            if not _weighted_kernel_sum(row, gamma, weights) >= threshold:
                inside = False
                break
        out[i] = inside


# Entries summed between the checks of a partial sum against the threshold: the terms are
# positive, so a sample is inside once a partial sum reaches it; checking every entry would
# keep the loop from running as one block.
_CHECK_EVERY = 32
# Above this exponent of exp(gamma t (1 - t) |a - b|^2) a sample's sum is computed from the
# distances instead of the factors: the product of the factors would lose its terms to underflow.
FACTORED_MAX_EXPONENT = 600.0


@njit(cache=True, nogil=True)
def _reaches_from_distances(first, second, t, shortening, gamma, weights, threshold):
    """Whether ``sum_j weights[j] exp(-gamma d_j) >= threshold`` for the squared distances
    ``d_j = (1 - t) first[j] + t second[j] - shortening``, clipped at 0."""
    total = 0.0
    m = first.size
    for start in range(0, m, _CHECK_EVERY):
        for j in range(start, min(start + _CHECK_EVERY, m)):
            distance = (1.0 - t) * first[j] + t * second[j] - shortening
            total += weights[j] * _kernel_entry(-gamma * max(distance, 0.0))
        if total >= threshold:
            return True
    return False


@njit(cache=True, nogil=True)
def _reaches_from_factors(a_large, a_small, b_large, b_small, weights, threshold):
    """Whether ``sum_j weights[j] a_large[j] a_small[j] b_large[j] b_small[j] >= threshold``."""
    total = 0.0
    m = weights.size
    for start in range(0, m, _CHECK_EVERY):
        for j in range(start, min(start + _CHECK_EVERY, m)):
            total += weights[j] * (a_large[j] * a_small[j]) * (b_large[j] * b_small[j])
        if total >= threshold:
            return True
    return False


@njit(cache=True, nogil=True)
def rbf_segments_inside_from_factors(rows, cols, squared_lengths, distances_a, small_a, large_a,
                                     distances_b, small_b, large_b, a_power, b_power, step, t,
                                     gamma, weights, threshold, out):
    """:func:`rbf_segments_inside` for the segments ``a -> b`` from the points ``a`` whose
    squared distances to the points ``Y_j`` are the rows ``distances_a[rows[i]]`` to the points
    ``b`` with ``distances_b[cols[i]]``, of squared lengths ``squared_lengths[i]``.

    At ``p = a + t (b - a)``, ``|p - y|^2 = (1 - t)|a - y|^2 + t|b - y|^2 - t (1 - t)|a - b|^2``,
    so with ``t = k / (n + 1)`` and ``B = exp(-gamma |. - y|^2 / (n + 1))``,
    ``exp(-gamma |p - y|^2)`` is ``B_a^(n + 1 - k) B_b^k exp(gamma t (1 - t)|a - b|^2)``; a
    power ``q step + r`` is ``large[q] small[r]`` (``algorithms.kernels.SegmentFactors``), and
    ``a_power[s]``, ``b_power[s]`` are the powers of sample ``s``. Where the last factor's
    exponent exceeds ``FACTORED_MAX_EXPONENT``, the sum is computed from the distances: a
    product of the factors that underflows (below 2.2e-308) then drops a term below
    ``exp(EXP_UNDERFLOW + FACTORED_MAX_EXPONENT)`` (1e-47) at most."""
    for i in range(rows.size):
        r, c = rows[i], cols[i]
        inside = True
        for s in range(t.size):
            exponent = gamma * t[s] * (1.0 - t[s]) * squared_lengths[i]
            if exponent > FACTORED_MAX_EXPONENT:
                reached = _reaches_from_distances(
                    distances_a[r], distances_b[c], t[s], exponent / gamma, gamma, weights,
                    threshold)
            else:
                qa, ra = a_power[s] // step, a_power[s] % step
                qb, rb = b_power[s] // step, b_power[s] % step
                reached = _reaches_from_factors(large_a[qa, r], small_a[ra, r], large_b[qb, c],
                                                small_b[rb, c], weights,
                                                threshold * np.exp(-exponent))
            if not reached:
                inside = False
                break
        out[i] = inside
