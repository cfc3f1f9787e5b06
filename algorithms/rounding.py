"""Hard labels from the relaxed label matrices of the SDPs, within the class balance."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.sparse.linalg import eigsh
from sklearn.utils import check_random_state


def balance_limit(n_samples: int, class_balance: float) -> float:
    """The papers' ``l`` in ``-l <= e^T y <= l`` from the fraction ``class_balance = l / n``."""
    return float(class_balance) * n_samples


def labels_from_leading_eigenvector(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``{0, 1}`` from the sign of ``sqrt(lambda_1) v_1`` of a label matrix ``M ~ yy^T``.

    Returns ``(labels, scores)``; ``scores = sqrt(lambda_1) v_1`` is the relaxed ``y``. The sign
    of an eigenvector is arbitrary, so it is fixed to make the first point's score non-negative.
    """
    eigvals, eigvecs = np.linalg.eigh((M + M.T) / 2.0)
    scores = np.sqrt(max(eigvals[-1], 0.0)) * eigvecs[:, -1]
    if scores[0] < 0:
        scores = -scores
    return (scores < 0).astype(np.int64), scores


def two_cluster_labels(y: np.ndarray) -> np.ndarray:
    """Labels ``{0, 1}`` of a two-cluster labeling given with any two values, cluster 0 holding
    the first point (as :func:`labels_from_leading_eigenvector` names them)."""
    y = np.asarray(y)
    return (y != y[0]).astype(np.int64)


def balanced_signs(scores: np.ndarray, limit: float) -> np.ndarray:
    """``y = sign(scores - t)`` in ``{-1, +1}`` with the threshold ``t`` nearest 0 that keeps
    ``-limit <= e^T y <= limit`` (both classes non-empty)."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.size
    low = max(1, math.ceil((n - limit) / 2))
    high = min(n - 1, math.floor((n + limit) / 2))
    if low > high:  # limit below the parity gap: the most balanced split
        low = high = n // 2
    n_positive = int(np.clip(np.count_nonzero(scores > 0), low, high))
    y = -np.ones(n)
    y[np.argsort(-scores, kind="stable")[:n_positive]] = 1.0
    return y


def psd_factor(M: np.ndarray, rank: int | None = None) -> np.ndarray:
    """``V`` with ``V V^T ~ M``: eigenvectors scaled by ``sqrt`` of the non-negligible eigenvalues
    (the largest ``rank`` of them when given), largest first. With ``rank`` only those
    eigenpairs are computed, by Lanczos from a fixed start: a relaxed label matrix has low rank,
    so a full eigendecomposition wastes most of its work, and LAPACK's ``evr`` for a few
    eigenpairs is slow on the matrix's large cluster of zero eigenvalues."""
    symmetric = (M + M.T) / 2.0
    n = symmetric.shape[0]
    if rank is not None and n > 4 * rank + 20:
        # A fixed random start: ones would be orthogonal to a balanced labeling's y (M e = 0).
        start = np.random.default_rng(0).standard_normal(n)
        eigvals, eigvecs = eigsh(symmetric, k=rank, which="LA", v0=start)
        order = np.argsort(eigvals)
        eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    else:
        eigvals, eigvecs = np.linalg.eigh(symmetric)
    eigvals, eigvecs = eigvals[::-1], eigvecs[:, ::-1]
    keep = eigvals > max(eigvals[0], 0.0) * 1e-6
    if rank is not None:
        keep[rank:] = False
    return eigvecs[:, keep] * np.sqrt(eigvals[keep])[None, :]


def randomized_rounding(
    M: np.ndarray,
    objective: Callable[[np.ndarray], float],
    *,
    limit: float,
    n_trials: int = 50,
    random_state: int | np.random.RandomState | None = None,
) -> tuple[np.ndarray, float, int]:
    """Hard labels ``y in {-1, +1}`` from a relaxed ``M ~ yy^T`` by randomized hyperplane rounding.

    Candidates: the leading eigenvector and ``n_trials`` random hyperplanes ``sign(V r)`` with
    ``V V^T = M``, ``r ~ N(0, I)`` (Goemans-Williamson), each thresholded by
    :func:`balanced_signs` so it meets the balance constraint. Returns the candidate of smallest
    ``objective(y)``, its objective, and the index of the winner (0 = the eigenvector).
    """
    rng = check_random_state(random_state)
    V = psd_factor(M)
    best_y = balanced_signs(V[:, 0], limit)
    best_value, best_index = float(objective(best_y)), 0
    for trial in range(1, n_trials + 1):
        y = balanced_signs(V @ rng.standard_normal(V.shape[1]), limit)
        value = float(objective(y))
        if value < best_value:
            best_y, best_value, best_index = y, value, trial
    return best_y, best_value, best_index


def labels_from_label_matrix(
    M: np.ndarray, n_clusters: int, random_state: int | np.random.RandomState | None = None
) -> np.ndarray:
    """Cluster labels ``0..k-1`` from a relaxed equivalence matrix ``M ~ DD^T`` (``M_ij ~ 1`` when
    i and j share a cluster): k-means (20 starts) on the rows of its rank-k factor."""
    from sklearn.cluster import KMeans  # local: k-means is only needed by multi-class recovery

    embedding = psd_factor(M, rank=n_clusters)
    seed = check_random_state(random_state).randint(2**31 - 1)
    labels = KMeans(n_clusters, n_init=20, random_state=seed).fit_predict(embedding)
    return _first_seen_order(labels)


def _first_seen_order(labels: np.ndarray) -> np.ndarray:
    """Renumber labels ``0..k-1`` in the order clusters first appear (deterministic names)."""
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(np.argsort(first))
    return order[np.unique(labels, return_inverse=True)[1]].astype(np.int64)

