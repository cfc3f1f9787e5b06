"""GMMC's parameters (Valizadegan and Jin 2006): what a caller may set, checked before any fit and
by the API's request schema."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from algorithms.params.common import (
    DEFAULT_MAX_CLUSTERS,
    MaxClusters,
    NClustersOrAuto,
    PortfolioParam,
    PositiveFloat,
    RandomStateParam,
    Renames,
    SampledFitParams,
    SDPTol,
)


class GMMCParams(SampledFitParams):
    """Parameters of :class:`GMMC` (the paper's defaults are in its sections 3 and 4)."""

    renamed: ClassVar[Renames] = {"width_fraction": ("width_factor", None),
                                  "C": ("C_svm", None),
                                  "max_iter": ("lowrank_max_iter", None),
                                  "tol": ("sdp_tol", None)}
    library_only = ("guide",)

    n_clusters: NClustersOrAuto = Field(
        2, description="2: the paper's problem (10); more: recursive bisection guided by "
        "CPM3C's multi-class max-margin partition (two-class splits only with "
        "kernel_learning=false); 'auto': the k in 2..max_clusters of largest prediction "
        "strength (not with kernel_learning).")
    max_clusters: MaxClusters = DEFAULT_MAX_CLUSTERS
    kernel: Literal["rbf"] = Field("rbf", description="RBF affinities (the paper's only kernel).")
    gamma: PositiveFloat | Literal["local_scaling", "paper"] = Field(
        "local_scaling",
        description=(
            "RBF width exp(-gamma ||x-x'||^2) (a number means what it means in scikit-learn); "
            "'local_scaling': gamma = 1 / (2 sigma^2), sigma the median distance from a point to "
            "its 7th nearest neighbour; 'paper': sigma = width_factor x the range of pairwise "
            "distances, gamma = 1 / (2 sigma^2) (section 4). Ignored with kernel_learning."
        ),
    )
    width_factor: float = Field(
        0.2, gt=0, le=10,
        description="For gamma='paper': sigma = width_factor x D, D the range (max - min) of "
        "the pairwise distances (section 4; Shi and Malik's 0.1 to 0.2)."
    )
    degree_regularization: float = Field(
        1.0, ge=0, le=100,
        description="Laplacians of degrees + this x the mean degree (regularized spectral "
        "clustering; 0 = the paper's Laplacian): no nearly isolated point is split off for free.",
    )
    kernel_learning: bool = Field(
        False, description="Learn weights of n_widths Laplacians jointly with the labels (12)."
    )
    n_widths: int = Field(
        10, ge=2, le=50, description="Kernel learning widths: 1/m, 2/m, ..., 1 of the range."
    )
    C_e: float = Field(1e4, gt=0, le=1e9, description="Weight of (z^T e)^2 in (5); paper: 10,000.")
    C_delta: float = Field(1e5, gt=0, le=1e10, description="Bound on gamma in (10); paper: 1e5.")
    solver: Literal["lowrank", "scs"] = Field(
        "lowrank", description="Burer-Monteiro augmented Lagrangian, or the scaled SDP for SCS."
    )
    rank: int | None = Field(None, ge=1, le=200, description="Factor rank (lowrank solver).")
    lowrank_max_iter: int = Field(
        50, ge=1, le=1000,
        description="solver='lowrank': most augmented-Lagrangian iterations of one solve of (10).")
    kernel_max_iter: int = Field(30, ge=1, le=500, description="Kernel-learning iterations.")
    sdp_tol: SDPTol = Field(
        1e-6,
        description="Stopping tolerance of the SDP solver: the relative duality gap and residual "
        "of an 'optimal' solve of solver='lowrank' (SCS runs at its own eps 1e-7).")
    C_svm: float = Field(
        100.0, gt=0, le=1e7,
        description="C of the out-of-sample SVM trained on the found labels, which also scores "
        "the spectral candidate; not a weight of (10), whose weights are C_e and C_delta.")
    spectral_candidate: bool = Field(
        True,
        description="Two clusters without kernel learning: also score the spectral partition of "
        "the kNN graph by the soft-margin objective of the out-of-sample SVM (C_svm) and keep "
        "whichever labeling has the smaller (false: the labels of (10) alone, as in the paper).",
    )
    exact_max_n: int | None = Field(
        800, ge=3, le=20000,
        description="Largest n solved over every point; above it, over a random sample of "
        "exact_max_n points stratified over k-means cells of the data, and every point is "
        "labelled by the out-of-sample SVM. null: always every point.",
    )
    portfolio: PortfolioParam = True
    random_state: RandomStateParam = None

    @model_validator(mode="after")
    def _kernel_learning_is_two_class(self):
        if self.kernel_learning and self.n_clusters != 2:
            raise ValueError(f"kernel_learning (12) is a two-class problem: use n_clusters=2, "
                             f"not {self.n_clusters!r}")
        return self
