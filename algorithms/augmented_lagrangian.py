"""The penalty and inner-tolerance policy of the augmented-Lagrangian solvers.

Both factorised solvers (the low-rank SDP solver, :mod:`algorithms.lowrank_sdp.solver`, and
GMMC's, :func:`algorithms.gmmc_solver.solve_gmmc_lowrank`) follow the two rules of a practical
augmented Lagrangian (Nocedal and Wright 2006, section 17.4; Burer and Monteiro 2003 for the
low-rank factor): each inner problem is solved only as accurately as the outer residual
warrants, and the penalty grows only while the residual lags, since a large penalty makes the
inner problem (quartic in the factor) ill-conditioned for L-BFGS without helping the duality
gap.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PenaltyPolicy:
    """When and how the penalty ``mu`` grows, and how tight each inner solve is.

    Parameters
    ----------
    inner_floor : float
        The tightest inner tolerance (in the caller's units, before its scale).
    inner_ceiling : float, default=1e-3
        The loosest inner tolerance, taken while the residual is large.
    inner_share : float, default=0.1
        The inner tolerance as this share of the previous outer residual, between the two.
    lag : float, default=0.25
        The penalty grows when an outer iteration leaves the residual above ``lag`` times the
        previous one (and above the tolerance).
    growth : float, default=4.0
        The factor by which the penalty grows, up to the caller's cap.
    """

    inner_floor: float
    inner_ceiling: float = 1e-3
    inner_share: float = 0.1
    lag: float = 0.25
    growth: float = 4.0

    def inner_tolerance(self, residual_old: float) -> float:
        """``max(floor, min(ceiling, share * residual_old))``: the gradient tolerance of the next
        inner solve, before the caller's scale (``inf`` before the first outer iteration gives
        the ceiling)."""
        return max(self.inner_floor, min(self.inner_ceiling, self.inner_share * residual_old))

    def lags(self, residual: float, residual_old: float, tol: float) -> bool:
        """Whether the residual is above ``tol`` and fell by less than ``1 / lag`` times."""
        return residual > tol and residual > self.lag * residual_old

    def grown(self, mu: float, mu_max: float) -> float:
        """The penalty after one growth step, at most ``mu_max``."""
        return min(self.growth * mu, mu_max)
