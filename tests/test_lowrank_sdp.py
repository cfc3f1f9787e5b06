"""The shared low-rank SDP solver (algorithms.lowrank_sdp) against cvxpy on random problems.

Every problem has n <= 100: the reference solves (SCS at tol 1e-5, Clarabel where it is quick)
take a few seconds each. Objectives must agree to 1e-3 (relative), eigenvector labels exactly,
and the certificate's lower bound must be a true lower bound.
"""

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import OptimizeResult
from sklearn.datasets import make_blobs, make_moons

from algorithms.conic import SDPSolverError
from algorithms.kernels import pairwise_kernel
from algorithms.lowrank_sdp import (
    FACTORED_MAX_RANK,
    Constraints,
    HalfSphereMarginObjective,
    LinearObjective,
    MarginObjective,
    bilinear,
    factored_is_cheaper,
    low_rank_factor,
    solve_box_qp,
    solve_lowrank_sdp,
    solve_multiclass_lowrank,
    solve_two_class_lowrank,
)
from algorithms.lowrank_sdp.solver import _stop_on_creep
from algorithms.robust_svm import gaussians_with_ring_outliers, solve_robust_sdp
from algorithms.rounding import balance_limit, labels_from_label_matrix, psd_factor
from algorithms.sdp_mmc import SDPMMC, median_heuristic_gamma
from algorithms.sdp_mmc_programs import solve_multiclass_sdp_symmetric, solve_two_class_sdp
from algorithms.selection.margin import margin_kernel
from benchmarks.sdp_mmc import digits_subset


def _kernel(X):
    return margin_kernel(pairwise_kernel(X, kernel="rbf", gamma=median_heuristic_gamma(X)))


def _signs(M):
    v = psd_factor(M, rank=1)[:, 0]
    return np.sign(v) * np.sign(v[0])


def _random_two_class(seed, n):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-4, 4, size=(2, 2))
    X, _ = make_blobs(n_samples=n, centers=centers, cluster_std=rng.uniform(0.8, 1.6),
                      random_state=seed)
    return _kernel(X)


@pytest.mark.parametrize(("seed", "n"), [(0, 40), (1, 70), (2, 100)])
def test_two_class_sdp_matches_scs_objective_and_labels(seed, n):
    K = _random_two_class(seed, n)
    limit = balance_limit(n, 0.1)
    low = solve_two_class_lowrank(K, beta=0.01, limit=limit, tol=1e-4)
    M, omega, _, _ = solve_two_class_sdp(K, beta=0.01, limit=limit, tol=1e-5)
    assert abs(low.omega - omega) <= 1e-3 * abs(omega)
    assert np.array_equal(_signs(low.M), _signs(M))
    cert = low.result.certificate()
    assert cert["status"] == "optimal" and cert["relative_gap"] <= 1e-4
    # The certified bound is below the reference optimum (up to SCS's own accuracy).
    assert cert["lower_bound"] <= omega * (1 + 1e-4)
    assert np.allclose(np.diag(low.M), 1.0)


def test_two_class_sdp_with_s1_s2_matches_clarabel():
    rng = np.random.default_rng(3)
    n = 40
    K = _random_two_class(3, n)
    partial = np.zeros(n)
    known = rng.choice(n, size=6, replace=False)
    partial[known] = rng.choice([-1.0, 1.0], size=6)
    limit = balance_limit(n, 0.2)
    low = solve_two_class_lowrank(K, beta=0.01, limit=limit, y_partial=partial, tol=1e-4)
    M, omega, _, _ = solve_two_class_sdp(K, beta=0.01, limit=limit, y_partial=partial,
                                         solver="clarabel", tol=1e-8)
    assert abs(low.omega - omega) <= 1e-3 * abs(omega)
    assert np.array_equal(_signs(low.M), _signs(M))
    # S1 holds on the labeled block; S2 for every unlabeled point.
    assert np.allclose(low.M[np.ix_(known, known)], np.outer(partial[known], partial[known]),
                       atol=1e-3)
    unknown = np.flatnonzero(partial == 0)
    assert np.all(low.M[known][:, unknown].sum(axis=0) >= 2 - known.size - 1e-3)


def test_two_class_sdp_over_groups_keeps_each_group_whole_and_bounds_from_above():
    # M constant on each pair of groups (1 within one): the relaxation restricted to labelings
    # of whole groups, so its omega is at least the unrestricted one; singleton groups are no
    # restriction at all.
    n = 40
    K = _random_two_class(5, n)
    limit = balance_limit(n, 0.2)
    free = solve_two_class_lowrank(K, beta=0.01, limit=limit, tol=1e-6)
    groups = np.repeat(np.random.default_rng(5).permutation(8), 5)
    grouped = solve_two_class_lowrank(K, beta=0.01, limit=limit, groups=groups, tol=1e-6)
    G = np.eye(8)[groups]
    Z = G.T @ grouped.M @ G / np.outer(G.sum(0), G.sum(0))  # block means
    np.testing.assert_allclose(grouped.M, G @ Z @ G.T, atol=1e-8)
    np.testing.assert_allclose(np.diag(Z), 1.0, atol=1e-6)
    assert grouped.omega >= free.omega * (1 - 1e-4)
    singletons = solve_two_class_lowrank(K, beta=0.01, limit=limit, groups=np.arange(n),
                                         tol=1e-6)
    assert singletons.omega == pytest.approx(free.omega, rel=1e-4)
    with pytest.raises(ValueError, match="not both"):
        solve_two_class_lowrank(K, beta=0.01, limit=limit, groups=groups,
                                y_partial=np.zeros(n))


def test_two_class_sdp_over_weighted_distinct_rows_is_the_program_over_all_copies():
    # Rows repeated 1-6 times: (3.5) over all the points with each row's copies kept together
    # (groups) and (3.5) over the distinct rows weighted by their copies are one program. A
    # large beta makes the box of the margin's dual bind, where the copies count (without the
    # weights: omega 6.07 against 6.34, and other labels).
    rng = np.random.default_rng(3)
    X, _ = make_blobs(n_samples=25, centers=2, cluster_std=3.0, random_state=3)
    copies = rng.integers(1, 7, size=25)
    rows = np.repeat(np.arange(25), copies)
    K_all = _kernel(X[rows])
    first = np.unique(rows, return_index=True)[1]
    limit = balance_limit(rows.size, 0.2)
    grouped = solve_two_class_lowrank(K_all, beta=3.0, limit=limit, groups=rows, tol=1e-6)
    weighted = solve_two_class_lowrank(K_all[np.ix_(first, first)], beta=3.0, limit=limit,
                                       weights=copies, tol=1e-6)
    assert weighted.omega == pytest.approx(grouped.omega, rel=1e-4)
    assert weighted.result.gap <= 1e-6
    np.testing.assert_array_equal(_signs(weighted.M)[rows], _signs(grouped.M))
    with pytest.raises(ValueError, match="not both"):
        solve_two_class_lowrank(K_all[np.ix_(first, first)], beta=0.01, limit=limit,
                                weights=copies, y_partial=np.zeros(25))


def test_estimator_reports_the_certificate_in_result_extras():
    X, _ = make_blobs(n_samples=60, centers=2, random_state=4)
    model = SDPMMC(random_state=0).fit(X)
    assert model.solver_ == "lowrank"
    cert = model.result_extras()["certificate"]
    assert cert["solver"] == "lowrank" and cert["status"] == "optimal"
    assert cert["relative_gap"] <= model.sdp_tol
    assert cert["lower_bound"] <= cert["objective"]
    assert cert["dual_slack_min_eig"] is not None and cert["rank"] >= 1
    # SCS at the estimator's default tol 1e-3 is itself 4e-3 off here; at 1e-5 it is not.
    reference = SDPMMC(solver="scs", sdp_tol=1e-5, random_state=0).fit(X)
    assert np.array_equal(model.labels_, reference.labels_)
    assert abs(model.objective_ - reference.objective_) <= 1e-3 * abs(reference.objective_)


def test_generic_solver_on_maxcut_by_multipliers_and_by_unit_rows_matches_cvxpy():
    # min <C, Z> s.t. diag(Z) = e, Z >= 0: once with diag as augmented-Lagrangian equalities,
    # once on unit rows. A linear objective exercises the certificate with G = C.
    rng = np.random.default_rng(5)
    n = 30
    A = rng.standard_normal((n, n))
    C = (A + A.T) / 2

    Z = cp.Variable((n, n), PSD=True)
    reference = cp.Problem(cp.Minimize(cp.trace(C @ Z)), [cp.diag(Z) == 1]).solve(
        solver="CLARABEL")
    everyone = np.arange(n)
    by_multipliers = solve_lowrank_sdp(LinearObjective(C),
                                       Constraints(bilinear(n, everyone, everyone, 1.0)),
                                       n, trace_bound=n, rank=8, tol=1e-5, random_state=0)
    by_rows = solve_lowrank_sdp(LinearObjective(C), Constraints(), n, trace_bound=n, rank=8,
                                tol=1e-5, random_state=0, unit_rows=everyone)
    for result in (by_multipliers, by_rows):
        assert result.status == "optimal", result.messages
        assert abs(result.objective - reference) <= 1e-4 * abs(reference)
        assert result.lower_bound <= reference + 1e-6 * abs(reference)


def test_box_qp_matches_cvxpy():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((50, 8))
    H = A @ A.T
    p = rng.uniform(0, 2, 50)
    x = solve_box_qp(H, p)
    v = cp.Variable(50)
    best = cp.Problem(cp.Maximize(p @ v - 0.5 * cp.sum_squares(A.T @ v)), [v >= 0, v <= 1]).solve(
        solver="CLARABEL")
    assert p @ x - 0.5 * x @ H @ x >= best - 1e-7 * abs(best)
    assert np.all((x >= 0) & (x <= 1))


def test_low_rank_factor_reproduces_a_linear_kernel_and_declines_a_full_rank_one():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((60, 3))
    y = np.sign(rng.standard_normal(60))
    G = (X @ X.T) * np.outer(y, y)
    F = low_rank_factor(G, 32)
    assert F.shape == (60, 3)
    np.testing.assert_allclose(F @ F.T, G, atol=1e-10 * np.abs(G).max())
    assert low_rank_factor(pairwise_kernel(X, kernel="rbf", gamma=1.0), 32) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_factored_smoothed_dual_matches_the_active_set(seed):
    # The smoothed SVM dual max p^T l - |B^T l|^2 / 2 - s |l|^2 / 2 over the box, by Newton on
    # its q-dimensional primal and by the dense active set on H = B B^T + s I, from a cold start
    # and warm-started at a perturbed solution (the line searches' situation).
    from algorithms.lowrank_compiled import NEWTON_STEPS, smoothed_dual_newton

    rng = np.random.default_rng(seed)
    n, q, smoothing = 80, 6, 10.0 ** rng.uniform(-4, -1)
    B = rng.standard_normal((n, q)) * rng.uniform(0.1, 2.0)
    p = rng.uniform(-0.2, 1.0, n)
    H = B @ B.T + smoothing * np.eye(n)
    reference = solve_box_qp(H, p)

    def value(lam):
        return p @ lam - 0.5 * lam @ H @ lam

    for start in (np.zeros(n), np.clip(reference + 0.05 * rng.standard_normal(n), 0, 1)):
        lam = start.copy()
        assert smoothed_dual_newton(B, p, smoothing, lam, 1e-12, NEWTON_STEPS) >= 0
        assert np.all((lam >= 0) & (lam <= 1))
        assert value(lam) == pytest.approx(value(reference), rel=1e-9)
        np.testing.assert_allclose(lam, reference, atol=1e-6)


def test_contradicting_labels_raise_infeasible():
    K = _random_two_class(7, 30)
    with pytest.raises(SDPSolverError, match="infeasible"):
        solve_two_class_lowrank(K, beta=0.01, limit=balance_limit(30, 0.1),
                                y_partial=np.ones(30))


def _robust_problem(kind: str):
    """Section 6.5 data (n = 30, linear kernel on two features: G / beta has rank 2, so the
    inner SVM dual runs on its factor), or 30 noisy moons with three labels flipped under an RBF
    kernel (full rank: the dense active set)."""
    if kind == "rings":
        X, y, _ = gaussians_with_ring_outliers(np.random.RandomState(0), radius=35.0,
                                               n_per_class=12, n_outliers=6)
        return X @ X.T, y
    X, labels = make_moons(30, noise=0.1, random_state=1)
    y = np.where(labels == 1, 1.0, -1.0)
    y[[2, 11, 23]] *= -1
    return pairwise_kernel(X, kernel="rbf", gamma=2.0), y


@pytest.fixture(scope="module", params=["rings", "moons"])
def robust_solutions(request):
    """REH and ROD by the low-rank solver and by Clarabel (interior point, exact to about 1e-8;
    SCS at its eps 1e-4 ends 6e-4 below REH's optimum on the rings)."""
    K, y = _robust_problem(request.param)
    G = K * np.outer(y, y) / 10.0
    factored = low_rank_factor(G, FACTORED_MAX_RANK)
    uses_factor = factored is not None and factored_is_cheaper(y.size, 4, factored.shape[1])
    assert uses_factor == (request.param == "rings")
    return K, y, {method: (solve_robust_sdp(K, y, 10.0, method=method, solver="lowrank"),
                           solve_robust_sdp(K, y, 10.0, method=method, solver="clarabel"))
                  for method in ("reh", "rod")}


@pytest.mark.parametrize("method", ["reh", "rod"])
def test_robust_lowrank_matches_clarabel_and_its_certificate_brackets_the_optimum(
        robust_solutions, method):
    K, y, solutions = robust_solutions
    low, ref = solutions[method]
    assert abs(low.objective - ref.objective) <= 1e-3 * abs(ref.objective)
    assert low.status == "optimal" and low.certificate["relative_gap"] <= 1e-3
    # The certificate is a proof: its lower bound is below the exact optimum, its value above.
    slack = 1e-6 * abs(ref.objective)
    assert low.certificate["lower_bound"] <= ref.objective + slack <= low.objective + 2 * slack
    # The same outliers (eta rounded at 1/2), the same classifier's decision values on the
    # training points to 2 % of their range (a value within 1e-3 leaves the classifier freer:
    # REH on the moons, 0.4 %), so the same signs away from the boundary (a moons point sits at
    # f = 1e-3 of the largest |f|).
    assert np.array_equal(low.eta < 0.5, ref.eta < 0.5)
    f_low, f_ref = (K @ (s.lam * s.eta * y) for s in (low, ref))
    largest = np.abs(f_ref).max()
    np.testing.assert_allclose(f_low, f_ref, atol=2e-2 * largest)
    clear = np.abs(f_ref) > 5e-2 * largest
    assert np.array_equal(np.sign(f_low[clear]), np.sign(f_ref[clear]))


def test_robust_lowrank_leaves_a_saddle_by_adding_a_column():
    # ROD on two Gaussians in 16 dimensions (10 of 100 labels flipped, linear kernel): at the
    # default rank 4 the objective settles with the gap open (0.098 s, "inaccurate" before this
    # rule), the gap mostly lambda_min's term; the eigenvector as a fifth column certifies it.
    rng = np.random.RandomState(0)
    y = np.where(np.arange(100) % 2, 1.0, -1.0)
    X = rng.standard_normal((100, 16)) + 1.5 * y[:, None] / 4.0
    y[rng.choice(100, 10, replace=False)] *= -1
    X -= np.median(X, axis=0)
    solution = solve_robust_sdp(X @ X.T, y, 10.0, method="rod", solver="lowrank")
    assert solution.status == "optimal", solution.warnings
    assert solution.certificate["relative_gap"] <= 1e-3
    assert solution.certificate["rank"] > 4


@pytest.mark.parametrize("seed", [1, 2])
def test_multiclass_lowrank_matches_scs_on_the_collapsed_program(seed):
    # Unsupervised (4.8) in its collapsed form, digits {0,6,8,9}, 12 per class (n = 48), against
    # SCS at tol 1e-6 (0.3 s; Clarabel takes 3-4 s and stops "inaccurate"). Measured: the values
    # agree to 1e-7 / 7e-5; the certificate closes on seed 2 (gap 0) but not on seed 1 (2.6e-2):
    # there no multipliers of M >= 0 fitted to the point's stationarity make the dual slack PSD,
    # although the value is SCS's to 1e-7. The bound is still a true lower bound.
    X, _ = digits_subset((0, 6, 8, 9), 12, seed=seed)
    K = _kernel(X)
    low = solve_multiclass_lowrank(K, 4, beta=0.01, balance=0.1,
                                   start_labels=labels_from_label_matrix(K, 4, 0))
    M, _, omega, _, _ = solve_multiclass_sdp_symmetric(K, 4, beta=0.01, balance=0.1, tol=1e-6,
                                                       max_iter=100_000)
    assert abs(low.omega - omega) <= 1e-3 * abs(omega)
    assert np.array_equal(labels_from_label_matrix(low.M, 4, 0), labels_from_label_matrix(M, 4, 0))
    assert np.all(low.M >= 0.0) and np.all(low.d >= 0.0)
    assert np.allclose(np.diag(low.M), 1.0)
    # lower_bound is on the solver's scale, -(<K, M> + 2 beta e^T d) / n = 2 beta (omega - n) / n.
    n = K.shape[0]
    certificate = low.result.certificate()
    assert certificate["lower_bound"] <= 2 * 0.01 * (omega - n) / n + 1e-6


def _robust_lagrangian_case(seed: int = 3, n: int = 20, r: int = 4):
    """A random point of ROD's augmented Lagrangian: W, the constraint e^T eta >= rho n with a
    positive multiplier, a smoothed inner SVM dual (so the value is differentiable)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = np.sign(rng.standard_normal(n))
    G = (X @ X.T) * np.outer(y, y)
    inner = MarginObjective(G, 0.5, eta_column=True, c=0.0, smoothing=0.05)
    N = n + 1
    minus = np.zeros(N)
    minus[:n] = -1.0 / n
    cons = Constraints(bilinear(N, np.array([n]), None, 1.0 - 2.0 * 0.8, inequality=True,
                                shared_c=minus))
    return inner, cons, rng.standard_normal((N, r))


@pytest.mark.parametrize("factored", [False, True])
def test_compiled_robust_lagrangian_value_and_gradient(factored):
    # The compiled inner problem of REH / ROD against the Python objective it replaces (the
    # value at y = 0) and against central differences (the gradient, with the constraint's
    # penalty active); the inner SVM dual by the dense active set, and by Newton on the
    # factor of G / beta (rank 2 here: a linear kernel on two features).
    from algorithms.lowrank_compiled import robust_lagrangian

    inner, cons, W = _robust_lagrangian_case()
    n, r = inner.n, W.shape[1]
    A, C = cons.dense(n + 1)
    python_objective = HalfSphereMarginObjective(
        MarginObjective(inner.K, inner.beta, eta_column=True, smoothing=inner.smoothing))
    factor = (low_rank_factor(inner.K / inner.beta, FACTORED_MAX_RANK) if factored
              else np.zeros((n, 0)))
    assert factor.shape[1] == (2 if factored else 0)

    def compiled(w, y, mu):
        grad = np.empty(w.size)
        value = robust_lagrangian(w, n, r, inner.K / inner.beta, factor, inner.c,
                                  inner.smoothing, inner.lam, A, C, cons.b, cons.inequality, y,
                                  mu, 2.0, grad)
        return value, grad

    U = W / np.linalg.norm(W, axis=1, keepdims=True)
    value, _ = compiled(W.ravel(), np.zeros(1), 1e-9)
    assert value == pytest.approx(python_objective(U)[0] / 2.0, rel=1e-9)

    y, mu = np.array([0.7]), 3.0
    _, grad = compiled(W.ravel(), y, mu)
    step = 1e-6
    numeric = np.empty(W.size)
    for index in range(W.size):
        e = np.zeros(W.size)
        e[index] = step
        numeric[index] = (compiled(W.ravel() + e, y, mu)[0]
                          - compiled(W.ravel() - e, y, mu)[0]) / (2 * step)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


def test_restore_feasibility_meets_a_violated_inequality_by_a_short_step():
    # Within the tolerance an iterate may violate ROD's e^T eta >= rho n, and f there is then no
    # upper bound (ROD, n = 30: 7.8e-4 below the optimum); the restored point satisfies it.
    from algorithms.lowrank_sdp.solver import _restore_feasibility, _violations

    _, cons, W = _robust_lagrangian_case()
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    assert _violations(cons.values(W)[0], cons).max() > 0.0
    rows = np.arange(W.shape[0])
    restored = _restore_feasibility(W, cons, rows)
    assert np.all(cons.values(restored)[0] <= cons.b)
    np.testing.assert_allclose(np.linalg.norm(restored, axis=1), 1.0)
    # Moved no farther than needed: a step a tenth shorter is still infeasible.
    direction = restored - W
    shorter = W + 0.9 * direction
    shorter /= np.linalg.norm(shorter, axis=1, keepdims=True)
    assert np.any(cons.values(shorter)[0] > cons.b)


def test_an_inner_run_that_creeps_is_stopped_and_one_that_descends_is_not():
    creeping = _stop_on_creep(budget=400, tol=1e-3)
    with pytest.raises(StopIteration):
        for step in range(400):  # 1e-7 per step: the rest of the budget is worth < 1e-4
            creeping(OptimizeResult(fun=1.0 - 1e-7 * step))
    descending = _stop_on_creep(budget=400, tol=1e-3)
    for step in range(390):  # 1e-3 per step: worth more than a tenth of tol to the budget's end
        descending(OptimizeResult(fun=1.0 - 1e-3 * step))


def test_two_clusters_of_three_blobs_do_not_spend_the_inner_budget_creeping():
    """SDP MMC asked for two clusters of three blobs of unequal spread: (3.5) has no clear
    optimum, and L-BFGS lowers the Lagrangian by tiny steps. Without the creep stop its first
    outer iterations each run L-BFGS to its full budget of 400 steps, well over the bound."""
    from benchmarks.defaults import toy_sets

    varied = next(s for s in toy_sets(200, seed=3) if s.name == "varied blobs")
    fitted = SDPMMC(n_clusters=2, random_state=0).fit(varied.X)
    assert fitted.certificate_["evaluations"] < 1000
    assert np.bincount(fitted.labels_).min() > 0
