"""Trivial baselines that every accuracy test states beside its bound.

A bound that a method doing nothing useful also meets cannot tell a working method from a broken
one, so each accuracy test computes the simplest answer on the same data and asserts the margin
by which the method beats it, or says in the test that the paper's method does not beat it here.
"""

import numpy as np
from sklearn.cluster import KMeans

from algorithms.metrics import clustering_error


def digit_subset(digits: tuple[np.ndarray, np.ndarray], classes) -> tuple[np.ndarray, np.ndarray]:
    """The points of ``digits`` (``load_digits(return_X_y=True)``) whose label is in ``classes``."""
    X, y = digits
    mask = np.isin(y, classes)
    return X[mask], y[mask]


def kmeans_error(X: np.ndarray, y: np.ndarray, n_clusters: int) -> float:
    """Clustering error of k-means (10 starts, seeded) on the same points."""
    labels = KMeans(n_clusters, n_init=10, random_state=0).fit_predict(X)
    return float(clustering_error(y, labels))


def majority_error(y_train: np.ndarray, y_test: np.ndarray) -> float:
    """Test error of predicting the training set's most frequent label everywhere."""
    values, counts = np.unique(y_train, return_counts=True)
    return float(np.mean(y_test != values[np.argmax(counts)]))
