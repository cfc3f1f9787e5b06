"""iterSVR's parameters (Zhang, Tsang and Kwok 2007): what a caller may set, checked before any fit
and by the API's request schema."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from algorithms.params.common import (
    DEFAULT_MAX_CLUSTERS,
    AlgorithmParams,
    ExactMaxN,
    GammaParam,
    KernelParam,
    MaxAlternations,
    MaxClusters,
    NClustersOrAuto,
    PortfolioParam,
    RandomStateParam,
    Renames,
    exact_max_n_of_sampling,
)


class IterSVRParams(AlgorithmParams):
    """Parameters of :class:`IterSVR` (the paper's defaults are in its section 4)."""

    renamed: ClassVar[Renames] = {"solver": ("exact_max_n", exact_max_n_of_sampling),
                                  "max_iter": ("max_alternations", None)}
    library_only = ("guide",)

    n_clusters: NClustersOrAuto = 2
    max_clusters: MaxClusters = DEFAULT_MAX_CLUSTERS
    kernel: KernelParam = "rbf"
    gamma: GammaParam = Field("local_scaling", description=(
        "RBF width, exp(-gamma ||x - x'||^2) (a number means what it means in scikit-learn). "
        "'local_scaling': gamma = 1 / (2 sigma^2), sigma the median distance from a point to its "
        "7th nearest neighbour; 'paper': sigma = width_factor * D, D the diagonal of the data's "
        "bounding box (footnote 5), gamma = 1 / sigma^2; 'scale': scikit-learn's "
        "1 / (n_features * X.var())."))
    width_factor: float = Field(
        3.0, gt=0, le=100,
        description="For gamma='paper': sigma = width_factor * D (the paper uses 2 to 5).",
    )
    init: Literal["spectral", "k-means"] = Field(
        "spectral",
        description=(
            "Starting labels of each split: 'spectral' (the kNN graph's spectral split, then the "
            "k-means starts; each run keeps its start's imbalance) or 'k-means' (the paper's)."
        ),
    )
    C: float = Field(500.0, gt=0, le=1e7, description="SVR/SVM regularisation (paper: 500).")
    class_balance: float = Field(
        0.03, ge=0, le=1,
        description="l / n in -l <= e^T y <= l (paper: 0.03 balanced, 0.3 unbalanced data).",
    )
    n_init: int = Field(10, ge=1, le=100, description="k-means restarts for the initial labels.")
    max_alternations: MaxAlternations = Field(
        50,
        description="Most rounds of each split's alternation (fit the SVR to the labels, "
        "relabel by the sign of its output); a split stops earlier when no label changes.")
    exact_max_n: ExactMaxN = Field(
        1500,
        description="Largest n clustered over every point (the kernel matrix of all points); "
        "above it, a uniform random sample of exact_max_n points is clustered and every point "
        "is labelled by the SVM tree (section 3.2.1). null: always every point.",
    )
    portfolio: PortfolioParam = True
    random_state: RandomStateParam = None
