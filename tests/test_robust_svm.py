"""RobustSVM (thesis chapter 6): REH and ROD SDPs and the ramp alternation against the SVM.

The section 6.5 experiment is run at the size of the tests: 20 training points per class plus 10
ring outliers (n = 50) and 1,000 test points per class (``benchmarks.robust_svm.ring_draw``); its
mean over 10 draws at R = 55 (thesis Figures 6.7 and 6.10) is checked by
``python -m benchmarks.paper_tables``. The SDPs of this module take about 1-2 s each
with SCS (eps 1e-4, the default). The thesis' offset-free classifier (fit_intercept=False) and the
default (fit_intercept=True) are both run. Trivial baselines beside every accuracy test: the
majority class (50 % test error on the balanced test set) and the plain soft-margin SVM.
"""

import numpy as np
import pytest
from sklearn.svm import SVC

from algorithms.inputs import arrays_to_npz_bytes, npz_bytes_to_arrays
from algorithms.kernels import pairwise_kernel
from algorithms.robust_svm import RobustSVM, best_offset, class_centre_inliers
from benchmarks.robust_svm import ring_draw

C = 0.1  # beta = 10, inside the thesis' grid 1e-4..1e4; the SVM's error is flat for C >= 0.01 here
SVM_C_GRID = (1e-4, 1e-2, 0.1, 1.0, 1e2)  # the SVM gets its best C on the test set (thesis 6.5)
REPETITIONS = 10


def test_two_pairs_on_a_line_by_hand_no_outlier_and_the_svm_margin():
    # Points -2, -1 (class 0) and 1, 2 (class 1), linear kernel, C = 1 (beta = 1): no point
    # need be ablated, and (6.7) is the SVM's beta/2 ||w||^2 + sum hinge, least at w = 1, b = 0
    # (hinge 0 at every point, as 1 - w for w < 1 costs 2 per unit at the inner pair against
    # beta w): 0.5. The ramp alternation reaches it exactly, f(x) = x; REH's relaxation of
    # (6.9) is tight on separable data.
    X = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    y = np.array([0, 0, 1, 1])
    ramp = RobustSVM(method="ramp", C=1.0).fit(X, y)
    assert list(ramp.labels_) == [0, 0, 1, 1] and ramp.outliers_.size == 0
    assert ramp.objective_ == pytest.approx(0.5, abs=1e-9)
    assert ramp.decision_function(np.array([[-1.0], [0.5], [2.0]])) == pytest.approx(
        [-1.0, 0.5, 2.0], abs=1e-9)
    reh = RobustSVM(method="reh", C=1.0).fit(X, y)
    assert list(reh.labels_) == [0, 0, 1, 1] and reh.outliers_.size == 0
    assert reh.objective_ == pytest.approx(0.5, abs=1e-4)


def test_reh_rod_and_ramp_beat_the_svm_and_the_majority_on_a_ring_draw_that_tilts_the_svm():
    # One draw at R = 55 (seed 1002) whose ring outliers pull the SVM's plane: measured SVM
    # 16.3 % at its best C of the grid, REH 3.15 %, ROD 1.9 %, ramp 2.25 % (offset-free), the
    # majority class 50 %.
    X, y, _, X_test, y_test = ring_draw(1002, 55.0, 10)
    svm = min(np.mean(SVC(kernel="linear", C=svm_c).fit(X, y).predict(X_test) != y_test)
              for svm_c in SVM_C_GRID)
    majority = np.mean(y_test != (1.0 if np.sum(y > 0) >= np.sum(y < 0) else -1.0))
    for method in ("reh", "rod", "ramp"):
        model = RobustSVM(method, C=C, fit_intercept=False).fit(X, y)
        error = np.mean(model.predict(X_test) != y_test)
        assert error < svm - 0.1, (method, error, svm)
        assert error < 0.06, (method, error)
        assert error < majority - 0.4, (method, error, majority)


@pytest.mark.parametrize("method", ["reh", "rod"])
def test_default_intercept_follows_the_data_where_the_offset_free_sdp_cannot(method):
    # Section 6.5 moved by (8, -8), across the Bayes boundary x1 = x2: a classifier through the
    # origin cannot separate it (measured 54 % REH, 41 % ROD on this draw); the default is
    # translation equivariant (median origin, unregularised b), so it labels the moved test set
    # as it labels the original one (3.8 % / 3.4 % test error).
    X, y, _, X_test, y_test = ring_draw(1000, 55.0, 10)
    shift = np.array([8.0, -8.0])
    original = RobustSVM(method, C=C).fit(X, y)
    moved = RobustSVM(method, C=C).fit(X + shift, y)
    offset_free = RobustSVM(method, C=C, fit_intercept=False).fit(X + shift, y)
    assert np.mean(moved.predict(X_test + shift) != y_test) < 0.05
    assert np.mean(moved.predict(X_test + shift) != original.predict(X_test)) < 0.01
    assert np.mean(offset_free.predict(X_test + shift) != y_test) > 0.25


def test_best_offset_minimises_the_piecewise_linear_losses_exactly():
    rng = np.random.RandomState(0)
    f, y = rng.randn(30), np.where(rng.rand(30) < 0.5, -1.0, 1.0)
    eta = rng.rand(30)
    grid = np.linspace(-5, 5, 20001)

    def ramp(b):
        return np.minimum(1.0, np.maximum(0.0, 1.0 - y * (f + b))).sum()

    def weighted_hinge(b):
        return eta @ np.maximum(0.0, 1.0 - y * (f + b))

    assert ramp(best_offset(f, y)) <= min(ramp(b) for b in grid) + 1e-12
    assert weighted_hinge(best_offset(f, y, eta)) <= min(weighted_hinge(b) for b in grid) + 1e-12


def test_ramp_start_ablates_ring_outliers_when_one_class_holds_most_of_them():
    # Seed 1004 at R = 55: 8 of the 10 ring points are labeled -1 (28 points in that class), so
    # 20 % per class cannot drop them all; one far point left collapses the first SVM.
    X, y, _, X_test, y_test = ring_draw(1004, 55.0, 10)
    K_rows = pairwise_kernel(X, kernel="linear")
    start = class_centre_inliers(np.diag(K_rows), K_rows, y, np.arange(y.size), 0.8)
    assert np.flatnonzero(~start).tolist() == list(range(40, 50))
    model = RobustSVM("ramp", C=C).fit(X, y)
    assert np.mean(model.predict(X_test) != y_test) < 0.06


def test_robust_methods_match_the_svm_on_clean_data():
    """No outliers: the robust methods lose at most 1 point against the SVM (the accepted margin).

    10 draws of 20 + 20 points. Measured: SVM 2.7 %, REH 2.1 %, ROD 2.3 %, ramp 2.8 %; the
    offset-free SDP classifiers suit these origin-symmetric draws and may be *better* than the
    SVM, so the check is one-sided.
    """
    errors = {"svm": [], "reh": [], "rod": [], "ramp": []}
    for seed in range(REPETITIONS):
        X, y, _, X_test, y_test = ring_draw(2000 + seed, 55.0, 0)
        svm = SVC(kernel="linear", C=C).fit(X, y)
        errors["svm"].append(np.mean(svm.predict(X_test) != y_test))
        for method in ("reh", "rod", "ramp"):
            model = RobustSVM(method, C=C, fit_intercept=False).fit(X, y)
            errors[method].append(np.mean(model.predict(X_test) != y_test))
    means = {key: float(np.mean(value)) for key, value in errors.items()}
    for method in ("reh", "rod", "ramp"):
        assert means[method] <= means["svm"] + 0.01, means


def test_ramp_objective_never_increases_and_rounds_eta_to_zero_or_one():
    X, y, *_ = ring_draw(7, 35.0, 5)
    model = RobustSVM("ramp", C=1.0).fit(X, y)
    history = np.array(model.objective_history_)
    assert np.all(np.diff(history) <= 1e-9 * np.abs(history[:-1]).max())
    assert set(np.unique(model.eta_)) <= {0.0, 1.0}
    assert model.solver_ == "libsvm" and model.n_iter_ >= 1


def test_sdp_reports_lambda_in_the_box_and_a_relaxation_bound_below_its_primal():
    X, y, *_ = ring_draw(3, 35.0, 5)
    model = RobustSVM("reh", C=C, fit_intercept=False).fit(X, y)
    # (6.10) relaxes (6.9): its optimum is a lower bound on (6.7) at any classifier.
    assert model.objective_ <= model.primal_objective_ + 1e-3 * abs(model.primal_objective_)
    assert np.all((model.eta_ >= 0) & (model.eta_ <= 1))
    # The default solver is the low-rank one, and its certificate is part of the result.
    assert model.solver_ == "lowrank"
    certificate = model.result_extras()["certificate"]
    assert certificate["status"] == "optimal" and certificate["relative_gap"] <= 1e-3
    assert isinstance(model.warnings_, list)


def test_any_two_label_values_and_rbf_kernel_with_offset():
    X, y, *_ = ring_draw(5, 15.0, 5)
    labels = np.where(y > 0, "spam", "ham")
    model = RobustSVM("rod", kernel="rbf", gamma="scale", C=1.0).fit(X, labels)
    assert model.classes_.tolist() == ["ham", "spam"]
    assert set(model.predict(X)) <= {"ham", "spam"}
    assert np.mean(model.labels_ == labels) >= 0.8
    decision = model.decision_function(X)
    assert np.array_equal(model.predict(X), np.where(decision > 0, "spam", "ham"))


@pytest.mark.parametrize("method", ["reh", "rod"])
def test_a_point_nine_orders_of_magnitude_out_does_not_break_the_newton_step(method):
    """A linear kernel with one point at 1e9 among points near 1 gave the factored dual's Newton
    system ``I + B_F^T B_F / s`` entries some 1e18 apart, and LU called it singular
    (``LinAlgError`` from a worker, found by fuzzing). The fit now ends and says how far the
    solver got."""
    X = np.random.RandomState(2).randn(6, 2)
    X[3] = 1e9
    y = np.arange(6) % 2
    model = RobustSVM(method=method, C=1000.0).fit(X, y)
    assert model.predict(X).shape == (6,)
    assert any("low-rank SDP solver" in note for note in model.warnings_)


def test_portable_model_round_trip_predicts_the_same():
    X, y, *_ = ring_draw(9, 35.0, 5)
    labels = np.where(y > 0, 7, 3)
    model = RobustSVM("ramp", C=1.0).fit(X, labels)
    meta, arrays = model.to_model()
    restored = RobustSVM.from_model(meta, npz_bytes_to_arrays(arrays_to_npz_bytes(arrays)))
    assert np.array_equal(restored.predict(X), model.predict(X))
    assert np.allclose(restored.decision_function(X), model.decision_function(X))
    assert restored.outliers_.tolist() == model.outliers_.tolist()
    assert restored.result_extras()["n_outliers"] == model.n_outliers_


@pytest.mark.parametrize(
    ("y", "message"),
    [(None, "required"), (np.zeros(6), "two classes"), (np.arange(6), "two classes"),
     (np.ones(5), "one label per point")],
)
def test_labels_must_be_given_with_exactly_two_classes(y, message):
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(ValueError, match=message):
        RobustSVM("ramp").fit(X, y)


def test_invalid_parameters_name_the_field():
    X, y = np.arange(12.0).reshape(6, 2), np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="rho"):
        RobustSVM("rod", rho=1.5).fit(X, y)
    with pytest.raises(ValueError, match="method"):
        RobustSVM("svm").fit(X, y)
