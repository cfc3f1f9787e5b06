"""One low-rank SDP solver (Burer and Monteiro 2003) for the convex matrix programs of SDP MMC and
the robust SVM: the constraint algebra (:mod:`.constraints`), the box QP of the inner SVM duals
(:mod:`.box_qp`), the augmented-Lagrangian solver and its certificate (:mod:`.solver`), the
objectives (:mod:`.objectives`) and the programs (:mod:`.programs`)."""

from algorithms.lowrank_sdp.box_qp import compiled_active_set, solve_box_qp
from algorithms.lowrank_sdp.constraints import (
    BilinearConstraints,
    Constraints,
    bilinear,
    map_constraints,
)
from algorithms.lowrank_sdp.objectives import (
    FACTORED_MAX_RANK,
    HalfSphereMarginObjective,
    LinearObjective,
    MappedObjective,
    MarginObjective,
    compiled_factored_dual,
    compiled_lbfgs,
    factored_is_cheaper,
    half_sphere_map,
    low_rank_factor,
)
from algorithms.lowrank_sdp.programs import (
    MultiClassLowRank,
    RobustLowRank,
    TwoClassLowRank,
    default_rank,
    solve_multiclass_lowrank,
    solve_robust_lowrank,
    solve_two_class_lowrank,
    spectral_start,
)
from algorithms.lowrank_sdp.solver import (
    LowRankSDPResult,
    Objective,
    certificate_values,
    raise_if_infeasible,
    solve_lowrank_sdp,
)

__all__ = [
    "FACTORED_MAX_RANK", "BilinearConstraints", "Constraints", "HalfSphereMarginObjective",
    "LinearObjective", "LowRankSDPResult", "MappedObjective", "MarginObjective",
    "MultiClassLowRank", "Objective", "RobustLowRank", "TwoClassLowRank", "bilinear",
    "certificate_values", "compiled_active_set", "compiled_factored_dual", "compiled_lbfgs",
    "default_rank", "factored_is_cheaper", "half_sphere_map", "low_rank_factor",
    "map_constraints", "raise_if_infeasible", "solve_box_qp", "solve_lowrank_sdp",
    "solve_multiclass_lowrank", "solve_robust_lowrank", "solve_two_class_lowrank",
    "spectral_start",
]
