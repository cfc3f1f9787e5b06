"""The compiled loops of Genie (numba): Prim's minimum spanning tree of dense points, and the
Gini-corrected merging of its edges (Gagolewski, Bartoszuk and Cena 2016, Algorithm 1).

Imported on first use (numba's import is slow); compiled once and cached on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _join_nearest(row, current, nearest, parent_of, in_tree):
    """One step of Prim's algorithm: ``row`` holds the squared distances from ``current`` (the
    point that joined the tree last) to every point; each point outside the tree keeps its
    nearest tree point, and the nearest of them all joins the tree. Returns that point."""
    best, best_distance = -1, np.inf
    for j in range(row.size):
        if in_tree[j]:
            continue
        if row[j] < nearest[j]:
            nearest[j] = row[j]
            parent_of[j] = current
        if nearest[j] < best_distance:
            best_distance = nearest[j]
            best = j
    in_tree[best] = True
    return best


@njit(cache=True, nogil=True)
def _prim(n, X, D):
    """Prim's minimum spanning tree of ``n`` points, with the squared distances from a point
    taken from the rows of ``D`` when it has ``n`` rows, else computed from the rows of
    ``X``: ``(parents, children, weights)``, the ``n - 1`` edges in the order they join the
    tree, weights the distances."""
    nearest = np.full(n, np.inf)
    parent_of = np.zeros(n, dtype=np.int64)
    in_tree = np.zeros(n, dtype=np.bool_)
    parents = np.empty(n - 1, dtype=np.int64)
    children = np.empty(n - 1, dtype=np.int64)
    weights = np.empty(n - 1)
    row = np.empty(n)
    current = 0
    in_tree[0] = True
    for edge in range(n - 1):
        if D.shape[0] == n:
            row[:] = D[current]
        else:
            for j in range(n):
                if in_tree[j]:
                    continue
                total = 0.0
                for f in range(X.shape[1]):
                    difference = X[current, f] - X[j, f]
                    total += difference * difference
                row[j] = total
        best = _join_nearest(row, current, nearest, parent_of, in_tree)
        parents[edge] = parent_of[best]
        children[edge] = best
        weights[edge] = np.sqrt(nearest[best])
        current = best
    return parents, children, weights


@njit(cache=True, nogil=True)
def prim_mst(X):
    """The Euclidean minimum spanning tree of the rows of ``X`` by Prim's algorithm in
    O(n^2 d) time and O(n) memory (no distance matrix): ``(parents, children, weights)``, the
    ``n - 1`` edges in the order they join the tree, weights the distances."""
    return _prim(X.shape[0], X, np.empty((0, 0)))


@njit(cache=True, nogil=True)
def prim_mst_of_distances(D):
    """:func:`prim_mst` of the points whose squared distances are ``D``, in O(n^2) time."""
    return _prim(D.shape[0], np.empty((0, 0)), D)


@njit(cache=True, nogil=True)
def _root(forest, i):
    while forest[i] != i:
        forest[i] = forest[forest[i]]
        i = forest[i]
    return i


@njit(cache=True, nogil=True)
def _gini(size_count, largest, n_clusters, n_points):
    """The normalised Gini index of the cluster sizes, from the number of clusters of each size
    (``size_count[s]``, sizes up to ``largest``): ``sum_{i<j} |c_i - c_j| / ((m - 1) n)``."""
    if n_clusters <= 1:
        return 0.0
    total = 0.0  # sum over pairs of clusters of the difference of their sizes
    below_count = 0.0  # clusters smaller than s so far, and the sum of their sizes
    below_sum = 0.0
    for s in range(1, largest + 1):
        c = size_count[s]
        if c == 0:
            continue
        total += c * (s * below_count - below_sum)
        below_count += c
        below_sum += c * s
    return total / ((n_clusters - 1) * n_points)


@njit(cache=True, nogil=True)
def genie_merge(a, b, n_points, n_clusters, threshold):
    """Cluster labels ``0..n_clusters-1`` from the spanning-tree edges ``(a[e], b[e])`` sorted by
    increasing length: the edges are taken in that order and each joins two clusters, except that
    while the Gini index of the cluster sizes exceeds ``threshold`` the edge taken is the shortest
    one left that touches a cluster of the smallest size. A forest of more than ``n_clusters``
    trees keeps its trees apart (the caller joins them first)."""
    forest = np.arange(n_points)
    size = np.ones(n_points, dtype=np.int64)
    size_count = np.zeros(n_points + 1, dtype=np.int64)
    size_count[1] = n_points
    used = np.zeros(a.size, dtype=np.bool_)
    first_unused = 0
    clusters = n_points
    largest = 1
    while clusters > n_clusters and first_unused < a.size:
        while first_unused < a.size and used[first_unused]:
            first_unused += 1
        if first_unused >= a.size:
            break
        chosen = first_unused
        if _gini(size_count, largest, clusters, n_points) > threshold:
            smallest = 1
            while size_count[smallest] == 0:
                smallest += 1
            for e in range(first_unused, a.size):
                if used[e]:
                    continue
                if (size[_root(forest, a[e])] == smallest
                        or size[_root(forest, b[e])] == smallest):
                    chosen = e
                    break
        used[chosen] = True
        ra, rb = _root(forest, a[chosen]), _root(forest, b[chosen])
        size_count[size[ra]] -= 1
        size_count[size[rb]] -= 1
        merged = size[ra] + size[rb]
        size_count[merged] += 1
        if merged > largest:
            largest = merged
        if size[ra] < size[rb]:
            ra, rb = rb, ra
        forest[rb] = ra
        size[ra] = merged
        clusters -= 1
    labels = np.full(n_points, -1, dtype=np.int64)
    root_label = np.full(n_points, -1, dtype=np.int64)
    next_label = 0
    for i in range(n_points):
        r = _root(forest, i)
        if root_label[r] < 0:
            root_label[r] = next_label
            next_label += 1
        labels[i] = root_label[r]
    return labels
