"""The unsupervised M3N's parameters (Xu 2007, chapter 5), with the check that the exact relaxation
has a feasible point: what a caller may set, checked before any fit and by the API's request
schema."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from algorithms.params.common import (
    AlgorithmParams,
    CuttingPlaneTol,
    MaxAlternations,
    RandomStateParam,
    Renames,
    SDPMaxIter,
    SDPTol,
    reciprocal,
)


def exact_relaxation_problem(n_positions: int, n_pairs: int, n_states: int,
                             size_band: float, pair_size_band: float) -> str | None:
    """Why the relaxation (5.24)-(5.27) has no feasible point for this many positions and
    adjacent pairs, or None: a row of ``M`` (of ``N``) holds its diagonal 1, so the largest row
    sum the balance (5.25) (its pair analogue) allows must be at least 1."""
    if (1.0 / n_states + size_band) * n_positions < 1.0:
        return (f"method='exact' needs (1/n_states + size_band) x positions >= 1; "
                f"{n_positions} positions give less: send more positions or raise size_band")
    if n_pairs and (1.0 / n_states**2 + pair_size_band) * n_pairs < 1.0:
        return (f"method='exact' needs (1/n_states^2 + pair_size_band) x adjacent pairs >= 1; "
                f"{n_pairs} pairs give less: send longer sequences, raise pair_size_band or use "
                "method='alternating'")
    return None


NStates = Annotated[int, Field(ge=2, le=50, description="Number of hidden states k.")]


class UnsupervisedM3NParams(AlgorithmParams):
    """Parameters of :class:`UnsupervisedM3N` (defaults from thesis section 5.3)."""

    renamed: ClassVar[Renames] = {"beta": ("C", reciprocal), "class_balance": ("size_band", None),
               "pair_balance": ("pair_size_band", None), "sdp_solver": ("solver", None),
               "max_iter": ("max_alternations", None), "tol": ("cutting_plane_tol", None),
               "n_init": ("n_restarts", None)}

    n_states: NStates = 2
    method: Literal["alternating", "exact"] = Field(
        "alternating",
        description="'alternating' (ACDHMM, section 5.4, fast) or 'exact' (CDHMM, the convex "
        "relaxation (5.28) solved as an SDP; small problems only).",
    )
    C: float = Field(100.0, ge=1e-4, le=1e7, description="Weight of the margin loss, C = 1 / beta "
                     "of (2.47) (thesis: beta = 0.01 for the synthetic data, 1.0 for proteins).")
    size_band: float = Field(
        0.1, ge=0, le=1,
        description="epsilon of (5.25): every state labels between (1/k - eps) and (1/k + eps) "
        "of all positions.",
    )
    pair_size_band: float = Field(
        0.3, ge=0, le=1,
        description="epsilon of the pair constraint in (5.25) (exact method): every pair of "
        "states labels between (1/k^2 - eps) and (1/k^2 + eps) of all adjacent pairs.",
    )
    n_restarts: int = Field(5, ge=1, le=100, description="Runs of the alternating method, each "
                            "from a new EM run; the smallest margin loss is kept.")
    em_iter: int = Field(100, ge=1, le=10000, description="Baum-Welch iterations per restart.")
    max_alternations: MaxAlternations = Field(
        50,
        description="Most rounds of the alternation (train the M3N on the labels, relabel by "
        "balanced Viterbi); it stops earlier when no label changes or the margin loss decreases "
        "by less than cutting_plane_tol.")
    cutting_plane_tol: CuttingPlaneTol = Field(
        1e-3,
        description="Cutting-plane precision: stop when no constraint is violated by more than "
        "this, per position (the supervised M3N); the alternation also stops when the margin "
        "loss decreases by less.")
    solver: Literal["scs", "clarabel"] = Field(
        "scs", description="Exact method: cvxpy solver of the CDHMM relaxation.")
    sdp_tol: SDPTol = Field(1e-3, description="Stopping tolerance of the SDP "
                           "solver of the exact method's CDHMM relaxation (SCS eps_abs = "
                           "eps_rel).")
    sdp_max_iter: SDPMaxIter = Field(3000, description="Iteration limit of the "
                              "cvxpy solver of the exact method; a solve stopped there is "
                              "reported in warnings (inaccurate) or fails the job with the "
                              "solver status.")
    random_state: RandomStateParam = None
