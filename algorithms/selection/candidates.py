"""Candidate partitions: the spectral partition of the kNN graph and k-means runs.

The max-margin objectives of iterSVR (Zhang, Tsang and Kwok 2007, eq. (2)) and CPM3C (Zhao,
Wang and Zhang 2008, eq. (11)) are non-convex: each method descends from a starting labeling. The
papers start from k-means, which can only propose splits by a hyperplane between two means; on
data whose clusters are not convex blobs (rings, moons) no k-means start lies in the basin of the
max-margin labeling. The spectral partition of the k-nearest-neighbour graph (Shi and Malik 2000;
Ng, Jordan and Weiss 2002) is a candidate that can; each method then refines the candidates and
keeps one by its margin objective (:mod:`algorithms.selection.margin`).

Small k-means calls run under one thread (:mod:`algorithms.threads`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.sparse import csgraph
from scipy.sparse.linalg import ArpackNoConvergence, eigsh
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.neighbors import NearestNeighbors, kneighbors_graph
from sklearn.utils import check_random_state

from algorithms.kernels import centred, distinct_rows, squared_distances
from algorithms.threads import small_problem_threads

# scikit-learn's SpectralClustering(affinity="nearest_neighbors") default.
SPECTRAL_NEIGHBORS = 10
# Above this many points the spectral partition is that of a uniform random sample of this size,
# each point taking the cluster of its nearest sampled point: ARPACK's cost on the kNN graph grows
# steeply with n when the graph has several components (one per well-separated cluster).
SPECTRAL_SAMPLE_SIZE = 5000
SPECTRAL_PROTOTYPES = 1000
# Above this many points a pool of k-means starts is run on a uniform random sample of this size
# and every point takes its nearest centre: the pool's n_init Lloyd runs over all n points would
# cost more than the method they start, and a sample of this size places k centres as well.
KMEANS_SAMPLE_SIZE = 10_000
# Graphs of at most this many points are embedded by a dense eigensolver (exact, and faster
# there than ARPACK's shift-invert factorisation and iterations).
DENSE_EIGEN_MAX_N = 300
# Squared distances that agree to this many decimals of the largest are taken as equal when
# neighbours are ranked (knn_graph_of_distances): the round-off of the expansion in
# algorithms.kernels.squared_distances is about 1e-15 of the largest; structure finer than
# 1e-5 of the data's diameter is not seen.
TIE_DIGITS = 10


def kmeans_labels(X, n_clusters: int, *, init="k-means++", n_init: int = 10,
                  random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """k-means labels and centres under :func:`small_problem_threads`."""
    with small_problem_threads():
        km = KMeans(n_clusters=n_clusters, init=init, n_init=n_init,
                    random_state=random_state).fit(X)
    return km.labels_, km.cluster_centers_


def kmeans_runs(X: np.ndarray, n_clusters: int, *, n_init: int, first_centres=None,
                random_state=None, max_iter: int = 300, tol: float = 1e-4
                ) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """``n_init`` Lloyd runs ``(inertia, labels, centres)``: from ``first_centres`` (if given)
    and from k-means++ seeds for the rest (:func:`iter_kmeans_runs`, every run kept)."""
    return list(iter_kmeans_runs(X, n_clusters, n_init=n_init, first_centres=first_centres,
                                 random_state=random_state, max_iter=max_iter, tol=tol))


def best_kmeans_run(X: np.ndarray, n_clusters: int, *, n_init: int, random_state=None
                    ) -> tuple[float, np.ndarray, np.ndarray]:
    """The run of lowest inertia (the first of equals) among the runs of :func:`kmeans_runs`,
    holding two runs' labels at a time instead of ``n_init``: on millions of points those are
    the largest arrays of the pool."""
    return min(iter_kmeans_runs(X, n_clusters, n_init=n_init, random_state=random_state),
               key=lambda run: run[0])


def iter_kmeans_runs(X: np.ndarray, n_clusters: int, *, n_init: int, first_centres=None,
                     random_state=None, max_iter: int = 300, tol: float = 1e-4
                     ) -> Iterator[tuple[float, np.ndarray, np.ndarray]]:
    """The runs of :func:`kmeans_runs`, one after the other.

    Dense data run the compiled loops of :mod:`algorithms.selection.kmeans_compiled` on the
    centred data, with scikit-learn's stopping rule (squared centre shift at most ``tol`` times
    the mean feature variance): on a few hundred points a ``KMeans(n_init=1).fit`` call costs
    far more in input validation and thread set-up than in arithmetic. CSR data run
    scikit-learn's Lloyd, which keeps them sparse.
    """
    rng = check_random_state(random_state)
    if sp.issparse(X):
        yield from _sparse_kmeans_runs(X, n_clusters, n_init, first_centres, rng)
        return
    plusplus_seeds, lloyd = compiled_kmeans()
    mean = X.mean(axis=0)
    if X.dtype == np.float64 and X.flags.c_contiguous:  # centred by the loops, without a copy
        shift = mean
    else:
        X, shift = np.ascontiguousarray(X - mean, dtype=np.float64), np.zeros(X.shape[1])
    threshold = tol * float(np.mean(shifted_column_variances(X, shift)))
    trials = 2 + int(np.log(n_clusters))  # candidates per centre, as scikit-learn's
    for run in range(n_init):
        if run == 0 and first_centres is not None:
            centres = np.array(first_centres, dtype=np.float64) - mean
        else:
            centres = np.empty((n_clusters, X.shape[1]))
            first = rng.randint(X.shape[0])
            plusplus_seeds(X, shift, first, rng.uniform(size=(n_clusters - 1, trials)),
                           centres)
        labels = np.empty(X.shape[0], dtype=np.int64)
        inertia = lloyd(X, shift, centres, labels, max_iter, threshold)
        yield float(inertia), labels, centres + mean


# Rows of the blocks in which shifted_column_variances sums.
VARIANCE_BLOCK_ROWS = 65_536


def shifted_column_variances(X: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``(X - shift).var(axis=0)`` without the ``n x d`` copy ``X - shift`` (nor the variance's
    own temporary of that size), to the last bit: numpy sums a C-ordered matrix over axis 0 row
    after row, and so do these blocks, each continuing the running sums of the ones before
    (one column is summed pairwise by numpy, and is computed as numpy does)."""
    if X.shape[1] == 1 or X.shape[0] <= VARIANCE_BLOCK_ROWS:
        return (X - shift).var(axis=0)

    def column_sums(values) -> np.ndarray:
        total = None
        for start in range(0, X.shape[0], VARIANCE_BLOCK_ROWS):
            block = values(X[start:start + VARIANCE_BLOCK_ROWS] - shift)
            rows = block if total is None else np.concatenate((total[None, :], block))
            total = np.add.reduce(rows, axis=0)
        return total

    mean = column_sums(lambda block: block) / X.shape[0]
    return column_sums(lambda block: (block - mean) ** 2) / X.shape[0]


def _sparse_kmeans_runs(X: sp.spmatrix, n_clusters: int, n_init: int, first_centres,
                        rng: np.random.RandomState) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """:func:`kmeans_runs` on CSR data, by scikit-learn's k-means++ and Lloyd."""
    runs = []
    with small_problem_threads():
        for run in range(n_init):
            if run == 0 and first_centres is not None:
                centres = first_centres
            else:
                centres, _ = kmeans_plusplus(X, n_clusters, random_state=rng.randint(2**31 - 1))
            km = KMeans(n_clusters=n_clusters, init=centres, n_init=1).fit(X)
            runs.append((km.inertia_, km.labels_, km.cluster_centers_))
    return runs


@functools.cache
def compiled_kmeans():
    """The compiled k-means++ seeding and Lloyd loop, loaded on first use (numba imported then:
    the API process, which never fits, does not pay its import)."""
    from algorithms.selection.kmeans_compiled import lloyd, plusplus_seeds

    X, shift, centres = np.array([[0.0], [1.0]]), np.zeros(1), np.empty((2, 1))
    plusplus_seeds(X, shift, 0, np.full((1, 2), 0.5), centres)
    lloyd(X, shift, centres, np.empty(2, dtype=np.int64), 1, 0.0)
    return plusplus_seeds, lloyd


def kmeans_partitions(X, n_clusters: int, *, n_init: int = 10, n_partitions: int,
                      random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The distinct partitions among ``n_init`` k-means++ runs, lowest inertia first.

    Up to ``n_partitions`` ``(labels, centres)``: restarts of a non-convex method from the best
    distinct local optima of one pool of runs, instead of one best-of-``n_init`` per restart (three
    pools cost three times as much and often return the same partition).
    """
    rng = check_random_state(random_state)
    n = X.shape[0]
    if n > KMEANS_SAMPLE_SIZE:  # the pool on a sample, every point to its nearest centre
        sample = np.sort(rng.choice(n, size=KMEANS_SAMPLE_SIZE, replace=False))
        pool = kmeans_partitions(X[sample], n_clusters, n_init=n_init,
                                 n_partitions=n_partitions, random_state=rng)
        return [(nearest_centre(X, centres), centres) for _, centres in pool]
    if n_partitions == 1:  # one KMeans call with n_init runs: half the cost of n_init calls
        return [kmeans_labels(X, n_clusters, n_init=n_init, random_state=rng)]
    runs = kmeans_runs(X, n_clusters, n_init=n_init, random_state=rng)
    runs.sort(key=lambda run: run[0])
    partitions, seen = [], set()
    for _, labels, centres in runs:
        key = partition_key(labels)
        if key not in seen and len(partitions) < n_partitions:
            seen.add(key)
            partitions.append((labels, centres))
    return partitions


def nearest_centre(X, centres: np.ndarray, *, chunk_rows: int = 65_536) -> np.ndarray:
    """The index of each row's nearest centre (dense or CSR ``X``), in chunks of rows so that
    the distance block stays small at any ``n``."""
    centres = np.asarray(centres, dtype=np.float64)
    centre_sq = np.einsum("ij,ij->i", centres, centres)
    # the product in X's precision (float32 data is not converted a block at a time)
    centres_T = centres.T.astype(X.dtype if X.dtype == np.float32 else np.float64)
    labels = np.empty(X.shape[0], dtype=np.int64)
    for start in range(0, X.shape[0], chunk_rows):
        block = X[start:start + chunk_rows]
        # |x|^2 is the same for every centre of a row: it does not change the argmin
        distances = centre_sq[None, :] - 2.0 * np.asarray(block @ centres_T)
        labels[start:start + chunk_rows] = np.argmin(distances, axis=1)
    return labels


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
    on_stage: Callable[[str], None] | None = None,
) -> np.ndarray:
    """Spectral clustering of the symmetrized kNN graph: labels ``0..n_clusters-1``.

    The normalized-Laplacian embedding of ``0.5 (A + A^T)``, ``A`` the kNN connectivity, with
    k-means on its ``n_clusters`` leading eigenvectors (the construction of scikit-learn's
    ``SpectralClustering(affinity="nearest_neighbors")``). Dense data are centred first, so the
    neighbour search is exact at any offset. Above ``SPECTRAL_SAMPLE_SIZE`` points the graph is
    that of a uniform random sample, and every other point takes the cluster of its nearest
    prototype, ``SPECTRAL_PROTOTYPES`` of the sampled points (``on_stage(message)`` is told
    before that step).
    """
    n = X.shape[0]
    rng = check_random_state(random_state)
    if n <= SPECTRAL_SAMPLE_SIZE:
        return _spectral_labels(centred(X), n_clusters, n_neighbors, rng)
    # Rows are centred as they are used (a sample, a block of rows), not all at once.
    centre = None if sp.issparse(X) else np.asarray(X, dtype=np.float64).mean(axis=0)
    sample = np.sort(rng.choice(n, size=SPECTRAL_SAMPLE_SIZE, replace=False))
    labels = _spectral_labels(_centred_rows(X[sample], centre), n_clusters, n_neighbors, rng)
    if on_stage is not None:
        on_stage(f"every point to the cluster of its nearest of {SPECTRAL_PROTOTYPES:,} "
                 "prototypes")
    return NearestPrototypes(X, sample, rng, centre).extend(labels)


class NearestPrototypes:
    """Every row of ``X`` paired with its nearest of ``SPECTRAL_PROTOTYPES`` prototypes, a
    uniform subset of the sampled rows ``sample``, so that a partition of ``X[sample]`` labels
    every row (:meth:`extend`); one search serves every partition of the same sample. A
    neighbour search among all of the sample would cost ``n x sample.size`` distances, which on
    more than a few features no tree prunes. ``centre``: the data's mean, subtracted from the
    rows as they are searched (None for sparse rows)."""

    def __init__(self, X, sample: np.ndarray, rng: np.random.RandomState,
                 centre: np.ndarray | None):
        self.sample = sample
        prototypes = np.sort(rng.choice(sample.size, size=min(SPECTRAL_PROTOTYPES, sample.size),
                                        replace=False))
        index = NearestNeighbors(n_neighbors=1).fit(_centred_rows(X[sample[prototypes]], centre))
        n = X.shape[0]
        starts = range(0, n, NEAREST_BLOCK_ROWS)[:max(1, n // NEAREST_BLOCK_ROWS)]
        nearest = np.concatenate([
            index.kneighbors(_centred_rows(X[start:stop], centre), return_distance=False)[:, 0]
            for start, stop in itertools.pairwise([*starts, n])])
        self._sampled_row = prototypes[nearest]  # each row's prototype, as a row of the sample

    def extend(self, labels: np.ndarray) -> np.ndarray:
        """The labels of every row from ``labels`` of the sampled rows: a sampled row keeps its
        own, every other row takes its nearest prototype's."""
        result = labels[self._sampled_row]
        result[self.sample] = labels
        return result


# Rows whose nearest prototype is searched at once (the last block takes the remainder): a
# multiple of the 256-row chunks of scikit-learn's neighbour search, and large enough for it to
# split the rows, not the prototypes, among its threads, so that every row meets the same
# arithmetic as in one search of all rows.
NEAREST_BLOCK_ROWS = 65_536


def _centred_rows(rows, centre: np.ndarray | None):
    """Rows of the data minus the data's mean ``centre`` (None: sparse rows, left as they are),
    as :func:`~algorithms.kernels.centred` gives them."""
    return rows if centre is None else np.asarray(rows, dtype=np.float64) - centre


def copies_split_the_graph(copies_of: np.ndarray, n_neighbors: int) -> bool:
    """Whether some row is repeated ``n_neighbors`` times or more (``copies_of``: each row's
    distinct row, :func:`~algorithms.kernels.distinct_rows`). The neighbour list of such a row
    holds only its copies, so the kNN graph falls apart into groups of copies (data rounded to a
    grid; empty documents of a term matrix are copies of one sparse row): such data is
    partitioned over its distinct rows, each copy in its row's cluster."""
    return bool(np.bincount(copies_of).max() >= n_neighbors)


def _spectral_labels(X: np.ndarray | sp.spmatrix, n_clusters: int, n_neighbors: int,
                     rng: np.random.RandomState) -> np.ndarray:
    """:func:`spectral_partition` of every point of centred ``X``, over its distinct rows where
    copies split the graph (:func:`copies_split_the_graph`)."""
    first, copies_of = distinct_rows(X)
    if copies_split_the_graph(copies_of, n_neighbors):
        return _spectral_labels(X[first], n_clusters, n_neighbors, rng)[copies_of]
    n = X.shape[0]
    if n <= n_clusters:  # a point per cluster (the eigensolver needs more points than vectors)
        return np.arange(n)
    embedding = knn_spectral_embedding(X, n_clusters, n_neighbors, rng)
    labels, _ = kmeans_labels(embedding, n_clusters, random_state=rng.randint(2**31 - 1))
    return labels


def knn_spectral_embedding(X: np.ndarray | sp.spmatrix, n_components: int, n_neighbors: int,
                           rng: np.random.RandomState) -> np.ndarray:
    """The leading ``n_components`` vectors of the normalized-Laplacian embedding of
    ``0.5 (A + A^T)``, ``A`` the kNN connectivity of ``X`` (each point its own neighbour)."""
    if X.shape[0] <= DENSE_EIGEN_MAX_N and not sp.issparse(X):  # no neighbour index to build
        graph = knn_graph_of_distances(squared_distances(X), n_neighbors)
        return graph_spectral_embedding(graph, n_components, rng)
    with small_problem_threads():
        graph = kneighbors_graph(X, n_neighbors=min(n_neighbors, X.shape[0] - 1),
                                 include_self=True)
    return graph_spectral_embedding(graph, n_components, rng)


def knn_graph_of_distances(D: np.ndarray, n_neighbors: int) -> sp.csr_matrix:
    """The kNN connectivity ``A`` of :func:`knn_spectral_embedding` from the points' squared
    distances ``D`` (``n x n``, zero diagonal): row i marks the ``n_neighbors`` points nearest
    to i, i itself among them.

    Distances that agree to ``TIE_DIGITS`` decimals of the largest are ties, and a tie goes to
    the point of lower index: on data with repeated distances (integer pixels, rounded
    measurements) round-off would otherwise decide which of equally near points is a neighbour,
    and a shift of the data, which changes the round-off, would change the graph."""
    n = D.shape[0]
    n_neighbors = min(n_neighbors, n - 1)
    scale = float(D.max())
    rounded = np.round(D / scale, TIE_DIGITS) if scale > 0 else D
    # A partial sort finds each row's n_neighbors-th smallest distance; every nearer point is a
    # neighbour, and the places left go to the points at that distance, lowest index first.
    cutoff = np.partition(rounded, n_neighbors - 1, axis=1)[:, n_neighbors - 1:n_neighbors]
    nearer = rounded < cutoff
    at_cutoff = rounded == cutoff
    places_left = n_neighbors - nearer.sum(axis=1, keepdims=True)
    neighbours = nearer | (at_cutoff & (np.cumsum(at_cutoff, axis=1) <= places_left))
    rows, columns = np.nonzero(neighbours)
    return sp.csr_matrix((np.ones(rows.size), (rows, columns)), shape=(n, n))


def graph_spectral_embedding(graph: sp.spmatrix, n_components: int,
                             rng: np.random.RandomState) -> np.ndarray:
    """The leading ``n_components`` vectors of the normalized-Laplacian embedding of the
    symmetrized kNN connectivity ``W = 0.5 (graph + graph^T)`` (scikit-learn's
    ``spectral_embedding`` with ``drop_first=False``, without its input checks, which cost more
    than the eigensolver on a few hundred points).

    The eigenvectors ``x`` of ``L = I - D^-1/2 W D^-1/2`` of smallest eigenvalue (Ng, Jordan and
    Weiss 2002), found by a dense eigensolver on graphs of at most ``DENSE_EIGEN_MAX_N`` points
    and by ARPACK above (:func:`_smallest_eigenvectors_arpack`), mapped to ``u = D^-1/2 x``
    (Shi and Malik 2000), each ``u`` signed so that its entry of largest magnitude is positive. A
    graph of several components (well-separated clusters) has a zero eigenvalue per component,
    and the embedding of its indicators is the partition wanted.
    """
    affinity = 0.5 * (graph + graph.T)
    laplacian, degree_sqrt = csgraph.laplacian(affinity, normed=True, return_diag=True)
    laplacian = laplacian.tocsr()
    laplacian.setdiag(1.0)  # a self-loop leaves 1 - w_ii / d_i there; L's diagonal is 1
    start = rng.uniform(-1, 1, laplacian.shape[0])
    with small_problem_threads():
        if laplacian.shape[0] <= DENSE_EIGEN_MAX_N:  # a dense solve costs less than ARPACK's LU
            vectors = _smallest_eigenvectors_dense(laplacian, n_components)
            return _signed_embedding(vectors, n_components, degree_sqrt)
        connected = csgraph.connected_components(affinity, directed=False,
                                                 return_labels=False) == 1
        try:
            vectors = _smallest_eigenvectors_arpack(laplacian, n_components, start, connected)
        except RuntimeError:  # ARPACK's failures (ArpackError, ArpackNoConvergence)
            vectors = _smallest_eigenvectors_dense(laplacian, n_components)
    return _signed_embedding(vectors, n_components, degree_sqrt)


def _smallest_eigenvectors_arpack(laplacian: sp.csr_matrix, n_components: int,
                                  start: np.ndarray, connected: bool) -> np.ndarray:
    """The eigenvectors of the ``n_components`` smallest eigenvalues of the normalized
    ``laplacian``, ascending, by ARPACK from ``start``.

    On a connected graph, Lanczos on ``I - L`` for its largest eigenvalues: matrix-vector
    products alone. On a graph of several components the eigenvalue 0 is multiple, which
    Lanczos from one start vector does not resolve, and shift-invert mode just below 0 (``L`` is
    singular) finds its eigenvectors; its sparse LU costs little on graphs of low-dimensional
    data but seconds on the kNN graph of a few thousand points in tens of dimensions, whose
    factor fills in. Lanczos that does not converge falls back to shift-invert."""
    if connected:
        adjacency = sp.identity(laplacian.shape[0], format="csr") - laplacian
        try:
            _, vectors = eigsh(adjacency, k=n_components, which="LA", tol=0, v0=start)
            return vectors[:, ::-1]  # the largest of I - L first: the smallest of L
        except ArpackNoConvergence:
            pass
    _, vectors = eigsh(laplacian, k=n_components, sigma=-1e-5, which="LM", tol=0, v0=start)
    return vectors


def _signed_embedding(vectors: np.ndarray, n_components: int, degree_sqrt: np.ndarray
                      ) -> np.ndarray:
    """``u = D^-1/2 x`` of the eigenvectors ``x`` (columns), each signed so that its entry of
    largest magnitude is positive."""
    embedding = vectors.T[:n_components] / degree_sqrt
    largest = np.argmax(np.abs(embedding), axis=1)
    embedding *= np.sign(embedding[np.arange(n_components), largest])[:, None]
    return embedding.T


def _smallest_eigenvectors_dense(laplacian: sp.spmatrix, n_components: int) -> np.ndarray:
    """The eigenvectors of the ``n_components`` smallest eigenvalues of ``laplacian``, by a dense
    symmetric eigensolver: the solver of graphs of at most ``DENSE_EIGEN_MAX_N`` points, and the
    fallback where ARPACK fails, as on graphs of a few distinct points each repeated a few
    times, whose eigenvalues are many and equal ("no shifts could be applied"). Exact, at
    O(n^3) time and O(n^2) memory, which the graphs here (at most ``SPECTRAL_SAMPLE_SIZE``
    points) afford."""
    return linalg.eigh(laplacian.toarray(), subset_by_index=[0, n_components - 1])[1]
