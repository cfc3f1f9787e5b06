"""The robust SVM's parameters (Xu 2007, chapter 6), with the size limit of its SDPs: what a caller
may set, checked before any fit and by the API's request schema."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from algorithms.params.common import (
    AlgorithmParams,
    GammaParam,
    KernelParam,
    MaxAlternations,
    Renames,
)

Method = Literal["reh", "rod", "ramp"]


class RobustSVMParams(AlgorithmParams):
    """Parameters of :class:`RobustSVM` (the thesis's defaults are in its section 6.5)."""

    renamed: ClassVar[Renames] = {"max_iter": ("max_alternations", None)}

    method: Method = Field(
        "reh",
        description="'reh' SDP of Theorem 7, 'rod' SDP of section 6.3, 'ramp' alternating "
        "(w, eta) minimisation (large n).",
    )
    kernel: KernelParam = "linear"
    gamma: GammaParam = Field("scale", description=(
        "RBF width, exp(-gamma ||x - x'||^2) (a number means what it means in scikit-learn). "
        "'scale': scikit-learn's 1 / (n_features * X.var()); 'local_scaling': gamma = "
        "1 / (2 sigma^2), sigma the median distance from a point to its 7th nearest neighbour; "
        "'paper': 1 / D^2, D the diagonal of the data's bounding box."))
    C: float = Field(
        1.0, gt=0, le=1e6,
        description="Soft-margin weight, C = 1 / beta of (6.1); thesis grid beta = 1e-4..1e4.",
    )
    rho: float = Field(
        0.8, gt=0, le=1,
        description=(
            "ROD: least share of inliers, e^T eta >= rho n (thesis: 0.8); ramp: share of the "
            "points (nearest their class centre) kept by the second start of the alternation."
        ),
    )
    fit_intercept: bool = Field(
        True, description="Fit an unregularised offset. SDPs: solved at the median of the points "
        "(linear kernel), then b minimising the eta-hinge loss; False is the thesis' offset-free "
        "classifier through the origin."
    )
    max_alternations: MaxAlternations = Field(
        50,
        description="method='ramp': most rounds of the alternation (fit the SVM with the "
        "outlier indicators eta held, then eta with the SVM held); it stops earlier when eta "
        "repeats.")
    solver: Literal["auto", "lowrank", "clarabel", "scs"] = Field(
        "auto",
        description="SDP solver: 'auto' = 'lowrank' (factorised, certified relative gap 1e-3, "
        "reported as the certificate); 'scs' (SCS at eps 1e-4) and 'clarabel' (interior point) "
        "solve the cvxpy formulation, the reference.",
    )


# REH / ROD size limit of the registry: the largest n whose fit stays well inside the job
# timeout on a small, loaded machine. The SDPs run on the low-rank solver, fast on the factor of a
# low-rank kernel but dense, and much slower, for a kernel of full rank (RBF), with ROD slower to
# certify than REH (benchmarks/sdp_solver.py times them).
SDP_MAX_N = 1000
