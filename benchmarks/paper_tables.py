"""The papers' tables at their full size, as pytest checks with the bounds the tests had: CPM3C's
Table 2 (Zhao, Wang & Zhang 2008), iterSVR's Tables 1 and 2 (Zhang, Tsang & Kwok 2007), GMMC's
Table 1 (Valizadegan & Jin 2006), RobustSVM's ring outliers at R = 55 (thesis Figures 6.7 and
6.10) and CDHMM's Table 5.1 (thesis chapter 5). Each row refits the paper's data (the 45 digit
pairs, ten draws), which takes minutes on two cores, so ``make test`` leaves them here; the
estimators' test files keep fast accuracy tests against trivial baselines.

Run: ``python -m benchmarks.paper_tables [pytest options]``; it exits non-zero when a row misses
its bound. Strict ``xfail`` marks are the accepted deviations (docs/algorithms/*.md): one that
starts passing fails the run.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.svm import SVC

from algorithms.cpm3c import CPM3C
from algorithms.cpm3c import PAPER_SETTING as CPM3C_PAPER
from algorithms.gmmc import GMMC, PAPER_SETTING
from algorithms.itersvr import PAPER_SETTING as PAPER_PARAMS
from algorithms.itersvr import IterSVR
from algorithms.m3n import UnsupervisedM3N, sample_switching_hmm
from algorithms.metrics import clustering_error
from algorithms.robust_svm import RobustSVM, outlier_f_measure
from benchmarks.cpm3c import K4_PARAMS, KPCA_PARAMS, PAIRS_45_PARAMS
from benchmarks.gmmc import digit_pair, two_circles, two_gaussians, two_jointed_circles
from benchmarks.robust_svm import ring_draw


@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits (the UCI optical digits test set of the papers), loaded once."""
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def fits_on_digits(digits):
    """``fit(estimator, classes)``: a clone of ``estimator`` fitted on the digits of ``classes``,
    once for the same estimator class, parameters and classes; a row that several checks read
    (a pair, its margin over k-means, the mean over the 45 pairs) is fitted once, and the
    estimator returned is shared: a check reads it and never refits it."""
    cache = {}

    def fit(estimator, classes):
        key = (type(estimator).__qualname__, tuple(classes),
               repr(sorted(estimator.get_params().items())))
        if key not in cache:
            cache[key] = clone(estimator).fit(digit_subset(digits, classes)[0])
        return cache[key]

    return fit


@pytest.fixture(scope="module")
def fitted_on_digits(digits):
    return fits_on_digits(digits)


def digit_subset(digits, classes):
    """The points of ``digits`` whose label is in ``classes``."""
    X, y = digits
    mask = np.isin(y, classes)
    return X[mask], y[mask]


def kmeans_error(X, y, n_clusters: int) -> float:
    """Clustering error of k-means (10 starts, seeded) on the same points: the trivial baseline."""
    labels = KMeans(n_clusters, n_init=10, random_state=0).fit_predict(X)
    return float(clustering_error(y, labels))


# --- CPM3C, Table 2 -----------------------------------------------------------------------------
# The named pairs use the paper's setting (linear, k-means starts) with C = 100, class_balance =
# l/n = 0.03; the mean over the 45 pairs uses PAIRS_45_PARAMS (Nystrom coordinates, width 0.4 of
# the median distance, three runs); 8-9 and the 4-cluster sets also run on the paper's kernel-PCA
# coordinates (KPCA_PARAMS), the 4-cluster sets with C = 3 and class_balance = 0 (K4_PARAMS).


def paper_cpm3c(**params) -> CPM3C:
    """CPM3C with the paper's settings, overridden by ``params``."""
    return CPM3C(**{**CPM3C_PAPER, **params})


def _accuracy(y, labels) -> float:
    return 1.0 - clustering_error(y, labels)


# The paper's Table 2, CPM3C column: 3-8 96.92 %, 1-7 100 %, 2-7 100 %, 8-9 97.74 %. Bounds: the
# acceptance levels (paper minus 1.5 points).
@pytest.mark.parametrize(
    ("classes", "min_accuracy"),
    [
        ((3, 8), 0.954),
        ((1, 7), 0.985),
        ((2, 7), 0.985),
    ],
)
def test_digit_pairs_match_table_2(digits, fitted_on_digits, classes, min_accuracy):
    _, y = digit_subset(digits, classes)
    est = fitted_on_digits(paper_cpm3c(random_state=0), classes)
    assert np.bincount(est.labels_, minlength=2).min() > 0
    assert _accuracy(y, est.labels_) >= min_accuracy


def test_digits_8_9_match_table_2_on_kernel_pca_coordinates(digits, fitted_on_digits):
    # The paper's Table 2 "Dig 8-9": 97.74 % (accepted: 96.2 %). Measured 97.74 % with KPCA_PARAMS
    # (98.02 % with 16 or 18 components; 94.9 % with 22 and about 90 % with 25 or more, so the
    # truncation matters: all components at this width give 89.8 %).
    _, y = digit_subset(digits, (8, 9))
    est = fitted_on_digits(paper_cpm3c(random_state=0, **KPCA_PARAMS), (8, 9))
    assert np.bincount(est.labels_, minlength=2).min() > 0
    assert _accuracy(y, est.labels_) >= 0.962


def test_digits_8_9_stays_at_its_measured_linear_accuracy(digits, fitted_on_digits):
    # Linear (the defaults): measured 95.76 % (15 of 354 wrong), also when started from the true
    # classes: the CPM3C objective's optimum, not the initialization, sits there. Floor 95.4 %.
    _, y = digit_subset(digits, (8, 9))
    est = fitted_on_digits(paper_cpm3c(random_state=0), (8, 9))
    assert _accuracy(y, est.labels_) >= 0.954


@pytest.fixture(scope="module")
def pair_accuracies(digits):
    accuracies = []
    for classes in itertools.combinations(range(10), 2):
        X, y = digit_subset(digits, classes)
        est = paper_cpm3c(random_state=0, **PAIRS_45_PARAMS).fit(X)
        accuracies.append(_accuracy(y, est.labels_))
    return np.array(accuracies)


def test_mean_accuracy_over_the_45_digit_pairs_matches_table_2(pair_accuracies):
    # The paper's Table 2, "UCIDig": 99.38 % for CPM3C; the test accepts 98.5 %. Measured 99.03 %
    # (linear: 97.0 %, the pairs with digit 1 split it).
    assert pair_accuracies.mean() >= 0.985


def test_mean_accuracy_over_the_45_digit_pairs_beats_k_means(pair_accuracies):
    # The paper's Table 2, "UCIDig" KM column: 96.38 %. Measured 99.03 %.
    assert pair_accuracies.mean() >= 0.975
    assert np.median(pair_accuracies) >= 0.99
    assert pair_accuracies.min() >= 0.85


@pytest.mark.parametrize(
    ("classes", "min_accuracy", "floor"),
    [((0, 6, 8, 9), 0.950, 0.935), ((1, 2, 7, 9), 0.925, 0.895)],
)
def test_four_digit_classes_keep_four_clusters_and_measured_accuracy(
    digits, fitted_on_digits, classes, min_accuracy, floor
):
    # The paper's Table 2 "Dig 0689" 96.63 % and "Dig 1279" 94.01 % (accepted: 95.0 % and 92.5 %).
    # Measured 93.97 % and 90.25 %: the floors below them catch regressions.
    _, y = digit_subset(digits, classes)
    est = fitted_on_digits(paper_cpm3c(n_clusters=4, random_state=0, **K4_PARAMS), classes)
    assert np.bincount(est.labels_, minlength=4).min() > 0
    assert _accuracy(y, est.labels_) >= floor


@pytest.mark.parametrize(
    ("classes", "min_accuracy"),
    [
        ((0, 6, 8, 9), 0.950),
        pytest.param(
            (1, 2, 7, 9), 0.925,
            marks=pytest.mark.xfail(
                strict=True,
                reason="accepted deviation: about a quarter of the digit 1s join the 2 and 9 "
                "clusters, also when CCCP starts from the true classes (docs/algorithms/cpm3c.md)",
            ),
        ),
    ],
)
def test_four_digit_classes_match_table_2_on_kernel_pca_coordinates(
    digits, fitted_on_digits, classes, min_accuracy
):
    # The paper's Table 2 "Dig 0689" 96.63 %, "Dig 1279" 94.01 % (accepted: 95.0 % and 92.5 %).
    # Measured with KPCA_PARAMS and C = 3, l = 0: 96.63 % (random_state 0-4 alike; 95.9-96.8 %
    # for 15-50 components) and 90.11 %.
    _, y = digit_subset(digits, classes)
    est = fitted_on_digits(
        paper_cpm3c(n_clusters=4, random_state=0, **KPCA_PARAMS, **K4_PARAMS), classes)
    assert np.bincount(est.labels_, minlength=4).min() > 0
    assert _accuracy(y, est.labels_) >= min_accuracy


# --- iterSVR, Tables 1 and 2 (the paper's setting: sigma = 3 D, k-means starts, C = 500) ------


@pytest.fixture(scope="module")
def pair_errors(digits, fitted_on_digits):
    """Clustering error of iterSVR (the paper's setting, random_state=0) on each of the 45 digit
    pairs, fitted once: Table 1's named pairs are rows of the same Table 2 run."""
    errors = {}
    for classes in itertools.combinations(range(10), 2):
        _, y = digit_subset(digits, classes)
        est = fitted_on_digits(IterSVR(random_state=0, **PAPER_PARAMS), classes)
        errors[classes] = clustering_error(y, est.labels_)
    return errors


# The paper's Table 1, iterSVR column: 3-8 3.36 %, 1-7 0.55 %, 2-7 0.0 %, 8-9 3.67 %. The bounds
# are the acceptance levels: the paper's number plus about one point for 3-8, 1-7 and 2-7. The
# margins over k-means on the same pairs: tests/test_baselines_fast.py.
@pytest.mark.parametrize(
    ("classes", "max_error"),
    [((3, 8), 0.044), ((1, 7), 0.010), ((2, 7), 0.010), ((8, 9), 0.047)],
)
def test_digit_pairs_match_table_1(pair_errors, classes, max_error):
    assert pair_errors[classes] <= max_error


def test_mean_error_over_all_45_digit_pairs_matches_table_2(digits, pair_errors):
    # The paper's Table 2: 1.82 % for iterSVR on UCI digits; accepted up to 2.3 %. Baseline: k-means
    # (10 starts) on the same pairs.
    assert len(pair_errors) == 45
    mean = np.mean(list(pair_errors.values()))
    assert mean <= 0.023
    kmeans = np.mean([kmeans_error(*digit_subset(digits, classes), 2) for classes in pair_errors])
    assert mean < kmeans


# --- GMMC, Table 1 ------------------------------------------------------------------------------

# -- Table 1 of the paper, best width of the 10 -------------------------------------------------

# (data, width fraction, the accepted bound on the error % with the best width; the paper's Table 1,
# "Optimal Kernel Width" GMMC column; the margin in points by which GMMC beats k-means on the same
# points). The width is one of the paper's 10 (10 %, ..., 100 % of the range of pairwise
# distances), the best found by benchmarks/gmmc.py, except digits 1-7 and 2-7: their best, 10 %,
# nearly disconnects the graph and the solve takes ~50x longer, so the test uses 20 % (0.0 % and
# 0.3 % error in the benchmark, still within the bound).
# Measured (GMMC / k-means, %): circles 0 / 48.75, jointed 0 / 8.75, Gaussians 2.5 / 3.75, 3-8
# 2.8 / 5.32, 1-7 0 / 0, 2-7 0.28 / 3.09, 8-9 5.65 / 8.76. On digits 1-7 GMMC does NOT beat
# k-means: both are exact (margin 0, asserted as a tie); the paper's own 2.2 % is worse than it.
BEST_WIDTH_CASES = [
    ("two circles", two_circles, 0.1, 0.0, 40.0),
    ("two jointed circles", two_jointed_circles, 0.2, 1.0, 5.0),
    ("two Gaussians", two_gaussians, 0.3, 2.5, 1.0),
    ("digits 3-8", lambda: digit_pair(3, 8), 0.2, 6.6, 2.0),
    ("digits 1-7", lambda: digit_pair(1, 7), 0.2, 3.2, 0.0),
    ("digits 2-7", lambda: digit_pair(2, 7), 0.2, 1.5, 2.0),
    ("digits 8-9", lambda: digit_pair(8, 9), 0.2, 16.0, 2.0),
]


@pytest.mark.parametrize(("name", "make", "fraction", "bound", "margin"), BEST_WIDTH_CASES,
                         ids=[c[0] for c in BEST_WIDTH_CASES])
def test_table_1_error_with_the_best_width_is_within_the_issue_bound(
    name, make, fraction, bound, margin
):
    X, y = make()
    # The paper's method: (10)'s labels alone. With the spectral candidate at these wide widths
    # the margin objective prefers the spectral partition on three rows (jointed circles 10 %,
    # two Gaussians 3.75 %, digits 8-9 10.2 %).
    model = GMMC(gamma="paper", width_factor=fraction, spectral_candidate=False,
                 portfolio=False, random_state=0).fit(X)
    error = 100 * clustering_error(y, model.labels_)
    assert error <= bound + 1e-9
    assert model.solver_status_ == "optimal", model.warnings_
    baseline = 100 * kmeans_error(X, y, 2)
    assert error <= baseline - margin + 1e-9, (error, baseline)


# -- Table 1, unsupervised kernel learning (12) -------------------------------------------------

# The paper's kernel-learning column (Table 1); the test accepts 2 points above it. Last column: the
# margin in points over k-means on the same points. Measured (GMMC kernel learning / k-means, %):
# jointed circles 0 / 8.75, Gaussians 2.5 / 3.75, 3-8 5.6 / 5.32, 1-7 0.28 / 0, 2-7 1.4 / 3.09,
# 8-9 9.04 / 8.76. On 3-8, 1-7 and 8-9 kernel learning does NOT beat k-means (0.3 points behind
# on each; the paper's own numbers are not better than k-means there either): a negative margin
# bounds how far behind it may fall.
KERNEL_LEARNING_CASES = [
    ("two jointed circles", two_jointed_circles, 0.0, 5.0),
    ("two Gaussians", two_gaussians, 3.75, 1.0),
    ("digits 3-8", lambda: digit_pair(3, 8), 5.6, -0.5),
    ("digits 1-7", lambda: digit_pair(1, 7), 3.0, -0.5),
    ("digits 2-7", lambda: digit_pair(2, 7), 5.6, 1.0),
    ("digits 8-9", lambda: digit_pair(8, 9), 12.0, -0.5),
]


@pytest.mark.parametrize(("name", "make", "paper", "margin"), KERNEL_LEARNING_CASES,
                         ids=[c[0] for c in KERNEL_LEARNING_CASES])
def test_kernel_learning_error_is_within_two_points_of_table_1(name, make, paper, margin):
    X, y = make()
    model = GMMC(kernel_learning=True, random_state=0, **PAPER_SETTING).fit(X)
    error = 100 * clustering_error(y, model.labels_)
    assert error <= paper + 2.0 + 1e-9
    assert model.kernel_weights_.shape == (10,)
    assert model.kernel_weights_.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(model.kernel_weights_ >= 0)
    baseline = 100 * kmeans_error(X, y, 2)
    assert error <= baseline - margin + 1e-9, (error, baseline)


@pytest.mark.xfail(strict=True, reason=(
    "accepted deviation: (12) maximizes sum(gamma) over beta, which favours the flattest (widest) "
    "kernel, while two concentric circles need the narrowest width (measured in "
    "docs/algorithms/gmmc.md)"))
def test_kernel_learning_separates_two_circles_as_in_table_1():
    X, y = two_circles()
    model = GMMC(kernel_learning=True, random_state=0, **PAPER_SETTING).fit(X)
    assert 100 * clustering_error(y, model.labels_) <= 2.0


# --- RobustSVM, thesis section 6.5 at R = 55 ----------------------------------------------------
# ``ring_draw``: 20 training points per class plus 10 ring outliers (n = 50), 1,000 test points
# per class.

C = 0.1  # beta = 10, inside the thesis' grid 1e-4..1e4; the SVM's error is flat for C >= 0.01 here
SVM_C_GRID = (1e-4, 1e-2, 0.1, 1.0, 1e2)  # the SVM gets its best C on the test set (thesis 6.5)
REPETITIONS = 10


@pytest.fixture(scope="module")
def ring_55():
    """10 draws at R = 55: mean test errors of SVC (best C of the grid over the 10 draws), REH,
    ROD (offset-free and default), ramp (C = 0.1), the majority class, and ROD's mean outlier
    F-measure."""
    errors = {"svm": [], "reh": [], "rod": [], "ramp": [], "reh_default": [], "rod_default": [],
              "majority": []}
    svm_errors = {svm_c: [] for svm_c in SVM_C_GRID}
    f_measures = []
    for seed in range(REPETITIONS):
        X, y, is_outlier, X_test, y_test = ring_draw(1000 + seed, 55.0, 10)
        for svm_c in SVM_C_GRID:
            svm = SVC(kernel="linear", C=svm_c).fit(X, y)
            svm_errors[svm_c].append(np.mean(svm.predict(X_test) != y_test))
        for method in ("reh", "rod", "ramp"):
            model = RobustSVM(method, C=C, fit_intercept=False).fit(X, y)
            errors[method].append(np.mean(model.predict(X_test) != y_test))
            if method == "rod":
                detected = np.isin(np.arange(y.size), model.outliers_)
                f_measures.append(outlier_f_measure(is_outlier, detected)[2])
        for method in ("reh", "rod"):
            model = RobustSVM(method, C=C).fit(X, y)
            errors[f"{method}_default"].append(np.mean(model.predict(X_test) != y_test))
        majority = 1.0 if np.sum(y > 0) >= np.sum(y < 0) else -1.0
        errors["majority"].append(np.mean(y_test != majority))
    means = {key: float(np.mean(value)) for key, value in errors.items() if value}
    means["svm"] = min(float(np.mean(value)) for value in svm_errors.values())
    return means, float(np.mean(f_measures))


def test_reh_and_rod_beat_the_soft_margin_svm_at_ring_radius_55(ring_55):
    errors, _ = ring_55
    # Thesis Figure 6.7: the robust methods stay near the noise-free error (Bayes 2.2 %) while
    # the SVM degrades with R; the test accepts below the SVM and below 6 %. Measured (n = 50,
    # SCS): SVM 25.8 % (best C = 1), REH 2.3 %, ROD 2.3 %.
    for method in ("reh", "rod"):
        assert errors[method] < errors["svm"] - 0.1, errors
        assert errors[method] < 0.06, errors
        assert errors[method] < errors["majority"] - 0.4, errors


def test_default_fit_intercept_beats_the_svm_at_ring_radius_55(ring_55):
    errors, _ = ring_55
    # The default (fit_intercept=True): offset-free SDP at the coordinate-wise median, then the
    # b minimising the eta-hinge loss. Measured: REH 3.19 %, ROD 3.10 % (worst draws 7.5 % /
    # 5.5 %), against the offset-free 2.26 % / 2.28 % on these origin-symmetric draws and SVM
    # 25.8 %. The constant-feature offset it replaces gave 4.95 % / 9.65 % (worst 44 % / 43 %).
    for method in ("reh_default", "rod_default"):
        assert errors[method] < 0.04, errors
        assert errors[method] < errors["svm"] - 0.1, errors
        assert errors[method] < errors["majority"] - 0.4, errors


def test_rod_detects_the_ring_outliers_with_f_measure_075(ring_55):
    _, f_measure = ring_55
    # Thesis Figure 6.10: F about 0.85 (0.75 when rho is too large). Truth: training points the
    # Bayes rule misclassifies. Measured 0.91.
    assert f_measure >= 0.75


def test_ramp_cccp_beats_the_soft_margin_svm_at_ring_radius_55(ring_55):
    errors, _ = ring_55
    # Measured 2.7 % vs 25.8 % (worst draw 4.2 %). With a per-class trimmed start one draw
    # (seed 1004) ended at 50 % and the mean at 7.6 %, hence also the 6 % bar of REH and ROD.
    assert errors["ramp"] < errors["svm"] - 0.1, errors
    assert errors["ramp"] < 0.06, errors
    assert errors["ramp"] < errors["majority"] - 0.4, errors


# --- CDHMM, thesis Table 5.1 (10 draws of 10 sequences of length 8) ---------------------------

REPEATS = range(10)
DATA3 = 0.20  # the stay probability of Data3 (20 % emission noise)


def draws(stay):
    for rep in REPEATS:
        sequences, states = sample_switching_hmm(stay, random_state=rep)
        yield rep, sequences, np.concatenate(states)


def observed_symbol_error(sequences, truth):
    """Trivial baseline: label every position with the symbol it emits (2 states, 2 symbols)."""
    return clustering_error(truth, np.concatenate(sequences))


def test_exact_cdhmm_error_on_synthetic_data_beats_the_observed_symbol():
    # Data3 of Table 5.1 (20 % emission noise), 10 draws: the thesis's bound on CDHMM (25 %), and
    # the trivial labelling by the observed symbol, which a method must beat to have learned
    # anything from the chain. The table's rows, Data1 included, are reproduced by
    # ``python -m benchmarks.m3n`` (docs/algorithms/m3n.md).
    stay, limit, margin = DATA3, 0.25, 0.01
    errors, baseline = [], []
    for rep, sequences, truth in draws(stay):
        model = UnsupervisedM3N(2, method="exact", random_state=rep).fit(sequences)
        errors.append(clustering_error(truth, np.concatenate(model.labels_)))
        baseline.append(observed_symbol_error(sequences, truth))
    assert np.mean(errors) <= limit, errors
    assert np.all(np.array(errors) <= np.array(baseline) + 1e-12), (errors, baseline)
    assert np.mean(errors) <= np.mean(baseline) - margin, (np.mean(errors), np.mean(baseline))


def main(argv: list[str] | None = None) -> int:
    """pytest over this file (without the project's ``addopts``: one process, no durations)."""
    return int(pytest.main([str(Path(__file__)), "-p", "no:cacheprovider", "-o", "addopts=",
                            "-ra", "-q", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    raise SystemExit(main())
