"""Candidate partitions (algorithms.selection.candidates): k-means runs and pools, kNN graphs and
spectral partitions, on samples, grids and sparse rows."""

import numpy as np
import pytest

from algorithms.kernels import (
    resolve_gamma,
)
from algorithms.selection.candidates import (
    SPECTRAL_SAMPLE_SIZE,
    VARIANCE_BLOCK_ROWS,
    best_kmeans_run,
    kmeans_runs,
    shifted_column_variances,
    spectral_partition,
)


def test_kmeans_runs_are_scikit_learns_lloyd_from_the_same_starts():
    from sklearn.cluster import KMeans

    rng = np.random.RandomState(4)
    X = np.vstack([rng.randn(30, 2) + shift for shift in ([0, 0], [9, 0], [0, 9])]) + 1e6
    for _ in range(6):
        start = X[rng.choice(90, 3, replace=False)]
        [(inertia, labels, centres)] = kmeans_runs(X, 3, n_init=1, first_centres=start)
        reference = KMeans(3, init=start, n_init=1).fit(X)
        np.testing.assert_array_equal(labels, reference.labels_)
        np.testing.assert_allclose(centres, reference.cluster_centers_)
        assert inertia == pytest.approx(reference.inertia_, rel=1e-6)
    # The offset of 1e6 cancels: the best of the k-means++ runs finds the three blobs.
    best = min(kmeans_runs(X, 3, n_init=5, random_state=0), key=lambda run: run[0])
    assert sorted(np.bincount(best[1])) == [30, 30, 30]


def test_width_and_knn_graph_of_a_distance_matrix_are_those_of_the_points():
    from sklearn.neighbors import kneighbors_graph

    from algorithms.kernels import scale_gamma_of_distances, squared_distances
    from algorithms.selection.candidates import knn_graph_of_distances

    rng = np.random.RandomState(5)
    X = np.vstack([rng.randn(40, 3), rng.randn(40, 3) * 0.2 + 4.0]) + 1e6
    D = squared_distances(X)
    # scikit-learn's "scale" of the centred points (its X.var() also counts the offset).
    assert scale_gamma_of_distances(D) == pytest.approx(
        resolve_gamma(X - X.mean(axis=0), "scale"), rel=1e-9)
    graph = knn_graph_of_distances(D, 10)
    reference = kneighbors_graph(X - X.mean(axis=0), n_neighbors=10, include_self=True)
    assert (graph != reference).nnz == 0 and graph.sum() == 80 * 10
    with pytest.raises(ValueError, match="not all identical"):
        scale_gamma_of_distances(np.zeros((3, 3)))


def test_spectral_partition_above_its_sample_size_extends_a_sample_to_every_point():
    # 12,000 noisy moons: the kNN graph of 5,000 of them, each point joining its nearest
    # sampled point, separates the moons (k-means cuts both, ARI 0.25).
    from sklearn.datasets import make_moons
    from sklearn.metrics import adjusted_rand_score

    X, y = make_moons(12_000, noise=0.05, random_state=0)
    assert X.shape[0] > SPECTRAL_SAMPLE_SIZE
    labels = spectral_partition(X, 2, random_state=0)
    assert labels.shape == (12_000,) and adjusted_rand_score(y, labels) >= 0.99
    np.testing.assert_array_equal(spectral_partition(X, 2, random_state=0), labels)


def test_kmeans_pool_above_its_sample_size_labels_every_point_by_its_nearest_centre(
        monkeypatch):
    # Above KMEANS_SAMPLE_SIZE the pool of k-means starts runs on a sample; every point then
    # takes its nearest centre (forced here at 600 points of three separated blobs).
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score

    import algorithms.selection.candidates as candidates

    X, y = make_blobs(3000, centers=3, cluster_std=0.5, random_state=0)
    monkeypatch.setattr(candidates, "KMEANS_SAMPLE_SIZE", 600)
    [(labels, centres)] = candidates.kmeans_partitions(X, 3, n_partitions=1, random_state=0)
    distances = ((X[:, None, :] - centres[None]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(labels, distances.argmin(axis=1))
    assert labels.shape == (3000,) and adjusted_rand_score(y, labels) >= 0.99


def test_dense_eigenvectors_span_arpacks_where_arpack_fails_over():
    # The fallback of graph_spectral_embedding: the same invariant subspace as ARPACK's.
    from scipy.sparse import csgraph
    from scipy.sparse.linalg import eigsh
    from sklearn.neighbors import kneighbors_graph

    from algorithms.selection.candidates import _smallest_eigenvectors_dense

    X = np.random.RandomState(0).normal(size=(80, 2))
    graph = kneighbors_graph(X, 10, include_self=True)
    laplacian = csgraph.laplacian(0.5 * (graph + graph.T), normed=True).tocsr()
    dense = _smallest_eigenvectors_dense(laplacian, 3)
    _, sparse = eigsh(laplacian, k=3, sigma=-1e-5, which="LM", tol=0)
    # Orthonormal bases of one subspace: the projection of one onto the other keeps its norm.
    assert dense.shape == (80, 3)
    np.testing.assert_allclose(np.linalg.norm(sparse.T @ dense, axis=0), 1.0, atol=1e-8)


@pytest.mark.parametrize("grid_step", [1.0, 0.5])
def test_spectral_partition_of_data_on_a_grid_links_locations_not_copies(grid_step):
    # Two Gaussian blobs rounded to a grid: most rows repeat ten times or more, and over the
    # copies the kNN graph is groups of copies (scikit-learn's SpectralClustering: ARI 0.02 at
    # step 1, 0.00 at 0.5). Over the distinct rows it separates the blobs, as k-means does.
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.RandomState(1)
    X = np.round(np.vstack([rng.randn(300, 2), rng.randn(300, 2) + 4]) / grid_step) * grid_step
    y = np.repeat([0, 1], 300)
    labels = spectral_partition(X, 2, random_state=0)
    assert adjusted_rand_score(y, labels) >= 0.95
    _, copies_of = np.unique(X, axis=0, return_inverse=True)
    for row in np.unique(copies_of):  # copies share their row's cluster
        assert np.unique(labels[copies_of.ravel() == row]).size == 1


def test_spectral_partition_of_sparse_rows_links_rows_not_copies_of_an_empty_one():
    # Two topics of 100 documents over disjoint words, and 30 empty documents: with the
    # copies the kNN graph had a component of empty rows and cut a topic (ARI 0.08); over the
    # distinct rows it separates the topics, as on the dense matrix and as k-means does (0.77).
    import scipy.sparse as sp
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.RandomState(0)
    X = np.zeros((230, 60))
    for i in range(200):
        np.add.at(X[i], rng.choice(30, 5) + (30 if i >= 100 else 0), 1.0)
    y = np.r_[np.repeat([0, 1], 100), np.full(30, 2)]
    sparse = spectral_partition(sp.csr_matrix(X), 2, random_state=0)
    dense = spectral_partition(X, 2, random_state=0)
    assert adjusted_rand_score(y, sparse) == pytest.approx(adjusted_rand_score(y, dense))
    assert adjusted_rand_score(y, sparse) >= 0.75


@pytest.mark.parametrize("n_features", [1, 2, 8])
def test_block_variances_equal_numpys_to_the_last_bit(n_features):
    # k-means's stopping threshold is tol times the mean variance of the centred data: computed
    # a block at a time (no n x d copy on millions of points), it must be numpy's own.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3 * VARIANCE_BLOCK_ROWS + 17, n_features)) * 50.0 + 1e3
    shift = X.mean(axis=0)
    np.testing.assert_array_equal(shifted_column_variances(X, shift), (X - shift).var(axis=0))


def test_best_kmeans_run_is_the_lowest_inertia_run_of_the_pool():
    X = np.random.default_rng(1).standard_normal((400, 3))
    runs = kmeans_runs(X, 3, n_init=5, random_state=0)
    inertia, labels, centres = best_kmeans_run(X, 3, n_init=5, random_state=0)
    best = min(runs, key=lambda run: run[0])
    assert inertia == best[0]
    np.testing.assert_array_equal(labels, best[1])
    np.testing.assert_array_equal(centres, best[2])
