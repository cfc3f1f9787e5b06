"""The compiled SMO (algorithms.dual_qp) against libsvm's SVR and SVC duals on random problems."""

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC, SVR

from algorithms.dual_qp import solve_dual_qp
from algorithms.kernels import pairwise_kernel


def _problem(seed: int, n: int = 80):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return pairwise_kernel(X, kernel="rbf", gamma=0.5), y


def _objective(K, y, u):
    return 0.5 * u @ K @ u - y @ u


@pytest.mark.parametrize("seed", range(3))
def test_laplacian_svr_dual_matches_libsvm(seed):
    K, y = _problem(seed)
    C = 10.0
    svr = SVR(kernel="precomputed", C=C, epsilon=0.0, tol=1e-8).fit(K, y)
    u_libsvm = np.zeros(y.size)
    u_libsvm[svr.support_] = svr.dual_coef_[0]
    solution = solve_dual_qp(K, y, -C, C, tol=1e-8)
    assert solution.converged
    assert abs(solution.u.sum()) < 1e-9 and np.abs(solution.u).max() <= C
    reference = _objective(K, y, u_libsvm)
    assert abs(_objective(K, y, solution.u) - reference) <= 1e-7 * abs(reference)
    np.testing.assert_allclose(solution.scores, K @ u_libsvm, atol=1e-4)
    np.testing.assert_allclose(solution.scores, K @ solution.u)


def test_per_variable_bounds_give_the_svc_dual():
    # With u = y * alpha the SVC dual is the same QP under the bounds 0 <= y_i u_i <= C.
    K, y = _problem(7)
    C = 2.0
    svc = SVC(kernel="precomputed", C=C, tol=1e-8).fit(K, y)
    u_libsvm = np.zeros(y.size)
    u_libsvm[svc.support_] = svc.dual_coef_[0]
    solution = solve_dual_qp(K, y, np.minimum(0.0, C * y), np.maximum(0.0, C * y), tol=1e-8)
    np.testing.assert_allclose(solution.u, u_libsvm, atol=1e-5)


def test_an_iteration_cap_warns_and_returns_a_feasible_iterate():
    K, y = _problem(1)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        solution = solve_dual_qp(K, y, -10.0, 10.0, max_iter=3)
    assert not solution.converged and solution.n_iter == 3
    assert abs(solution.u.sum()) < 1e-12 and np.abs(solution.u).max() <= 10.0


def test_a_start_from_nearby_labels_reaches_the_optimum_in_fewer_iterations():
    # iterSVR's warm start: at its tolerance (1e-2) a late step, which moves a few labels, needs
    # fewer SMO iterations from the previous dual solution than from zero, to the same optimum.
    K, y = _problem(0, n=120)
    C = 10.0
    previous = solve_dual_qp(K, y, -C, C, tol=1e-2)
    start = previous.u.copy()
    moved = y.copy()
    moved[:3] *= -1.0
    cold = solve_dual_qp(K, moved, -C, C, tol=1e-2)
    warm = solve_dual_qp(K, moved, -C, C, tol=1e-2, u0=start)
    exact = _objective(K, moved, solve_dual_qp(K, moved, -C, C, tol=1e-10).u)
    assert warm.converged and warm.n_iter < 0.75 * cold.n_iter
    assert 0.0 <= _objective(K, moved, warm.u) - exact <= 0.05
    assert abs(warm.u.sum()) < 1e-9 and np.abs(warm.u).max() <= C
    np.testing.assert_array_equal(start, previous.u)  # the start is not written to
