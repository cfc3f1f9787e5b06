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
def rbf_block(X, Y, gamma, out):
    """``out[i, j] = exp(-gamma |X_i - Y_j|^2)`` in place."""
    n, d = X.shape
    m = Y.shape[0]
    for i in range(n):
        for j in range(m):
            total = 0.0
            for k in range(d):
                difference = X[i, k] - Y[j, k]
                total += difference * difference
            out[i, j] = np.exp(-gamma * total)
