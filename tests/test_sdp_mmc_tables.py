"""SDP MMC's semi-supervised multi-class paper rows (Xu 2007, thesis Table 4.2) and the
solver-tolerance check on the same protocol: the heaviest SCS solves of the suite, in a module of
their own."""

import numpy as np
import pytest
from sklearn.svm import SVC

from algorithms.sdp_mmc import PAPER_SETTING, SDPMMC
from benchmarks.sdp_mmc import (
    TABLE_4_2,
    semi_supervised_classes,
    standard_error,
    table_4_2_errors,
)


@pytest.mark.parametrize("row, classes, svm_margin", [
    ("DigitsA689", (6, 8, 9), 0.05),
    ("DigitsA0689", (0, 6, 8, 9), 0.0),
])
def test_semi_supervised_table_4_2_rows(row, classes, svm_margin):
    # Thesis Table 4.2's protocol: 39 digits per class, 1/10 labeled, 10 draws, error on the
    # unlabeled points +- one standard error. Measured (thesis in brackets):
    #   689:  semidefinite 7.0 +- 0.9 (5.6 +- 0.7), SVM on the labeled points 15.5 (16.3),
    #         spectral with labeled assignment 8.6 (12.7);
    #   0689: semidefinite 6.8 +- 0.6 (6.5 +- 0.5), SVM 8.1 (20.6), spectral 7.6 (11.8).
    # The thesis's DigitsA are 20 x 16 binary images, ours scikit-learn's 8 x 8 digits, on which
    # both baselines are stronger (with 16 labeled points of four classes the SVM errs on 8 %, not
    # 21 %), so the margin over the SVM is asserted only on 689, where the paper's 10 points hold.
    # Asserted: our mean is within two combined standard errors of the thesis's row, and below
    # both of the thesis's baselines on the same draws.
    errors = table_4_2_errors(classes)
    ours = errors["semidefinite"]
    thesis_mean, thesis_se = (v / 100 for v in TABLE_4_2[row]["semidefinite"])
    allowed = thesis_mean + 2 * np.hypot(standard_error(ours), thesis_se)
    assert ours.mean() <= allowed, (ours, allowed)
    assert ours.mean() <= errors["spectral"].mean(), errors
    assert ours.mean() <= errors["supervised SVM"].mean() - svm_margin, errors


def test_semi_supervised_multiclass_labels_do_not_hang_on_the_solvers_early_stop():
    # Solved accurately, (4.8)'s M links no unlabeled point to a class (flat affinities), so a
    # rounding that read classes off M depended on where SCS stopped: on this draw (20 per
    # class, 1/10 labeled) the former seeded k-means erred on 5.6 % at tol 1e-3 and 33.3 % at
    # 1e-5. Clusters of M's unlabeled block matched to the classes by kernel affinity: 5.6 % at
    # both, against 11.1 % for the SVM on the labeled points.
    X, y, partial = semi_supervised_classes((6, 8, 9), 20, 2)
    unknown = partial < 0
    errors = []
    for tol in (1e-3, 1e-5):
        model = SDPMMC(n_clusters=3, random_state=0, tol=tol, max_iter=100_000,
                       **PAPER_SETTING).fit(X, partial)
        errors.append(np.mean(model.labels_[unknown] != y[unknown]))
    svm = SVC(C=100.0, gamma=model.gamma_).fit(X[~unknown], partial[~unknown])
    svm_error = np.mean(svm.predict(X[unknown]) != y[unknown])
    assert errors[0] == errors[1], errors
    assert errors[1] <= svm_error - 0.05, (errors, svm_error)
