"""SDP maximum margin clustering (Xu thesis ch. 3-4): accuracy against the thesis, solver status,
progress, semi-supervised constraints, out-of-sample model, and the shared rounding helpers.

Sizes follow the thesis (50-100 points): each SDP solve takes a few seconds with SCS.
"""

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs
from sklearn.svm import SVC

from algorithms.conic import SDPSolverError, check_solver_status
from algorithms.kernels import pairwise_kernel
from algorithms.metrics import clustering_error
from algorithms.registry import get_spec
from algorithms.rounding import balanced_signs, labels_from_label_matrix, randomized_rounding
from algorithms.sdp_mmc import (
    PAPER_SETTING,
    SDPMMC,
    SDPMMCParams,
    median_heuristic_gamma,
)
from algorithms.sdp_mmc_programs import (
    _margin_objective_by_qp,
    multiclass_margin_objective,
    solve_multiclass_sdp,
    solve_multiclass_sdp_symmetric,
)
from algorithms.selection.margin import margin_kernel, two_class_margin_objective
from benchmarks.gmmc import two_circles, two_gaussians
from benchmarks.sdp_mmc import (
    digits_subset,
    joined_circles,
    semi_supervised_classes,
    semi_supervised_digits,
)
from tests.baselines import kmeans_error

# --- thesis Table 3.1 (two-class clustering, error %) -------------------------------------------

@pytest.mark.parametrize(("points", "omega"), [((-2, -1, 1, 2), 0.0125), ((-3, -1, 1, 3), 0.025)])
def test_two_pairs_on_a_line_split_at_the_gap_with_omega_computed_by_hand(points, omega):
    # Linear kernel scaled to trace(K) = n: the points become x / rms(x), so the inner pair sits
    # at +-1/sqrt(2.5) (points -2, -1, 1, 2) or +-1/sqrt(5) (-3, -1, 1, 3). The split at the gap
    # is separable; its hard margin needs ||w||^2 = 2.5 or 5, and (3.5)'s omega at C = 100 is
    # beta/2 ||w||^2 = 0.005 ||w||^2, the relaxation being tight.
    X = np.array(points, dtype=float)[:, None]
    est = SDPMMC(n_clusters=2, kernel="linear", random_state=0).fit(X)
    assert est.labels_[0] == est.labels_[1] != est.labels_[2] == est.labels_[3]
    assert est.objective_ == pytest.approx(omega, rel=1e-4)
    assert list(est.predict(np.array([[-1.5], [1.5]]))) == [est.labels_[0], est.labels_[2]]


def test_two_gaussians_error_at_most_2_5_percent():
    # Thesis Table 3.1 "Gaussians": 1.2 %. Two unit Gaussians 4 sd apart, 40 points each,
    # numpy default_rng(2) (benchmarks.gmmc.two_gaussians): Bayes error 2.3 %, the accepted 2.5 %.
    X, y = two_gaussians(seed=2)
    model = SDPMMC(random_state=0, **PAPER_SETTING).fit(X)
    assert clustering_error(y, model.labels_) <= 0.025 + 1e-9  # 2 of 80 points
    assert model.warnings_ == []
    # Baseline: k-means also gets 2.5 % here (the Bayes error); SDP MMC does NOT beat it on this
    # set (thesis: 1.2 vs k-means 5), so only a tie is asserted.
    assert clustering_error(y, model.labels_) <= kmeans_error(X, y, 2) + 1e-9


def test_two_circles_are_separated_without_error():
    # Thesis Table 3.1 "Circles": 0 %. Concentric rings, radius ratio 0.4, noise 0.03, 80 points
    # (sklearn make_circles, random_state=0); narrow RBF, sigma = 0.25 (gamma = 16).
    X, y = two_circles()
    model = SDPMMC(gamma=16.0, spectral_candidate=False, random_state=0).fit(X)
    assert clustering_error(y, model.labels_) == 0.0
    assert kmeans_error(X, y, 2) >= 0.4  # k-means cuts the rings in half (48.75 %)


def test_joined_circles_error_at_most_2_percent():
    # Thesis Table 3.1 "Joined Circles": 1.0 % (spectral 24 %, k-means 50 %). Two unit rings of
    # 50 points each, touching up to a gap of 0.4, noise 0.02 (benchmarks.sdp_mmc.joined_circles).
    X, y = joined_circles()
    model = SDPMMC(gamma=32.0, spectral_candidate=False, random_state=0).fit(X)
    assert clustering_error(y, model.labels_) <= 0.02 + 1e-9
    # Baseline: these rings are separable by k-means too (0 %, where the thesis reports 50 % on
    # its set), so this case cannot show SDP MMC beating k-means; a tie is asserted.
    assert clustering_error(y, model.labels_) <= kmeans_error(X, y, 2) + 1e-9


@pytest.mark.parametrize(("pair", "bound", "margin"),
                         [((3, 8), 0.05, 0.01), ((2, 7), 0.05, 0.02), ((8, 9), 0.10, 0.005)])
def test_digit_pairs_with_50_points_per_class(pair, bound, margin):
    # iterSVR paper Table 3 setting: 50 points per class, drawn at random as the paper samples
    # them (RandomState(0), the same draw for every pair); thesis Table 3.1 digits 3.0 %.
    # Issue bound 5 %. 8-9 deviates (iterSVR Table 3: 3 %): this draw gives 9 %, and on this draw
    # randomized rounding finds balanced labelings with a SMALLER margin objective omega(yy^T)
    # than the true one (0.144 vs 0.148), so the exact maximum margin labeling itself is wrong
    # here and no rounding can fix it. Widths 1/8..4x median and sigma = 2..5 D (iterSVR), linear,
    # eps 0..0.2, beta 0.01..1, uncentred: 8-12 % with the eigenvector on every random draw tried
    # (`python -m benchmarks.sdp_mmc --digits-89`). Also tried over 8 draws (mean error): the
    # multi-class SDP (4.8) with k = 2 (Xu & Schuurmans' setting) 10 %, sqrt or unit-length
    # rows 5.3 / 4.5 % with randomized rounding (the draw here 10 / 5 %), rank-10..40 kernels
    # 8-9 %, beta 0.001..1 with randomized rounding 6.9-7.9 %, 400 hyperplanes 5.3 %.
    # The per-draw bound is a property of the draw (`python -m benchmarks.sdp_mmc --draws 20`):
    # over RandomState(0..19) the eigenvector labels are within 5 % on 13 of 20 draws for 3-8
    # (mean 5.25 %, 1-12 %), 20 of 20 for 2-7 (mean 1.1 %) and 7 of 20 for 8-9 (mean 6.95 %,
    # 1-13 %; randomized rounding 12 of 20, mean 5.65 %). Pinned at 10 % to catch regressions.
    # Baseline, k-means on the same 100 points: 3-8 3.0 %, 2-7 6.0 %, 8-9 10.0 % against SDP MMC
    # 1.0, 2.0, 9.0 (margins asserted: 1, 2 and 0.5 points).
    X, y = digits_subset(pair, 50, seed=0)
    model = SDPMMC(random_state=0, **PAPER_SETTING).fit(X)
    assert clustering_error(y, model.labels_) <= bound + 1e-9
    assert clustering_error(y, model.labels_) <= kmeans_error(X, y, 2) - margin + 1e-9


# --- thesis Table 4.1 (multi-class) -------------------------------------------------------------

def test_digits_0689_with_20_per_class_error_at_most_12_percent():
    # Thesis Table 4.1 "DigitsA0689" (20 of 39 per class): 11.6 +- 1.8 %; accepted bound 12 %.
    X, y = digits_subset((0, 6, 8, 9), 20, seed=0)
    model = SDPMMC(n_clusters=4, random_state=0, **PAPER_SETTING).fit(X)
    assert clustering_error(y, model.labels_) <= 0.12 + 1e-9
    # objective_ is the margin objective omega of Theorem 2 at the labels: non-negative (Lambda
    # = Y gives 0) and of the order of the true labels' (0.083 vs 0.096 measured), not the
    # relaxation's -26,229.
    assert 0.0 <= model.objective_ < 1.0 and model.relaxation_objective_ < -1000.0
    # Baseline: k-means gets 6.25 % on the same 80 points (thesis: 38.3 % on its set); SDP MMC
    # (4.8) gets the same 6.25 % and does NOT beat it here, so a tie is asserted.
    assert clustering_error(y, model.labels_) <= kmeans_error(X, y, 4) + 1e-9
    assert model.assignment_.shape == (80, 4)
    assert np.allclose(np.diag(model.label_matrix_), 1.0, atol=1e-2)
    # The collapsed program runs on the low-rank solver, which reports its certificate.
    assert model.solver_ == "lowrank" and model.certificate_["relative_gap"] is not None


def test_a_refit_reports_only_its_own_extras():
    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    model = SDPMMC(random_state=0).fit(X)
    assert "certificate" in model.result_extras()
    model.set_params(solver="scs").fit(X)
    assert "certificate" not in model.result_extras()


def test_multiclass_margin_objective_by_liblinear_equals_the_dual_qp():
    # objective_ of a multi-class fit: Crammer & Singer's primal by liblinear against the dual QP
    # by Clarabel (measured 3e-5 apart here; on 600 digits with k = 10, 0.16 s against 30 s).
    X, y = digits_subset((0, 6, 8, 9), 20, seed=0)
    K = margin_kernel(pairwise_kernel(X, gamma=median_heuristic_gamma(X)))
    labels = np.searchsorted([0, 6, 8, 9], y)
    exact = _margin_objective_by_qp(K, labels, 4, 0.01)
    assert multiclass_margin_objective(K, labels, 4, 0.01) == pytest.approx(exact, rel=1e-4)
    wrong = np.roll(labels, 7)  # a worse labeling has a larger inverse squared margin
    assert multiclass_margin_objective(K, wrong, 4, 0.01) > 2 * exact


def test_unsupervised_multiclass_relaxation_collapses_to_the_symmetric_program():
    # solve_multiclass_sdp_symmetric's derivation: at the optimum of (4.8) D = d e^T and
    # omega = n - e^T d - <K, M> / (2 beta); beta only weighs e^T d, so the labels do not move.
    X, _ = digits_subset((0, 6, 8, 9), 12, seed=1)
    K = margin_kernel(pairwise_kernel(X, gamma=median_heuristic_gamma(X)))
    n = K.shape[0]
    M, D, omega, _, _ = solve_multiclass_sdp(K, 4, beta=0.01, balance=0.1)
    assert np.abs(D - D.mean(axis=1, keepdims=True)).max() < 1e-3  # equal columns
    M_sym, _, omega_sym, _, _ = solve_multiclass_sdp_symmetric(K, 4, beta=0.01, balance=0.1)
    # Same optimum (the general program's value omits Theorem 2's constant n).
    assert omega + n == pytest.approx(omega_sym, rel=2e-3)
    assert np.sum(K * M) == pytest.approx(np.sum(K * M_sym), rel=2e-3)
    same = labels_from_label_matrix(M, 4, random_state=0)
    assert clustering_error(same, labels_from_label_matrix(M_sym, 4, random_state=0)) == 0.0
    wide = SDPMMC(n_clusters=4, C=1.0, random_state=0, **PAPER_SETTING).fit(X)
    narrow = SDPMMC(n_clusters=4, C=100.0, random_state=0, **PAPER_SETTING).fit(X)
    assert clustering_error(wide.labels_, narrow.labels_) == 0.0


# --- semi-supervised (thesis section 3.5, Table 3.2; section 4.3) -------------------------------

def test_semi_supervised_digits_1_7_transductive_error_at_most_4_3_percent():
    # Thesis Table 3.2 "Digits 1-7": 3.3 %; 50 per class, 1/10 labeled, linear kernel, beta 0.01.
    X, y, partial = semi_supervised_digits((1, 7), 50, labeled_share=0.1, seed=0)
    model = SDPMMC(kernel="linear", random_state=0).fit(X, partial)
    unknown = partial < 0
    assert np.array_equal(model.labels_[~unknown], partial[~unknown])
    assert np.mean(model.labels_[unknown] != y[unknown]) <= 0.043 + 1e-9
    # Baseline of Table 3.2: the supervised SVM on the 10 labeled points alone, 7.8 % on the
    # unlabeled ones (SDP MMC 3.3 % on the low-rank solver, the thesis's number; 0 % with SCS);
    # margin asserted 4 points.
    svm = SVC(kernel="linear", C=100.0).fit(X[~unknown], partial[~unknown])
    svm_error = np.mean(svm.predict(X[unknown]) != y[unknown])
    assert np.mean(model.labels_[unknown] != y[unknown]) <= svm_error - 0.04


def test_semi_supervised_multiclass_keeps_labels_and_names_clusters_by_class():
    X, y = make_blobs(n_samples=36, centers=[[0, 0], [6, 0], [0, 6]], random_state=3)
    partial = -np.ones(36, dtype=int)
    for c in range(3):
        partial[np.flatnonzero(y == c)[:2]] = c
    model = SDPMMC(n_clusters=3, random_state=0, **PAPER_SETTING).fit(X, partial)
    known = partial >= 0
    assert np.array_equal(model.labels_[known], partial[known])
    assert model.solver_ == "scs"  # labels break (4.8)'s symmetry: the cvxpy formulation
    # Cluster r is class r (no matching). Baselines: the SVM on the 6 labeled points and k-means
    # both get every unlabeled point right. The former rounding (argmax of D plus affinity to
    # the labeled points) did not spread the labels (M between labeled and unlabeled points
    # 0-0.015) and got 77 %; clusters of M's unlabeled block matched to the classes get all.
    svm = SVC(kernel="rbf", C=100.0, gamma=model.gamma_).fit(X[known], partial[known])
    assert np.mean(svm.predict(X[~known]) == y[~known]) == 1.0
    assert np.mean(model.labels_[~known] == y[~known]) == 1.0


def test_semi_supervised_multiclass_with_fewer_unlabeled_points_than_clusters():
    # Two unlabeled points cannot be clustered into three groups by k-means (it raised); the
    # affinity rule labels them.
    X, y = make_blobs(n_samples=12, centers=[[0, 0], [6, 0], [0, 6]], random_state=3)
    partial = y.copy()
    partial[[0, 5]] = -1
    model = SDPMMC(n_clusters=3, random_state=0, **PAPER_SETTING).fit(X, partial)
    assert np.array_equal(model.labels_, y)


def test_partial_labels_outside_the_clusters_are_rejected():
    X, _ = make_blobs(n_samples=20, centers=2, random_state=0)
    y = -np.ones(20, dtype=int)
    y[0] = 5
    with pytest.raises(ValueError, match="partial labels"):
        SDPMMC().fit(X, y)

def test_semi_supervised_multiclass_labels_do_not_hang_on_the_solvers_early_stop():
    # Solved accurately, (4.8)'s M links no unlabeled point to a class (flat affinities), so a
    # rounding that read classes off M would depend on where SCS stops. The clusters of M's
    # unlabeled block are matched to the classes by kernel affinity instead: the same labels at
    # two tolerances a decade apart (20 digits per class, 1/10 labeled), and fewer errors than the
    # SVM trained on the labeled points.
    X, y, partial = semi_supervised_classes((6, 8, 9), 20, 2)
    unknown = partial < 0
    errors = []
    for tol in (1e-3, 1e-4):
        model = SDPMMC(n_clusters=3, random_state=0, sdp_tol=tol, sdp_max_iter=100_000,
                       **PAPER_SETTING).fit(X, partial)
        errors.append(np.mean(model.labels_[unknown] != y[unknown]))
    svm = SVC(C=100.0, gamma=model.gamma_).fit(X[~unknown], partial[~unknown])
    svm_error = np.mean(svm.predict(X[unknown]) != y[unknown])
    assert errors[0] == errors[1], errors
    assert errors[1] <= svm_error - 0.05, (errors, svm_error)


# --- solver status, progress, rounding -------------------------------------------------------

def test_infeasible_sdp_raises_with_the_solver_status():
    # Every point labeled class 0 forces M = ee^T (S1), whose row sums n break the balance bound.
    from algorithms.sdp_mmc_programs import solve_two_class_sdp

    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    with pytest.raises(SDPSolverError, match="infeasible"):
        solve_two_class_sdp(K, beta=1.0, limit=3.0, y_partial=np.ones(30))


@pytest.mark.parametrize(("k", "multiclass", "labels"), [
    (2, "bisection", [0] * 30),  # the solver found the SDP infeasible after its iterations
    (3, "joint", [2] * 20 + [-1] * 10),
])
def test_labels_that_break_the_balance_are_refused_before_any_solve(k, multiclass, labels):
    X, _ = make_blobs(n_samples=30, centers=k, random_state=0)
    band = "class_balance" if k == 2 else "size_band"  # (3.5)'s label sum, (4.8)'s sizes
    with pytest.raises(ValueError, match=rf"more than {band}=0\.1 allows"):
        SDPMMC(n_clusters=k, multiclass=multiclass).fit(X, np.array(labels))


def test_inaccurate_solve_is_reported_in_warnings():
    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    model = SDPMMC(solver="scs", sdp_max_iter=10).fit(X)
    assert any("optimal_inaccurate" in w for w in model.warnings_)
    assert model.result_extras()["warnings"] == model.warnings_


def test_check_solver_status_maps_statuses():
    assert check_solver_status("optimal", solver="SCS", what="x") == []
    assert len(check_solver_status("optimal_inaccurate", solver="SCS", what="x")) == 1
    for status in ("infeasible", "unbounded", "user_limit", None):
        with pytest.raises(SDPSolverError, match="SCS failed on x"):
            check_solver_status(status, solver="SCS", what="x")


def test_progress_reports_building_solving_and_rounding():
    X, _ = make_blobs(n_samples=30, centers=2, random_state=0)
    events = []
    SDPMMC(random_state=0).fit(X, progress=lambda s, o, m: events.append((s, m)))
    messages = " | ".join(m for _, m in events)
    for word in ("building", "solving", "rounding"):
        assert word in messages
    steps = [s for s, _ in events]
    assert steps == sorted(steps)


def test_randomized_rounding_never_worse_than_the_eigenvector_in_objective():
    X, _ = two_gaussians(seed=2)
    # The rounding alone: with the portfolio, labels_ may be a candidate partition instead.
    model = SDPMMC(rounding="randomized", n_rounding=20, spectral_candidate=False,
                   portfolio=False, random_state=0).fit(X)
    eigen = SDPMMC(spectral_candidate=False, portfolio=False, random_state=0).fit(X)
    from algorithms.rounding import psd_factor

    Z = psd_factor(margin_kernel(pairwise_kernel(X, gamma=eigen.gamma_)))
    eigen_value = two_class_margin_objective(Z, np.where(eigen.labels_ == 1, 1.0, -1.0), 0.01)
    assert model.rounded_objective_ <= eigen_value + 1e-9
    # The reported objective is that of the labels returned, not of some other candidate.
    returned = two_class_margin_objective(Z, np.where(model.labels_ == 1, 1.0, -1.0), 0.01)
    assert model.rounded_objective_ == pytest.approx(returned, rel=1e-3)  # liblinear tol 1e-5
    assert abs(np.count_nonzero(model.labels_) - 40) <= 0.1 * 80 / 2  # balance kept


def test_randomized_rounding_picks_a_hyperplane_when_the_eigenvector_is_not_best():
    # M = V V^T with V = [2 a, b]: the leading eigenvector is the labeling a, the objective
    # prefers the orthogonal labeling b, which only hyperplanes with |r_2| > 2 |r_1| give
    # (probability about 0.3 each). A rounding that kept candidate 0 (the eigenvector) fails.
    a = np.r_[np.ones(8), -np.ones(8)]
    b = np.tile([1.0, -1.0], 8)
    V = np.column_stack((2.0 * a, b))
    y, value, winner = randomized_rounding(V @ V.T, lambda v: -abs(v @ b), limit=0,
                                           n_trials=30, random_state=0)
    assert winner > 0
    assert abs(y @ b) == 16 and value == -16
    _, eigen_value, _ = randomized_rounding(V @ V.T, lambda v: -abs(v @ b), limit=0,
                                            n_trials=0, random_state=0)
    assert eigen_value == 0  # the eigenvector alone: orthogonal to b


# --- out-of-sample model and export -------------------------------------------------------------

def test_out_of_sample_svm_reproduces_training_labels_and_round_trips():
    X, _ = two_gaussians(seed=2)
    model = SDPMMC(random_state=0).fit(X)
    assert np.mean(model.predict(X) == model.labels_) >= 0.95
    meta, arrays = model.to_model()
    clone = SDPMMC.from_model(meta, arrays)
    assert np.array_equal(clone.predict(X), model.predict(X))
    assert np.allclose(clone.decision_function(X), model.decision_function(X))


# --- shared helpers and registry ----------------------------------------------------------------

def test_balanced_signs_respects_the_balance_limit():
    scores = np.r_[np.ones(9), -np.ones(1)]  # 9 positive of 10
    y = balanced_signs(scores, limit=2)
    assert abs(y.sum()) <= 2 and set(np.unique(y)) == {-1.0, 1.0}


def test_randomized_rounding_finds_the_planted_labels_of_a_rank_one_matrix():
    truth = np.r_[np.ones(6), -np.ones(6)]
    y, value, _ = randomized_rounding(np.outer(truth, truth), lambda v: -abs(v @ truth),
                                      limit=0, n_trials=5, random_state=0)
    assert abs(y @ truth) == 12 and value == -12


def test_labels_from_label_matrix_recovers_blocks():
    truth = np.repeat([0, 1, 2], 5)
    M = (truth[:, None] == truth[None, :]).astype(float)
    assert clustering_error(truth, labels_from_label_matrix(M, 3, random_state=0)) == 0.0


def test_registry_routes_to_slow_queue_with_separate_limits():
    spec = get_spec("sdp_mmc")
    two, four = SDPMMCParams(exact_max_n=None), SDPMMCParams(n_clusters=4, multiclass="joint")
    assert spec.queue_for(two) == "slow" and spec.labels == "optional"
    assert spec.max_n_for(two) > spec.max_n_for(four) >= 80
    # Bisection solves (3.5) on the low-rank solver: the two-class limit.
    assert spec.max_n_for(SDPMMCParams(n_clusters=4, exact_max_n=None)) == spec.max_n_for(two)
    # A sampled fit solves over exact_max_n points whatever n: only its labelling grows.
    assert spec.max_n_for(SDPMMCParams()) == 1_000_000 > spec.max_n_for(two)
    assert spec.max_n_for(SDPMMCParams(n_clusters=4, multiclass="joint", exact_max_n=300)) \
        == 1_000_000
    assert "exact_max_n=800" in spec.notes["large_n"]


def test_digits_subset_is_balanced_and_reproducible():
    X, y = digits_subset((0, 6, 8, 9), 20, seed=0)
    X2, _ = digits_subset((0, 6, 8, 9), 20, seed=0)
    assert np.array_equal(X, X2) and np.bincount(y)[[0, 6, 8, 9]].tolist() == [20] * 4
    assert X.shape[1] == load_digits().data.shape[1]


def test_default_width_separates_touching_gaussians_as_well_as_k_means():
    X, y = two_gaussians(n=450, seed=2)
    model = SDPMMC(random_state=0).fit(X)
    assert clustering_error(y, model.labels_) <= kmeans_error(X, y, 2) + 0.01


def test_more_than_two_clusters_by_guided_bisection_beat_k_means_and_export():
    # Two moons and a blob: each split is (3.5) on one cluster's points, allowed the imbalance
    # of its spectral start (1:2 at the first split); k-means cuts the moons (16 % error).
    from sklearn.datasets import make_moons

    moons, moon = make_moons(200, noise=0.05, random_state=0)
    blob = np.random.default_rng(0).normal([3.5, 0.0], 0.2, size=(100, 2))
    X, y = np.vstack([moons, blob]), np.r_[moon, np.full(100, 2)]
    steps = []
    model = SDPMMC(n_clusters=3, random_state=0).fit(X, progress=lambda s, o, m: steps.append(s))
    assert steps == sorted(steps) and len(steps) > 5  # one running count over the splits
    assert kmeans_error(X, y, 3) >= 0.1
    assert clustering_error(y, model.labels_) == 0.0
    assert model.solver_ == "lowrank" and model.certificate_["status"] == "optimal"
    assert np.mean(model.predict(X) == model.labels_) >= 0.99
    meta, arrays = model.to_model()
    np.testing.assert_array_equal(SDPMMC.from_model(meta, arrays).predict(X), model.predict(X))


def test_partial_labels_with_more_than_two_clusters_need_the_joint_program():
    X, y = digits_subset((6, 8, 9), 10, seed=0)
    partial = np.where(np.arange(y.size) % 5 == 0, np.searchsorted([6, 8, 9], y), -1)
    with pytest.raises(ValueError, match="multiclass='joint'"):
        SDPMMC(n_clusters=3).fit(X, partial)
    spec = get_spec("sdp_mmc")
    message = spec.check_labels(SDPMMCParams(n_clusters=3), partial.tolist())
    assert "multiclass='joint'" in message
    joint = SDPMMCParams(n_clusters=3, multiclass="joint")
    assert spec.check_labels(joint, partial.tolist()) is None
    assert spec.check_labels(SDPMMCParams(n_clusters=3), [-1] * y.size) is None


@pytest.mark.parametrize(("k", "multiclass"), [(3, "bisection"), (5, "bisection"),
                                               (6, "bisection"), (4, "joint")])
def test_every_cluster_is_non_empty_for_every_k(k, multiclass):
    # Blobs of unequal sizes (the last one a third of the others), k-means as the baseline.
    sizes = [24] * (k - 1) + [8]
    centers = [(6.0 * (i % 3), 6.0 * (i // 3)) for i in range(k)]
    X, y = make_blobs(n_samples=sizes, centers=centers, cluster_std=0.6, random_state=k)
    model = SDPMMC(n_clusters=k, multiclass=multiclass, random_state=0).fit(X)
    assert np.bincount(model.labels_, minlength=k).min() >= 1
    # k-means makes no error on these; with the spectral partition as the guide SDP MMC
    # misplaced 2 of 128 points at k = 6, with CPM3C's none.
    assert clustering_error(y, model.labels_) <= kmeans_error(X, y, k) + 0.02


def test_repeated_rows_are_solved_once_with_their_copies_and_labelled_alike():
    # One point 299 times and one other: over all the copies the solver stalled at a certified
    # gap of 3e2 and stopped (a warning), and 1,999 + 1 points took 510 s; over the distinct
    # rows, each weighted by its copies, it certifies at once.
    X = np.zeros((300, 2))
    X[-1] = 5.0
    model = SDPMMC(random_state=0).fit(X)
    assert not any("gap" in warning for warning in model.warnings_)
    assert model.certificate_["relative_gap"] <= model.sdp_tol
    assert np.bincount(model.labels_).tolist() == [299, 1]


def test_above_exact_max_n_the_relaxation_is_solved_on_a_sample_and_the_svm_labels_all():
    X, y = two_gaussians(n=600, seed=3)
    X[y == 1, 0] += 4.0  # 8 standard deviations apart: a Bayes error of 3e-5
    # portfolio=False: the relaxation's own sample and out-of-sample SVM are what is tested.
    est = SDPMMC(exact_max_n=150, random_state=0, portfolio=False).fit(X)
    assert est.n_fit_samples_ == 150 and est.label_matrix_.shape == (150, 150)
    assert est.labels_.shape == (600,)
    np.testing.assert_array_equal(est.labels_, est.predict(X))
    np.testing.assert_array_equal(est.fit_decision_values(X, 1000, lambda *_: None),
                                  est.decision_function(X))
    # One cluster for all, the trivial baseline, errs on half the points.
    assert clustering_error(y, est.labels_) <= 0.02 < clustering_error(y, np.zeros(600, int))
    assert est.result_extras()["n_fit_samples"] == 150
    exact = SDPMMC(exact_max_n=None, random_state=0, portfolio=False).fit(X[:200])
    assert exact.n_fit_samples_ == 200 and exact._fit_decision is None


def test_a_sampled_semi_supervised_fit_keeps_every_labelled_point_and_its_label():
    X, y = two_gaussians(n=400, seed=4)
    partial = np.full(400, -1)
    known = np.r_[0:10, 390:400]
    partial[known] = y[known]
    est = SDPMMC(exact_max_n=100, random_state=0).fit(X, partial)
    assert est.n_fit_samples_ == 100
    np.testing.assert_array_equal(est.labels_[known], y[known])
    assert clustering_error(y, est.labels_) < 0.1
    partial[:120] = 0
    with pytest.raises(ValueError, match="do not fit in the sample of exact_max_n=100"):
        SDPMMC(exact_max_n=100).fit(X, partial)
