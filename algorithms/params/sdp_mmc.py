"""SDP maximum margin clustering's parameters (Xu 2007, chapters 3-4), with the checks of partial
labels and the size limits of its solvers: what a caller may set, checked before any fit and by
the API's request schema."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from algorithms.params.common import (
    AUTO,
    DEFAULT_MAX_CLUSTERS,
    GammaParam,
    KernelParam,
    MaxClusters,
    NClustersOrAuto,
    PortfolioParam,
    RandomStateParam,
    Renames,
    SampledFitParams,
    SDPMaxIter,
    SDPTol,
    reciprocal,
)

SolverParam = Literal["lowrank", "scs", "clarabel"]


class SDPMMCParams(SampledFitParams):
    """Parameters of :class:`SDPMMC` (defaults from the thesis, sections 3.4 and 4.2)."""

    renamed: ClassVar[Renames] = {"beta": ("C", reciprocal), "tol": ("sdp_tol", None),
                                  "max_iter": ("sdp_max_iter", None)}
    library_only = ("guide",)

    n_clusters: NClustersOrAuto = 2
    max_clusters: MaxClusters = DEFAULT_MAX_CLUSTERS
    kernel: KernelParam = "rbf"
    gamma: GammaParam = Field(
        "local_scaling", description="RBF width, exp(-gamma ||x - x'||^2) (a number means what "
        "it means in scikit-learn); 'local_scaling': gamma = 1 / (2 sigma^2), sigma the median "
        "distance from a point to its 7th nearest neighbour; 'paper': the thesis's 1 / median "
        "squared pairwise distance (section 3.4); 'scale': scikit-learn's "
        "1 / (n_features * X.var())."
    )
    C: float = Field(
        100.0, ge=1e-4, le=1e7,
        description="Soft-margin weight C = 1 / beta of (3.1)/(4.1), on the unit-trace kernel "
        "(thesis: beta = 0.01).",
    )
    class_balance: float = Field(
        0.1, ge=0, le=1,
        description="l / n in -l <= e^T y <= l of (3.5), for two clusters and every split.",
    )
    size_band: float = Field(
        0.1, ge=0, le=1,
        description="multiclass='joint': every cluster holds between (1/k - size_band) n and "
        "(1/k + size_band) n points (4.8).",
    )
    multiclass: Literal["bisection", "joint"] = Field(
        "bisection",
        description="n_clusters > 2: 'bisection' splits one cluster at a time with the "
        "two-class SDP (3.5), guided by CPM3C's multi-class max-margin k-partition (low-rank "
        "solver); 'joint' solves "
        "the multi-class SDP (4.8) (low-rank solver; SCS with partial labels, where it is "
        "required).",
    )
    rounding: Literal["eigenvector", "randomized"] = Field(
        "eigenvector",
        description="Two-class label recovery: sign of sqrt(alpha_1) v_1, or randomized hyperplane "
        "rounding keeping the smallest margin objective.",
    )
    n_rounding: int = Field(50, ge=1, le=1000, description="Random hyperplanes for 'randomized'.")
    spectral_candidate: bool = Field(
        True,
        description="Two clusters without partial labels: also score the spectral partition of "
        "the kNN graph by the margin objective omega of (3.1) and keep whichever labeling has the "
        "smaller omega (false: the relaxation's rounding alone, as in the thesis).",
    )
    solver: SolverParam = Field(
        "lowrank",
        description="'lowrank': factorized augmented Lagrangian with a duality-gap certificate "
        "(two-class, and unsupervised multi-class (4.8); (4.8) with partial labels uses SCS); "
        "'scs' or 'clarabel': the cvxpy formulation, the reference.",
    )
    exact_max_n: int | None = Field(
        800, ge=2, le=20000,
        description="Largest n whose relaxation is solved over every point; above it, over a "
        "random sample of exact_max_n points stratified over k-means cells of the data (every "
        "partially labelled point among them), and every point is labelled by the "
        "out-of-sample SVM. null: always every point.",
    )
    sdp_tol: SDPTol = Field(
        1e-3,
        description="Stopping tolerance of the SDP solver (lowrank: relative gap and "
        "infeasibility; scs, clarabel: their absolute and relative tolerances).")
    sdp_max_iter: SDPMaxIter = Field(
        20000,
        description="Iteration limit of the cvxpy solver (scs, clarabel; also for (4.8) with "
        "partial labels under solver='lowrank'); the low-rank solver has its own limits.")
    portfolio: PortfolioParam = True
    random_state: RandomStateParam = None


def label_range_problem(labels, n_clusters: int) -> str | None:
    """Why partial labels are out of range (each must be ``-1`` or ``0..n_clusters-1``), or
    None."""
    bad = np.setdiff1d(np.unique(np.asarray(labels)), np.arange(-1, n_clusters))
    if bad.size:
        return (f"partial labels must be -1 (unknown) or 0..{n_clusters - 1}; "
                f"found {bad.tolist()}")
    return None


def label_balance_problem(labels, n_clusters: int, class_balance: float,
                          size_band: float) -> str | None:
    """Why partial labels (in range) leave the balance constraint no solution, or None: a class
    given more points than its largest allowed size, ``(1 + class_balance) n / 2`` of (3.5)'s
    ``|e^T y| <= class_balance n`` for two clusters and ``(1/k + size_band) n`` of (4.8)'s
    for more."""
    labels = np.asarray(labels)
    n = labels.size
    name, value = (("class_balance", class_balance) if n_clusters == 2
                   else ("size_band", size_band))
    largest = ((1.0 + value) * n / 2.0 if n_clusters == 2 else (1.0 / n_clusters + value) * n)
    counts = np.bincount(labels[labels >= 0], minlength=n_clusters)
    cluster = int(np.argmax(counts))
    if counts[cluster] > largest + 1e-9:
        return (f"the partial labels put {counts[cluster]} of {n} points in cluster {cluster}, "
                f"more than {name}={value} allows ({largest:.1f}); raise "
                f"{name} or label fewer points")
    return None


def partial_labels_problem(n_clusters: int | str, multiclass: str, labels, class_balance: float,
                           size_band: float, exact_max_n: int | None = None) -> str | None:
    """Why partial labels (``-1`` unknown) cannot be used with these parameters, or None: each
    is ``-1`` or a cluster ``0..n_clusters-1``, a fit over a sample of ``exact_max_n`` points has
    room for every labelled point, no cluster holds more labelled points than the balance allows
    over the points solved (:func:`labels_in_fit`), and with more than two clusters only the
    multi-class SDP (4.8) takes them (thesis section 4.3)."""
    if n_clusters == AUTO:
        if labels is not None and np.any(np.asarray(labels) >= 0):
            return ("partial labels name their clusters 0..k-1: give n_clusters as a number, "
                    "not 'auto'")
        return None
    if labels is not None and (
            problem := label_range_problem(labels, n_clusters)
            or sampled_labels_problem(labels, exact_max_n)
            or label_balance_problem(labels_in_fit(labels, exact_max_n), n_clusters,
                                     class_balance, size_band)):
        return problem
    if (n_clusters > 2 and multiclass != "joint" and labels is not None
            and np.any(np.asarray(labels) >= 0)):
        return ("partial labels with n_clusters > 2 need multiclass='joint' (the multi-class "
                "SDP (4.8) with labels, thesis section 4.3)")
    return None


def labels_in_fit(labels, exact_max_n: int | None) -> np.ndarray:
    """The partial labels of the points a fit solves over, as counts matter to the checks: all of
    ``labels`` up to ``exact_max_n`` points, else every labelled point and enough unknown
    (``-1``) ones to make a sample of ``exact_max_n`` (:func:`algorithms.sampling.fit_sample`)."""
    labels = np.asarray(labels)
    if exact_max_n is None or labels.size <= exact_max_n:
        return labels
    known = labels[labels >= 0]
    return np.concatenate([known, np.full(max(0, exact_max_n - known.size), -1)])


def sampled_labels_problem(labels, exact_max_n: int | None) -> str | None:
    """Why the labelled points cannot all join the sample of a large fit, or None."""
    labels = np.asarray(labels)
    if exact_max_n is None or labels.size <= exact_max_n:
        return None
    n_known = int(np.count_nonzero(labels >= 0))
    if n_known > exact_max_n:
        return (f"{n_known} labelled points do not fit in the sample of exact_max_n={exact_max_n} "
                f"points a fit of {labels.size} points solves over; raise exact_max_n or label "
                f"fewer points")
    return None


# Size limits of the registry (algorithms/registry.py): the largest n whose fit stays well inside
# the job timeout on a small, loaded machine, with room for data with many support vectors (timed
# by benchmarks/sdp_mmc.py for SCS and benchmarks/sdp_solver.py for the low-rank solver). SCS's
# time grows steeply with n (one n x n and one (n+1) x (n+1) PSD cone); the multi-class program
# leaves room for the n x k blocks of larger k.
TWO_CLASS_MAX_N = 400


MULTICLASS_MAX_N = 300


LOWRANK_TWO_CLASS_MAX_N = 2_000
