"""Starting partitions shared by the iterative max-margin methods, and their thread control.

The max-margin objectives of iterSVR (2) and CPM3C (11) are non-convex: each method descends from
a starting labeling, and the seeds start from k-means, which can only propose splits by a
hyperplane between two means. On data whose clusters are not convex blobs (rings, moons) no
k-means start lies in the basin of the max-margin labeling. The default start here is a spectral
partition of the k-nearest-neighbour graph (Shi & Malik 2000; Ng, Jordan & Weiss 2002): the
max-margin method then refines it, keeping, moving or rejecting the cut by its own objective.

Small k-means calls run under one thread (:mod:`algorithms.threads`).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.manifold import spectral_embedding
from sklearn.neighbors import kneighbors_graph
from sklearn.utils import check_random_state

from algorithms.kernels import centred
from algorithms.threads import small_problem_threads

# scikit-learn's SpectralClustering(affinity="nearest_neighbors") default.
SPECTRAL_NEIGHBORS = 10
# Above this many points the kNN graph and its eigenvectors cost more than the method itself;
# the methods fall back to their seeds' k-means starts there.
SPECTRAL_START_MAX_N = 5000


def kmeans_labels(X, n_clusters: int, *, init="k-means++", n_init: int = 10,
                  random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """k-means labels and centres under :func:`small_problem_threads`."""
    with small_problem_threads():
        km = KMeans(n_clusters=n_clusters, init=init, n_init=n_init,
                    random_state=random_state).fit(X)
    return km.labels_, km.cluster_centers_


def kmeans_partitions(X, n_clusters: int, *, n_init: int = 10, n_partitions: int,
                      random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The distinct partitions among ``n_init`` k-means++ runs, lowest inertia first.

    Up to ``n_partitions`` ``(labels, centres)``: restarts of a non-convex method from the best
    distinct local optima of one pool of runs, instead of one best-of-``n_init`` per restart (three
    pools cost three times as much and often return the same partition).
    """
    rng = check_random_state(random_state)
    if n_partitions == 1:  # one KMeans call with n_init runs: half the cost of n_init calls
        return [kmeans_labels(X, n_clusters, n_init=n_init, random_state=rng)]
    runs = []
    with small_problem_threads():
        for _ in range(n_init):
            km = KMeans(n_clusters=n_clusters, n_init=1,
                        random_state=rng.randint(2**31 - 1)).fit(X)
            runs.append((km.inertia_, km.labels_, km.cluster_centers_))
    runs.sort(key=lambda run: run[0])
    partitions, seen = [], set()
    for _, labels, centres in runs:
        key = partition_key(labels)
        if key not in seen and len(partitions) < n_partitions:
            seen.add(key)
            partitions.append((labels, centres))
    return partitions


def partition_key(labels: np.ndarray) -> bytes:
    """The same bytes for two labelings that are one partition (clusters renamed)."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # clusters numbered by first appearance
    return order[inverse].astype(np.int32).tobytes()


def spectral_partition(
    X: np.ndarray | sp.spmatrix,
    n_clusters: int,
    *,
    n_neighbors: int = SPECTRAL_NEIGHBORS,
    random_state=None,
) -> np.ndarray:
    """Spectral clustering of the symmetrized kNN graph: labels ``0..n_clusters-1``.

    The normalized-Laplacian embedding of ``0.5 (A + A^T)``, ``A`` the kNN connectivity, with
    k-means on its ``n_clusters`` leading eigenvectors (the construction of scikit-learn's
    ``SpectralClustering(affinity="nearest_neighbors")``). Dense data are centred first, so the
    neighbour search is exact at any offset.
    """
    n = X.shape[0]
    rng = check_random_state(random_state)
    X = centred(X)
    with warnings.catch_warnings(), small_problem_threads():
        graph = kneighbors_graph(X, n_neighbors=min(n_neighbors, n - 1), include_self=True)
        affinity = 0.5 * (graph + graph.T)
        # Well-separated clusters leave a disconnected graph; the embedding of its components'
        # indicators is then the partition wanted, so the warning says nothing.
        warnings.filterwarnings("ignore", message="Graph is not fully connected")
        embedding = spectral_embedding(affinity, n_components=n_clusters, drop_first=False,
                                       random_state=rng)
    labels, _ = kmeans_labels(embedding, n_clusters, random_state=rng.randint(2**31 - 1))
    return labels
