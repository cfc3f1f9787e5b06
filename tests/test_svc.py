"""Support vector clustering (Ben-Hur, Horn, Siegelmann and Vapnik 2001): sphere, labelings,
schedule, model.

Scaling at which the paper's q applies: iris projected on its principal components in the original
centimetres (``PCA(c).fit_transform(X)``: centred, not whitened or standardised). At that scale the
SV / bounded-SV counts are closest to Table 1 for all three rows (whitening or standardising first
gives far more SVs on 3 and 4 components), and rows 1-3 and 1-4 reproduce the misclassification
counts exactly. Row 1-2 does not reproduce at any isotropic scaling of these data (see
``test_iris_two_components_at_the_paper_q_keeps_setosa_apart_but_merges_the_overlap``).
"""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer, load_iris, make_moons
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from algorithms.inputs import arrays_to_npz_bytes, npz_bytes_to_arrays
from algorithms.kernels import squared_distances
from algorithms.metrics import clustering_error
from algorithms.registry import get_spec, model_from_export
from algorithms.svc import (
    SupportVectorClustering,
    SupportVectorClusteringParams,
)
from algorithms.svc_sphere import (
    first_sample_may_be_inside,
    join_by_chain,
    join_nearest,
    segment_factors,
    segments_inside,
    segments_inside_by_factors,
    solve_enclosing_sphere,
)
from benchmarks.svc import rings_with_a_core

LABELINGS = ("complete", "support_vectors", "knn")


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


def iris_pcs(iris, n_components):
    X, y = iris
    return PCA(n_components).fit_transform(X), y


def misclassified(y, labels):
    return round(clustering_error(y, labels) * len(y))


# --- Table 1: iris on its principal components -----------------------------------------------


def check_proposition_2_1(model, n):
    """(16): n_bsv + n_sv >= 1/C and n_bsv < 1/C, with 1/C = N p."""
    inverse_c = n * model.p_
    assert model.n_bounded_ + model.n_support_ >= inverse_c - 1e-9
    assert model.n_bounded_ < inverse_c


def test_two_far_pairs_give_the_sphere_and_the_contours_computed_by_hand():
    # Points 0, 1 | 10, 11 at q = 1: K = e^-1 within a pair and below e^-81 across. The four
    # points are alike by symmetry, so (11)'s beta is 1/4 each (all on the sphere, none bounded:
    # C = 1 > 1/4) and the dual value 1 - beta^T K beta is 1 - (1 + e^-1) / 4. The midpoint
    # of a pair lies inside (squared distance 1 - e^-0.25 + (1 + e^-1) / 4 = 0.563 against
    # R^2 = 0.658), the middle of the gap outside (about 1.342): one cluster per pair.
    X = np.array([[0.0], [1.0], [10.0], [11.0]])
    est = SupportVectorClustering(gamma=1.0, n_clusters=None, random_state=0).fit(X)
    value = 1 - (1 + np.exp(-1.0)) / 4
    assert est.objective_ == pytest.approx(value, abs=1e-6)
    assert est.radius_ == pytest.approx(np.sqrt(value), abs=1e-6)
    assert est.n_bounded_ == 0
    assert est.labels_[0] == est.labels_[1] != est.labels_[2] == est.labels_[3]
    assert list(est.predict(np.array([[0.5], [10.5]]))) == [est.labels_[0], est.labels_[2]]


def test_iris_three_components_at_the_paper_q_misclassifies_at_most_five(iris):
    X, y = iris_pcs(iris, 3)
    labels = {}
    for labeling in LABELINGS:
        model = SupportVectorClustering(gamma=7.0, p=0.70, labeling=labeling, tol=1e-6,
                                        bounded_svs="nearest").fit(X)
        labels[labeling] = model.labels_
        # Table 1, row 1-3: 4 misclassified; the test accepts <= 5. We get 4 with the paper's
        # rule for bounded SVs, the nearest point inside the contours (the default 'chain': 6).
        assert model.n_clusters_ == 3
        assert misclassified(y, model.labels_) <= 5
        # Table 1: 23 SVs and 94 bounded SVs; we get 21 and 95 (tolerance 5 each).
        assert abs(model.n_support_ - 23) <= 5 and abs(model.n_bounded_ - 94) <= 5
        check_proposition_2_1(model, len(y))
    for labeling in ("support_vectors", "knn"):
        assert adjusted_rand_score(labels["complete"], labels[labeling]) >= 0.99


def test_iris_four_components_at_the_paper_q_misclassifies_at_most_fourteen(iris):
    X, y = iris_pcs(iris, 4)
    labels = {}
    for labeling in LABELINGS:
        model = SupportVectorClustering(gamma=9.0, p=0.75, labeling=labeling, tol=1e-6,
                                        bounded_svs="nearest").fit(X)
        labels[labeling] = model.labels_
        # Table 1, row 1-4: 14 misclassified (the accepted bound). We get 14 (also with 'chain').
        assert model.n_clusters_ == 3
        assert misclassified(y, model.labels_) <= 14
        # Table 1: 34 SVs, 96 bounded SVs; we get 29 and 98 (tolerance 6 each).
        assert abs(model.n_support_ - 34) <= 6 and abs(model.n_bounded_ - 96) <= 6
        check_proposition_2_1(model, len(y))
    for labeling in ("support_vectors", "knn"):
        assert adjusted_rand_score(labels["complete"], labels[labeling]) >= 0.99


def test_ten_segment_samples_bridge_the_iris_four_component_gap_that_twenty_close(iris):
    """Why n_segment_points defaults to 20: with the paper's 10 one long segment of the complete
    graph skips over the gap between versicolor and virginica."""
    X, _ = iris_pcs(iris, 4)
    coarse = SupportVectorClustering(gamma=9.0, p=0.75, labeling="complete", n_segment_points=10,
                                     tol=1e-6).fit(X)
    assert coarse.n_clusters_ == 2


def test_iris_two_components_at_the_paper_q_keeps_setosa_apart_but_merges_the_overlap(iris):
    """Table 1 row 1-2 (q = 4.2, 1/(NC) = 0.55, 4 misclassified) does NOT reproduce on these data:
    the contours of versicolor and virginica touch, so the complete graph joins them (50 points
    misclassified). What does reproduce: the SV counts (paper 20 / 72, ours 14 / 77) and setosa
    alone in its cluster. Also checked: the paper's UCI copy of iris, standardised, min-max or
    log features before PCA, whitened or quarter-whitened scores, each at 60 isotropic scales
    (best 7 misclassified, min-max at 3.6x); versicolor + virginica alone with the paper's C
    (N = 150) or p = 0.55 (16 and 38 misclassified). Only ad-hoc anisotropic scalings found by
    searching with the labels reach 4-5 (PC1 x 1.65, PC2 x 0.90), which is fitting, not a
    scaling to state."""
    X, y = iris_pcs(iris, 2)
    model = SupportVectorClustering(gamma=4.2, p=0.55, labeling="complete", tol=1e-6).fit(X)
    assert abs(model.n_support_ - 20) <= 7 and abs(model.n_bounded_ - 72) <= 7
    check_proposition_2_1(model, len(y))
    setosa = model.labels_[y == 0]
    assert np.all(setosa == setosa[0]) and not np.any(model.labels_[y != 0] == setosa[0])


def test_iris_two_components_setosa_splits_off_at_q_one_half_without_bounded_svs(iris):
    # Section 3.2: "One of the clusters is linearly separable from the other two at q = 0.5
    # with no bounded SVs".
    X, y = iris_pcs(iris, 2)
    model = SupportVectorClustering(gamma=0.5, C=1.0).fit(X)
    assert model.n_bounded_ == 0 and model.n_clusters_ == 2
    assert misclassified(np.minimum(y, 1), model.labels_) == 0


def test_gamma_auto_finds_three_iris_clusters_on_two_components(iris):
    X, y = iris_pcs(iris, 2)
    progress = []
    # portfolio=False: the schedule's own sphere (the accepted deviation is the method's).
    model = SupportVectorClustering(3, gamma="schedule", portfolio=False).fit(
        X, progress=lambda step, objective, message: progress.append((step, message))
    )
    # Issue acceptance: <= 8 misclassified with gamma="schedule" and k = 3. We get 6 (5 with
    # bounded_svs="nearest").
    assert model.n_clusters_ == 3
    assert misclassified(y, model.labels_) <= 8
    assert model.warnings_ == []
    # The schedule starts at q = 1 / max ||xi - xj||^2 and only raises q and p.
    first = model.schedule_[0]
    assert first["gamma"] == pytest.approx(1.0 / np.max(np.sum((X[:, None] - X[None]) ** 2, -1)))
    assert first["n_clusters"] == 1
    assert model.gamma_ > first["gamma"] and model.p_ > first["p"]
    assert len(progress) >= len(model.schedule_)


# --- Figure 2: rings with a core ---------------------------------------------------------------


def test_rings_with_a_core_separate_into_three_clusters_with_outliers():
    X, y = rings_with_a_core()
    labels = {}
    for labeling in LABELINGS:
        # Figure 2(b): 1/(NC) = 0.3, q = 1.0; the bounded SVs are the outliers (-1).
        model = SupportVectorClustering(gamma=1.0, p=0.3, labeling=labeling,
                                        bounded_svs="outlier").fit(X)
        inliers = model.labels_ >= 0
        assert model.n_clusters_ == 3
        assert np.array_equal(np.flatnonzero(~inliers), model.bounded_)
        assert inliers.sum() >= 0.7 * len(y)  # (16): fewer than N p bounded SVs
        assert clustering_error(y[inliers], model.labels_[inliers]) == 0.0
        labels[labeling] = model.labels_
    for labeling in ("support_vectors", "knn"):
        assert adjusted_rand_score(labels["complete"], labels[labeling]) >= 0.99


def test_rings_without_outliers_do_not_separate_the_two_rings():
    # Figure 2(a): with C = 1 the rings cannot be told apart at q = 3.5.
    X, y = rings_with_a_core()
    model = SupportVectorClustering(gamma=3.5, C=1.0).fit(X)
    assert model.n_bounded_ == 0
    assert clustering_error(y, model.labels_) > 0.1


# --- pieces: segment test, sphere, out-of-sample, model ------------------------------------------


def test_bounded_svs_join_the_cluster_their_chain_of_points_leads_to():
    # Two labeled cores; unlabeled points arc from the left core over to the right one, each
    # 1.0-1.4 from the one before. The arc's last two points are nearest to the right core (3.2
    # and 2.5 away) and join it by the nearest labeled point.
    X = np.array([[0, 0], [0.3, 0], [3, 0], [3.3, 0],
                  [0, 1], [0, 2], [1, 3], [2, 3], [3, 2.5]], dtype=float)
    labels = np.array([0, 0, 1, 1, -1, -1, -1, -1, -1])
    np.testing.assert_array_equal(join_by_chain(X, labels)[4:], [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(join_nearest(X, labels)[4:], [0, 0, 0, 1, 1])


def prim_from_labeled(X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Reference: the unlabeled point closest to a labeled one joins its cluster, repeatedly."""
    joined = labels.copy()
    while (joined < 0).any():
        out, inside = np.flatnonzero(joined < 0), np.flatnonzero(joined >= 0)
        distances = np.linalg.norm(X[out][:, None] - X[inside][None], axis=2)
        row, col = np.unravel_index(np.argmin(distances), distances.shape)
        joined[out[row]] = joined[inside[col]]
    return joined


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chain_join_over_neighbours_equals_prim_over_all_pairs(seed):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(centre, 1.0, size=(60, 3)) for centre in (0.0, 2.5, 5.0)])
    X = np.vstack([X, X[:5]])  # duplicates: zero distances must stay edges
    labels = np.full(X.shape[0], -1)
    cores = rng.choice(X.shape[0], size=30, replace=False)
    labels[cores] = rng.integers(0, 3, size=30)
    np.testing.assert_array_equal(join_by_chain(X, labels), prim_from_labeled(X, labels))


def test_first_sample_screen_drops_only_segments_whose_first_sample_is_outside():
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(300, n_features=8, centers=3, cluster_std=2.0, random_state=0)
    X = X - X.mean(axis=0)
    sphere = solve_enclosing_sphere(X, 0.02, 0.3)
    ends = sphere.points[~sphere.bounded]
    screen = first_sample_may_be_inside(sphere, ends, squared_distances(ends), 20)
    a, b = np.triu_indices(ends.shape[0], k=1)
    t = 10 / 21  # the middle sample of 20, tested first
    inside = sphere.kernel_sum(ends[a] + t * (ends[b] - ends[a])) >= sphere.threshold
    dropped = ~screen[a, b]
    assert not np.any(inside & dropped)
    assert dropped.sum() >= 0.9 * (~inside).sum() > 0


def test_batched_segment_test_matches_a_point_by_point_check(iris):
    X, _ = iris_pcs(iris, 2)
    sphere = solve_enclosing_sphere(X, 4.2, 0.55, tol=1e-6)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(X), 60), rng.integers(0, len(X), 60)
    batched = segments_inside(sphere, X[a], X[b], n_points=10)
    t = np.arange(1, 11) / 11.0
    for i in range(60):  # reference on a handful of pairs: R(y) <= R by (13)-(14)
        ys = X[a[i]] + t[:, None] * (X[b[i]] - X[a[i]])
        expected = np.all(sphere.squared_radius_of(ys) <= sphere.radius**2 + 1e-12)
        assert batched[i] == expected
    assert 0 < batched.sum() < 60


@pytest.mark.parametrize(("n_features", "n_points"), [(2, 10), (40, 10), (40, 20)])
def test_segment_test_from_the_ends_factors_matches_the_kernel_sums(n_features, n_points):
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(400, n_features=n_features, centers=4, cluster_std=3.0, random_state=1)
    X = X - X.mean(axis=0)
    sphere = solve_enclosing_sphere(X, 5.0 / squared_distances(X).mean(), 0.2)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(X), 3000), rng.integers(0, len(X), 3000)
    factors = segment_factors(sphere, X, n_points)
    assert factors is not None  # within the memory bound: the path a segment graph takes
    from_factors = segments_inside_by_factors(sphere, factors, factors, a, b,
                                              ((X[a] - X[b]) ** 2).sum(axis=1), n_points)
    from_kernel_sums = segments_inside(sphere, X[a], X[b], n_points)
    np.testing.assert_array_equal(from_factors, from_kernel_sums)
    assert 0.05 < from_factors.mean() < 0.95  # both outcomes are tested
    # From points to the sphere points (predict's segments): two sets of factors.
    anchors = rng.integers(0, sphere.points.shape[0], 3000)
    to_anchors = segments_inside_by_factors(
        sphere, factors, segment_factors(sphere, sphere.points, n_points), a, anchors,
        ((X[a] - sphere.points[anchors]) ** 2).sum(axis=1), n_points)
    np.testing.assert_array_equal(
        to_anchors, segments_inside(sphere, X[a], sphere.points[anchors], n_points))
    assert 0.05 < to_anchors.mean() < 0.95


def test_segments_too_long_for_the_factors_are_summed_from_the_distances():
    # Two points 60 apart at gamma 1: exp(gamma t (1 - t) |a - b|^2) would overflow; the
    # segment between the two close points is inside, the long one is not.
    X = np.array([[0.0, 0.0], [60.0, 0.0], [60.5, 0.0]])
    sphere = solve_enclosing_sphere(X, 1.0, 0.5)
    factors = segment_factors(sphere, X, n_points=10)
    rows, cols = np.array([0, 1]), np.array([1, 2])
    inside = segments_inside_by_factors(sphere, factors, factors, rows, cols,
                                        ((X[rows] - X[cols]) ** 2).sum(axis=1), 10)
    np.testing.assert_array_equal(inside, [False, True])
    np.testing.assert_array_equal(inside, segments_inside(sphere, X[rows], X[cols], n_points=10))


def test_predict_labels_every_training_point_as_the_fit_on_many_features():
    from sklearn.datasets import make_blobs

    X, y = make_blobs(300, n_features=30, centers=3, cluster_std=1.0, random_state=2)
    model = SupportVectorClustering(n_clusters=3, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.9
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_sphere_radius_is_r_of_the_support_vectors_and_bounded_svs_lie_outside(iris):
    X, _ = iris_pcs(iris, 3)
    model = SupportVectorClustering(gamma=7.0, p=0.70, tol=1e-6).fit(X)
    # (14): R = R(x) on the support vectors; bounded SVs have R(x) > R.
    r2_support = model._sphere.squared_radius_of(X[model.support_])
    np.testing.assert_allclose(r2_support, model.radius_**2, atol=1e-4)
    assert np.all(model.decision_function(X[model.bounded_]) < 0)
    assert np.isclose(model.dual_coef_.sum(), 1.0)  # (3)
    # (9) per point: a stored SV stands for its row's copies (iris repeats one flower).
    copies = np.unique(X, axis=0, return_inverse=True)[1].ravel()
    assert copies.max() + 1 < X.shape[0]
    assert np.all(model.dual_coef_ <= model.C_ * np.bincount(copies)[copies[model._sphere.index]]
                  + 1e-12)


def test_predict_reproduces_training_labels_and_marks_far_points(iris):
    X, y = iris_pcs(iris, 3)
    model = SupportVectorClustering(gamma=7.0, p=0.70, bounded_svs="outlier").fit(X)
    inside = model.labels_ >= 0
    assert np.mean(model.predict(X)[inside] == model.labels_[inside]) >= 0.95
    far = X.max(axis=0) + 10.0
    assert model.predict(far[None, :])[0] == -1
    nearest = SupportVectorClustering(gamma=7.0, p=0.70).fit(X)
    assert nearest.predict(far[None, :])[0] in range(nearest.n_clusters_)
    centres = np.array([X[y == c].mean(axis=0) for c in range(3)])
    predicted = nearest.predict(centres)
    assert len(set(predicted.tolist())) == 3


def test_model_round_trip_predicts_identically(iris):
    X, _ = iris_pcs(iris, 2)
    model = SupportVectorClustering(3, gamma="schedule").fit(X)
    meta, arrays = model.to_model()
    restored = model_from_export(meta, npz_bytes_to_arrays(arrays_to_npz_bytes(arrays)))
    assert isinstance(restored, SupportVectorClustering)
    probe = np.vstack([X, X[:10] + 0.3, [[20.0, 20.0]]])
    np.testing.assert_array_equal(restored.predict(probe), model.predict(probe))
    np.testing.assert_allclose(restored.decision_function(probe), model.decision_function(probe))
    np.testing.assert_array_equal(restored.labels_, model.labels_)
    assert restored.result_extras()["n_bounded"] == model.n_bounded_


def test_n_components_fits_on_the_principal_components_as_the_paper_does(iris):
    # Table 1's protocol inside the estimator: raw iris with n_components=3 gives the labels of
    # the same fit on PCA(3)-projected iris (4 misclassified), and predict projects new points.
    X, y = iris
    paper = {"gamma": 7.0, "p": 0.70, "tol": 1e-6, "bounded_svs": "nearest"}
    projected = SupportVectorClustering(**paper).fit(iris_pcs(iris, 3)[0])
    model = SupportVectorClustering(**paper, n_components=3).fit(X)
    assert model.components_.shape == (3, 4)
    np.testing.assert_array_equal(model.labels_, projected.labels_)
    assert misclassified(y, model.labels_) <= 5
    np.testing.assert_array_equal(model.predict(X)[model.support_], model.labels_[model.support_])


def test_gamma_auto_retries_on_principal_components_where_the_input_space_has_no_two_clusters():
    # 300 standardized breast-cancer points in 30 dimensions: no q or p gives two contours of at
    # least 5 % of the points. The input space's fallback is the sphere whose second group was
    # largest (3 points; ARI 0.13 once the rest joins the nearest). On the leading two principal
    # components two contours of 5 % appear (ARI 0.58; k-means 0.64, one cluster 0).
    X, y = load_breast_cancer(return_X_y=True)
    pick = np.sort(np.random.default_rng(0).choice(y.size, 300, replace=False))
    X, y = StandardScaler().fit_transform(X[pick]), y[pick]
    input_space = SupportVectorClustering(2, n_components=None, portfolio=False).fit(X)
    assert input_space.warnings_[-1].startswith("no sphere had 2 clusters of at least 15 points")
    assert adjusted_rand_score(y, input_space.labels_) < 0.3
    model = SupportVectorClustering(2).fit(X)
    assert model.n_clusters_ == 2 and model.components_.shape == (2, 30)
    assert "principal components" in model.warnings_[-1]
    assert adjusted_rand_score(y, model.labels_) >= 0.5
    meta, arrays = model.to_model()
    restored = model_from_export(meta, npz_bytes_to_arrays(arrays_to_npz_bytes(arrays)))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert np.mean(model.predict(X) == model.labels_) >= 0.95


def test_estimator_clones_and_reports_extras(iris):
    X, _ = iris_pcs(iris, 2)
    model = clone(SupportVectorClustering(gamma=0.5, labeling="knn"))
    extras = model.fit(X).result_extras()
    assert extras["n_clusters"] == 2 and extras["n_support"] == model.n_support_
    assert extras["gamma"] == 0.5 and extras["n_bounded"] == 0


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"C": 1.0, "p": 0.5}, "C or p"),
        ({"p": 1.0}, "p"),
        ({"gamma": -1.0}, "gamma"),
        ({"labeling": "delaunay"}, "labeling"),
        ({"n_clusters": 1}, "n_clusters"),
        ({"bounded_svs": "drop"}, "bounded_svs"),
        ({"n_components": 0}, "n_components"),
    ],
)
def test_invalid_parameters_are_rejected_with_the_field_named(params, fragment):
    with pytest.raises(ValueError, match=fragment):
        SupportVectorClustering(**params).fit(np.random.default_rng(0).normal(size=(20, 2)))
    with pytest.raises(ValueError):
        SupportVectorClusteringParams(**params)


def test_bad_data_is_rejected_with_a_message_that_says_what_to_fix():
    model = SupportVectorClustering(gamma=1.0)
    with pytest.raises(ValueError, match="NaN"):
        model.fit([[0.0, 1.0], [np.nan, 2.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="2D"):
        model.fit([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="identical"):
        model.fit(np.ones((10, 2)))
    points = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="1/N"):
        SupportVectorClustering(gamma=1.0, C=0.01).fit(points)
    with pytest.raises(ValueError, match="n_clusters"):
        SupportVectorClustering(5, gamma="schedule").fit([[0.0], [1.0], [2.0]])
    fitted = SupportVectorClustering(gamma=1.0).fit(points)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.zeros((3, 5)))


def test_registered_on_the_fast_queue_with_exact_fits_limited_below_sampled_ones():
    spec = get_spec("svc")
    assert spec.estimator is SupportVectorClustering and spec.queue == "fast"
    limit = {name: spec.max_n_for(spec.parse_params(params)) for name, params in {
        "sampled": {}, "exact": {"exact_max_n": None},
        "exact complete": {"exact_max_n": None, "labeling": "complete"},
        "large sample": {"exact_max_n": 20_000},
    }.items()}
    assert limit["exact complete"] < limit["exact"] < limit["sampled"]
    assert limit["large sample"] == limit["exact"]


# --- large n: a sample's contours label every point ----------------------------------------------


def test_large_n_path_fits_a_sample_and_labels_every_point_by_predict():
    # 1,200 noisy moons, the sphere and its contours from 300 of them: every point still lands
    # on its moon, where k-means cuts both.
    X, y = make_moons(1200, noise=0.05, random_state=0)
    model = SupportVectorClustering(2, exact_max_n=300, random_state=0).fit(X)
    assert not model.exact_ and model.n_fit_samples_ == 300
    assert model.labels_.shape == (1200,)
    np.testing.assert_array_equal(model.labels_, model.predict(X))
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    kmeans = KMeans(2, n_init=10, random_state=0).fit_predict(X)
    assert adjusted_rand_score(y, kmeans) < 0.6
    # The support vectors are rows of X, and the same seed draws the same sample.
    free = model.support_vectors_[~model._sphere.bounded]
    np.testing.assert_allclose(np.sort(X[model.support_] - model.center_, axis=0),
                               np.sort(free, axis=0))
    again = SupportVectorClustering(2, exact_max_n=300, random_state=0).fit(X)
    np.testing.assert_array_equal(again.labels_, model.labels_)
    assert SupportVectorClustering(2, exact_max_n=None).fit(X[:200]).exact_


def test_sampled_outliers_are_every_point_outside_the_sphere():
    X, _ = make_moons(800, noise=0.08, random_state=1)
    model = SupportVectorClustering(2, exact_max_n=200, bounded_svs="outlier",
                                    portfolio=False, random_state=0).fit(X)
    np.testing.assert_array_equal(model.outliers_, np.flatnonzero(model.labels_ == -1))
    assert np.isin(model.bounded_, model.outliers_).all()
    assert model.outliers_.size > model.bounded_.size
