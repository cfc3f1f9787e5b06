"""CPM3C's parameters (Zhao, Wang and Zhang 2008): what a caller may set, checked before any fit
and by the API's request schema."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from algorithms.params.common import (
    DEFAULT_MAX_CLUSTERS,
    AlgorithmParams,
    CuttingPlaneTol,
    KernelParam,
    MaxClusters,
    NClustersOrAuto,
    PortfolioParam,
    PositiveFloat,
    RandomStateParam,
    RenamedValues,
    Renames,
)

# gamma="wide_local_scaling": the local-scaling sigma times this (see algorithms.cpm3c).
WIDE_LOCAL_SCALING = "wide_local_scaling"


class CPM3CParams(AlgorithmParams):
    """Parameters of :class:`CPM3C` (meanings and defaults: see the class)."""

    renamed: ClassVar[Renames] = {"n_components": ("n_landmarks", None),
                                  "class_balance": ("score_balance", None),
                                  "epsilon": ("cutting_plane_tol", None),
                                  "max_iter": ("max_cutting_plane_iter", None)}
    renamed_values: ClassVar[RenamedValues] = {"gamma": {"auto": WIDE_LOCAL_SCALING}}

    n_clusters: NClustersOrAuto = 2
    max_clusters: MaxClusters = DEFAULT_MAX_CLUSTERS
    kernel: KernelParam = "rbf"
    gamma: PositiveFloat | Literal["wide_local_scaling", "local_scaling", "paper", "scale"] = (
        Field(WIDE_LOCAL_SCALING, description=(
            "RBF width, exp(-gamma ||x - x'||^2) (a number means what it means in "
            "scikit-learn). 'wide_local_scaling': the local-scaling sigma (median distance to "
            "the 7th nearest neighbour) doubled, gamma = 1 / (8 sigma^2); 'local_scaling': "
            "gamma = 1 / (2 sigma^2); 'paper': sigma = width_factor * D, gamma = 1 / sigma^2; "
            "'scale': scikit-learn's 1 / (n_features * X.var()).")))
    width_factor: float = Field(
        1.0, gt=0, le=100,
        description="For kernel='rbf', gamma='paper': sigma = width_factor * D, gamma = 1/sigma^2.",
    )
    init: Literal["spectral", "k-means"] = Field(
        "spectral",
        description=(
            "Initial weights of the first run: from the clusters of the kNN graph's spectral "
            "partition ('spectral'; later runs start from k-means) or from k-means (the paper's)."
        ),
    )
    n_landmarks: int = Field(
        300, ge=10, le=5000, description="Nystrom coordinates used for kernel='rbf'."
    )
    width_reference: Literal["diameter", "max_distance"] = Field(
        "diameter",
        description=(
            "For kernel='rbf', gamma='paper': the distance D that width_factor multiplies, the "
            "bounding-box diagonal ('diameter') or the largest pairwise distance ('max_distance', "
            "the paper's sigma_0)."
        ),
    )
    kpca_components: int | None = Field(
        None, ge=1, le=5000,
        description=(
            "For kernel='rbf': keep only the top principal components of the kernel coordinates "
            "(kernel PCA, the paper's section 2.1); None keeps all."
        ),
    )
    C: float = Field(
        100.0, gt=0, le=1e7,
        description="Weight of the slack xi against 1/2 sum ||w_p||^2 (the paper's 1 / beta).",
    )
    score_balance: float = Field(
        0.03, ge=0, le=1e3,
        description=(
            "l / n in the class balance (16): -l <= sum_i (f_p(x_i) - f_q(x_i)) <= l, i.e. the "
            "largest difference between two clusters' mean scores."
        ),
    )
    cutting_plane_tol: CuttingPlaneTol = Field(
        0.01,
        description="Cutting-plane precision: stop when no constraint is violated by more than "
        "this (the paper's epsilon, per point).",
    )
    cccp_tol: float = Field(
        0.01, gt=0, lt=1, description="CCCP stops when the objective improves by less (0.01)."
    )
    max_cutting_plane_iter: int = Field(
        200, ge=1, le=10000,
        description="Most cutting-plane iterations (one most violated constraint added each).")
    max_cccp_iter: int = Field(30, ge=1, le=1000, description="CCCP steps per iteration.")
    n_init: int = Field(10, ge=1, le=100, description="k-means runs in the pool of starts.")
    supervised_start: bool = Field(
        True,
        description=(
            "Each run first fits the supervised SVM of its starting partition by the same "
            "cutting planes (labels held), then lets the labels move (false: the paper's start "
            "from w0 with a one-constraint working set)."
        ),
    )
    n_restarts: int = Field(
        1, ge=1, le=50,
        description=(
            "Distinct k-means partitions of the pool (lowest inertia first) that CPM3C runs "
            "from, besides the spectral partition; the run with the lowest final objective (11) "
            "that leaves no cluster empty is kept."
        ),
    )
    exact_max_n: int | None = Field(
        1_000_000, ge=2, le=100_000_000,
        description="Largest n clustered over every point; above it, a uniform random sample of "
        "exact_max_n points is clustered and every point is labelled by the paper's rule, the "
        "argmax of the scores w_p.x + b_p. null: always every point.",
    )
    normalize: Literal["none", "l2"] = Field(
        "none", description="Row preprocessing: 'l2' scales every point to unit Euclidean norm."
    )
    portfolio: PortfolioParam = True
    random_state: RandomStateParam = None
