"""The candidate partitions of the selection layer: Genie on the minimum spanning tree
(Gagolewski, Bartoszuk and Cena 2016) on cases checked by hand, and the margin criterion that
chooses among candidates (algorithms.selection.portfolio)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.svm import LinearSVC

from algorithms.cpm3c import CPM3C
from algorithms.itersvr import IterSVR
from algorithms.kernels import local_scaling_gamma, pairwise_kernel, squared_distances
from algorithms.selection import genie, portfolio
from algorithms.selection.genie import (
    genie_partition,
    minimum_spanning_tree,
    minimum_spanning_tree_of_distances,
)
from algorithms.selection.margin import margin_kernel

# Two chains of four points (spacing 1) with a gap of 7, and one point 17 beyond the second.
CHAINS_AND_OUTLIER = np.array([[0.0], [1.0], [2.0], [3.0], [10.0], [11.0], [12.0], [13.0],
                               [30.0]])


def test_mst_of_a_chain_joins_neighbours_and_sorts_by_length():
    X = np.array([[0.0, 0.0], [3.0, 0.0], [1.0, 0.0], [6.0, 0.0]])
    a, b, length = minimum_spanning_tree(X)
    edges = {tuple(sorted(edge)) for edge in zip(a.tolist(), b.tolist(), strict=True)}
    assert edges == {(0, 2), (1, 2), (1, 3)}
    np.testing.assert_allclose(length, [1.0, 2.0, 3.0])


def test_mst_of_a_distance_matrix_is_the_mst_of_the_points_and_keeps_copies_joined():
    X = np.array([[0.0, 0.0], [3.0, 0.0], [1.0, 0.0], [6.0, 0.0], [6.0, 0.0]])
    a, b, length = minimum_spanning_tree_of_distances(squared_distances(X))
    edges = {tuple(sorted(edge)) for edge in zip(a.tolist(), b.tolist(), strict=True)}
    # The copies (3, 4) are joined by the shortest edge, not read as no edge at all.
    assert edges == {(3, 4), (0, 2), (1, 2), (1, 3)}
    np.testing.assert_allclose(length, [0.0, 1.0, 2.0, 3.0], atol=1e-300)


def test_genie_splits_two_chains_at_the_gap():
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.5]])
    np.testing.assert_array_equal(genie_partition(X, 2), [0, 0, 0, 1, 1, 1])


def test_two_blobs_with_a_bridge_split_at_the_bridge_not_at_a_blob_edge():
    # Two 3 x 3 grids (spacing 1) joined by a chain of points 1.5 apart that ends 3 short of
    # the second grid: that edge is the tree's longest, and the chain stays with the first.
    grid = np.array([[i, j] for i in range(3) for j in range(3)], dtype=float)
    bridge = np.array([[3.5, 1.0], [5.0, 1.0], [6.5, 1.0]])
    X = np.vstack([grid, bridge, grid + np.array([9.5, 0.0])])
    labels = genie_partition(X, 2, gini_threshold=0.3)
    np.testing.assert_array_equal(labels, [0] * 12 + [1] * 9)


def test_gini_threshold_merges_a_singleton_that_single_linkage_keeps_apart():
    # After the chains form, the sizes are (4, 4, 1): Gini index 6 / (2 * 9) = 0.33. Above a
    # threshold of 0.3 the next merge must take the singleton (along its edge of 17); at 0.5
    # the shortest edge left (7) joins the chains, as single linkage (threshold 1) does.
    np.testing.assert_array_equal(genie_partition(CHAINS_AND_OUTLIER, 2, 0.3),
                                  [0, 0, 0, 0, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(genie_partition(CHAINS_AND_OUTLIER, 2, 0.5),
                                  [0, 0, 0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(genie_partition(CHAINS_AND_OUTLIER, 2, 1.0),
                                  [0, 0, 0, 0, 0, 0, 0, 0, 1])


def test_genie_refuses_a_threshold_outside_zero_one_and_too_many_clusters():
    with pytest.raises(ValueError, match="gini_threshold"):
        genie_partition(CHAINS_AND_OUTLIER, 2, 1.5)
    with pytest.raises(ValueError, match="10 clusters of 9 points"):
        genie_partition(CHAINS_AND_OUTLIER, 10)


def test_knn_spanning_tree_joins_its_components_into_one_tree(monkeypatch):
    # Three far groups: the kNN graph falls apart, and the links between groups join it.
    X, y = make_blobs(n_samples=[40, 40, 40], centers=[[0, 0], [50, 0], [0, 50]],
                      cluster_std=0.5, random_state=0)
    monkeypatch.setattr(genie, "EXACT_MST_MAX_N", 10)
    a, _, length = minimum_spanning_tree(X)
    assert a.size == X.shape[0] - 1 and np.all(np.diff(length) >= 0)
    assert adjusted_rand_score(y, genie_partition(X, 3)) == 1.0


def test_the_mixture_and_k_means_are_fitted_on_a_sample_and_extended_to_every_point(monkeypatch):
    """Candidates are built on at most PORTFOLIO_SAMPLE_SIZE points: a fit on a million points
    ran k-means' ten starts over all of them, most of the portfolio's time."""
    monkeypatch.setattr(portfolio, "PORTFOLIO_SAMPLE_SIZE", 200)
    seen: dict[str, int] = {}
    for name in ("best_kmeans_run", "gmm_labels"):
        built = getattr(portfolio, name)

        def spy(X, *args, _built=built, _name=name, **kwargs):
            seen[_name] = max(seen.get(_name, 0), X.shape[0])
            return _built(X, *args, **kwargs)

        monkeypatch.setattr(portfolio, name, spy)
    X, y = make_blobs(n_samples=900, centers=[[0, 0], [8, 0], [0, 8]], random_state=0)
    candidates = portfolio.candidate_partitions(X, 3, random_state=0)
    assert seen == {"best_kmeans_run": 200, "gmm_labels": 200}
    for name in ("kmeans", "gmm"):  # every point labelled, by its nearest cluster centre
        assert candidates[name].shape == (900,)
        assert adjusted_rand_score(y, candidates[name]) == 1.0


def test_genie_and_spectral_partitions_of_the_sample_reach_every_point_by_nearest_prototype(
        monkeypatch):
    """Above PORTFOLIO_SAMPLE_SIZE, Genie's and the spectral partitions are of one sample and
    reach every other point through its nearest sampled prototype: two moons stay whole, where
    the nearest of the two clusters' centres cuts both (ARI about 0.25)."""
    monkeypatch.setattr(portfolio, "PORTFOLIO_SAMPLE_SIZE", 400)
    searched: list[int] = []
    built = portfolio.spectral_partition

    def spy(X, *args, **kwargs):
        searched.append(X.shape[0])
        return built(X, *args, **kwargs)

    monkeypatch.setattr(portfolio, "spectral_partition", spy)
    X, y = make_moons(3000, noise=0.05, random_state=0)
    candidates = portfolio.candidate_partitions(X, 2, random_state=0)
    assert searched == [400, 400]  # both graphs are of the portfolio's sample
    for name in ("genie_0.3", "spectral_10", "spectral_30"):
        assert candidates[name].shape == (3000,)
        assert adjusted_rand_score(y, candidates[name]) >= 0.99, name
    assert adjusted_rand_score(y, candidates["kmeans"]) < 0.5  # the centres' extension


def test_candidates_that_repeat_each_other_are_scored_once():
    labels = np.array([0, 0, 1, 1, 2, 2])
    renamed = np.array([5, 5, 3, 3, 4, 4])  # the same partition, other cluster names
    distinct, repeats = portfolio.distinct_candidates(
        {"first": labels, "second": renamed, "other": np.array([0, 1, 1, 1, 2, 2]),
         "two_clusters": np.array([0, 0, 0, 1, 1, 1])}, 3)
    assert list(distinct) == ["first", "other"] and repeats == {"second": "first"}


def _score_features(X: np.ndarray) -> np.ndarray:
    gamma = local_scaling_gamma(X, random_state=0)
    return portfolio.leading_features(
        margin_kernel(pairwise_kernel(X, kernel="rbf", gamma=gamma)), portfolio.SCORE_RANK)


def test_finite_newton_reaches_the_squared_hinge_optimum_liblinear_approaches():
    X, y = make_blobs(n_samples=300, centers=3, cluster_std=2.5, random_state=0)
    Z, beta = _score_features(X), 1.0 / portfolio.SCORE_C
    for c in range(3):
        signs = np.where(y == c, 1.0, -1.0)
        newton = portfolio.squared_hinge_margin(Z, signs, beta)
        svm = LinearSVC(C=1.0 / beta, loss="squared_hinge", dual=False, fit_intercept=False,
                        tol=1e-10, max_iter=100_000).fit(Z, signs)
        w = svm.coef_[0]
        slack = np.maximum(0.0, 1.0 - signs * (Z @ w))
        liblinear = 0.5 * beta * float(w @ w) + float(slack @ slack)
        assert newton <= liblinear * (1 + 1e-9)
        assert newton == pytest.approx(liblinear, rel=1e-5)


def test_a_cluster_shared_by_candidates_or_its_complement_is_solved_once(monkeypatch):
    X, _ = make_blobs(n_samples=120, centers=3, random_state=0)
    solved = []
    original = portfolio.squared_hinge_margin

    def counting(Z, y, beta):
        solved.append(y.copy())
        return original(Z, y, beta)

    monkeypatch.setattr(portfolio, "squared_hinge_margin", counting)
    margins = portfolio.ClusterMargins(_score_features(X), 0.01)
    a = np.repeat([0, 1, 2], 40)
    b = np.repeat([0, 1, 2], [40, 20, 60])  # shares its first cluster with a
    two = np.repeat([0, 1], [40, 80])  # the first cluster and its complement
    margins.summed(a), margins.summed(b)
    assert len(solved) == 5
    assert margins.summed(two) == pytest.approx(2 * margins.one_vs_rest(a == 0))
    assert len(solved) == 5


def _fit_messages(estimator, **params) -> list[str]:
    """The progress messages of ``estimator(n_clusters=4, random_state=0, **params)`` fitted to
    four separated blobs."""
    X, _ = make_blobs(n_samples=240, centers=4, cluster_std=0.6, random_state=3)
    messages: list[str] = []
    estimator(n_clusters=4, random_state=0, **params).fit(
        X, progress=lambda step, objective, message: messages.append(message))
    return messages


def test_the_portfolio_best_candidate_guides_a_bisection_and_cpm3c_without_it():
    messages = _fit_messages(IterSVR)
    assert any(m.endswith("candidate guides the splits") for m in messages)
    messages = _fit_messages(IterSVR, portfolio=False)
    assert any(m.startswith("CPM3C's 4-cluster partition") for m in messages)
    assert not any("guides the splits" in m and "candidate" in m for m in messages)


def test_cpm3c_refines_the_portfolio_best_candidate_from_its_first_run():
    messages = _fit_messages(CPM3C)
    assert any(m.endswith("candidate is the first start") for m in messages)
    assert any(m.startswith("run 1 of") and "portfolio's best" in m for m in messages)
    messages = _fit_messages(CPM3C, portfolio=False)
    assert any(m.startswith("run 1 of") and "from the spectral partition" in m
               for m in messages)


def test_choice_keeps_the_separated_partition_over_a_cut_through_clusters():
    X, y = make_moons(n_samples=300, noise=0.05, random_state=0)
    cut = (X[:, 0] > 0.5).astype(int)  # a straight cut through both moons
    choice = portfolio.choose_partition(X, 2, extra={"straight_cut": cut}, random_state=0)
    assert choice.chosen != "straight_cut"
    assert choice.scores[choice.chosen] < choice.scores["straight_cut"]
    assert adjusted_rand_score(y, choice.labels) == 1.0 > adjusted_rand_score(y, cut) + 0.5
    assert set(choice.scores) | set(choice.repeats) >= {"straight_cut", "genie_0.3", "kmeans"}


def test_outliers_do_not_take_a_cluster_of_their_own():
    # Three blobs and four far points: a partition that spends a cluster on the far points
    # (single linkage's) loses to the three blobs.
    X, y = make_blobs(n_samples=[100, 100, 100], centers=[[0, 0], [8, 0], [4, 7]],
                      cluster_std=0.8, random_state=1)
    far = np.array([[30.0, 30.0], [31.0, -28.0], [-29.0, 30.0], [-30.0, -29.0]])
    X = np.vstack([X, far])
    choice = portfolio.choose_partition(X, 3, random_state=0)
    assert adjusted_rand_score(y, choice.labels[:300]) > 0.95
    assert np.bincount(choice.labels).min() >= 100


def test_the_score_does_not_depend_on_the_unit_of_a_feature():
    X, y = make_blobs(n_samples=300, centers=3, n_features=3, random_state=2)
    in_other_units = X * np.array([1000.0, 1.0, 0.01])
    cut = (X[:, 0] > np.median(X[:, 0])).astype(int) + (X[:, 1] > np.median(X[:, 1]))
    for labels in (y, cut):
        assert portfolio.PartitionScorer(in_other_units, random_state=0)(labels) == \
            pytest.approx(portfolio.PartitionScorer(X, random_state=0)(labels), rel=1e-9)


def test_a_feature_of_a_large_unit_does_not_decide_the_partition():
    # Three blobs in four features, and a fifth feature of noise in a unit 1000 times larger:
    # on the raw kernel the score follows the noise column, on unit-variance columns the blobs.
    rng = np.random.default_rng(0)
    X, y = make_blobs(n_samples=450, centers=3, n_features=4, cluster_std=1.0, random_state=3)
    X = np.column_stack([X, 1000.0 * rng.normal(size=450)])
    along_noise = np.digitize(X[:, 4], np.quantile(X[:, 4], [1 / 3, 2 / 3]))
    raw = portfolio.ClusterMargins(_score_features(X), 1.0 / portfolio.SCORE_C)
    assert raw.summed(along_noise) < raw.summed(y)
    scorer = portfolio.PartitionScorer(X, random_state=0)
    assert scorer(y) < scorer(along_noise)


def test_a_method_keeps_the_candidate_and_predicts_its_labels():
    X, y = make_moons(n_samples=300, noise=0.05, random_state=0)
    X = np.vstack([X, X + np.array([0.0, 3.0])])  # four moons, two pairs one above the other
    y = np.r_[y, y + 2]
    model = IterSVR(n_clusters=4, random_state=0).fit(X)
    assert model.candidate_ in model.candidate_scores_
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    assert adjusted_rand_score(y, model.labels_) > 0.95
    own = IterSVR(n_clusters=4, random_state=0, portfolio=False).fit(X)
    assert not hasattr(own, "candidate_")
    meta, arrays = model.to_model()
    np.testing.assert_array_equal(IterSVR.from_model(meta, arrays).predict(X), model.labels_)


@pytest.mark.xfail(strict=True, reason=(
    "open: the summed one-vs-rest omega has no bias, and on the centred kernel a small cluster "
    "costs a large ||w||; on separated blobs of 60 and 3 x 180 points it prefers Genie's "
    "partition at gini 0.1 (13 % error) to the blobs, which every other candidate finds"))
def test_unequal_separated_blobs_keep_the_partition_every_other_family_finds():
    centers = [(0.0, 0.0), (8.0, 0.0), (0.0, 8.0), (8.0, 8.0)]
    X, y = make_blobs(n_samples=[60, 180, 180, 180], centers=centers, cluster_std=0.8,
                      random_state=0)
    assert adjusted_rand_score(y, portfolio.gmm_labels(X, 4, random_state=0)) == 1.0
    assert adjusted_rand_score(y, portfolio.choose_partition(X, 4, random_state=0).labels) == 1.0
