"""Shared numerics beside the estimator base: clustering error (algorithms.metrics), sampling
(algorithms.sampling), label rounding (algorithms.rounding), the margin choice on degenerate
samples, the out-of-sample classifier (algorithms.out_of_sample); the earlier names of
algorithms.base."""

import numpy as np
import pytest

import algorithms.base
from algorithms.metrics import clustering_error
from algorithms.out_of_sample import KernelExpansionClassifier, with_intercept
from algorithms.rounding import labels_from_leading_eigenvector


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
    from algorithms.sampling import _cell_shares

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
    from algorithms.rounding import psd_factor

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


@pytest.mark.parametrize(("name", "home"), [("clustering_error", "algorithms.metrics"),
                                            ("SDPSolverError", "algorithms.conic"),
                                            ("npz_bytes_to_arrays", "algorithms.inputs")])
def test_a_name_that_left_base_is_still_importable_with_a_deprecation_warning(name, home):
    import importlib

    with pytest.warns(DeprecationWarning, match=home):
        moved = getattr(algorithms.base, name)
    assert moved is getattr(importlib.import_module(home), name)
    with pytest.raises(AttributeError):
        algorithms.base.no_such_name  # noqa: B018
