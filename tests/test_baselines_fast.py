"""Trivial baselines beside the accuracy tests of iterSVR, CPM3C and SVC.

The accuracy tests in test_itersvr.py, test_cpm3c.py and test_svc.py bound each method by the
paper's number with the paper's settings (PAPER_SETTING); this file asserts, on the same data and
settings, the margin by which each beats k-means (10 starts) on the same points, or says where it
does not. The defaults are held against k-means and scikit-learn's other clusterers in
tests/test_defaults.py.
"""

import pytest
from sklearn.datasets import load_iris
from sklearn.decomposition import PCA

from algorithms import cpm3c, itersvr
from algorithms.cpm3c import CPM3C
from algorithms.itersvr import IterSVR
from algorithms.metrics import clustering_error
from algorithms.svc import SupportVectorClustering
from tests.baselines import digit_subset, kmeans_error


# Measured error % (method / k-means on the same points): iterSVR 3-8 3.08 / 5.32, 1-7 0 / 0,
# 2-7 0 / 3.09, 8-9 3.39 / 8.76, {0,6,8,9} 2.38 / 5.19 (the paper's Table 1 KM: 5.32, 0.55, 3.09,
# 9.32). On 1-7 k-means is already exact: iterSVR only ties it (margin 0).
@pytest.mark.parametrize(
    ("classes", "margin"),
    [((3, 8), 0.015), ((1, 7), 0.0), ((2, 7), 0.02), ((8, 9), 0.03), ((0, 6, 8, 9), 0.02)],
)
def test_itersvr_beats_k_means_on_the_table_1_digits(digits, fitted_on_digits, classes, margin):
    X, y = digit_subset(digits, classes)
    estimator = IterSVR(n_clusters=len(classes), random_state=0, **itersvr.PAPER_SETTING)
    labels = fitted_on_digits(estimator, classes).labels_
    baseline = kmeans_error(X, y, len(classes))
    assert clustering_error(y, labels) <= baseline - margin + 1e-9, baseline


# CPM3C with the paper's setting (linear, k-means starts), as Table 2's named pairs in
# benchmarks/paper_tables.py:
# 3-8 4.2 / 5.32, 1-7 0 / 0 (a tie), 2-7 0 / 3.09, 8-9 4.24 / 8.76.
@pytest.mark.parametrize(
    ("classes", "margin"), [((3, 8), 0.005), ((1, 7), 0.0), ((2, 7), 0.02), ((8, 9), 0.03)],
)
def test_cpm3c_beats_k_means_on_the_table_2_digit_pairs(digits, fitted_on_digits, classes, margin):
    X, y = digit_subset(digits, classes)
    labels = fitted_on_digits(CPM3C(random_state=0, **cpm3c.PAPER_SETTING), classes).labels_
    baseline = kmeans_error(X, y, 2)
    assert clustering_error(y, labels) <= baseline - margin + 1e-9, baseline


# SVC the paper's Table 1 rows 1-3 and 1-4 (q = 7, p = 0.70 and q = 9, p = 0.75, PCs in centimetres
# as
# in test_svc.py): 4 and 14 misclassified against k-means' 16 and 16 on the same components.
@pytest.mark.parametrize(
    ("n_components", "gamma", "p", "margin"), [(3, 7.0, 0.70, 8), (4, 9.0, 0.75, 1)],
)
def test_svc_beats_k_means_on_the_table_1_iris_components(n_components, gamma, p, margin):
    X, y = load_iris(return_X_y=True)
    Z = PCA(n_components).fit_transform(X)
    labels = SupportVectorClustering(gamma=gamma, p=p, tol=1e-6).fit(Z).labels_
    ours = round(clustering_error(y, labels) * len(y))
    baseline = round(kmeans_error(Z, y, 3) * len(y))
    assert ours <= baseline - margin, (ours, baseline)
