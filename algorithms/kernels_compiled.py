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
        exponent = -gamma * row[j]
        if exponent > EXP_UNDERFLOW:
            total += weights[j] * np.exp(exponent)
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
            exponent = -gamma * row[j]
            row[j] = np.exp(exponent) if exponent > EXP_UNDERFLOW else 0.0


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
