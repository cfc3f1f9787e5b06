"""The compiled loops of k-means (numba): k-means++ seeding and Lloyd's iterations on dense data.

A fit runs many k-means on a few hundred points (the candidate partitions, and every k of
``n_clusters="auto"`` on every half of every split); there the per-call overhead of numpy or
scikit-learn dominates the arithmetic. Distances are summed from the differences of the rows,
which are exact where the expansion ``|x|^2 + |c|^2 - 2 x.c`` loses the digits of a short
distance. The random draws are made by the caller, so a ``random_state`` gives the same runs as
it would to numpy code drawing the same numbers. The loops see the rows ``X - shift`` (the caller
centres the data by its mean) without that copy of ``X`` being made: each difference is the one
numpy's ``X - shift`` would hold.

Imported on first use (numba's import is slow); compiled once and cached on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _squared_distance(x, shift, y):
    """``|(x - shift) - y|^2``."""
    total = 0.0
    for f in range(x.size):
        difference = (x[f] - shift[f]) - y[f]
        total += difference * difference
    return total


@njit(cache=True, nogil=True)
def _shifted_row(X, i, shift, out):
    for f in range(X.shape[1]):
        out[f] = X[i, f] - shift[f]


@njit(cache=True, nogil=True)
def plusplus_seeds(X, shift, first, uniforms, centres):
    """Greedy k-means++ (Arthur and Vassilvitskii 2007, with ``uniforms.shape[1]`` candidates per
    centre, as :func:`sklearn.cluster.kmeans_plusplus`) on the rows ``X - shift`` into
    ``centres`` (``k x d``): the first centre is row ``first``; centre ``c`` is the best of
    candidates drawn with probability proportional to the squared distance to the nearest centre
    so far, by the uniforms ``uniforms[c - 1]``. When every point already sits on a centre, the
    rest repeat row ``first`` (each cluster that stays empty keeps its centre in
    :func:`lloyd`)."""
    n = X.shape[0]
    trials = uniforms.shape[1]
    closest = np.empty(n)
    cumulative = np.empty(n)
    candidates = np.empty((trials, n))
    picks = np.empty(trials, dtype=np.int64)
    _shifted_row(X, first, shift, centres[0])
    for i in range(n):
        closest[i] = _squared_distance(X[i], shift, centres[0])
    for c in range(1, centres.shape[0]):
        total = 0.0
        for i in range(n):
            total += closest[i]
            cumulative[i] = total
        if total <= 0.0:
            centres[c] = centres[0]
            continue
        best, best_potential = 0, np.inf
        for t in range(trials):
            pick = min(np.searchsorted(cumulative, uniforms[c - 1, t] * total), n - 1)
            picks[t] = pick
            potential = 0.0
            _shifted_row(X, pick, shift, centres[c])
            for i in range(n):
                candidates[t, i] = _squared_distance(X[i], shift, centres[c])
                potential += min(closest[i], candidates[t, i])
            if potential < best_potential:
                best, best_potential = t, potential
        _shifted_row(X, picks[best], shift, centres[c])
        for i in range(n):
            closest[i] = min(closest[i], candidates[best, i])


@njit(cache=True, nogil=True)
def _assign(X, shift, centres, labels):
    """Each row to its nearest centre (the first of equals); returns the inertia."""
    inertia = 0.0
    for i in range(X.shape[0]):
        nearest, nearest_distance = 0, np.inf
        for c in range(centres.shape[0]):
            distance = _squared_distance(X[i], shift, centres[c])
            if distance < nearest_distance:
                nearest, nearest_distance = c, distance
        labels[i] = nearest
        inertia += nearest_distance
    return inertia


@njit(cache=True, nogil=True)
def lloyd(X, shift, centres, labels, max_iter, threshold):
    """Lloyd's iterations on the rows ``X - shift`` from ``centres`` (updated in place) until the
    squared movement of all centres is at most ``threshold`` or ``max_iter`` steps; ``labels``
    gets each row's nearest final centre. Returns the inertia. A cluster that empties keeps its
    centre."""
    k, dim = centres.shape
    sums = np.empty((k, dim))
    counts = np.empty(k)
    for _ in range(max_iter):
        _assign(X, shift, centres, labels)
        sums[:] = 0.0
        counts[:] = 0.0
        for i in range(X.shape[0]):
            counts[labels[i]] += 1.0
            for f in range(dim):
                sums[labels[i], f] += X[i, f] - shift[f]
        movement = 0.0
        for c in range(k):
            if counts[c] > 0.0:
                for f in range(dim):
                    moved = sums[c, f] / counts[c]
                    movement += (moved - centres[c, f]) ** 2
                    centres[c, f] = moved
        if movement <= threshold:
            break
    return _assign(X, shift, centres, labels)
