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

from algorithms.base import DEPRECATED, RENAMED_VALUES
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
    ("sdp_mmc", {"beta": 0.5}, {"C": 2.0}),
    ("sdp_mmc", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("sdp_mmc", {"solver": "CLARABEL"}, {"solver": "clarabel"}),
    ("gmmc", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("robust_svm", {"solver": "cvxpy"}, {"solver": "scs"}),
    ("m3n", {"beta": 1.0}, {"C": 1.0}),
    ("m3n", {"class_balance": 0.2, "pair_balance": 0.4}, {"size_band": 0.2, "pair_size_band": 0.4}),
    ("m3n", {"sdp_solver": "CLARABEL"}, {"solver": "clarabel"}),
    ("itersvr", {"gamma": "seed"}, {"gamma": "paper"}),
    ("gmmc", {"gamma": "seed"}, {"gamma": "paper"}),
]


@pytest.mark.parametrize(("name", "old", "new"), RENAMES)
def test_old_names_and_values_are_translated_with_a_deprecation_warning(name, old, new):
    spec = get_spec(name)
    with pytest.warns(DeprecationWarning, match="renamed"):
        translated = spec.parse_params(old)
    assert translated == spec.parse_params(new)


def test_every_renamed_value_names_a_value_of_its_parameter():
    for parameter, values in RENAMED_VALUES.items():
        owners = [spec for spec in SPECS if parameter in spec.params_model.model_fields]
        assert owners, parameter
        for new in values.values():
            assert any(spec.parse_params({parameter: new}) for spec in owners
                       if new in str(spec.params_model.model_fields[parameter].annotation))


def test_an_estimator_given_an_old_name_fits_as_with_the_new_one():
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=60, centers=2, random_state=0)
    spec = get_spec("sdp_mmc")
    with pytest.warns(DeprecationWarning, match="'beta' is renamed 'C'"):
        old = spec.estimator(beta=0.01, random_state=0).fit(X)
    new = spec.estimator(C=100.0, random_state=0).fit(X)
    np.testing.assert_array_equal(old.labels_, new.labels_)


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
