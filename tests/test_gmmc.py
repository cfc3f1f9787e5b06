"""GMMC (Valizadegan & Jin 2006): the formulation, the solvers, the estimator. Its Table 1 (best
width and kernel learning, synthetic sets and digit pairs) is checked by
``python -m benchmarks.paper_tables``."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from algorithms.conic import SDPSolverError
from algorithms.gmmc import (
    GMMC,
    PAPER_SETTING,
    degenerate_laplacian_labels,
    eliminate_bias,
    laplacian_precision,
)
from algorithms.gmmc_solver import (
    relax_whole_groups,
    solve_gmmc_cvxpy,
    solve_gmmc_lowrank,
    split_whole_groups,
)
from algorithms.kernels import normalized_laplacian, squared_distances
from algorithms.metrics import clustering_error
from algorithms.registry import get_spec
from benchmarks.gmmc import (
    two_gaussians,
    two_jointed_circles,
)
from tests.baselines import kmeans_error

C_E, C_DELTA = 1e4, 1e5  # the paper's constants (sections 3.1 and 3.2)


def _same_partition(a, b) -> bool:
    return clustering_error(a, b) == 0.0


def _tiny_instance(n=24):
    X, y = make_blobs(n_samples=n, centers=[[0, 0], [3, 1]], cluster_std=0.8, random_state=3)
    K = np.exp(-0.25 * squared_distances(X))
    return X, y, K


def _solve_10_directly(M: np.ndarray):
    """(10) exactly as printed, (n+1) x (n+1) LMI with P = (I, e) and the paper's constants."""
    n = M.shape[0]
    P = np.hstack([np.eye(n), np.ones((n, 1))])
    e0 = np.r_[np.ones(n), 0.0]
    A0 = P.T @ M @ P + C_E * np.outer(e0, e0)
    gamma = cp.Variable(n)
    lmi = A0 - cp.diag(cp.hstack([gamma, np.zeros(1)]))
    constraints = [(lmi + lmi.T) / 2 >> 0, gamma >= 0, gamma <= C_DELTA]
    problem = cp.Problem(cp.Maximize(cp.sum(gamma)), constraints)
    problem.solve(solver="CLARABEL")
    # Labels from the LMI's dual, the relaxed label matrix (rank one here: eigenvalues 24 and
    # 2e-5). The KKT matrix's null vector of section 3.1 is the same direction in exact
    # arithmetic, but at Clarabel's accuracy its two smallest eigenvalues (-3e-5, 2e-5) mix, and
    # the vector's sign on one point depended on the machine.
    w = np.linalg.eigh(constraints[0].dual_value)[1][:, -1]
    return problem.status, float(problem.value), (w[:n] < 0).astype(int)


# -- the formulation -------------------------------------------------------------------------


def test_printed_laplacian_is_indefinite_so_chung_normalization_is_used():
    _, _, K = _tiny_instance()
    d = K.sum(axis=1)
    printed = np.eye(len(d)) - np.sqrt(d)[:, None] * K * np.sqrt(d)[None, :]
    assert np.linalg.eigvalsh(printed)[0] < -1.0  # (10) would be infeasible even at gamma = 0
    chung = np.linalg.eigvalsh(normalized_laplacian(K))
    assert chung[0] > -1e-10 and chung[-1] < 2 + 1e-10


def test_bare_laplacian_gives_10_a_zero_cost_degree_split():
    _, y, K = _tiny_instance()
    n = len(y)
    L = normalized_laplacian(K)
    P = np.hstack([np.eye(n), np.ones((n, 1))])
    e0 = np.r_[np.ones(n), 0.0]
    u = np.sqrt(K.sum(axis=1))
    w = np.r_[u - u.mean(), u.mean()]
    A0 = P.T @ L @ P + C_E * np.outer(e0, e0)
    assert np.linalg.norm(A0 @ w) < 1e-8 * np.linalg.norm(w)  # forces gamma = 0 in (10)
    assert np.array_equal(degenerate_laplacian_labels(K), (w[:n] < 0).astype(int))
    M = laplacian_precision(K)  # the lifted null direction makes the problem positive definite
    assert np.linalg.eigvalsh(M)[0] > 1e-6


def test_eliminating_the_bias_row_is_exact():
    _, _, K = _tiny_instance()
    M = laplacian_precision(K)
    S = eliminate_bias(M)
    assert np.allclose(S @ np.ones(len(S)), 0.0, atol=1e-10)
    z = np.random.default_rng(0).standard_normal(len(S))
    lam = np.linspace(-3, 3, 20001)
    costs = [(z + t) @ M @ (z + t) for t in lam]
    assert min(costs) == pytest.approx(z @ S @ z, rel=1e-6)


def test_lowrank_and_scaled_cvxpy_solve_the_same_problem_as_a_direct_solve_of_10():
    X, _, K = _tiny_instance()
    M = laplacian_precision(K)
    status, value, labels = _solve_10_directly(M)
    assert status == "optimal"
    low = solve_gmmc_lowrank(eliminate_bias(M), C_e=C_E, C_delta=C_DELTA, random_state=0)
    assert low.status == "optimal"
    # (10) with the paper's constants and our scaled problem agree to the solvers' accuracy.
    assert low.dual == pytest.approx(value, rel=1e-4)
    assert low.min_eig > -1e-5  # the KKT matrix certifies a global optimum
    low_labels = (np.linalg.svd(low.V)[0][:, 0] < 0).astype(int)
    assert _same_partition(labels, low_labels)
    model = GMMC(gamma=0.25, solver="scs", degree_regularization=0.0,
                 spectral_candidate=False, portfolio=False).fit(X)
    assert model.objective_ == pytest.approx(value, rel=1e-3)
    assert _same_partition(labels, model.labels_)


def test_inaccurate_solve_is_reported_in_warnings_and_as_convergence_warning():
    X, _ = two_gaussians()
    with pytest.warns(ConvergenceWarning, match="augmented-Lagrangian"):
        model = GMMC(lowrank_max_iter=1, random_state=0).fit(X)
    assert model.solver_status_ == "inaccurate"
    assert any("duality gap" in message for message in model.warnings_)
    assert model.result_extras()["warnings"] == model.warnings_


def test_failed_conic_solve_raises_instead_of_returning_labels():
    _, _, K = _tiny_instance()
    with pytest.raises(SDPSolverError, match="GMMC SDP"):
        solve_gmmc_cvxpy(eliminate_bias(laplacian_precision(K)), solver="NO_SUCH_SOLVER")


def test_certified_solve_has_no_warnings_and_a_small_duality_gap():
    X, _ = two_gaussians()
    model = GMMC(gamma="paper", width_factor=0.3, random_state=0).fit(X)
    assert model.warnings_ == [] and model.solver_status_ == "optimal"
    assert model.duality_gap_ < 1e-6


def test_out_of_sample_svm_on_the_learned_kernel_reproduces_the_labels_and_exports():
    X, _ = two_jointed_circles()
    model = GMMC(kernel_learning=True, kernel_max_iter=5, random_state=0, **PAPER_SETTING).fit(X)
    assert np.mean(model.predict(X) == model.labels_) >= 0.97
    meta, arrays = model.to_model()
    clone = GMMC.from_model(meta, arrays)
    assert np.allclose(clone.decision_function(X[:10]), model.decision_function(X[:10]))
    assert np.array_equal(clone.kernel_weights_, model.kernel_weights_)
    extras = model.result_extras()
    assert len(extras["kernel_weights"]) == 10 and "warnings" in extras


def test_params_are_validated_and_registered_on_the_slow_queue():
    X, _ = two_gaussians()
    with pytest.raises(ValueError, match="kernel_learning"):
        GMMC(n_clusters=3, kernel_learning=True).fit(X)
    with pytest.raises(ValueError, match="C_e"):
        GMMC(C_e=-1).fit(X)
    spec = get_spec("gmmc")
    assert spec.queue == "slow" and spec.estimator is GMMC
    assert spec.max_n == 1_000_000  # the default fits a sample above exact_max_n points
    exact = spec.max_n_for(spec.parse_params({"exact_max_n": None}))
    assert spec.max_n_for(spec.parse_params({"kernel_learning": True, "exact_max_n": None})) \
        < exact < spec.max_n


def test_more_than_two_clusters_by_guided_bisection_beat_k_means_and_export():
    # Two moons and a blob (k = 3): (10) alone makes even splits, so the 1:2 root split comes
    # from keeping the guide's clusters whole. k-means cuts the moons (16 % error).
    from sklearn.datasets import make_moons

    moons, moon = make_moons(200, noise=0.05, random_state=0)
    blob = np.random.default_rng(0).normal([3.5, 0.0], 0.2, size=(100, 2))
    X, y = np.vstack([moons, blob]), np.r_[moon, np.full(100, 2)]
    model = GMMC(n_clusters=3, random_state=0).fit(X)
    assert kmeans_error(X, y, 3) >= 0.1
    assert clustering_error(y, model.labels_) == 0.0
    # Both splits move whole guide clusters: found exactly, no relaxation of (10) is solved.
    assert model.n_iter_ == 0 and model.duality_gap_ == 0.0
    assert model.decision_function(X[:5]).shape == (5, 3)
    assert np.mean(model.predict(X) == model.labels_) >= 0.99
    meta, arrays = model.to_model()
    np.testing.assert_array_equal(GMMC.from_model(meta, arrays).predict(X), model.predict(X))


@pytest.mark.parametrize("block", [1 << 16, 3])  # the 15 labelings in one block, or five
def test_split_of_whole_groups_is_the_best_labeling_of_whole_groups(block, monkeypatch):
    import itertools

    import algorithms.gmmc_solver

    monkeypatch.setattr(algorithms.gmmc_solver, "_LABELINGS_PER_BLOCK", block)

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2)) + np.repeat(rng.normal(0, 3, size=(5, 2)), 8, axis=0)
    S = eliminate_bias(laplacian_precision(np.exp(-0.5 * squared_distances(X)), 1.0))
    groups = np.repeat([3, 1, 4, 0, 2], 8)
    solution = split_whole_groups(S, groups, C_e=10.0)
    z = solution.V[:, 0]
    A = S + 10.0 * np.ones_like(S)

    def value(signs):  # signs for the groups 0..4
        labels = np.asarray(signs, dtype=float)[groups]
        return labels @ A @ labels

    best = min(value(signs) for signs in itertools.product([-1, 1], repeat=5)
               if len(set(signs)) == 2)
    assert solution.dual == pytest.approx(best) and z @ A @ z == pytest.approx(best)
    assert all(np.unique(z[groups == g]).size == 1 for g in range(5))
    assert set(z.tolist()) == {-1.0, 1.0}
    # gamma makes z stationary for (10)'s KKT matrix and sums to the value.
    np.testing.assert_allclose((A - np.diag(solution.gamma)) @ z, 0.0, atol=1e-8)
    assert solution.gamma.sum() == pytest.approx(best)


def test_relaxation_over_whole_groups_bounds_and_rounds_to_labels_of_whole_groups():
    # Twelve groups (4,095 labelings of whole groups, enumerated for reference): the relaxation of
    # (10) over X = G Z G^T is a lower bound on every one of them, and its rounding is a labeling
    # of whole groups with both sides used, no worse than any single group moved across.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(96, 2)) + np.repeat(rng.normal(0, 4, size=(12, 2)), 8, axis=0)
    S = eliminate_bias(laplacian_precision(np.exp(-0.3 * squared_distances(X)), 1.0))
    groups = np.repeat(rng.permutation(12), 8)
    exact = split_whole_groups(S, groups, C_e=10.0)
    relaxed = relax_whole_groups(S, groups, C_e=10.0, C_delta=C_DELTA)
    z = relaxed.V[:, 0]
    A = S + 10.0 * np.ones_like(S)
    assert relaxed.dual <= exact.dual + 1e-6 * abs(exact.dual)
    assert relaxed.primal == pytest.approx(z @ A @ z)
    assert relaxed.primal >= exact.dual - 1e-9 * abs(exact.dual)
    assert all(np.unique(z[groups == g]).size == 1 for g in range(12))
    assert set(z.tolist()) == {-1.0, 1.0}
    for g in range(12):
        moved = np.where(groups == g, -z, z)
        assert moved @ A @ moved >= relaxed.primal - 1e-9 * abs(relaxed.primal)
    np.testing.assert_allclose((A - np.diag(relaxed.gamma)) @ z, 0.0, atol=1e-8)


def test_more_guide_clusters_than_enumeration_reaches_split_by_the_group_relaxation(monkeypatch):
    # 22 guide clusters (> EXACT_SPLIT_MAX_GROUPS): each split above 20 clusters relaxes (10)
    # over whole groups (22 x 22), not over the 330 points; the leaves are the guide's clusters
    # and the tree's SVMs label the training points as fitted.
    from sklearn.metrics import adjusted_rand_score

    import algorithms.gmmc
    import algorithms.gmmc_solver

    calls = []
    relax = algorithms.gmmc_solver.relax_whole_groups
    monkeypatch.setattr(algorithms.gmmc, "relax_whole_groups",
                        lambda *args: calls.append(np.unique(args[1]).size) or relax(*args))
    monkeypatch.setattr(algorithms.gmmc.GMMC, "_solve", lambda *args: pytest.fail("point SDP"))
    X, y = make_blobs(n_samples=330, centers=22, cluster_std=0.4, center_box=(-25, 25),
                      random_state=2)
    model = GMMC(n_clusters=22, random_state=0).fit(X)
    assert calls and min(calls) > algorithms.gmmc_solver.EXACT_SPLIT_MAX_GROUPS
    assert adjusted_rand_score(y, model.labels_) > 0.95
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_keeping_guide_clusters_whole_moves_each_to_its_majority_side():
    from algorithms.selection.bisection import keep_guide_clusters_whole

    guide = np.repeat([0, 1, 2], 4)
    even_split = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=bool)  # cuts cluster 1
    y = keep_guide_clusters_whole(even_split | (np.arange(12) == 6), guide)
    np.testing.assert_array_equal(y, np.repeat([1.0, 1.0, -1.0], 4))
    # Every cluster on one side: the least decided one changes side, so both sides are used.
    y = keep_guide_clusters_whole(np.ones(12, dtype=bool), guide)
    assert set(y.tolist()) == {-1.0, 1.0}


def test_regularized_degrees_split_no_handful_of_outliers_off():
    # Standardized breast cancer (300 points, benchmarks/defaults.py) at the local width: with the
    # paper's Laplacian three nearly isolated points form a cluster (ARI 0.00); with degrees plus
    # their mean (Qin & Rohe) the split is even, ARI 0.60 (k-means 0.64, spectral 0.74).
    from sklearn.metrics import adjusted_rand_score

    from benchmarks.defaults import public_sets

    cancer = next(s for s in public_sets() if s.name.startswith("breast cancer"))
    # (10)'s labels alone (the spectral candidate would replace both splits).
    plain = GMMC(degree_regularization=0.0, spectral_candidate=False, portfolio=False,
                 random_state=0).fit(cancer.X)
    assert np.bincount(plain.labels_).min() <= 5
    model = GMMC(spectral_candidate=False, portfolio=False, random_state=0).fit(cancer.X)
    assert np.bincount(model.labels_).min() >= 0.4 * cancer.X.shape[0]
    assert adjusted_rand_score(cancer.y, model.labels_) >= 0.55


def test_above_exact_max_n_gmmc_solves_a_sample_and_the_svm_labels_every_point():
    X, y = two_gaussians(n=600, seed=3)
    X[y == 1, 0] += 4.0
    est = GMMC(exact_max_n=150, random_state=0).fit(X)
    assert est.n_fit_samples_ == 150 and est.scores_.shape == (150,)
    np.testing.assert_array_equal(est.labels_, est.predict(X))
    # One cluster for all, the trivial baseline, errs on half the points.
    assert clustering_error(y, est.labels_) <= 0.02 < clustering_error(y, np.zeros(600, int))
