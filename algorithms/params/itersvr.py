"""iterSVR's parameters (Zhang, Tsang and Kwok 2007): what a caller may set, checked before any fit
and by the API's request schema."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from algorithms.params.common import (
    DEFAULT_MAX_CLUSTERS,
    AlgorithmParams,
    GammaParam,
    KernelParam,
    MaxClusters,
    NClustersOrAuto,
    PortfolioParam,
    RandomStateParam,
    SampleSolver,
)


class IterSVRParams(AlgorithmParams):
    """Parameters of :class:`IterSVR` (the paper's defaults are in its section 4)."""

    library_only = ("guide",)

    n_clusters: NClustersOrAuto = 2
    max_clusters: MaxClusters = DEFAULT_MAX_CLUSTERS
    kernel: KernelParam = "rbf"
    gamma: GammaParam = "auto"
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
    max_iter: int = Field(50, ge=1, le=1000, description="SVR iterations per split.")
    solver: SampleSolver = Field(
        "auto",
        description=(
            "'exact': cluster every point (kernel matrix of all points); 'sample': cluster a "
            "random sample of exact_max_n points and label the rest by the SVM tree; 'auto': "
            "exact up to exact_max_n points, sample above."
        ),
    )
    exact_max_n: int = Field(
        1500, ge=2, le=20000,
        description="Largest n clustered exactly; the sample size above it.",
    )
    portfolio: PortfolioParam = True
    random_state: RandomStateParam = None
