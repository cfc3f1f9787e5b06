"""Shared numerics: clustering error, kernels and width heuristics, portable arrays, validation."""

import numpy as np
import pytest

from algorithms.base import (
    KernelExpansionClassifier,
    arrays_to_npz_bytes,
    as_float_matrix,
    check_clustering_input,
    clustering_error,
    labels_from_leading_eigenvector,
    npz_bytes_to_arrays,
    with_intercept,
)
from algorithms.kernels import (
    NystromMap,
    center_kernel,
    data_diameter,
    normalized_laplacian,
    pairwise_kernel,
    resolve_gamma,
)
from algorithms.selection.candidates import SPECTRAL_SAMPLE_SIZE, kmeans_runs, spectral_partition


def test_clustering_error_is_invariant_to_cluster_names():
    truth = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    renamed = np.array([5, 5, 5, 3, 3, 9, 9, 9])
    assert clustering_error(truth, renamed) == 0.0


def test_clustering_error_counts_misassigned_points_after_hungarian_matching():
    truth = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    pred = np.array([1, 1, 1, 0, 0, 0, 0, 1])  # best matching 1->0, 0->1 leaves 2 wrong
    assert clustering_error(truth, pred) == pytest.approx(2 / 8)


def test_clustering_error_handles_more_clusters_than_classes_and_outliers():
    truth = np.array([0, 0, 1, 1, 1, 1])
    pred = np.array([0, 0, 1, 1, 2, -1])  # cluster 2 and the outlier cannot match
    assert clustering_error(truth, pred) == pytest.approx(2 / 6)


def test_gamma_paper_is_the_papers_width_heuristic():
    X = np.array([[0.0, 0.0], [3.0, 0.0], [1.0, 4.0]])
    diameter = np.sqrt(3.0**2 + 4.0**2)  # D = sqrt(sum_k (max_k - min_k)^2) = 5
    assert data_diameter(X) == pytest.approx(diameter)
    assert resolve_gamma(X, "paper", width_factor=2.0) == pytest.approx(1.0 / (2.0 * diameter) ** 2)


def test_rbf_kernel_matches_its_definition():
    rng = np.random.RandomState(0)
    X, Y = rng.randn(5, 3), rng.randn(4, 3)
    expected = np.exp(-0.7 * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(pairwise_kernel(X, Y, kernel="rbf", gamma=0.7), expected, rtol=1e-12)
    np.testing.assert_allclose(pairwise_kernel(X, Y, kernel="linear"), X @ Y.T, rtol=1e-12)


def test_unknown_kernel_and_bad_gamma_are_refused():
    X = np.eye(3)
    with pytest.raises(ValueError, match="unknown kernel"):
        pairwise_kernel(X, kernel="poly")
    with pytest.raises(ValueError, match="positive"):
        resolve_gamma(X, -1.0)


def test_centered_kernel_has_zero_row_sums_and_laplacian_is_psd():
    rng = np.random.RandomState(1)
    K = pairwise_kernel(rng.randn(20, 2), gamma=0.5)
    np.testing.assert_allclose(center_kernel(K).sum(axis=0), 0.0, atol=1e-10)
    assert np.linalg.eigvalsh(normalized_laplacian(K)).min() > -1e-10


def test_nystrom_map_reproduces_the_kernel_on_its_landmarks():
    rng = np.random.RandomState(2)
    X = rng.randn(50, 3)
    fmap = NystromMap.fit(X, n_components=50, gamma=0.3, random_state=0)
    Z = fmap.transform(X)
    np.testing.assert_allclose(Z @ Z.T, pairwise_kernel(X, gamma=0.3), atol=1e-6)


def test_nystrom_features_of_the_fit_are_the_maps_features():
    # fit_transform reads the landmarks' features off the Cholesky factor and maps only the
    # other points: both must be what the exported map gives new points, and a kernel of rank
    # below the landmarks' count (duplicated points) keeps only the pivots it needs.
    rng = np.random.RandomState(3)
    X = np.vstack([rng.randn(40, 3), rng.randn(20, 3)])
    X[40:50] = X[:10]
    for n_components in (30, 60):
        fmap, Z = NystromMap.fit_transform(X, n_components=n_components, gamma=0.3,
                                           random_state=0)
        np.testing.assert_allclose(Z, fmap.transform(X), atol=1e-8)
    assert fmap.landmarks.shape[0] == 50  # 60 landmarks, 10 of them duplicates
    np.testing.assert_allclose(Z @ Z.T, pairwise_kernel(X, gamma=0.3), atol=1e-6)


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

    from algorithms.kernels import resolve_gamma, scale_gamma_of_distances, squared_distances
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


def test_distinct_rows_of_a_sparse_matrix_are_those_of_its_dense_form():
    import scipy.sparse as sp

    from algorithms.kernels import distinct_rows

    X = sp.random(300, 20, density=0.1, random_state=0, format="csr")
    X = sp.vstack([X, X[:40], sp.csr_matrix((25, 20))]).tocsr()  # copies and empty rows
    X.data[X.indptr[5]] = 0.0  # an explicit zero is no entry
    first, copies_of = distinct_rows(X)
    dense_first, dense_copies_of = distinct_rows(X.toarray())
    np.testing.assert_array_equal(first, dense_first)
    np.testing.assert_array_equal(copies_of, dense_copies_of)
    np.testing.assert_array_equal(X[first].toarray()[copies_of], X.toarray())


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


def test_portable_arrays_round_trip_without_pickle():
    arrays = {"a": np.arange(6.0).reshape(2, 3), "b": np.array([1, 2, 3])}
    loaded = npz_bytes_to_arrays(arrays_to_npz_bytes(arrays))
    for key, value in arrays.items():
        np.testing.assert_array_equal(loaded[key], value)
    with pytest.raises(TypeError, match="numeric"):
        arrays_to_npz_bytes({"bad": np.array([{"x": 1}], dtype=object)})


@pytest.mark.parametrize(
    ("X", "message"),
    [
        ([[1.0, np.nan], [0.0, 1.0]], "NaN"),
        ([[1.0, np.inf], [0.0, 1.0]], "NaN or infinity"),
        ([[1.0 + 1j, 0.0], [0.0, 1.0]], "Complex data not supported"),
        (np.empty((0, 3)), "0 sample"),
        ([1.0, 2.0, 3.0], "2D"),
        ([[1.0, 2.0], [3.0]], "ragged"),
        ([["a", "b"], ["c", "d"]], "numbers"),
        ([[1e200, 0.0], [0.0, 1.0]], "magnitude 1e\\+200.*rescale"),
    ],
)
def test_bad_matrices_are_refused_with_a_message_that_names_the_problem(X, message):
    with pytest.raises(ValueError, match=message):
        as_float_matrix(X)


def test_clustering_input_needs_enough_distinct_points():
    with pytest.raises(ValueError, match="n_samples=2 is fewer than n_clusters=3"):
        check_clustering_input(np.array([[0.0], [1.0]]), 3)
    with pytest.raises(ValueError, match="identical"):
        check_clustering_input(np.ones((5, 2)), 2)
    # Distinct points whose squared distances underflow: rescale, not "identical".
    with pytest.raises(ValueError, match=r"spans at most 2e-300.*rescale"):
        check_clustering_input(np.array([[0.0], [1e-300], [2e-300]]), 2)


def test_fewer_distinct_points_than_clusters_are_refused():
    # 10 x (0, 0) and 10 x (1, 1) in three clusters: sdp_mmc failed on a leaf of one repeated
    # point, itersvr and gmmc gave identical points different labels.
    X = np.repeat([[0.0, 0.0], [1.0, 1.0]], 10, axis=0)
    with pytest.raises(ValueError, match="2 distinct points, fewer than n_clusters=3"):
        check_clustering_input(X, 3)
    check_clustering_input(X, 2)


def test_margin_choice_survives_a_sample_of_one_repeated_point():
    # 1,999 identical points and one other: the 1,000-point sample that scores candidates may
    # hold only the repeated point, whose centred kernel is zero (sdp_mmc failed after 10 min).
    from algorithms.selection.margin import lowest_margin_labeling

    sampled = np.random.RandomState(0).choice(2000, 1000, replace=False)
    other = np.setdiff1d(np.arange(2000), sampled)[0]  # a point the sample leaves out
    K = np.ones((2000, 2000))
    K[other, :] = K[:, other] = 0.5
    K[other, other] = 1.0
    odd = np.zeros(2000, dtype=int)
    odd[other] = 1
    cut = np.zeros(2000, dtype=int)
    cut[:700] = 1
    choice = lowest_margin_labeling(K, {"odd": odd, "cut": cut}, 0.01, random_state=0)
    assert choice.chosen in ("odd", "cut") and choice.objectives == {}


@pytest.mark.parametrize("name", ["gmmc", "sdp_mmc"])
def test_a_sampled_fit_keeps_a_rare_row_that_its_share_would_leave_out(name):
    # 599 copies of one row and one other: the other's share of a 150-point sample is 0.25 of a
    # point. Without it the sample held one row, which cannot be clustered (a ValueError about
    # identical points, on data that has two).
    from algorithms.registry import get_spec

    X = np.zeros((600, 2))
    X[-1] = 5.0
    model = get_spec(name).build({"n_clusters": 2, "exact_max_n": 150, "random_state": 0}).fit(X)
    assert model.n_fit_samples_ == 150
    assert np.bincount(model.labels_).tolist() == [599, 1]  # one cluster for all: [600]


def test_stratified_shares_sum_to_the_sample_and_reach_every_cell():
    from algorithms.base import _cell_shares

    rng = np.random.RandomState(0)
    for _ in range(200):
        counts = rng.randint(0, 3000, size=64) * (rng.uniform(size=64) < 0.8)
        counts[rng.randint(64)] += rng.randint(1, 5)  # a rare cell
        size = rng.randint(64, min(900, counts.sum()) + 1)
        take = _cell_shares(counts, size)
        assert take.sum() == size and (take <= counts).all()
        assert ((take >= 1) == (counts > 0)).all()
        quota = size * counts / counts.sum()
        assert (take >= np.floor(quota) - 1).all() and (take <= np.ceil(quota) + 1).all()


def test_sparse_matrices_are_held_to_the_same_magnitude():
    from scipy import sparse

    with pytest.raises(ValueError, match="magnitude"):
        as_float_matrix(sparse.csr_matrix([[1e120, 0.0], [0.0, 1.0]]), accept_sparse=True)


@pytest.mark.parametrize("name", ["itersvr", "cpm3c", "gmmc", "sdp_mmc"])
@pytest.mark.parametrize(("n", "k"), [(2, 2), (4, 4), (12, 6)])
def test_fits_whose_splits_reach_one_or_two_points_give_every_cluster(name, n, k):
    # n == k is allowed; recursive bisection then splits leaves of two points, whose spectral
    # start is one point per cluster (the eigensolver needs more points than eigenvectors).
    from algorithms.registry import get_spec

    X = np.random.default_rng(0).normal(size=(n, 2))
    model = get_spec(name).build({"n_clusters": k, "random_state": 0}).fit(X)
    assert np.unique(model.labels_).size == k


def test_psd_factor_of_given_rank_matches_the_full_decomposition():
    from algorithms.base import psd_factor

    # A balanced labeling: y is orthogonal to e, a start Lanczos must not use.
    y = np.repeat([1.0, -1.0], 60)
    np.testing.assert_allclose(np.abs(psd_factor(np.outer(y, y), rank=1)[:, 0]), 1.0)
    A = np.random.default_rng(1).normal(size=(300, 300))
    A = A @ A.T
    values, vectors = np.linalg.eigh(A)
    full = vectors[:, ::-1][:, :3] * np.sqrt(values[::-1][:3])
    np.testing.assert_allclose(np.abs(psd_factor(A, rank=3)), np.abs(full), atol=1e-8)


def test_leading_eigenvector_recovers_labels_from_outer_product():
    y = np.array([1, 1, -1, 1, -1, -1.0])
    labels, scores = labels_from_leading_eigenvector(np.outer(y, y))
    assert clustering_error(y, labels) == 0.0
    np.testing.assert_allclose(np.abs(scores), 1.0)


def test_far_from_every_support_vector_the_nearest_ones_decide_not_the_bias():
    # Class 0 around -1, class 1 around +1, and a bias toward class 1. Near the data the bias
    # counts; at -6 the RBF expansion is ~1e-11 and the bias alone would say class 1.
    svm = KernelExpansionClassifier(np.array([[-1.0], [1.0]]), np.array([[-1.0], [1.0]]),
                                    np.array([0.5]), np.array([0, 1]), "rbf", 1.0)
    X = np.array([[-6.0], [-1.0], [0.0], [6.0]])
    np.testing.assert_array_equal(svm.predict(X), [0, 0, 1, 1])
    expansion, _ = svm.expansion(X)
    biased = expansion[:, 0] + 0.5
    assert biased[0] > 0  # what the bias alone would decide
    np.testing.assert_allclose(svm.decision_function(X)[1:3], biased[1:3])
    # Several columns: the bias is left out only where no column's expansion can outweigh it.
    values = with_intercept(np.array([[1e-9, -1e-9], [0.3, 0.1]]),
                            np.array([[1e-9, 1e-9], [0.3, 0.2]]), np.array([-0.5, -0.2]))
    np.testing.assert_allclose(values, [[1e-9, -1e-9], [-0.2, -0.1]])
