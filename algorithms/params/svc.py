"""Support vector clustering's parameters (Ben-Hur, Horn, Siegelmann and Vapnik 2001), with the
check that ``C`` can bound the dual: what a caller may set, checked before any fit and by the
API's request schema."""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from algorithms.params.common import (
    DEFAULT_MAX_CLUSTERS,
    AlgorithmParams,
    ExactMaxN,
    MaxClusters,
    NClustersAutoOrNone,
    PortfolioParam,
    PositiveFloat,
    RandomStateParam,
    RenamedValues,
    Renames,
    exact_max_n_of_sampling,
)

Labeling = Literal["complete", "support_vectors", "knn"]

# gamma="schedule": the divisive schedule of section 4 searches q (Ben-Hur et al. 2001).
SCHEDULE = "schedule"


# The default exact_max_n: above this many points the fit runs on a random sample of this size and
# predict labels every point. The schedule solves tens to a hundred and more spheres, each O(N^2)
# in libsvm, plus the O(N_sv^2) SV graph, so the exact fit grows quadratically with N and the
# sample bounds it (the battery's longest fits, docs/battery.md).
SAMPLE_SIZE = 1000


def soft_margin_problem(C: float | None, n: int) -> str | None:
    """Why ``C`` cannot bound the dual (11) of ``n`` points (``C < 1/N``), or None."""
    if C is not None and C * n < 1.0:
        return (f"C={C} is below 1/N = {1.0 / n:.3g}: the constraints sum(beta) = 1 and "
                "beta <= C cannot both hold; use C >= 1/N or give p = 1/(N C) in (0, 1]")
    return None


class SupportVectorClusteringParams(AlgorithmParams):
    """Parameters of :class:`SupportVectorClustering` (meanings and defaults: see the class)."""

    renamed: ClassVar[Renames] = {"solver": ("exact_max_n", exact_max_n_of_sampling),
                                  "max_iter": ("max_spheres", None)}
    renamed_values: ClassVar[RenamedValues] = {"gamma": {"auto": SCHEDULE}}

    n_clusters: NClustersAutoOrNone = Field(
        None,
        description=(
            "Clusters wanted by gamma='schedule' (default 2 there); 'auto': the k in "
            "2..max_clusters of largest prediction strength. With a numeric gamma it is not "
            "used: the number of clusters is that of the contours."
        ),
    )
    max_clusters: MaxClusters = DEFAULT_MAX_CLUSTERS
    gamma: PositiveFloat | Literal["schedule", "scale"] = Field(
        SCHEDULE,
        description=(
            "The paper's q in exp(-q ||x - x'||^2) (a number means what it means in "
            "scikit-learn). 'schedule': no one width; the divisive schedule of section 4 raises q "
            "(at most max_spheres spheres) until the contours give n_clusters clusters; 'scale': "
            "scikit-learn's 1 / (n_features * X.var())."
        ),
    )
    C: float | None = Field(
        None, gt=0, le=1e6,
        description="Soft margin C of (9); C >= 1 means no bounded SVs. Give C or p, not both.",
    )
    p: float | None = Field(
        None, gt=0, lt=1,
        description="p = 1/(N C), the share of points allowed outside (paper Table 1: 0.55-0.75).",
    )
    labeling: Labeling = Field(
        "support_vectors",
        description=(
            "Which segments (19) are tested: 'complete' (all pairs, the paper's, O(N^2)), "
            "'support_vectors' (SV pairs + each point to its nearest SVs) or 'knn'."
        ),
    )
    n_neighbors: int = Field(10, ge=1, le=200, description="Neighbours per point for knn/SV tests.")
    n_segment_points: int = Field(
        20, ge=1, le=100,
        description="Samples per segment (paper: 10; more avoid false bridges across gaps).",
    )
    bounded_svs: Literal["chain", "nearest", "outlier"] = Field(
        "chain",
        description=(
            "Bounded SVs (outside the sphere) join the closest cluster: 'chain' grows the "
            "clusters outward, nearest point first, each joining the cluster of its nearest "
            "point already in one; 'nearest' takes the nearest point inside the contours; "
            "'outlier' labels them -1."
        ),
    )
    n_components: Annotated[int, Field(ge=1, le=10000)] | Literal["auto"] | None = Field(
        "auto",
        description=(
            "Fit the sphere on this many leading principal components of the centred data "
            "(the paper's section 5: SVC on a low-dimensional PCA representation when the data is "
            "sparse). 'auto': the input space first, and with gamma='schedule' the leading "
            "n_clusters components when no sphere in the input space has n_clusters clusters of "
            "at least 5 % of the points; "
            "null: always the input space."
        ),
    )
    tol: float = Field(1e-4, gt=0, le=1e-1, description="libsvm stopping tolerance.")
    max_spheres: int = Field(
        200, ge=1, le=10000,
        description="Most spheres (one per q) that gamma='schedule' solves in one space.")
    exact_max_n: ExactMaxN = Field(
        SAMPLE_SIZE,
        description="Largest n whose sphere and contours are fitted on every point; above it, on "
        "a uniform random sample of exact_max_n points, and every point is labelled by predict. "
        "null: always every point.",
    )
    portfolio: PortfolioParam = True
    random_state: RandomStateParam = None

    @model_validator(mode="after")
    def _c_or_p(self):
        if self.C is not None and self.p is not None:
            raise ValueError("give C or p = 1/(N C), not both")
        if isinstance(self.gamma, float) and not (0 < self.gamma < math.inf):
            raise ValueError("gamma must be a positive number, 'schedule' or 'scale'")
        return self
