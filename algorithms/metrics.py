"""Clustering metrics."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment


def clustering_error(y_true: Any, y_pred: Any) -> float:
    """Share of points misassigned after the best one-to-one matching of clusters to classes.

    The matching is Hungarian (``linear_sum_assignment``) on the contingency table, so it works when
    the numbers of clusters and classes differ; points labeled ``-1`` (outliers) count as errors.
    """
    truth = np.asarray(y_true).ravel()
    pred = np.asarray(y_pred).ravel()
    if truth.shape != pred.shape:
        raise ValueError(f"y_true and y_pred differ in length: {truth.shape[0]} vs {pred.shape[0]}")
    if truth.size == 0:
        raise ValueError("cannot score an empty labeling")
    classes, truth_index = np.unique(truth, return_inverse=True)
    assigned = pred != -1
    clusters, pred_index = np.unique(pred[assigned], return_inverse=True)
    table = np.zeros((clusters.size, classes.size), dtype=np.int64)
    np.add.at(table, (pred_index, truth_index[assigned]), 1)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return 1.0 - table[rows, cols].sum() / truth.size
