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


@njit(cache=True, nogil=True)
def rbf_block(X, YT, gamma, out):
    """``out[i, j] = exp(-gamma |X_i - Y_j|^2)`` in place, ``YT`` holding the rows ``Y_j`` as
    columns: the innermost loops run along a row of ``out`` (contiguous, so they vectorize),
    each entry summing its squared differences in feature order."""
    n, d = X.shape
    m = YT.shape[1]
    for i in range(n):
        row = out[i]
        for j in range(m):
            row[j] = 0.0
        for k in range(d):
            x = X[i, k]
            for j in range(m):
                difference = x - YT[k, j]
                row[j] += difference * difference
        for j in range(m):
            row[j] = np.exp(-gamma * row[j])


@njit(cache=True, nogil=True)
def rbf_sums(X, YT, gamma, weights, out):
    """``out[i] = sum_j weights[j] exp(-gamma |X_i - Y_j|^2)`` in place (``YT`` as in
    :func:`rbf_block`), without the kernel block: one row of it at a time."""
    n, d = X.shape
    m = YT.shape[1]
    row = np.empty(m)
    for i in range(n):
        for j in range(m):
            row[j] = 0.0
        for k in range(d):
            x = X[i, k]
            for j in range(m):
                difference = x - YT[k, j]
                row[j] += difference * difference
        total = 0.0
        for j in range(m):
            total += weights[j] * np.exp(-gamma * row[j])
        out[i] = total
