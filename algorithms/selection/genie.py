"""Genie: hierarchical clustering on the minimum spanning tree with Gini-corrected merging.

Gagolewski, Bartoszuk and Cena 2016, "Genie: A new, fast, and outlier-resistant hierarchical
clustering algorithm", Information Sciences 363, Algorithm 1. Single linkage joins clusters along
the edges of the Euclidean minimum spanning tree, shortest first; it follows thin, curved
clusters but ends with one giant cluster and a few outliers. Genie takes the same edges, but
while the Gini index of the cluster sizes is above a threshold ``g`` the next merge must involve
a cluster of the smallest size: outliers join a cluster instead of taking one of the k places.
``g = 1`` is single linkage; smaller ``g`` makes the sizes more even.

The exact tree (Prim's algorithm, O(n^2 d) time, O(n) memory) is used up to
``EXACT_MST_MAX_N`` points; above that, the spanning tree of the kNN graph, its components
joined by their shortest links to each other (an approximation that keeps the cost near
O(n log n)).
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from sklearn.neighbors import NearestNeighbors, kneighbors_graph

from algorithms.kernels import centred
from algorithms.threads import small_problem_threads

# The Gini thresholds of the candidates: 0.3 is Genie's default (the authors' recommendation
# over their benchmark); 0.1 and 0.5 are the ends of the range they studied.
GINI_THRESHOLDS = (0.1, 0.3, 0.5)
EXACT_MST_MAX_N = 20_000
KNN_MST_NEIGHBORS = 15


@functools.cache
def compiled_genie():
    """The compiled tree and merge loops, loaded on first use (numba is imported then)."""
    from algorithms.selection.genie_compiled import genie_merge, prim_mst, prim_mst_of_distances

    return prim_mst, genie_merge, prim_mst_of_distances


def minimum_spanning_tree(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges ``(a, b, length)`` of the Euclidean minimum spanning tree of the rows of ``X``,
    sorted by length (exact up to ``EXACT_MST_MAX_N`` rows, of the kNN graph above)."""
    X = np.ascontiguousarray(centred(np.asarray(X, dtype=np.float64)))
    if X.shape[0] <= EXACT_MST_MAX_N:
        prim_mst, _, _ = compiled_genie()
        return _sorted_by_length(*prim_mst(X))
    return _sorted_by_length(*_knn_spanning_tree(X))


def minimum_spanning_tree_of_distances(D: np.ndarray
                                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`minimum_spanning_tree` of the points whose squared distances are ``D`` (a matrix
    already at hand), exact whatever the number of points."""
    _, _, prim_mst_of_distances = compiled_genie()
    return _sorted_by_length(*prim_mst_of_distances(np.ascontiguousarray(D, dtype=np.float64)))


def _sorted_by_length(a: np.ndarray, b: np.ndarray, length: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges ``(a, b, length)`` shortest first (ties in their order), as Genie merges."""
    order = np.argsort(length, kind="stable")
    return a[order], b[order], length[order]


def _knn_spanning_tree(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The spanning tree of the symmetrized kNN graph; where that graph falls apart, each
    component is linked to the nearest point outside it, until one tree remains."""
    with small_problem_threads():
        graph = kneighbors_graph(X, KNN_MST_NEIGHBORS, mode="distance")
    graph = graph.maximum(graph.T).tocoo()
    # zero lengths (copies of a row) would be read as missing edges
    graph.data = np.maximum(graph.data, np.finfo(float).tiny)
    tree = csgraph.minimum_spanning_tree(graph).tocoo()
    n_components, component = csgraph.connected_components(tree, directed=False)
    while n_components > 1:
        rows, cols, lengths = [tree.row], [tree.col], [tree.data]
        for c in range(n_components):
            inside = np.flatnonzero(component == c)
            outside = np.flatnonzero(component != c)
            distance, nearest = NearestNeighbors(n_neighbors=1).fit(X[outside]).kneighbors(
                X[inside])
            best = int(np.argmin(distance[:, 0]))
            rows.append([inside[best]])
            cols.append([outside[nearest[best, 0]]])
            lengths.append([max(distance[best, 0], np.finfo(float).tiny)])
        links = sp.coo_matrix((np.concatenate(lengths),
                               (np.concatenate(rows), np.concatenate(cols))), shape=graph.shape)
        tree = csgraph.minimum_spanning_tree(links).tocoo()
        n_components, component = csgraph.connected_components(tree, directed=False)
    return tree.row.astype(np.int64), tree.col.astype(np.int64), tree.data


def genie_labels_from_tree(tree: tuple[np.ndarray, np.ndarray, np.ndarray], n_points: int,
                           n_clusters: int, gini_threshold: float) -> np.ndarray:
    """Genie's ``n_clusters`` clusters (labels ``0..k-1``, numbered by first point) from the
    sorted edges of :func:`minimum_spanning_tree`."""
    if not 0.0 <= gini_threshold <= 1.0:
        raise ValueError(f"gini_threshold must lie in [0, 1], got {gini_threshold}")
    if not 1 <= n_clusters <= n_points:
        raise ValueError(f"cannot form {n_clusters} clusters of {n_points} points")
    _, genie_merge, _ = compiled_genie()
    a, b, _ = tree
    return genie_merge(a, b, n_points, n_clusters, float(gini_threshold))


def genie_partition(X: np.ndarray, n_clusters: int, gini_threshold: float = 0.3
                    ) -> np.ndarray:
    """Genie's ``n_clusters``-partition of dense ``X`` at ``gini_threshold`` (Gagolewski,
    Bartoszuk and Cena 2016, Algorithm 1)."""
    X = np.asarray(X, dtype=np.float64)
    return genie_labels_from_tree(minimum_spanning_tree(X), X.shape[0], n_clusters,
                                  gini_threshold)
