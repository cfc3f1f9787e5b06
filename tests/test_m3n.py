"""Unsupervised M3N (thesis chapter 5): HMM pieces, supervised M3N, ACDHMM, CDHMM, contract."""

import itertools

import numpy as np
import pytest

from algorithms.conic import SDPSolverError
from algorithms.hmm import (
    SequenceBatch,
    baum_welch,
    emission_scores,
    forward_backward,
    loss_augmented_viterbi,
    viterbi,
)
from algorithms.inputs import arrays_to_npz_bytes as to_npz
from algorithms.inputs import npz_bytes_to_arrays
from algorithms.m3n import (
    UnsupervisedM3N,
    balance_bounds,
    balanced_viterbi,
    m3n_objective,
    sample_switching_hmm,
    solve_cdhmm_relaxation,
    solve_m3n,
)
from algorithms.metrics import clustering_error
from algorithms.registry import get_spec

REPEATS = range(10)  # Tables 5.1/5.2: 10 draws of 10 sequences of length 8 per data set
DATA1, DATA3 = 0.05, 0.20  # stay probabilities


def draws(stay):
    for rep in REPEATS:
        sequences, states = sample_switching_hmm(stay, random_state=rep)
        yield rep, sequences, np.concatenate(states)


# --- HMM pieces -------------------------------------------------------------------------------


def _brute_force_paths(x, E, T, s):
    def score(y):
        return (s[y[0]] + sum(E[y[t], x[t]] for t in range(len(x)))
                + sum(T[y[t - 1], y[t]] for t in range(1, len(x))))
    return max(itertools.product(range(E.shape[0]), repeat=len(x)), key=score)


def test_viterbi_matches_brute_force_on_sequences_of_mixed_lengths():
    rng = np.random.RandomState(0)
    sequences = [rng.randint(0, 4, size=n) for n in (1, 2, 3, 5, 4, 7, 2)]
    batch = SequenceBatch(sequences)
    E, T, s = rng.randn(3, 4), rng.randn(3, 3), rng.randn(3)
    paths = batch.split(viterbi(batch, emission_scores(batch, E), T, s))
    for x, path in zip(sequences, paths, strict=True):
        assert tuple(path) == _brute_force_paths(x, E, T, s)


def test_forward_backward_posteriors_and_likelihood_match_enumeration():
    rng = np.random.RandomState(1)
    k, V = 2, 3
    sequences = [rng.randint(0, V, size=n) for n in (1, 3, 4, 6)]
    batch = SequenceBatch(sequences)
    pi, A = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k), size=k)
    B = rng.dirichlet(np.ones(V), size=k)
    gamma, xi_sum, loglik = forward_backward(batch, pi, A, B)
    total, expected_gamma, expected_xi = 0.0, [], np.zeros((k, k))
    for x in sequences:
        joint = {}
        for y in itertools.product(range(k), repeat=len(x)):
            joint[y] = (pi[y[0]] * np.prod([B[y[t], x[t]] for t in range(len(x))])
                        * np.prod([A[y[t - 1], y[t]] for t in range(1, len(x))]))
        px = sum(joint.values())
        total += np.log(px)
        g = np.zeros((len(x), k))
        for y, p in joint.items():
            g[np.arange(len(x)), y] += p / px
            for t in range(1, len(x)):
                expected_xi[y[t - 1], y[t]] += p / px
        expected_gamma.append(g)
    assert loglik == pytest.approx(total, abs=1e-10)
    np.testing.assert_allclose(gamma, np.vstack(expected_gamma), atol=1e-10)
    np.testing.assert_allclose(xi_sum, expected_xi, atol=1e-10)


def test_loss_augmented_viterbi_maximises_hamming_loss_plus_score():
    rng = np.random.RandomState(2)
    x = rng.randint(0, 3, size=6)
    batch = SequenceBatch([x])
    E, T = rng.randn(2, 3), rng.randn(2, 2)
    labels = rng.randint(0, 2, size=6)
    u = loss_augmented_viterbi(batch, E, T, labels)
    best = max(itertools.product(range(2), repeat=6), key=lambda y: (
        sum(y[t] != labels[t] for t in range(6)) + sum(E[y[t], x[t]] for t in range(6))
        + sum(T[y[t - 1], y[t]] for t in range(1, 6))))
    assert tuple(u) == best


def test_baum_welch_increases_likelihood_over_random_parameters():
    sequences, _ = sample_switching_hmm(0.1, n_sequences=20, length=10, random_state=0)
    batch = SequenceBatch(sequences)
    short = baum_welch(batch, 2, 2, rng=np.random.RandomState(0), max_iter=1)
    long = baum_welch(batch, 2, 2, rng=np.random.RandomState(0), max_iter=50)
    assert long.loglik > short.loglik


# --- supervised M3N and balanced relabeling ---------------------------------------------------


def test_supervised_m3n_finds_the_minimum_margin_loss_and_decodes_its_labels():
    sequences, states = sample_switching_hmm(0.05, random_state=3)
    batch = SequenceBatch(sequences)
    truth = np.concatenate(states)
    solution = solve_m3n(batch, truth, 2, 2, beta=0.01)
    decoded = viterbi(batch, emission_scores(batch, solution.emission), solution.transition)
    # (2.47) is convex in w: no nearby weights may have a clearly smaller margin loss (the
    # cutting plane stops within tol = 1e-3 per position, 0.08 here).
    rng = np.random.RandomState(0)
    w_e, w_t = solution.emission, solution.transition
    for _ in range(20):
        nearby = m3n_objective(batch, truth, w_e + 0.05 * rng.randn(2, 2),
                               w_t + 0.05 * rng.randn(2, 2), 0.01)
        assert nearby >= solution.objective - 1e-3 * batch.n_positions
    assert solution.objective == pytest.approx(m3n_objective(batch, truth, w_e, w_t, 0.01))
    # Data1's noise is 5 %: the decoder recovers the training labels up to a few positions.
    assert np.mean(decoded == truth) >= 0.9


def test_balanced_viterbi_keeps_every_state_within_the_balance_bounds():
    rng = np.random.RandomState(4)
    batch = SequenceBatch([rng.randint(0, 5, size=20) for _ in range(5)])
    for k, epsilon in ((2, 0.05), (3, 0.1)):
        E = rng.randn(k, 5)
        E[0] += 3.0  # state 0 wins almost everywhere without the constraint
        T = 0.3 * rng.randn(k, k)
        assert np.bincount(viterbi(batch, emission_scores(batch, E), T), minlength=k)[0] > 60
        counts = np.bincount(balanced_viterbi(batch, E, T, size_band=epsilon), minlength=k)
        low, high = balance_bounds(batch.n_positions, k, epsilon)
        assert np.all((counts >= low) & (counts <= high)), (k, counts, low, high)


# --- acceptance: Tables 5.1 / 5.2 ---------------------------------------------------------------


def em_mean_error(sequences, truth, seed, restarts=10):
    """The thesis's EM column: 10 Baum-Welch runs from random starts, error averaged."""
    batch = SequenceBatch(sequences)
    rng = np.random.RandomState(seed)
    runs = [baum_welch(batch, 2, 2, rng=rng) for _ in range(restarts)]
    return float(np.mean([clustering_error(truth, run.decode(batch)) for run in runs]))


def observed_symbol_error(sequences, truth):
    """Trivial baseline: label every position with the symbol it emits (2 states, 2 symbols).

    In the data of Tables 5.1/5.2 each state emits one fixed symbol except with probability
    ``stay`` (5 % on Data1, 20 % on Data3), so up to the matching of names the symbols alone are
    right at about 95 % and 80 % of the positions; a method must beat this to have learned
    anything from the chain."""
    return clustering_error(truth, np.concatenate(sequences))


def test_exact_cdhmm_beats_the_observed_symbol_on_two_draws_of_data3():
    # Data3 of Table 5.1 (20 % emission noise), its first two draws: measured 16.25 % and
    # 13.75 % error against the observed-symbol labelling's 23.75 % and 17.5 %, the trivial
    # answer a method must beat to have learned anything from the chain. Table 5.1's 10 draws
    # (the thesis's bound on CDHMM, 25 %) are checked by ``python -m benchmarks.paper_tables``,
    # its rows printed by ``python -m benchmarks.m3n`` (docs/algorithms/m3n.md).
    errors, baseline = [], []
    for rep, sequences, truth in itertools.islice(draws(DATA3), 2):
        model = UnsupervisedM3N(2, method="exact", random_state=rep).fit(sequences)
        errors.append(clustering_error(truth, np.concatenate(model.labels_)))
        baseline.append(observed_symbol_error(sequences, truth))
    assert np.mean(errors) <= 0.25, errors
    assert np.all(np.array(errors) <= np.array(baseline) + 1e-12), (errors, baseline)
    assert np.mean(errors) <= np.mean(baseline) - 0.01, (np.mean(errors), np.mean(baseline))


@pytest.mark.parametrize("stay", [DATA1, DATA3])
def test_alternating_acdhmm_is_no_worse_than_em_on_the_same_draws(stay):
    # Table 5.2: ACDHMM 14.46 vs EM 15.09 (Data1), 26.56 vs 30.06 (Data3). The thesis's EM column
    # averages 10 random-start runs; our own Baum-Welch reproduces it (13.1 % and 26.7 % here).
    # Against the observed-symbol labelling (5.5 % and 20.1 %): ACDHMM beats it on Data1
    # (3.4 %, by 2.1 points, asserted with 1 point to spare) but NOT on Data3 (21.25 % vs
    # 20.13 %): with 20 % emission noise the best of 5 restarts ends 1.1 points behind the
    # trivial labelling, so Data3 only pins that it stays within 2 points of it.
    ours, em, baseline = [], [], []
    for rep, sequences, truth in draws(stay):
        model = UnsupervisedM3N(2, method="alternating", random_state=rep).fit(sequences)
        ours.append(clustering_error(truth, np.concatenate(model.labels_)))
        em.append(em_mean_error(sequences, truth, seed=1000 + rep))
        baseline.append(observed_symbol_error(sequences, truth))
    assert np.mean(ours) <= np.mean(em), (np.mean(ours), np.mean(em))
    if stay == DATA1:
        assert np.mean(ours) <= np.mean(baseline) - 0.01, (np.mean(ours), np.mean(baseline))
    else:
        assert np.mean(ours) <= np.mean(baseline) + 0.02, (np.mean(ours), np.mean(baseline))


def test_exact_path_reports_an_inaccurate_relaxation_and_exposes_its_solver_settings():
    sequences, _ = sample_switching_hmm(DATA1, random_state=0)
    model = UnsupervisedM3N(2, method="exact", sdp_max_iter=10, random_state=0).fit(sequences)
    assert any("optimal_inaccurate" in note for note in model.warnings_), model.warnings_
    assert model.result_extras()["warnings"] == model.warnings_
    accurate = UnsupervisedM3N(2, method="exact", sdp_tol=1e-3, random_state=0).fit(sequences)
    assert accurate.warnings_ == []


def test_exact_path_raises_the_shared_solver_error_with_the_status():
    # 30 positions: Clarabel needs 20-30 iterations on this relaxation, so its cap of 10 stops it
    # (on the 80 positions of Table 5.1's draws those 10 iterations took a minute).
    sequences, _ = sample_switching_hmm(DATA1, n_sequences=5, length=6, random_state=0)
    with pytest.raises(SDPSolverError, match="user_limit"):
        UnsupervisedM3N(2, method="exact", solver="clarabel", sdp_max_iter=10).fit(sequences)
    with pytest.raises(SDPSolverError, match="MOSEK"):
        solve_cdhmm_relaxation(SequenceBatch(sequences), 2, 2, beta=0.01, size_band=0.1,
                               pair_size_band=0.3, solver="MOSEK")


@pytest.mark.parametrize(("sequences", "n_states", "words"), [
    ([[0, 1]], 2, "1 pairs"),  # SCS reported the relaxation infeasible
    ([[0, 1, 1]], 3, "2 pairs"),
])
def test_exact_path_refuses_too_few_pairs_for_its_balance_before_solving(sequences, n_states,
                                                                         words):
    with pytest.raises(ValueError, match=words):
        UnsupervisedM3N(n_states, method="exact").fit(sequences)
    # Three sequences of two symbols (3 pairs) are feasible at k = 3.
    UnsupervisedM3N(3, method="exact", random_state=0).fit([[0, 1], [1, 0], [0, 1]])


def test_model_labels_a_held_out_sequence_about_as_well_as_its_training_data():
    sequences, states = sample_switching_hmm(DATA1, random_state=11)
    truth = np.concatenate(states)
    model = UnsupervisedM3N(2, random_state=0).fit(sequences)
    train_labels = np.concatenate(model.labels_)
    train_error = clustering_error(truth, train_labels)
    # The state names are fixed by training: map them with the training matching, not anew.
    flip = np.mean(train_labels != truth) > 0.5
    held_out, held_states = sample_switching_hmm(DATA1, n_sequences=1, length=200, random_state=12)
    predicted = model.predict(held_out)[0]
    held_error = np.mean((1 - predicted if flip else predicted) != held_states[0])
    assert abs(held_error - train_error) <= 0.05, (held_error, train_error)


# --- estimator contract -------------------------------------------------------------------------


def test_fit_returns_one_int64_label_array_per_sequence_and_reports_progress():
    sequences = [[0, 1, 0, 1, 1], [1, 0], [0, 0, 1, 0, 1, 1, 0]]
    events = []
    model = UnsupervisedM3N(2, n_init=2, random_state=0).fit(
        sequences, progress=lambda *event: events.append(event))
    assert [len(labels) for labels in model.labels_] == [5, 2, 7]
    assert all(labels.dtype == np.int64 for labels in model.labels_)
    assert set(np.concatenate(model.labels_)) <= {0, 1}
    assert model.emission_.shape == (2, 2) and model.transition_.shape == (2, 2)
    assert len(events) >= 3 and events[-1][2] == "done"
    predicted = model.predict([[1, 0, 1], [0]])
    assert [p.shape for p in predicted] == [(3,), (1,)]


def test_portable_model_round_trips_through_npz_and_predicts_the_same():
    sequences, _ = sample_switching_hmm(DATA3, random_state=5)
    model = UnsupervisedM3N(2, n_init=2, random_state=0).fit(sequences)
    meta, arrays = model.to_model()
    restored = UnsupervisedM3N.from_model(meta, npz_bytes_to_arrays(to_npz(arrays)))
    np.testing.assert_array_equal(restored.emission_, model.emission_)
    for a, b in zip(restored.predict(sequences), model.predict(sequences), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(restored.labels_, model.labels_, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("sequences", "message"),
    [
        ([], "empty"),
        ([[0, 1], []], r"sequences\[1\] is empty"),
        ([[0, -1, 1]], "negative"),
        ([[0, 1.5]], "integer"),
        ([["a", "b"]], "integer"),
        ([[[0, 1], [1, 0]]], "1-D"),
        ("0101", "list"),
    ],
)
def test_bad_sequences_are_refused_with_a_clear_error(sequences, message):
    with pytest.raises(ValueError, match=message):
        UnsupervisedM3N(2).fit(sequences)


def test_predict_refuses_symbols_outside_the_training_vocabulary():
    model = UnsupervisedM3N(2, n_init=1, random_state=0).fit([[0, 1, 2, 1, 0, 2]])
    with pytest.raises(ValueError, match=r"symbol 3, outside the vocabulary 0..2"):
        model.predict([[0, 3]])


@pytest.mark.parametrize(("params", "field"), [({"n_states": 1}, "n_states"),
                                               ({"method": "em"}, "method"),
                                               ({"C": 0.0}, "C")])
def test_invalid_parameters_name_the_field(params, field):
    with pytest.raises(ValueError, match=field):
        UnsupervisedM3N(**params).fit([[0, 1, 0, 1]])


def test_fewer_positions_than_states_is_refused():
    with pytest.raises(ValueError, match="fewer than n_states=3"):
        UnsupervisedM3N(3).fit([[0], [1]])


def test_registry_routes_exact_to_slow_and_limits_its_positions():
    spec = get_spec("m3n")
    assert spec.input_kind == "sequences"
    exact, alternating = spec.parse_params({"method": "exact"}), spec.parse_params({})
    assert spec.queue_for(exact) == "slow" and spec.queue_for(alternating) == "fast"
    assert spec.max_n_for(exact) < spec.max_n_for(alternating)
    assert spec.build(alternating).C == 100.0
