"""n_clusters="auto": the k of largest prediction strength (algorithms/selection/n_clusters.py),
for the five clustering methods, as estimators and through the API."""

import httpx
import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

from algorithms.params.common import DEFAULT_MAX_CLUSTERS
from algorithms.registry import get_spec
from algorithms.selection.candidates import SPECTRAL_NEIGHBORS
from algorithms.selection.n_clusters import (
    _distinct_pairs,
    _strong_answer,
    choose_n_clusters,
    considered_ks,
    largest_k_considered,
    prediction_strength,
    reproduction,
    sample_size,
    spared_clusters,
)
from tests.helpers import submit_job, wait_for_job

METHODS = ["itersvr", "cpm3c", "sdp_mmc", "gmmc", "svc"]


def separated_blobs(k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``k`` blobs of 40 points, unit spread, centres 8 apart on a grid."""
    side = int(np.ceil(np.sqrt(k)))
    centres = [(8.0 * (i % side), 8.0 * (i // side)) for i in range(k)]
    return make_blobs(n_samples=40 * k, centers=centres, cluster_std=1.0, random_state=seed)


@pytest.mark.parametrize("k", range(2, 9))
def test_well_separated_blobs_give_exactly_their_number(k):
    X, _ = separated_blobs(k)
    choice = choose_n_clusters(X, 12, random_state=0)
    assert choice.n_clusters == k and choice.clear
    assert set(choice.strengths) == set(range(2, 13))


@pytest.mark.parametrize("X", [make_moons(300, noise=0.05, random_state=0)[0],
                               make_circles(300, factor=0.5, noise=0.05, random_state=0)[0]],
                         ids=["noisy moons", "noisy circles"])
def test_noisy_moons_and_circles_give_two(X):
    assert choose_n_clusters(X, 12, random_state=0).n_clusters == 2


@pytest.mark.parametrize("seed", range(2))
def test_uniform_noise_reaches_no_clear_k(seed):
    # The documented answer: no k reaches the threshold, so the choice is not clear; the
    # methods still partition (k >= 2). Separated blobs, the baseline, are clear.
    X = np.random.RandomState(seed).uniform(size=(300, 2))
    choice = choose_n_clusters(X, 12, random_state=seed)
    assert not choice.clear and choice.n_clusters >= 2
    assert max(choice.strengths.values()) < 0.8


def test_splits_are_drawn_until_every_strength_is_settled_about_the_threshold():
    from algorithms.selection.n_clusters import MAX_SPLITS, MIN_SPLITS, _settled

    assert _settled([1.0, 1.0, 1.0, 1.0]) and _settled([0.2, 0.3, 0.25, 0.2])
    assert not _settled([0.7, 0.9, 0.75, 0.85])  # straddles 0.8
    # Clusters separated by wide gaps (and uniform noise) have strengths far from the threshold
    # from the first splits; two touching blobs beside a third, whose three-way strength is near
    # it above a strong k = 2, need more.
    clear = choose_n_clusters(separated_blobs(3)[0], 12, random_state=0)
    noise = choose_n_clusters(np.random.RandomState(0).uniform(size=(300, 2)), 12,
                              random_state=0)
    touching, _ = make_blobs(300, centers=[(0, 0), (10, 0), (10, 2.3)], random_state=0)
    near = choose_n_clusters(touching, 12, random_state=0)
    assert clear.n_splits == noise.n_splits == MIN_SPLITS
    assert near.strengths[2] == 1.0 and abs(near.strengths[3] - 0.8) < 0.08
    assert MIN_SPLITS < near.n_splits <= MAX_SPLITS


def test_no_more_splits_are_drawn_once_they_cannot_change_the_answer():
    from algorithms.selection.n_clusters import MIN_SPLITS

    # Overlapping blobs: k = 2 alone is near the threshold, every other k is settled below it
    # and below k = 2, so k = 2 is the answer on either side of the threshold.
    X, _ = make_blobs(300, centers=3, cluster_std=1.8, random_state=0)
    choice = choose_n_clusters(X, 12, random_state=0)
    assert choice.n_clusters == 2 and abs(choice.strengths[2] - 0.8) < 0.05
    assert choice.n_splits == MIN_SPLITS


def test_a_lone_open_k_within_reach_of_the_runner_up_keeps_drawing_splits():
    from algorithms.selection.n_clusters import _still_open

    settled_weak = [0.3, 0.32, 0.31, 0.3]
    # k = 3 straddles 0.8, no k is strong: ahead of k = 2 by many standard errors it is the
    # answer whatever its side of 0.8; a few hundredths ahead, more splits may put k = 2 first.
    far_ahead = {2: settled_weak, 3: [0.75, 0.85, 0.78, 0.84]}
    close_behind = {2: [0.72, 0.74, 0.73, 0.72], 3: [0.7, 0.9, 0.72, 0.82]}
    assert _still_open(far_ahead, [2, 3]) == []
    assert _still_open(close_behind, [2, 3]) == [3]


@pytest.mark.parametrize("seed", range(5))
def test_a_single_k_considered_is_the_answer_after_the_fewest_splits(seed):
    from algorithms.selection.n_clusters import MIN_SPLITS, _still_open

    # With max_clusters=2 (or fewer than 12 points) k = 2 is the only candidate: the answer
    # whatever its strength, so no split beyond the fewest is drawn, even one straddling 0.8.
    assert _still_open({2: [0.7, 0.9, 0.75, 0.85]}, [2]) == []
    noise = np.random.RandomState(seed).uniform(size=(300, 2))
    choice = choose_n_clusters(noise, 2, random_state=seed)
    assert (choice.n_clusters, choice.n_splits, list(choice.strengths)) == (2, MIN_SPLITS, [2])


@pytest.mark.parametrize("name", METHODS)
def test_each_method_fits_a_handful_of_points_with_auto(name):
    # 8 to 11 points: halves of 4 or 5, so k = 2 is the only candidate, here without structure
    # (its strength straddles 0.8 after the fewest splits).
    X = np.random.RandomState(0).randn(10, 2)
    estimator = get_spec(name).build({"n_clusters": "auto", "random_state": 0}).fit(X)
    assert estimator.n_clusters_ == 2 and np.unique(estimator.labels_).size == 2
    assert np.array_equal(estimator.predict(X), estimator.labels_)


@pytest.mark.parametrize("seed", [1, 7, 14, 22])
def test_a_few_values_each_repeated_a_few_times_get_a_choice(seed):
    # Ten values, five copies each (fewer than the graph's 10 neighbours, so copies are not
    # grouped): the halves' graphs have many equal eigenvalues, and ARPACK's shift-invert
    # failed ("no shifts could be applied") at these random states.
    values = [0.24, 0.397, 1.474, -0.378, 1.983, -0.281, 0.38, -0.183, -0.352, 0.323]
    X = np.repeat(values, 5)[:, None]
    choice = choose_n_clusters(X, 10, random_state=seed)
    assert 2 <= choice.n_clusters <= 10 and set(choice.strengths) == set(range(2, 11))


def test_sparse_data_get_the_choice_of_their_dense_form():
    import scipy.sparse as sp

    X, _ = separated_blobs(3)
    X = X - X.min(axis=0)  # non-negative, as term counts: CSR rows are not centred
    dense = choose_n_clusters(X, 12, random_state=0)
    sparse = choose_n_clusters(sp.csr_matrix(X), 12, random_state=0)
    assert sparse.n_clusters == dense.n_clusters == 3 and sparse.clear


def test_the_choice_does_not_move_with_a_shift_of_the_data():
    # Digit pixels are integers: many pairs of points are equally far apart, and which of them
    # is a neighbour must not depend on the round-off that a shift of the data changes.
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X[np.isin(y, (0, 1, 2))][::2]
    choices = [choose_n_clusters(Z, 12, random_state=0) for Z in (X, X - X.mean(axis=0), X + 100)]
    assert all(choice.strengths == choices[0].strengths for choice in choices)


def test_max_clusters_bounds_the_choice_and_small_data_tries_fewer():
    X, _ = separated_blobs(6)
    assert choose_n_clusters(X, 4, random_state=0).n_clusters <= 4
    assert max(choose_n_clusters(X[:20], 12, random_state=0).strengths) == 5  # 20 // 4


@pytest.mark.parametrize("rows", [2, 3])
def test_copies_of_a_few_rows_give_one_cluster_per_row_and_the_methods_fit(rows):
    # Identical points share a cluster, so k stops at the number of distinct rows; a half's
    # cluster holding part of a row's copies would be predicted whole, and its strength 1 would
    # have sent k past the rows the methods can separate.
    X = np.repeat(8.0 * np.eye(3)[:rows, :2], 15, axis=0)
    y = np.repeat(np.arange(rows), 15)
    choice = choose_n_clusters(X, 12, random_state=0)
    assert choice.n_clusters == rows and choice.clear and max(choice.strengths) == rows
    estimator = get_spec("itersvr").build({"n_clusters": "auto", "random_state": 0}).fit(X)
    assert adjusted_rand_score(y, estimator.labels_) == 1.0  # one cluster for all scores 0


@pytest.mark.parametrize("seed", range(2))
def test_blobs_with_many_more_features_than_points_give_their_number(seed):
    # In 500 dimensions the points of a blob are all about equally far apart: an RBF SVM
    # trained on a cut of a blob predicts one label for all of it, and unless a k counts only
    # where the other half gets k clusters, a blob cut in two passes as two clusters (k = 4).
    X, _ = make_blobs(150, n_features=500, centers=3, random_state=seed)
    choice = choose_n_clusters(X, 12, random_state=0)
    assert choice.n_clusters == 3 and choice.strengths[4] < 0.8


@pytest.mark.parametrize("seed", [1, 2])
def test_a_small_sparse_cluster_beside_large_ones_is_carried_to_the_other_half(seed):
    # 30 points beside two blobs of 300: at a width set by the dense blobs' neighbour distances
    # the transfer SVM gave the small blob's unseen points to a large one (k = 2).
    X, _ = make_blobs([300, 300, 30], centers=[(0, 0), (10, 0), (0, 10)], random_state=seed)
    assert choose_n_clusters(X, 12, random_state=0).n_clusters == 3


def test_a_half_of_copies_of_one_row_holds_no_partition():
    # 299 copies of one point and one other: some halves hold only the copies.
    X = np.vstack([np.zeros((299, 2)), [[5.0, 5.0]]])
    choice = choose_n_clusters(X, 12, random_state=0)
    assert (choice.n_clusters, choice.clear) == (2, False)


def test_a_classifier_that_merges_the_other_halfs_clusters_reproduces_nothing():
    from algorithms.selection.n_clusters import reproduced_strength

    own = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    assert prediction_strength(np.zeros(8, dtype=int), own) == 1.0  # merging costs no pair
    assert reproduced_strength(np.array([0, 0, 0, 1, 1, 1, 1, 1]), own) == 0.0
    assert reproduced_strength(own + 4, own) == 1.0


@pytest.mark.parametrize("k", [2, 3])
def test_blobs_rounded_to_a_grid_give_their_number(k):
    # Rounded to steps of 2 (a unit spread), each blob is a few dozen distinct rows repeated up
    # to 60 times: counts, ratings and rounded measurements look like this.
    X, _ = make_blobs(300, centers=k, cluster_std=1.0, center_box=(-12, 12), random_state=1)
    X = np.round(X / 2.0) * 2.0
    assert np.unique(X, axis=0, return_counts=True)[1].max() >= 10
    assert choose_n_clusters(X, 12, random_state=0).n_clusters == k


@pytest.mark.parametrize("k", [20, 30])
def test_many_separated_blobs_give_their_number_at_the_default_max_clusters(k):
    # Above EVERY_K_UP_TO the ks are a grid (20 and 30 are not on it: the gap around the answer
    # is scored after), and the weakest clusters are spared; the answer is neither the grid's
    # neighbour nor a k that cuts one of the blobs in two.
    X, _ = separated_blobs(k)
    choice = choose_n_clusters(X, DEFAULT_MAX_CLUSTERS, random_state=0)
    assert choice.n_clusters == k and choice.clear
    assert k not in considered_ks(50)


def test_the_sample_gives_each_halfs_cluster_more_points_than_graph_neighbours():
    # At the default max_clusters a sample of the 1,000 points that serve 12 clusters would give
    # a half 10 points per cluster: every point's 10 neighbours would reach into other clusters.
    assert sample_size(12) == 1000
    for max_clusters in (12, 33, DEFAULT_MAX_CLUSTERS, 80):
        per_cluster_of_a_half = sample_size(max_clusters) / 2 / max_clusters
        assert per_cluster_of_a_half > SPECTRAL_NEIGHBORS
    assert sample_size(DEFAULT_MAX_CLUSTERS) == 1500


def test_above_every_k_up_to_the_weakest_share_of_clusters_is_spared():
    assert [spared_clusters(k) for k in (2, 7, 12)] == [0, 0, 0]
    assert [spared_clusters(k) for k in (13, 20, 30, 50)] == [1, 3, 4, 7]
    # 14 clusters, one of them split 7 + 7 by the classifier: eq. (2.1) is its share of pairs
    # (2 * 7 * 6 of 14 * 13); spared, the next weakest (1.0).
    own = np.repeat(np.arange(14), 14)
    predicted = own.copy()
    predicted[:7] = 13
    assert prediction_strength(predicted, own) == pytest.approx(84 / 182)
    assert reproduction(predicted, own) == (1.0, 13)


def test_a_larger_strong_k_replaces_the_answer_only_where_it_carries_over_more_clusters():
    # 15 clusters carried over; 16 and 17 cut one of them (no more carried over); 20 separates
    # clusters that 15 merged.
    strong = [8, 15, 16, 17]
    reproduced = {8: [8, 8, 8], 15: [15, 15, 15], 16: [15, 16, 15], 17: [15, 15, 15]}
    assert _strong_answer(strong, reproduced) == 15
    assert _strong_answer([*strong, 20], {**reproduced, 20: [19, 20, 20]}) == 20
    # Up to EVERY_K_UP_TO the largest strong k, as the paper's rule.
    assert _strong_answer([3, 4], {3: [3, 3], 4: [3, 4]}) == 4


def test_more_clusters_than_max_clusters_get_a_coarser_k_until_max_clusters_is_raised():
    # The documented behaviour of max_clusters: no k up to 12 splits 15 blobs reproducibly
    # except a coarse one, so the answer is coarse; with room for 15 it is 15.
    X, _ = separated_blobs(15)
    assert choose_n_clusters(X, 12, random_state=0).n_clusters < 12
    assert choose_n_clusters(X, 20, random_state=0).n_clusters == 15


@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_too_few_points_to_split_get_two_clusters_unscored(n):
    X = np.random.RandomState(0).randn(n, 2)
    choice = choose_n_clusters(X, 12, random_state=0)
    assert (choice.n_clusters, choice.strengths, choice.clear) == (2, {}, False)


def test_prediction_strength_is_the_weakest_clusters_share_of_pairs():
    own = np.array([0, 0, 0, 1, 1, 1])
    assert prediction_strength(own, own) == 1.0
    # Cluster 1 split 2 + 1: one of its three pairs stays together.
    assert prediction_strength(np.array([0, 0, 0, 1, 1, 2]), own) == pytest.approx(1 / 3)


def test_the_transfer_svm_labels_as_scikit_learns_one_vs_one_svc():
    # Four overlapping blobs, k-means labels of one half carried to the other by the compiled
    # one-vs-one SVM and by SVC(kernel="precomputed"): both solve the same duals to libsvm's
    # tolerance, so at most a point near a boundary may differ.
    from sklearn.svm import SVC

    from algorithms.kernels import local_scaling_gamma, pairwise_kernel
    from algorithms.selection.candidates import kmeans_labels
    from algorithms.selection.n_clusters import TRANSFER_C, _transfer

    X, _ = make_blobs(400, centers=4, cluster_std=2.5, random_state=3)
    train, test = X[:200], X[200:]
    labels, _ = kmeans_labels(train, 4, random_state=0)
    gamma = local_scaling_gamma(train)
    K_train = pairwise_kernel(train, gamma=gamma)
    K_test = pairwise_kernel(test, train, gamma=gamma)
    reference = SVC(C=TRANSFER_C, kernel="precomputed").fit(K_train, labels).predict(K_test)
    predicted = _transfer(K_train, labels + 5, K_test)  # cluster names are kept
    assert set(np.unique(predicted)) <= {5, 6, 7, 8}
    assert (predicted != reference + 5).sum() <= 2
    assert (reference != reference[0]).any()  # not a trivial one-cluster answer


@pytest.mark.parametrize("name", METHODS)
def test_each_method_chooses_k_fits_and_predicts_with_auto(name):
    X, y = separated_blobs(4)
    estimator = get_spec(name).build({"n_clusters": "auto", "random_state": 0}).fit(X)
    assert estimator.n_clusters_ == 4
    # One cluster for all, the trivial baseline, has ARI 0.
    assert adjusted_rand_score(y, estimator.labels_) >= 0.99
    extras = estimator.result_extras()
    assert extras["n_clusters"] == 4 and extras["n_clusters_clear"] is True
    assert max(extras["n_clusters_strengths"], key=extras["n_clusters_strengths"].get) == 4
    meta, arrays = estimator.to_model()
    loaded = type(estimator).from_model(meta, arrays)
    assert np.array_equal(loaded.predict(X), estimator.predict(X))


def test_a_refit_with_a_fixed_k_forgets_the_choice():
    X, _ = separated_blobs(3)
    estimator = get_spec("cpm3c").build({"n_clusters": "auto", "random_state": 0}).fit(X)
    assert "n_clusters_strengths" in estimator.result_extras()
    estimator.set_params(n_clusters=2).fit(X)
    assert estimator.n_clusters_ == 2 and "n_clusters_strengths" not in estimator.result_extras()


def test_auto_is_refused_where_k_is_fixed_by_the_problem():
    X, _ = separated_blobs(2)
    with pytest.raises(ValueError, match="kernel_learning"):
        get_spec("gmmc").build({"n_clusters": "auto", "kernel_learning": True})
    labels = np.full(X.shape[0], -1)
    labels[:3] = 0
    with pytest.raises(ValueError, match="not 'auto'"):
        get_spec("sdp_mmc").build({"n_clusters": "auto"}).fit(X, labels)
    with pytest.raises(ValueError, match="max_clusters"):
        get_spec("itersvr").build({"n_clusters": "auto", "max_clusters": 1})


def test_auto_job_reports_the_chosen_k_and_every_strength_and_its_model_predicts(service_url):
    X, y = separated_blobs(3)
    job = submit_job(service_url, {"algorithm": {"name": "cpm3c",
                                                 "params": {"n_clusters": "auto",
                                                            "random_state": 0}},
                                   "data": {"X": X.tolist()}})
    final = wait_for_job(service_url, job["id"])
    assert final["status"] == "succeeded", final["error"]
    assert final["algorithm"]["params"]["n_clusters"] == "auto"
    result = httpx.get(f"{service_url}/v1/jobs/{job['id']}/result", timeout=30).json()
    extras = result["extras"]
    assert extras["n_clusters"] == 3 and extras["n_clusters_clear"] is True
    assert sorted(map(int, extras["n_clusters_strengths"])) == considered_ks(
        largest_k_considered(X.shape[0], DEFAULT_MAX_CLUSTERS))
    assert adjusted_rand_score(y, result["labels"]) >= 0.99
    predicted = httpx.post(f"{service_url}/v1/models/{result['model_id']}/predict",
                           json={"X": X.tolist()}, timeout=30)
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["labels"] == result["labels"]
    plot = httpx.get(f"{service_url}/v1/jobs/{job['id']}/plot", timeout=30)
    assert plot.status_code == 200 and "prediction strength" in plot.text


def test_auto_with_partial_labels_is_a_422_that_says_what_to_fix(service_url):
    X, _ = separated_blobs(2)
    y = [-1] * X.shape[0]
    y[0] = 0
    response = httpx.post(f"{service_url}/v1/jobs", timeout=30, json={
        "algorithm": {"name": "sdp_mmc", "params": {"n_clusters": "auto"}},
        "data": {"X": X.tolist(), "y": y}})
    assert response.status_code == 422, response.text
    assert "not 'auto'" in response.text


def test_the_families_partitions_that_agree_train_one_transfer_svm():
    spectral = ({2: np.array([0, 0, 1, 1]), 3: np.array([0, 1, 2, 2])},
                {2: np.array([1, 1, 0, 0]), 3: np.array([0, 0, 1, 2])})
    genie = ({2: np.array([1, 1, 0, 0]), 3: np.array([2, 1, 0, 0])},  # k=2 agrees, renamed
             {2: np.array([0, 0, 1, 1]), 3: np.array([0, 1, 1, 2])})  # k=3 differs on a half
    assert len(_distinct_pairs([spectral, genie], 2)) == 1
    assert len(_distinct_pairs([spectral, genie], 3)) == 2
    ((train, test),) = _distinct_pairs([spectral, ({}, {})], 3)  # a family without k=3
    assert train is spectral[0][3] and test is spectral[1][3]
