"""The defaults a caller gets with only ``n_clusters``: against scikit-learn's clusterers.

The ten public sets and the peers are those of ``benchmarks/defaults.py`` (scikit-learn's
"comparing clustering algorithms" example at 300 points, iris, wine, breast cancer, digits), scored
by adjusted Rand index (ARI) in one run. The other tests pin the failures that the defaults fix,
measured with the papers' widths and starts, each beside the trivial baseline (k-means).
"""

import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.datasets import load_digits, make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from algorithms.cpm3c import CPM3C
from algorithms.gmmc import GMMC
from algorithms.itersvr import IterSVR
from algorithms.kernels import local_scaling_gamma, pairwise_kernel, squared_distances
from algorithms.metrics import clustering_error
from algorithms.registry import get_spec
from algorithms.sdp_mmc import SDPMMC
from algorithms.svc import SupportVectorClustering
from benchmarks.defaults import grid_blobs, public_sets, run_suite

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def suite():
    sets = public_sets()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = run_suite(sets, list(DEFAULTS_ISSUE_ALGORITHMS), seed=0)
    return sets, {name: np.array([s.ari for s in row]) for name, row in scores.items()}


DEFAULTS_ISSUE_ALGORITHMS = ("itersvr", "cpm3c", "svc", "gmmc", "sdp_mmc")

# Accepted deviations, strict (an xfail that starts passing fails loudly); the numbers are in
# docs/defaults.md, written by ``python -m benchmarks.defaults``.
_BELOW_SPECTRAL: dict[str, str] = {}
_BELOW_KMEANS = {
    "sdp_mmc": "breast cancer more than 0.05 behind k-means: omega prefers the SDP's 1:1 split",
}


def _known(table: dict[str, str], name: str):
    if name in table:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=table[name]))
    return name


@pytest.mark.slow
@pytest.mark.parametrize("name", [_known(_BELOW_SPECTRAL, n) for n in DEFAULTS_ISSUE_ALGORITHMS])
def test_default_mean_ari_reaches_spectral_clustering_in_the_same_run(suite, name):
    _, ari = suite
    assert ari[name].mean() >= ari["spectral"].mean()


@pytest.mark.slow
@pytest.mark.parametrize("name", [_known(_BELOW_KMEANS, n) for n in DEFAULTS_ISSUE_ALGORITHMS])
def test_default_is_within_005_ari_of_k_means_on_every_public_set(suite, name):
    sets, ari = suite
    behind = [s.name for s, ours, km in zip(sets, ari[name], ari["k-means"], strict=True)
              if ours < km - 0.05]
    assert behind == []


@pytest.mark.parametrize("estimator", [IterSVR, GMMC, SDPMMC])
def test_k_way_guide_leaves_a_spectral_partition_that_k_means_beats(estimator):
    # Every second digit 1, 4 and 7 (a sweep set of benchmarks/defaults.py): the kNN graph cuts
    # the 1s (spectral ARI 0.55, k-means 0.92). With the spectral partition as the guide the
    # three bisection methods returned it; the guide at defaults is the portfolio's best
    # candidate (CPM3C's partition with portfolio=False), and the splits must not end at the
    # spectral partition.
    X, y = load_digits(return_X_y=True)
    index = np.flatnonzero(np.isin(y, (1, 4, 7)))[::2]
    X, y = X[index], y[index]
    spectral = SpectralClustering(3, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    assert adjusted_rand_score(y, spectral) < 0.6
    kmeans = adjusted_rand_score(y, KMeans(3, n_init=10, random_state=0).fit_predict(X))
    assert adjusted_rand_score(y, _fitted(estimator, 3, X).labels_) >= kmeans - 0.05


def _three_rings(n_per_ring: int = 100, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    angles = rng.uniform(0, 2 * np.pi, 3 * n_per_ring)
    y = np.repeat(np.arange(3), n_per_ring)
    radius = (1.0 + y) + rng.normal(0, 0.08, y.size)
    return np.column_stack([radius * np.cos(angles), radius * np.sin(angles)]), y


def _moons_and_circles():
    # The example's shapes and noise (0.05) with a seed of their own (the public set uses 170).
    moons = make_moons(n_samples=300, noise=0.05, random_state=3)
    circles = make_circles(n_samples=300, factor=0.5, noise=0.05, random_state=3)
    return [("moons", *moons, 2), ("circles", *circles, 2)]


def _fitted(estimator, k: int, X: np.ndarray):
    """``estimator`` with its defaults (and ``random_state=0`` where it has one) fitted to X."""
    params = {"random_state": 0} if estimator is not SupportVectorClustering else {}
    return estimator(k, **params).fit(X)


def _shape_cases():
    # SDP MMC's relaxation alone is not rank one on these moons (eigenvalues 182, 102 of M): its
    # leading eigenvector gives ARI 0.65 (margin objective 8.1), and the spectral candidate
    # (0.18) is what reaches 1.0.
    for estimator in (IterSVR, CPM3C, SupportVectorClustering, GMMC, SDPMMC):
        for name, X, y, k in _moons_and_circles():
            yield pytest.param(estimator, X, y, k, id=f"{estimator.__name__}-{name}")


@pytest.mark.parametrize(("estimator", "X", "y", "k"), list(_shape_cases()))
def test_defaults_separate_moons_and_circles_that_k_means_cannot(estimator, X, y, k):
    # Measured with the papers' widths (sigma = 3 x the bounding-box diagonal): ARI 0.0-0.5.
    kmeans = adjusted_rand_score(y, KMeans(k, n_init=10, random_state=0).fit_predict(X))
    assert kmeans < 0.6
    assert adjusted_rand_score(y, _fitted(estimator, k, X).labels_) >= 0.95


@pytest.mark.xfail(strict=True, reason=(
    "open: outer-ring points in sparse arcs have a middle-ring point among their nearest "
    "neighbours, so every kNN graph joins rings before it joins each ring's arcs and the spectral "
    "start is wrong; the margin objectives do not leave it (SpectralClustering fails alike)."))
@pytest.mark.parametrize("estimator", [IterSVR, CPM3C, SupportVectorClustering])
def test_defaults_separate_three_rings(estimator):
    X, y = _three_rings()
    assert adjusted_rand_score(y, _fitted(estimator, 3, X).labels_) >= 0.95


@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_cpm3c_keeps_every_cluster_of_separated_blobs(k):
    centers = [(8.0 * (i % 3), 8.0 * (i // 3)) for i in range(k)]
    X, y = make_blobs(n_samples=60 * k, centers=centers, cluster_std=0.8, random_state=k)
    est = CPM3C(n_clusters=k, random_state=0).fit(X)
    assert np.bincount(est.labels_, minlength=k).min() >= 50
    assert clustering_error(y, est.labels_) <= 0.02
    assert est.warnings_ == []


def test_cpm3c_keeps_ten_digit_clusters_where_free_labels_empty_them():
    # Every third digit from the second (599 points, not the held-out draw). From the spectral
    # start the paper's one-constraint first QP left four clusters and the run three (ARI 0.30);
    # the supervised start keeps them until the labels are free, and when every run then empties
    # a cluster the start's max-margin classifier is kept (ARI 0.70, k-means 0.62).
    X, y = load_digits(return_X_y=True)
    X, y = X[1::3], y[1::3]
    kmeans = adjusted_rand_score(y, KMeans(10, n_init=10, random_state=0).fit_predict(X))
    with pytest.warns(UserWarning, match="class elimination"):
        paper_start = CPM3C(n_clusters=10, random_state=0, supervised_start=False,
                            portfolio=False).fit(X)
    assert np.bincount(paper_start.labels_, minlength=10).min() == 0
    est = CPM3C(n_clusters=10, random_state=0, portfolio=False).fit(X)
    assert np.bincount(est.labels_, minlength=10).min() >= 20
    assert adjusted_rand_score(y, est.labels_) >= kmeans - 0.05
    assert "max-margin classifier of the best run's starting partition" in est.warnings_[0]
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_cpm3c_keeps_the_start_classifier_that_empties_fewer_clusters_than_the_free_runs():
    # CPM3C's own runs (no portfolio). 16 touching blobs of 5 points: both runs keep 3
    # clusters once the labels are free and both held phases (the starts' max-margin
    # classifiers) empty two. Only a held phase that kept every cluster was used, so 3 clusters
    # came back (ARI 0.16; k-means 0.40).
    X, y = grid_blobs(16, 5, 3.0, seed=0)
    kmeans = KMeans(16, n_init=10, random_state=0).fit_predict(X)
    est = CPM3C(n_clusters=16, random_state=0, portfolio=False).fit(X)
    assert np.unique(est.labels_).size >= 14
    assert adjusted_rand_score(y, est.labels_) > adjusted_rand_score(y, kmeans)
    assert "2 of 16 clusters are empty" in est.warnings_[-1]


def test_cpm3c_keeps_another_runs_start_classifier_when_the_best_runs_empties_a_cluster():
    # 24 blobs of 7 points: the best free run's held phase empties one cluster, the other's
    # none; before, the free labels came back (3 clusters, ARI 0.14).
    X, _ = grid_blobs(24, 7, 4.0, seed=1)
    est = CPM3C(n_clusters=24, random_state=0, portfolio=False).fit(X)
    assert np.unique(est.labels_).size == 24
    assert est.warnings_ == ["class elimination: every one of the 2 runs emptied a cluster once "
                             "its labels were free; kept the max-margin classifier of the "
                             "fewest-emptying run's starting partition"]


def test_cpm3c_splits_two_distinct_points_repeated():
    # Every start margin is exactly 1 here: the first constraint (14) was empty and W = 0
    # stationary, so one cluster came back.
    X = np.repeat([[0.0, 0.0], [1.0, 1.0]], 10, axis=0)
    for kernel in ("linear", "rbf"):
        labels = CPM3C(kernel=kernel, random_state=0).fit(X).labels_
        assert clustering_error(np.repeat([0, 1], 10), labels) == 0.0


def _one_point_repeated(times: int, others: np.ndarray) -> np.ndarray:
    return np.vstack([np.zeros((times, 2)), others])


@pytest.mark.parametrize("name", DEFAULTS_ISSUE_ALGORITHMS)
@pytest.mark.parametrize("X", [
    _one_point_repeated(298, [[5.0, 5.0], [5.0, 6.0]]),
    _one_point_repeated(290, np.random.RandomState(0).randn(10, 2) + 6.0),
], ids=["298 copies and two points", "290 copies and ten points"])
def test_copies_of_one_point_share_a_cluster_and_no_cluster_is_empty(name, X):
    # k = 3. Before: the bisection methods split the leaf of copies (its two single points
    # ranked as guide strays): iterSVR 153:145:2, GMMC 151:147:2, SDP MMC a ValueError (a kernel
    # of zeros); SVC left copies in two clusters; CPM3C returned two clusters for 290 + 10 (the
    # fallback counted a 3-partition's clusters of the ten as eliminated).
    labels = get_spec(name).build({"n_clusters": 3, "random_state": 0}).fit(X).labels_
    rows = np.unique(X, axis=0, return_inverse=True)[1].ravel()
    assert all(np.unique(labels[rows == row]).size == 1 for row in np.unique(rows))
    kmeans = KMeans(3, n_init=10, random_state=0).fit_predict(X)
    assert np.unique(kmeans[rows == 0]).size == 1  # the baseline keeps the copies together
    if name != "svc":  # SVC's contours treat groups under 5 % of the points as outliers
        assert np.unique(labels).size == 3
        assert adjusted_rand_score(kmeans, labels) >= 0.9


@pytest.mark.parametrize("name", DEFAULTS_ISSUE_ALGORITHMS)
@pytest.mark.parametrize(("n", "k"), [(2, 2), (3, 3), (4, 3), (5, 2)])
def test_as_many_clusters_as_asked_for_on_a_handful_of_points(name, n, k):
    # Points 5 apart on a line, in 2-D; the baseline k-means finds k clusters. Before, SVC gave
    # one cluster for n = k (a single point was a fragment) and for 5 points at k = 2 (a third
    # support vector was "too many", so p rose to its limit without a split).
    X = np.column_stack([5.0 * np.arange(n), np.zeros(n)])
    assert np.unique(KMeans(k, n_init=10, random_state=0).fit_predict(X)).size == k
    labels = get_spec(name).build({"n_clusters": k, "random_state": 0}).fit(X).labels_
    assert np.unique(labels).size == k


def test_svc_finds_thirty_clusters_each_smaller_than_five_percent_of_the_points():
    # 30 blobs of 20 points on a grid 6 apart: 5 % of 600 points is 30, so every cluster was a
    # fragment and the schedule returned 12 clusters (ARI 0.21). A fragment is now at most half
    # the mean cluster size.
    centres = 6.0 * np.array([(i, j) for i in range(6) for j in range(5)])
    X = np.repeat(centres, 20, axis=0) + np.random.RandomState(0).randn(600, 2)
    y = np.repeat(np.arange(30), 20)
    est = SupportVectorClustering(30, random_state=0).fit(X)
    kmeans = KMeans(30, n_init=10, random_state=0).fit_predict(X)
    assert est.n_clusters_ == 30
    assert adjusted_rand_score(y, est.labels_) >= adjusted_rand_score(y, kmeans) - 0.05


def test_cpm3c_on_sparse_copies_of_an_empty_row_reports_no_class_elimination():
    # 290 empty rows and ten others, k = 3: the two clusters of the ten are small in points
    # but not in distinct rows; counted in points alone, every run "eliminated" two clusters
    # and a UserWarning said so, though the labels were right.
    import scipy.sparse as sp

    others = sp.random(10, 50, density=0.3, random_state=0, format="csr")
    X = sp.vstack([sp.csr_matrix((290, 50)), others]).tocsr()
    for kernel in ("linear", "rbf"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            model = CPM3C(n_clusters=3, kernel=kernel, random_state=0).fit(X)
        assert not model.warnings_
        assert np.unique(model.labels_[:290]).size == 1
        assert np.bincount(model.labels_, minlength=3).min() >= 1


def test_itersvr_two_clusters_keep_the_run_of_smallest_omega_not_a_small_spectral_group():
    # All digits 1 and 7: the kNN graph's spectral cut is a 27:334 group (ARI 0.02), and with
    # the balance loosened to that start's imbalance objective (2) preferred it (6.2 against
    # 14.0 for the even split); omega (3.1), as GMMC and SDP MMC choose, penalises a small
    # cluster that does not separate.
    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, (1, 7))
    X, y = X[keep], y[keep]
    spectral = SpectralClustering(2, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    assert adjusted_rand_score(y, spectral) < 0.1
    assert adjusted_rand_score(y, IterSVR(n_clusters=2, random_state=0).fit(X).labels_) >= 0.95


@pytest.mark.parametrize("pair", [(5, 8), (3, 9)])
def test_svc_finds_two_clusters_of_digits_where_contours_split_with_fragments(pair):
    # Every second digit of the pair (offset 1). No q splits the 64-D contours in two without
    # small groups breaking off at any p, so the schedule returned its last clean split: one
    # cluster (ARI 0). The first sphere with two clusters of at least 5 % of the points, its
    # fragments joined to the nearest, is kept instead.
    X, y = load_digits(return_X_y=True)
    index = np.flatnonzero(np.isin(y, pair))[1::2]
    X, y = X[index], y[index]
    kmeans = adjusted_rand_score(y, KMeans(2, n_init=10, random_state=0).fit_predict(X))
    est = SupportVectorClustering(2).fit(X)
    assert np.bincount(est.labels_).min() >= 0.4 * y.size
    assert adjusted_rand_score(y, est.labels_) >= kmeans - 0.05
    assert "kept the first sphere with 2 clusters" in est.warnings_[-1]
    np.testing.assert_array_equal(est.predict(X)[est.support_], est.labels_[est.support_])


def test_svc_bounded_svs_follow_their_chain_to_a_cluster_on_digits():
    # Digits 4 and 9: 78 % of the points are bounded SVs of the sphere the schedule keeps. Joined
    # to the nearest point inside the contours they cross to the other digit's core (ARI 0.83,
    # k-means 0.90); grown outward from the contours, nearest first, they stay with their own
    # (0.97).
    X, y = load_digits(return_X_y=True)
    index = np.flatnonzero(np.isin(y, (4, 9)))
    X, y = X[index], y[index]
    kmeans = adjusted_rand_score(y, KMeans(2, n_init=10, random_state=0).fit_predict(X))
    chain = SupportVectorClustering(2, portfolio=False).fit(X)
    nearest = SupportVectorClustering(2, bounded_svs="nearest", portfolio=False).fit(X)
    assert chain.n_bounded_ >= 0.7 * y.size
    np.testing.assert_array_equal(chain.labels_[chain.support_], nearest.labels_[nearest.support_])
    assert adjusted_rand_score(y, chain.labels_) >= kmeans + 0.03
    assert adjusted_rand_score(y, nearest.labels_) < kmeans - 0.05
    np.testing.assert_array_equal(chain.predict(X)[chain.bounded_], chain.labels_[chain.bounded_])


def test_svc_returns_n_clusters_when_no_sphere_has_that_many_of_five_percent():
    # Three blobs of varied spread (the comparison example's shape at seed 2, standardized):
    # small groups break off the contours at every q before three groups of 5 % appear, up to
    # p = 0.95, so the schedule returned its last clean split, one cluster (ARI 0.00, the
    # one-cluster baseline). The sphere whose third largest group is largest is kept instead,
    # the other groups joined to the nearest of its three.
    X, y = make_blobs(n_samples=300, cluster_std=[1.0, 2.5, 0.5], random_state=2)
    X = StandardScaler().fit_transform(X)
    est = SupportVectorClustering(3).fit(X)
    assert est.n_clusters_ == 3 and np.unique(est.labels_).size == 3
    assert np.bincount(est.labels_).min() >= 0.1 * y.size
    assert adjusted_rand_score(y, est.labels_) >= 0.5
    assert est.warnings_[-1].startswith("no sphere had 3 clusters of at least 15 points")
    np.testing.assert_array_equal(est.predict(X)[est.support_], est.labels_[est.support_])


@pytest.mark.parametrize(("sizes", "grid"), [([60, 180, 180, 180], 2), ([40] + [200] * 5, 3)])
def test_itersvr_bisection_finds_unequal_clusters(sizes, grid):
    # 1:3 at k = 4 and 1:5 at k = 6. The paper's k-means starts with a class_balance + 1/k
    # balance measured 4.5 % and 9.2-15 % error on these (seeds 0-2).
    centers = [(8.0 * (i % grid), 8.0 * (i // grid)) for i in range(len(sizes))]
    X, y = make_blobs(n_samples=sizes, centers=centers, cluster_std=0.8, random_state=0)
    k = len(sizes)
    # portfolio=False: the bisection's own partition (the portfolio's is tested elsewhere).
    bisection = IterSVR(n_clusters=k, random_state=0, portfolio=False).fit(X)
    assert clustering_error(y, bisection.labels_) <= 0.005
    paper_setting = IterSVR(n_clusters=k, random_state=0, gamma="paper", init="k-means").fit(X)
    assert clustering_error(y, paper_setting.labels_) >= 0.03


@pytest.mark.parametrize("estimator", [IterSVR, CPM3C, SupportVectorClustering, GMMC])
def test_a_constant_offset_changes_no_label(estimator):
    # +1e8 on every coordinate: the expansion |x|^2 + |y|^2 - 2 x.y lost every digit (iterSVR
    # 40 %, SVC 45 % error); distances are now taken after a shift to the data's mean.
    X, y = make_blobs(n_samples=200, centers=[(0, 0), (6, 0)], cluster_std=1.0, random_state=1)
    centred = _fitted(estimator, 2, X)
    shifted = _fitted(estimator, 2, X + 1e8)
    assert clustering_error(y, centred.labels_) <= 0.01
    np.testing.assert_array_equal(shifted.labels_, centred.labels_)
    np.testing.assert_array_equal(shifted.predict(X[:20] + 1e8), centred.predict(X[:20]))


def test_sdp_mmc_offset_moves_only_points_on_its_relaxed_boundary():
    # The kernels at +1e8 differ by 2e-8, and the low-rank solve by as much: a point whose relaxed
    # label sqrt(alpha_1) v_1 is 0.001 (against ~1 for the others) may change side.
    X, y = make_blobs(n_samples=200, centers=[(0, 0), (6, 0)], cluster_std=1.0, random_state=1)
    centred = _fitted(SDPMMC, 2, X)
    shifted = _fitted(SDPMMC, 2, X + 1e8)
    assert clustering_error(y, centred.labels_) <= 0.03  # 4 of 200 points (k-means: 0)
    sure = np.abs(centred.scores_) > 1e-2 * np.abs(centred.scores_).max()
    assert np.sum(~sure) <= 2
    np.testing.assert_array_equal(shifted.labels_[sure], centred.labels_[sure])


def test_squared_distances_are_exact_far_from_the_origin():
    X = np.random.default_rng(0).normal(size=(50, 3))
    np.testing.assert_allclose(squared_distances(X + 1e8), squared_distances(X), atol=1e-6)
    np.testing.assert_allclose(pairwise_kernel(X + 1e8, X[:5] + 1e8, gamma=0.5),
                               pairwise_kernel(X, X[:5], gamma=0.5), atol=1e-9)


def test_squared_distances_are_exact_between_points_close_beside_the_spread():
    # Two groups a unit apart, each within 1e-9: a shift cannot shrink |x|, and the expansion's
    # error (~1e-16 in d^2) was a hundred times the within-group d^2 (~1e-18).
    rng = np.random.default_rng(0)
    X = np.repeat([[0.0, 0.0], [1.0, 1.0]], 20, axis=0) + 1e-9 * rng.normal(size=(40, 2))
    exact = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(squared_distances(X), exact, rtol=1e-9, atol=0)
    np.testing.assert_allclose(squared_distances(X[:7], X), exact[:7], rtol=1e-9, atol=0)


@pytest.mark.parametrize("name", DEFAULTS_ISSUE_ALGORITHMS)
def test_two_groups_far_apart_beside_their_spread_are_found(name):
    # The local width is the groups' spread (1e-9); with the expansion's distances the kernel
    # within a group was noise: iterSVR and SDP MMC split both groups at random (ARI ~0), and
    # SDP MMC stopped with an uncertified gap of 2e2.
    rng = np.random.RandomState(0)
    X = np.r_[np.zeros((50, 2)), np.ones((50, 2))] + 1e-9 * rng.randn(100, 2)
    y = np.repeat([0, 1], 50)
    labels = get_spec(name).build({"n_clusters": 2, "random_state": 0}).fit(X).labels_
    assert adjusted_rand_score(y, KMeans(2, n_init=10, random_state=0).fit_predict(X)) == 1.0
    assert adjusted_rand_score(y, labels) == 1.0


def test_local_scaling_width_of_many_points_is_that_of_a_sample_of_the_reference_size():
    # Searched among all n points the 7th neighbour comes closer as n grows (n^(-1/2) in 2-D);
    # the width of 40,000 moons is that of 2,000 of them, near the width of another 2,000.
    X, _ = make_moons(40_000, noise=0.05, random_state=0)
    pick = np.sort(np.random.RandomState(0).choice(X.shape[0], 2000, replace=False))
    gamma = local_scaling_gamma(X, random_state=0)
    assert gamma == pytest.approx(local_scaling_gamma(X[pick]))
    other, _ = make_moons(2000, noise=0.05, random_state=1)
    assert gamma == pytest.approx(local_scaling_gamma(other), rel=0.2)


def test_cpm3c_separates_moons_far_above_the_spectral_sample_size():
    # 10,000 noisy moons: the spectral start comes from 5,000 of them, the width from 2,000.
    # With the width of all points CPM3C's 300 Nystrom coordinates lost the moons; k-means cuts
    # both.
    X, y = make_moons(10_000, noise=0.05, random_state=0)
    labels = CPM3C(random_state=0).fit(X).labels_
    kmeans = KMeans(2, n_init=10, random_state=0).fit_predict(X)
    assert adjusted_rand_score(y, labels) >= 0.95 > 0.5 > adjusted_rand_score(y, kmeans)


def test_local_scaling_width_follows_the_data_scale_and_ignores_offsets():
    X, _ = make_moons(n_samples=200, noise=0.05, random_state=0)
    gamma = local_scaling_gamma(X)
    assert local_scaling_gamma(X * 1000.0 + 1e6) == pytest.approx(gamma * 1e-6, rel=1e-6)
    # sigma is the median distance to the 7th neighbour: exp(-d^2 / (2 sigma^2)).
    d7 = np.sort(np.sqrt(squared_distances(X)), axis=1)[:, 7]
    assert gamma == pytest.approx(0.5 / np.median(d7) ** 2)


def test_sdp_mmc_on_blobs_rounded_to_a_grid_is_within_005_of_k_means():
    # Most rows repeat ten times or more. With the spectral partition over the copies (groups
    # of copies) SDP MMC gave 0.834 here (k-means 1.000) and 0.93-0.96 on two other draws.
    rng = np.random.RandomState(1)
    X = np.round(np.vstack([rng.randn(300, 2), rng.randn(300, 2) + 4]) * 2) / 2
    y = np.repeat([0, 1], 300)
    kmeans = KMeans(2, n_init=10, random_state=0).fit_predict(X)
    labels = SDPMMC(n_clusters=2, random_state=0).fit(X).labels_
    assert adjusted_rand_score(y, labels) >= adjusted_rand_score(y, kmeans) - 0.05
