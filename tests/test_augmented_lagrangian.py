"""The penalty and inner-tolerance policy shared by the low-rank SDP solver and GMMC's solver."""

import math

from algorithms.augmented_lagrangian import PenaltyPolicy


def test_the_inner_tolerance_follows_the_residual_between_floor_and_ceiling():
    policy = PenaltyPolicy(inner_floor=1e-6)
    assert policy.inner_tolerance(math.inf) == 1e-3  # before the first outer iteration
    assert policy.inner_tolerance(1e-3) == 0.1 * 1e-3
    assert policy.inner_tolerance(1e-9) == 1e-6


def test_the_penalty_grows_only_while_the_residual_lags_and_stops_at_its_cap():
    policy = PenaltyPolicy(inner_floor=1e-9)
    assert policy.lags(0.5, 1.0, tol=1e-4)  # fell by 2 times: less than 4
    assert not policy.lags(0.2, 1.0, tol=1e-4)  # fell by 5 times
    assert not policy.lags(5e-5, 1e-4, tol=1e-4)  # within the tolerance
    assert policy.grown(1.0, mu_max=100.0) == 4.0
    assert policy.grown(50.0, mu_max=100.0) == 100.0
