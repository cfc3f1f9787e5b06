"""The margin criterion: the soft-margin objective of a two-class labeling, and the choice of the
candidate labeling that minimises it.

Maximum margin clustering looks for the labeling ``y`` whose SVM has the smallest inverse soft
margin, (3.1) of Xu's thesis (2007) without bias:

    ``omega(yy^T) = min_w beta/2 ||w||^2 + sum_i max(0, 1 - y_i w^T phi(x_i))``

on the feature-space-centred kernel ``H K H`` scaled to unit mean self-similarity (so ``beta``
means the same trade-off at every feature scale). A convex relaxation (SDP (3.5), GMMC's (10))
gives one labeling by rounding; it is a candidate answer to that problem, not a certified one.
:func:`lowest_margin_labeling` scores candidate labelings by ``omega`` and keeps the smallest;
:func:`choose_with_spectral_candidate` makes the spectral partition of the kNN graph the second
candidate of a two-class fit. The candidates are not held to the relaxation's balance
``|e^T y| <= eps``: a partition found without labels is evidence of the class proportions, and
``omega`` itself penalises a small cluster that does not separate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC
from sklearn.utils import check_random_state

from algorithms.kernels import center_kernel, pivoted_cholesky
from algorithms.selection.candidates import partition_key, spectral_partition

# Candidates are scored on at most this many points (a random sample beyond), at this liblinear
# tolerance: omega is then within a few per cent of its exact value at a fraction of the cost.
MARGIN_SAMPLE_SIZE = 1000
MARGIN_TOL = 1e-3
# Passes of liblinear's dual coordinate descent when candidates are compared: on a labeling
# that cuts through clusters the descent crawls for thousands of passes at C = 100, while the
# primal value at the w of a thousand passes is within about one per cent of the limit (an
# upper bound on omega either way), far less than the gaps between the candidates it ranks.
MARGIN_MAX_PASSES = 1000
# Relative diagonal at which the factor of the centred kernel stops: below it a direction adds
# nothing to any margin at the betas in use.
FEATURE_RANK_TOL = 1e-10


def unit_trace_scale(K: np.ndarray) -> float:
    """Factor ``s`` with ``trace(K) / s = n``; ``omega`` depends on ``K / beta`` only."""
    scale = float(np.trace(K)) / K.shape[0]
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError("the kernel matrix has no positive self-similarity to scale by")
    return scale


def margin_kernel(K_raw: np.ndarray) -> np.ndarray:
    """``H K H`` scaled to ``trace = n``: no bias in (3.1) (thesis section 3.1), one scale."""
    K = center_kernel(K_raw)
    return K / unit_trace_scale(K)


def kernel_features(K: np.ndarray) -> np.ndarray:
    """``Z`` with ``Z Z^T ~= K`` (rows in the order of ``K``), from a pivoted Cholesky factor:
    a third of an eigendecomposition's cost, and exact on the rank-deficient centred kernel."""
    L, pivots = pivoted_cholesky(K, FEATURE_RANK_TOL)
    Z = np.empty_like(L)
    Z[pivots] = L
    return Z


def two_class_margin_objective(Z: np.ndarray, y: np.ndarray, beta: float,
                               tol: float = 1e-5, max_passes: int = 20000) -> float:
    """``omega(yy^T)`` of (3.1) without bias: the hinge-loss SVM ``min beta/2 ||w||^2 + sum xi``
    on kernel features ``Z`` (``Z Z^T = K``), solved by liblinear's dual coordinate descent with
    ``C = 1/beta``, no intercept, stopping tolerance ``tol`` and at most ``max_passes`` passes,
    then scaled by ``beta`` (the primal value at liblinear's ``w``: an upper bound, exact as
    ``tol -> 0``). The coordinate
    order is fixed so that the same labeling always gets the same value, and comparisons
    between roundings do not flicker."""
    C = 1.0 / beta
    svm = LinearSVC(C=C, loss="hinge", fit_intercept=False, dual=True, tol=tol,
                    max_iter=max_passes, random_state=0)
    with warnings.catch_warnings():  # a capped descent: its value is still an upper bound
        warnings.simplefilter("ignore", ConvergenceWarning)
        svm.fit(Z, y)
    w = svm.coef_[0]
    return beta * (0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - y * (Z @ w)).sum()))


@dataclass
class MarginChoice:
    """The kept labeling (any two values), the name of its candidate, and the ``omega`` of every
    candidate scored (not those that repeat an earlier one's partition, nor a candidate whose
    smaller cluster the sample of :func:`lowest_margin_labeling` misses)."""

    labels: np.ndarray
    chosen: str
    objectives: dict[str, float]


def lowest_margin_labeling(K_raw: np.ndarray, candidates: dict[str, np.ndarray], beta: float,
                           random_state=None, sample_size: int = MARGIN_SAMPLE_SIZE
                           ) -> MarginChoice:
    """The candidate labeling (two clusters, any two values) of smallest ``omega`` on ``K_raw``.

    Candidates with one cluster, or with an earlier candidate's partition, drop out; ties keep
    the earlier candidate, and a single remaining candidate is returned unscored. Above
    ``sample_size`` points every candidate is scored on the same random sample of that many
    points (``random_state``), at liblinear tolerance ``MARGIN_TOL``: at C = 100 the dual
    coordinate descent takes O(n^2) per pass and many passes.
    """
    distinct: dict[str, np.ndarray] = {}
    seen: set[bytes] = set()
    for name, labels in candidates.items():
        labels = np.asarray(labels)
        key = partition_key(labels)
        if np.unique(labels).size == 2 and key not in seen:
            seen.add(key)
            distinct[name] = labels
    if not distinct:
        raise ValueError("no candidate labeling with two clusters to choose from")
    if len(distinct) == 1:
        name, labels = next(iter(distinct.items()))
        return MarginChoice(labels, name, {})
    n = K_raw.shape[0]
    sample = np.arange(n)
    if n > sample_size:
        sample = np.sort(check_random_state(random_state).choice(n, sample_size, replace=False))
    signs = {name: np.where(labels[sample] == labels[0], 1.0, -1.0)
             for name, labels in distinct.items()}
    # A cluster the sample misses cannot be scored: that candidate is left out.
    signs = {name: y for name, y in signs.items() if np.unique(y).size == 2}
    first = next(iter(distinct))
    if not signs:
        return MarginChoice(distinct[first], first, {})
    try:
        K = margin_kernel(K_raw[np.ix_(sample, sample)])
    except ValueError:  # a sample of one repeated point: no self-similarity to score by
        return MarginChoice(distinct[first], first, {})
    Z = kernel_features(K)
    objectives = {name: two_class_margin_objective(Z, y, beta, tol=MARGIN_TOL,
                                                   max_passes=MARGIN_MAX_PASSES)
                  for name, y in signs.items()}
    chosen = min(objectives, key=objectives.__getitem__)  # the first of equal values
    return MarginChoice(distinct[chosen], chosen, objectives)


def choose_with_spectral_candidate(X: np.ndarray, labels: np.ndarray, K_raw: np.ndarray,
                                   beta: float, random_state) -> MarginChoice:
    """A relaxation's two-class ``labels`` against the spectral partition of the kNN graph
    (:func:`algorithms.selection.candidates.spectral_partition`), kept by the smaller ``omega``."""
    rng = check_random_state(random_state)
    candidates = {"relaxation": labels, "spectral": spectral_partition(X, 2, random_state=rng)}
    return lowest_margin_labeling(K_raw, candidates, beta, random_state=rng)
