"""CPM3C (Zhao, Wang & Zhang 2008) on the UCI digits and synthetic data: sparse input, class
balance, the dual QP of (20), kernel-PCA coordinates, float32 coordinates, the portable model and
input validation. The paper's Table 2 at its full size (the named pairs, the 45 pairs, the
4-cluster sets) is checked by ``python -m benchmarks.paper_tables``.

``sklearn.datasets.load_digits`` is the UCI optical digits set of the paper. The digit fits use
the paper's setting (PAPER_PARAMS: linear, k-means starts) with C = 100, class_balance = l/n =
0.03, epsilon = 0.01, CCCP tolerance 1 % and 3 runs keeping the lowest objective; the 4-cluster
sets use C = 3 and class_balance = 0 (the setting that keeps all four clusters alive, see the
class docstring), random_state = 0 everywhere.
"""


import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score

from algorithms.cpm3c import (
    CPM3C,
    CPM3CParams,
)
from algorithms.cpm3c import PAPER_SETTING as PAPER_PARAMS
from algorithms.cpm3c_constraints import (
    ConstraintSums,
    ScaledData,
    constraint_slacks,
    linearized_constraints,
    most_violated_constraint,
)
from algorithms.cpm3c_solver import solve_cutting_plane_dual
from algorithms.inputs import arrays_to_npz_bytes, npz_bytes_to_arrays
from algorithms.metrics import clustering_error
from algorithms.registry import get_spec
from tests.baselines import digit_subset

# PAPER_PARAMS is the paper's setting: linear kernel, k-means starts (the defaults are the
# local-scaling RBF width and a spectral start, checked in tests/test_defaults.py).
K4_PARAMS = {"C": 3.0, "score_balance": 0.0}
# The paper's kernel-PCA coordinates (section 2.1) with the width protocol of its section 4.2:
# sigma = 0.4 sigma_0 from the grid {0.1 sigma_0, ..., sigma_0}, sigma_0 the largest pairwise
# distance; every point a Nystrom landmark (n_components >= n: exact kernel PCA), top 20
# components kept.
KPCA_PARAMS = {"kernel": "rbf", "width_reference": "max_distance", "width_factor": 0.4,
               "n_landmarks": 2000, "kpca_components": 20}


def paper_cpm3c(**params) -> CPM3C:
    """CPM3C with the paper's settings (PAPER_PARAMS), overridden by ``params``."""
    return CPM3C(**{**PAPER_PARAMS, **params})


def test_two_pairs_on_a_line_split_at_the_gap_with_the_objective_computed_by_hand():
    # Points -2, -1 | 1, 2, linear kernel. CPM3C works on x' = (x - mean) / radius with radius^2
    # the mean squared norm, 2.5: the inner points sit at +-1/sqrt(2.5), so the hard margin of
    # the split at the gap needs ||w'|| = sqrt(2.5) and problem (11)'s 1/2 ||w'||^2 (no slack)
    # is 1.25; in the input's units w = 1, b = 0.
    X = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    est = CPM3C(n_clusters=2, kernel="linear", random_state=0).fit(X)
    assert est.labels_[0] == est.labels_[1] != est.labels_[2] == est.labels_[3]
    assert est.objective_ == pytest.approx(1.25, abs=1e-6)
    assert abs(est.coef_.ravel()) == pytest.approx([1.0], abs=1e-6)
    assert est.intercept_ == pytest.approx([0.0], abs=1e-6)
    assert list(est.predict(np.array([[-1.5], [1.5]]))) == [est.labels_[0], est.labels_[2]]


@pytest.mark.parametrize(("n_clusters", "classes"), [(2, (3, 8)), (4, (0, 6, 8, 9))])
def test_sparse_and_dense_input_give_the_same_labels(digits, fitted_on_digits, n_clusters,
                                                    classes):
    X, _ = digit_subset(digits, classes)
    params = {} if n_clusters == 2 else K4_PARAMS
    dense = fitted_on_digits(paper_cpm3c(n_clusters=n_clusters, random_state=0, **params), classes)
    sparse = paper_cpm3c(n_clusters=n_clusters, random_state=0, **params).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(dense.labels_, sparse.labels_)
    np.testing.assert_allclose(dense.coef_, sparse.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(sparse.predict(sp.csr_matrix(X)), dense.predict(X))


@pytest.mark.parametrize("n_rows", [1, 4])
def test_class_sums_linearization_matches_the_combination_matrix(n_rows):
    # Dense data sums each constraint's points per class (k > 2) or per sign (binary form),
    # kept across calls; CSR data builds the (constraint, class) x point combination matrix.
    # Same (G, d), with the data far from the origin (the sums are centred afterwards).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5)) + 3.0
    dense, sparse = ScaledData.of(X), ScaledData.of(sp.csr_matrix(X))
    columns = n_rows
    constraints = [most_violated_constraint(rng.normal(size=(60, columns)))[0]
                   for _ in range(3)]
    F = rng.normal(size=(60, columns))
    clamp = rng.integers(0, max(n_rows, 2), size=60)
    for labels_clamp in (None, clamp):
        G, d = linearized_constraints(dense, F, constraints, n_rows, labels_clamp)
        G_ref, d_ref = linearized_constraints(sparse, F, constraints, n_rows, labels_clamp)
        np.testing.assert_allclose(G, G_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(d, d_ref)
        assert np.abs(G).max() > 0.01
    # The kept sums grow with the working set and follow the labels, as in a solve: a few
    # points change class (updated), then most of them (recomputed).
    sums = ConstraintSums(dense, n_rows)
    linearized_constraints(dense, F, constraints[:2], n_rows, None, sums)
    # The slacks from the sums need the iterate W whose scores they are.
    w, b = rng.normal(size=(n_rows, 5)), rng.normal(size=n_rows)
    W = np.hstack([w, b[:, None]]).ravel()
    F_W = dense.scores(w, b)
    few = F_W.copy()
    few[:5] = F_W[:5, ::-1] if n_rows > 1 else -F_W[:5]
    for scores in (few, F_W, -F_W):
        G, d = linearized_constraints(dense, scores, constraints, n_rows, None, sums)
        G_ref, d_ref = linearized_constraints(sparse, scores, constraints, n_rows)
        np.testing.assert_allclose(G, G_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(d, d_ref, rtol=1e-15)
    for labels_clamp in (None, clamp):
        np.testing.assert_allclose(
            constraint_slacks(F_W, constraints, labels_clamp, sums, W),
            constraint_slacks(F_W, constraints, labels_clamp), rtol=1e-12, atol=1e-14)


def test_sparse_input_is_never_densified(monkeypatch):
    # Three topics, each with its own 100 words, 2 % of the words present in a document.
    rng = np.random.default_rng(0)
    topic = np.repeat(np.arange(3), 130)
    words = rng.integers(0, 100, size=(topic.size, 6)) + 100 * topic[:, None]
    rows = np.repeat(np.arange(topic.size), 6)
    X = sp.csr_matrix((rng.random(words.size) + 0.5, (rows, words.ravel())),
                      shape=(topic.size, 300))

    # Densifying small results (a column range, |Omega| k combined rows) is fine; anything with a
    # row per point is not.
    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        for name in ("toarray", "todense"):
            original = getattr(cls, name)

            def guarded(self, *args, _original=original, **kwargs):
                assert max(self.shape) < X.shape[0], f"densified a {self.shape} sparse matrix"
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(cls, name, guarded)
    est = paper_cpm3c(n_clusters=3, random_state=0, n_init=2).fit(X)
    assert clustering_error(topic, est.labels_) <= 0.02


def test_class_balance_l_controls_the_split_of_imbalanced_blobs():
    # 3:1 blobs that touch: a loose l lets the margin follow the gap (about 3:1), a tight l
    # forces the cluster mean scores together and the split towards 1:1 (Zhao, Wang and Zhang
    # 2008, eq. 16).
    X, _ = make_blobs(n_samples=[300, 100], centers=[[0.0, 0.0], [3.0, 0.0]], cluster_std=1.0,
                      random_state=0)
    minority = {}
    for balance in (0.0, 0.5):
        labels = paper_cpm3c(class_balance=balance, random_state=0).fit(X).labels_
        minority[balance] = np.bincount(labels, minlength=2).min() / labels.size
    # Measured: 43.5 % in the smaller cluster with l = 0, 35.3 % with l/n = 0.5.
    assert minority[0.5] < 0.37
    assert minority[0.0] > minority[0.5] + 0.05


@pytest.mark.parametrize("balance", [0.03, 0.3])
def test_balance_holds_for_every_pair_of_biases_though_only_violated_pairs_are_rows(balance):
    # Four separated blobs of 150 / 100 / 60 / 20 points: the biases spread 0.90 apart without
    # (16), so it binds. The QP carries only the pairs it found violated (BalanceRows), and the
    # spread of all k biases, max b - min b over the 12 ordered pairs, is exactly the limit.
    X, y = make_blobs([150, 100, 60, 20], centers=[(0, 0), (8, 0), (0, 8), (8, 8)],
                      random_state=0)
    est = CPM3C(n_clusters=4, kernel="linear", class_balance=balance, portfolio=False,
                random_state=0).fit(X)
    biases = est.intercept_ + est.coef_ @ X.mean(axis=0)  # b_p in the centred coordinates
    assert np.ptp(biases) == pytest.approx(balance, abs=1e-6)
    assert clustering_error(y, est.labels_) == 0.0
    free = CPM3C(n_clusters=4, kernel="linear", class_balance=3.0, random_state=0).fit(X)
    assert np.ptp(free.intercept_ + free.coef_ @ X.mean(axis=0)) > 0.5


def test_loose_balance_lets_the_trivial_one_cluster_solution_win(digits):
    # Why (16) exists (paper's section 2.3): without it the largest margin puts all points together.
    X, _ = digit_subset(digits, (3, 8))
    labels = paper_cpm3c(class_balance=100.0, random_state=0).fit(X).labels_
    assert np.unique(labels).size == 1


@pytest.mark.parametrize("seed", range(4))
def test_dual_qp_solver_matches_a_generic_solver(seed):
    rng = np.random.default_rng(seed)
    n_alpha, n_mu = 6 + seed, 2
    A = rng.normal(size=(n_alpha + n_mu, 5))
    Q = A @ A.T  # singular: rank 5, like Gram matrices of many near-parallel cutting planes
    q = np.concatenate([rng.random(n_alpha), -np.full(n_mu, 0.05)])
    C = [0.1, 1.0, 10.0, 100.0][seed]
    v = solve_cutting_plane_dual(Q, q, n_alpha, C)
    x = cp.Variable(q.size)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(A.T @ x) - q @ x),
                         [x >= 0, cp.sum(x[:n_alpha]) <= C])
    problem.solve(solver=cp.CLARABEL)
    assert np.all(v >= 0) and v[:n_alpha].sum() <= C * (1 + 1e-9)
    assert 0.5 * v @ Q @ v - q @ v <= problem.value + 1e-6 * max(1.0, abs(problem.value))


@pytest.mark.parametrize(
    ("n_clusters", "params"),
    [
        (2, {"kernel": "linear"}),
        (4, {"kernel": "linear"}),
        (3, {"kernel": "rbf", "n_landmarks": 100}),
        (4, KPCA_PARAMS),
    ],
)
def test_portable_model_round_trip_predicts_identically(digits, fitted_on_digits, n_clusters,
                                                      params):
    X, _ = digit_subset(digits, (0, 6, 8, 9))
    est = fitted_on_digits(
        paper_cpm3c(n_clusters=n_clusters, random_state=0, **params, **K4_PARAMS), (0, 6, 8, 9))
    meta, arrays = est.to_model()
    loaded = CPM3C.from_model(meta, npz_bytes_to_arrays(arrays_to_npz_bytes(arrays)))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_allclose(loaded.decision_function(X), est.decision_function(X))
    assert loaded.get_params() == est.get_params()


def test_predict_is_argmax_of_the_k_scores_and_reproduces_the_training_labels(
        digits, fitted_on_digits):
    X, _ = digit_subset(digits, (1, 2, 7, 9))
    for n_clusters in (2, 4):
        est = fitted_on_digits(paper_cpm3c(n_clusters=n_clusters, random_state=0, **K4_PARAMS),
                               (1, 2, 7, 9))
        scores = est.decision_function(X)
        assert scores.shape == (X.shape[0], n_clusters)
        np.testing.assert_array_equal(np.argmax(scores, axis=1), est.predict(X))
        np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_progress_is_reported_every_cutting_plane_iteration(digits):
    X, _ = digit_subset(digits, (3, 8))
    events = []
    est = paper_cpm3c(random_state=0, n_restarts=1).fit(
        X, progress=lambda *event: events.append(event))
    steps = [step for step, _, _ in events]
    assert steps == sorted(steps) and len(steps) >= est.n_iter_ + 1
    objectives = [obj for _, obj, msg in events if msg.startswith("cutting-plane")]
    assert len(objectives) == est.n_iter_ == len(est.objective_history_)
    events.clear()
    paper_cpm3c(random_state=0, n_restarts=3).fit(X, progress=lambda *event: events.append(event))
    steps = [step for step, _, _ in events]
    assert steps == sorted(steps)
    assert sum(msg.startswith("run ") for _, _, msg in events) == 3
    assert est.result_extras()["n_constraints"] == est.n_constraints_


@pytest.mark.parametrize(
    ("params", "X", "message"),
    [
        ({}, [[0.0, np.nan], [1.0, 2.0], [3.0, 1.0]], "NaN"),
        ({}, sp.csr_matrix([[0.0, np.inf], [1.0, 2.0], [3.0, 1.0]]), "infinity"),
        ({}, [0.0, 1.0, 2.0], "2D"),
        ({}, [[0.0, 1.0], [1.0], [2.0, 3.0]], "ragged"),
        ({}, [["a", "b"], ["c", "d"]], "numbers"),
        ({"n_clusters": 5}, [[0.0], [1.0], [2.0]], "fewer than n_clusters"),
        ({}, [[1.0, 1.0]] * 6, "identical"),
        ({"n_clusters": 1}, [[0.0], [1.0], [2.0]], "n_clusters"),
        ({"C": -1.0}, [[0.0], [1.0], [2.0]], "C"),
        ({"cutting_plane_tol": 0.0}, [[0.0], [1.0], [2.0]], "cutting_plane_tol"),
        ({"kernel": "poly"}, [[0.0], [1.0], [2.0]], "kernel"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(params, X, message):
    with pytest.raises(ValueError, match=message):
        CPM3C(**params).fit(X)


def test_predict_with_the_wrong_feature_count_is_refused(digits, fitted_on_digits):
    X, _ = digit_subset(digits, (1, 7))
    est = fitted_on_digits(paper_cpm3c(random_state=0), (1, 7))
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :10])


def test_clone_and_registry_entry():
    est = CPM3C(n_clusters=3, C=10.0, random_state=1)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    spec = get_spec("cpm3c")
    assert spec.estimator is CPM3C and spec.params_model is CPM3CParams
    assert spec.queue == "fast" and spec.accepts_sparse
    assert isinstance(spec.build({"n_clusters": 3}), CPM3C)


def test_rbf_coordinates_bound_max_n_by_their_memory():
    # kernel="rbf" stores the n x n_landmarks dense coordinates of the points it clusters: the
    # registry keeps that product at most 3e8 (1.2 GB as float32) instead of letting a
    # 1,000,000 x 5,000 request exhaust a worker. The default clusters a sample of 1,000,000
    # points above that size and labels up to 10,000,000.
    spec = get_spec("cpm3c")
    assert spec.max_n_for(spec.parse_params({})) == 10_000_000
    assert spec.max_n_for(spec.parse_params({"exact_max_n": None})) == 1_000_000
    assert spec.max_n_for(spec.parse_params({"kernel": "linear", "exact_max_n": None})) \
        == 1_000_000
    wide = spec.parse_params({"kernel": "rbf", "n_landmarks": 5000})
    assert spec.max_n_for(wide) * 5000 <= 300_000_000
    sampled = spec.parse_params({"n_landmarks": 5000, "exact_max_n": 60_000})
    assert spec.max_n_for(sampled) == 10_000_000


def test_above_exact_max_n_a_sample_is_clustered_and_every_point_labelled_by_the_scores():
    # The paper's rule labels the points outside the sample: argmax_p w_p.x + b_p, the same
    # predict gives, and the labelling's decision values are the ones the worker reports.
    X, y = make_blobs(n_samples=600, centers=[(-4, -4), (4, 4)], cluster_std=1.0,
                      random_state=0)
    est = CPM3C(exact_max_n=200, random_state=0).fit(X)
    assert not est.exact_ and est.n_fit_samples_ == 200
    np.testing.assert_array_equal(est.labels_, est.predict(X))
    assert adjusted_rand_score(y, est.labels_) == 1.0
    kept = est.fit_decision_values(X, 100, lambda done, total: None)
    np.testing.assert_allclose(kept, est.decision_function(X), rtol=1e-12, atol=1e-12)
    restored = CPM3C.from_model(*est.to_model())
    assert not restored.exact_ and restored.n_fit_samples_ == 200
    assert CPM3C(random_state=0).fit(X).exact_


def test_the_scores_of_an_exact_fit_are_its_decision_values_for_the_callers_array():
    # The cutting planes scored every point; the worker asks for the decision values of the
    # array it passed (float32 here, converted to float64 by fit) and gets those scores, whose
    # argmax is labels_, without a second pass through the Nystrom map.
    X, _ = make_blobs(n_samples=300, centers=3, cluster_std=1.0, random_state=1)
    X = X.astype(np.float32)
    est = CPM3C(n_clusters=3, portfolio=False, random_state=0).fit(X)
    blocks = []
    kept = est.fit_decision_values(X, 100, lambda done, total: blocks.append(done))
    assert blocks == [X.shape[0]]
    np.testing.assert_array_equal(kept.argmax(axis=1), est.labels_)
    np.testing.assert_allclose(kept, est.decision_function(X), rtol=1e-6, atol=1e-6)
    assert est.fit_decision_values(X.copy(), 100, lambda done, total: None) is not kept


def test_class_elimination_is_reported_not_silent(fitted_on_digits):
    # The paper's setting (linear, k-means starts) on three blobs with k = 3: every run all but
    # empties a cluster. The result must say so (warnings_ reaches the job result), not return
    # two clusters without a word.
    X, _ = make_blobs(n_samples=150, centers=3, cluster_std=0.8, random_state=3)
    with pytest.warns(UserWarning, match="class elimination"):
        est = paper_cpm3c(n_clusters=3, random_state=0).fit(X)
    assert np.bincount(est.labels_, minlength=3).min() <= 1  # sizes 85 / 1 / 64
    assert est.result_extras()["warnings"] and "empty" in est.result_extras()["warnings"][0]
    four = fitted_on_digits(paper_cpm3c(n_clusters=4, random_state=0, **K4_PARAMS), (0, 6, 8, 9))
    assert four.warnings_ == []


def test_blobs_with_three_clusters_are_found():
    # The defaults (spectral start, local-scaling width) keep every cluster: 0 % error where the
    # paper's setting above loses one (32.7 %).
    X, y = make_blobs(n_samples=150, centers=3, cluster_std=0.8, random_state=3)
    est = CPM3C(n_clusters=3, random_state=0).fit(X)
    assert clustering_error(y, est.labels_) <= 0.02
    assert est.warnings_ == []


def test_kernel_pca_truncation_keeps_the_leading_components_and_the_papers_width(
        digits, fitted_on_digits):
    X, _ = digit_subset(digits, (8, 9))
    est = fitted_on_digits(paper_cpm3c(random_state=0, **KPCA_PARAMS), (8, 9))
    # sigma = 0.4 * largest pairwise distance (the paper's sigma_0).
    diffs = X[:, None, :] - X[None, :, :]
    sigma_0 = np.sqrt((diffs**2).sum(axis=2).max())
    assert est.gamma_ == pytest.approx(1.0 / (0.4 * sigma_0) ** 2)
    assert est.coef_.shape == (1, 20) and est.kpca_.components.shape[0] == 20
    # Every point a landmark: the kept coordinates are kernel PCA's, their variances the top
    # eigenvalues of the centered kernel matrix (divided by n), in decreasing order.
    Z = est.kpca_.transform(est.nystrom_.transform(X))
    K = np.exp(-est.gamma_ * (diffs**2).sum(axis=2))
    n = X.shape[0]
    H = np.eye(n) - 1.0 / n
    top = np.sort(np.linalg.eigvalsh(H @ K @ H))[::-1][:20]
    np.testing.assert_allclose((Z**2).sum(axis=0), top, rtol=1e-6)


@pytest.mark.parametrize("kpca_components", [None, 20])
def test_float32_coordinates_cluster_and_predict_as_float64_ones(monkeypatch, kpca_components):
    # Large data keeps its Nystrom coordinates as float32, centred in place (FLOAT32_MIN_...):
    # forced here at 1,000 noisy moons (the threshold, not the size, picks the path), the fit
    # matches the float64 one and predict reproduces the labels, so the centring shift is folded
    # back into the model.
    import algorithms.cpm3c as cpm3c

    X, y = make_moons(1000, noise=0.08, random_state=0)
    params = {"n_clusters": 2, "random_state": 0, "kpca_components": kpca_components}
    wide = CPM3C(**params).fit(X)
    monkeypatch.setattr(cpm3c, "FLOAT32_MIN_COORDINATES", 1)
    narrow = CPM3C(**params).fit(X)
    assert adjusted_rand_score(y, narrow.labels_) >= adjusted_rand_score(y, wide.labels_) - 0.01
    assert adjusted_rand_score(y, narrow.labels_) > 0.9 > adjusted_rand_score(
        y, KMeans(2, n_init=10, random_state=0).fit_predict(X))
    assert np.mean(narrow.predict(X) == narrow.labels_) >= 0.999


def test_binary_form_keeps_its_sums_on_large_data(monkeypatch):
    # From BINARY_SUMS_MIN_POINTS on, the binary form's QPs read kept sums instead of a
    # combination product: forced at 600 points, the same labels as without.
    import algorithms.cpm3c_constraints as constraints

    X, y = make_moons(600, noise=0.08, random_state=1)
    plain = CPM3C(n_clusters=2, random_state=0).fit(X)
    monkeypatch.setattr(constraints, "BINARY_SUMS_MIN_POINTS", 1)
    kept = CPM3C(n_clusters=2, random_state=0).fit(X)
    assert adjusted_rand_score(plain.labels_, kept.labels_) >= 0.99
    assert adjusted_rand_score(y, kept.labels_) > 0.9
