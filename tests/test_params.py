"""Each algorithm's pydantic params model is the one source of truth for its parameters: the
estimator's ``__init__`` takes exactly its fields with the same defaults, the class docstring has
an entry for each, and every field carries its one-line meaning. Renamed parameters and values
keep working for one release, with a ``DeprecationWarning``."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest
from pydantic import Field

from algorithms.params.common import DEPRECATED, RENAMED_VALUES, AlgorithmParams
from algorithms.params.vocabulary import Term, renames, vocabulary_problems
from algorithms.registry import REGISTRY, get_spec

SPECS = sorted(REGISTRY.values(), key=lambda spec: spec.name)


def _init_parameters(estimator: type) -> dict[str, inspect.Parameter]:
    signature = inspect.signature(estimator.__init__)
    return {name: p for name, p in signature.parameters.items() if name != "self"}


def _current(spec) -> dict[str, inspect.Parameter]:
    """``__init__`` parameters that are neither deprecated nor library-only."""
    return {name: p for name, p in _init_parameters(spec.estimator).items()
            if p.default != DEPRECATED and name not in spec.params_model.library_only}


def _documented(estimator: type) -> set[str]:
    doc = inspect.getdoc(estimator) or ""
    section = doc.split("Parameters\n----------\n", 1)[1]
    section = re.split(r"\n(?:Attributes|References|See Also|Examples|Notes)\n-+\n", section)[0]
    entries = re.finditer(r"^(\w+(?:, \w+)*) :", section, re.MULTILINE)  # "C_e, C_delta : float"
    return {name for m in entries for name in m.group(1).split(", ")}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_init_takes_exactly_the_params_model_fields_with_its_defaults(spec):
    fields = spec.params_model.model_fields
    parameters = _current(spec)
    assert set(parameters) == set(fields)
    for name, parameter in parameters.items():
        assert parameter.default == fields[name].default, name


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_every_parameter_has_a_docstring_entry_and_a_one_line_meaning(spec):
    documented = _documented(spec.estimator)
    missing = set(_init_parameters(spec.estimator)) - documented
    deprecated = {name for name, p in _init_parameters(spec.estimator).items()
                  if p.default == DEPRECATED}
    assert missing <= deprecated, f"undocumented parameters: {sorted(missing - deprecated)}"
    for name, field in spec.params_model.model_fields.items():
        assert field.description, f"{spec.name}.{name} has no description"


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_renamed_parameters_stay_in_init_for_one_release_and_map_to_fields(spec):
    parameters = _init_parameters(spec.estimator)
    for old, (new, _) in spec.params_model.renamed.items():
        assert parameters[old].default == DEPRECATED, old
        assert new in spec.params_model.model_fields, new
        assert old not in spec.params_model.model_fields, old


RENAMES = [
    ("cpm3c", {"n_components": 100}, {"n_landmarks": 100}),
    ("cpm3c", {"class_balance": 0.2}, {"score_balance": 0.2}),
    ("cpm3c", {"epsilon": 0.05}, {"cutting_plane_tol": 0.05}),
    ("cpm3c", {"max_iter": 20}, {"max_cutting_plane_iter": 20}),
    ("cpm3c", {"gamma": "auto"}, {"gamma": "wide_local_scaling"}),
    ("cpm3c", {"gamma": "seed"}, {"gamma": "paper"}),
    ("gmmc", {"width_fraction": 0.3, "gamma": "paper"}, {"width_factor": 0.3, "gamma": "paper"}),
    ("gmmc", {"C": 10.0}, {"C_svm": 10.0}),
    ("gmmc", {"max_iter": 20}, {"lowrank_max_iter": 20}),
    ("gmmc", {"tol": 1e-4}, {"sdp_tol": 1e-4}),
    ("gmmc", {"gamma": "auto"}, {"gamma": "local_scaling"}),
    ("gmmc", {"gamma": "seed"}, {"gamma": "paper"}),
    ("gmmc", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("gmmc", {"solver": "SCS"}, {"solver": "scs"}),
    ("itersvr", {"solver": "exact"}, {"exact_max_n": None}),
    ("itersvr", {"solver": "sample", "exact_max_n": 20}, {"exact_max_n": 20}),
    ("itersvr", {"solver": "auto"}, {}),
    ("itersvr", {"max_iter": 3}, {"max_alternations": 3}),
    ("itersvr", {"gamma": "auto"}, {"gamma": "local_scaling"}),
    ("itersvr", {"gamma": "seed"}, {"gamma": "paper"}),
    ("m3n", {"beta": 1.0}, {"C": 1.0}),
    ("m3n", {"class_balance": 0.2, "pair_balance": 0.4}, {"size_band": 0.2, "pair_size_band": 0.4}),
    ("m3n", {"sdp_solver": "CLARABEL"}, {"solver": "clarabel"}),
    ("m3n", {"max_iter": 2}, {"max_alternations": 2}),
    ("m3n", {"tol": 1e-2}, {"cutting_plane_tol": 1e-2}),
    ("m3n", {"n_init": 2}, {"n_restarts": 2}),
    ("m3n", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("m3n", {"solver": "SCS"}, {"solver": "scs"}),
    ("m3n", {"solver": "CLARABEL"}, {"solver": "clarabel"}),
    ("robust_svm", {"max_iter": 2, "method": "ramp"}, {"max_alternations": 2, "method": "ramp"}),
    ("robust_svm", {"gamma": "auto", "kernel": "rbf"}, {"gamma": "local_scaling", "kernel": "rbf"}),
    ("robust_svm", {"gamma": "seed", "kernel": "rbf"}, {"gamma": "paper", "kernel": "rbf"}),
    ("robust_svm", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("robust_svm", {"solver": "SCS"}, {"solver": "scs"}),
    ("robust_svm", {"solver": "CLARABEL"}, {"solver": "clarabel"}),
    ("sdp_mmc", {"beta": 0.5}, {"C": 2.0}),
    ("sdp_mmc", {"tol": 1e-2, "solver": "scs"}, {"sdp_tol": 1e-2, "solver": "scs"}),
    ("sdp_mmc", {"max_iter": 500, "solver": "scs"}, {"sdp_max_iter": 500, "solver": "scs"}),
    ("sdp_mmc", {"gamma": "auto"}, {"gamma": "local_scaling"}),
    ("sdp_mmc", {"gamma": "seed"}, {"gamma": "paper"}),
    ("sdp_mmc", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("sdp_mmc", {"solver": "SCS"}, {"solver": "scs"}),
    ("sdp_mmc", {"solver": "CLARABEL"}, {"solver": "clarabel"}),
    ("svc", {"solver": "exact"}, {"exact_max_n": None}),
    ("svc", {"solver": "sample", "exact_max_n": 20}, {"exact_max_n": 20}),
    ("svc", {"max_iter": 5}, {"max_spheres": 5}),
    ("svc", {"gamma": "auto"}, {"gamma": "schedule"}),
]


def _case_id(case) -> str:
    name, old, _ = case
    return f"{name}-" + "-".join(f"{key}={value}" for key, value in old.items())


@pytest.mark.parametrize(("name", "old", "new"), RENAMES, ids=map(_case_id, RENAMES))
def test_old_names_and_values_are_translated_with_a_deprecation_warning(name, old, new):
    spec = get_spec(name)
    with pytest.warns(DeprecationWarning, match="renamed"):
        translated = spec.parse_params(old)
    assert translated == spec.parse_params(new)


def test_every_old_spelling_has_a_case():
    covered = set()
    for name, old, _ in RENAMES:
        for key, value in old.items():
            covered |= {(name, key), (name, f"{key}={value!r}")}
    models = {spec.name: spec.params_model for spec in SPECS}
    missing = [(name, old) for old, _, name in renames(models) if (name, old) not in covered]
    assert not missing, f"old spellings without a case in RENAMES: {missing}"


def _small_fit(name: str, params: dict) -> np.ndarray:
    """Labels of a few seconds' fit of ``name`` with ``params`` (its own partition, no
    portfolio, on a small set the method's family takes)."""
    from sklearn.datasets import make_blobs

    spec = get_spec(name)
    if name == "m3n":
        from algorithms.m3n import sample_switching_hmm

        sequences = sample_switching_hmm(0.1, n_sequences=4, length=10, random_state=0)[0]
        model = spec.estimator(**{"random_state": 0, **params}).fit(sequences)
        return np.concatenate(model.labels_)
    X, y = make_blobs(n_samples=30, centers=2, cluster_std=1.5, random_state=0)
    if name == "robust_svm":
        return spec.estimator(**params).fit(X, y).predict(X)
    return spec.estimator(**{"random_state": 0, "portfolio": False, **params}).fit(X).labels_


@pytest.mark.parametrize(("name", "old", "new"), RENAMES, ids=map(_case_id, RENAMES))
def test_each_old_spelling_fits_as_the_new_one(name, old, new):
    with pytest.warns(DeprecationWarning, match="renamed"):
        old_labels = _small_fit(name, old)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new_labels = _small_fit(name, new)
    np.testing.assert_array_equal(old_labels, new_labels)


def test_every_renamed_value_names_a_value_of_its_parameter():
    for parameter, values in RENAMED_VALUES.items():
        owners = [spec for spec in SPECS if parameter in spec.params_model.model_fields]
        assert owners, parameter
        for new in values.values():
            assert any(spec.parse_params({parameter: new}) for spec in owners
                       if new in str(spec.params_model.model_fields[parameter].annotation))


# -- one name, one meaning ------------------------------------------------------------------------


def test_every_parameter_name_has_one_meaning_in_the_vocabulary():
    assert vocabulary_problems({spec.name: spec.params_model for spec in SPECS}) == []


def test_a_name_two_algorithms_describe_differently_must_be_listed_as_one_concept():
    class First(AlgorithmParams):
        shared: int = Field(1, description="Rounds of the first loop.")

    class Second(AlgorithmParams):
        shared: int = Field(1, description="Iterations of another solver.")

    models = {"first": First, "second": Second}
    unlisted = {"shared": Term("Something.", "a reason")}
    listed = {"shared": Term("Something.", "a reason", varies="what each loop counts")}
    assert vocabulary_problems(models, unlisted) == [
        "shared: first, second describe it differently, but the vocabulary does not list it as "
        "one concept that varies"]
    assert vocabulary_problems(models, listed) == []
    assert vocabulary_problems(models, {}) == ["shared: no entry in the vocabulary"]


def test_a_model_stored_with_old_names_loads_without_warnings():
    from sklearn.datasets import make_blobs

    from algorithms.cpm3c import CPM3C

    X, _ = make_blobs(n_samples=60, centers=3, random_state=0)
    model = CPM3C(n_clusters=3, random_state=0).fit(X)
    meta, arrays = model.to_model()
    assert "n_landmarks" in meta["params"] and "n_components" not in meta["params"]
    old_meta = dict(meta, params={("n_components" if k == "n_landmarks" else k): v
                                  for k, v in meta["params"].items()})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        loaded = CPM3C.from_model(old_meta, arrays)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("name", ["itersvr", "svc"])
def test_the_old_solver_attribute_answers_as_exact_does_with_a_deprecation_warning(name):
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    estimator = get_spec(name).estimator
    sampled = estimator(n_clusters=2, exact_max_n=20, random_state=0).fit(X)
    exact = estimator(n_clusters=2, exact_max_n=None, random_state=0).fit(X)
    assert (sampled.exact_, exact.exact_) == (False, True)
    with pytest.warns(DeprecationWarning, match="exact_"):
        assert (sampled.solver_, exact.solver_) == ("sample", "exact")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        extras = sampled.result_extras()
    assert extras["exact"] is False and extras["solver"] == "sample"


@pytest.mark.parametrize("name", ["gmmc", "sdp_mmc"])
def test_exact_says_whether_the_relaxation_was_solved_over_every_point(name):
    # GMMC and SDP MMC report exact_ as iterSVR and SVC do (they never had solver_ for it:
    # their solver_ is the SDP backend).
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=60, centers=2, random_state=0)
    estimator = get_spec(name).estimator
    fits = [estimator(exact_max_n=size, portfolio=False, random_state=0).fit(X)
            for size in (None, 40)]
    assert [(fit.exact_, fit.n_fit_samples_) for fit in fits] == [(True, 60), (False, 40)]
    assert [fit.result_extras()["exact"] for fit in fits] == [True, False]


def test_an_itersvr_model_stored_with_solver_loads_with_exact():
    from sklearn.datasets import make_blobs

    from algorithms.itersvr import IterSVR

    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    meta, arrays = IterSVR(exact_max_n=20, random_state=0).fit(X).to_model()
    assert IterSVR.from_model(meta, arrays).exact_ is False
    old_meta = {**meta, "state": {k: v for k, v in meta["state"].items() if k != "exact_"}}
    assert IterSVR.from_model(old_meta, arrays).exact_ is False


def test_the_api_accepts_old_names_and_records_the_new_ones(service_url):
    import httpx

    from tests.helpers import submit_job, wait_for_job

    X = np.vstack([np.zeros((10, 2)), np.ones((10, 2)) * 5]) + np.linspace(0, 0.5, 20)[:, None]
    job = submit_job(service_url, {
        "algorithm": {"name": "sdp_mmc", "params": {"beta": 0.01, "solver": "cvxpy",
                                                    "random_state": 0}},
        "data": {"X": X.tolist()}})
    params = job["algorithm"]["params"]
    assert params["C"] == 100.0 and params["solver"] == "scs" and "beta" not in params
    assert wait_for_job(service_url, job["id"])["status"] == "succeeded"
    described = {a["name"]: a for a in httpx.get(f"{service_url}/v1/algorithms").json()}
    assert described["cpm3c"]["paper"].startswith("Zhao, Wang and Zhang 2008")
    assert described["itersvr"]["renamed"]["max_iter"] == "max_alternations"
    assert described["svc"]["renamed"]["gamma='auto'"] == "gamma='schedule'"


@pytest.mark.parametrize(("name", "old", "new"), [
    ("itersvr", {"max_iter": 5, "solver": "exact", "gamma": "auto"},
     {"max_alternations": 5, "exact_max_n": None, "gamma": "local_scaling"}),
    ("gmmc", {"C": 10.0, "tol": 1e-5, "width_fraction": 0.3},
     {"C_svm": 10.0, "sdp_tol": 1e-5, "width_factor": 0.3}),
    ("svc", {"max_iter": 50, "gamma": "auto"}, {"max_spheres": 50, "gamma": "schedule"}),
])
def test_a_job_with_old_spellings_runs_with_the_new_ones(service_url, name, old, new):
    from tests.helpers import submit_job, wait_for_job

    X = np.vstack([np.zeros((10, 2)), np.ones((10, 2)) * 5]) + np.linspace(0, 0.5, 20)[:, None]
    job = submit_job(service_url, {"algorithm": {"name": name, "params": {**old, "n_clusters": 2}},
                                   "data": {"X": X.tolist()}})
    params = job["algorithm"]["params"]
    assert {key: params[key] for key in new} == new and not set(old) - set(new) & set(params)
    assert wait_for_job(service_url, job["id"])["status"] == "succeeded"
