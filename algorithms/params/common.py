"""What every algorithm's parameters share: the base model (unknown names refused, renamed names
and values translated for one release) and the field types that give a name one meaning in every
algorithm.

These modules hold no numerics: the API validates requests with them without importing an
estimator.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

# ---------------------------------------------------------------------------------------------
# Parameter models: one pydantic model per algorithm, shared field types so names mean the same
# thing everywhere: a parameter name means the same across algorithms.
# ---------------------------------------------------------------------------------------------

NClusters = Annotated[int, Field(ge=2, le=1000, description="Number of clusters k.")]
# ``n_clusters="auto"``: the method chooses k in 2..max_clusters
# (:mod:`algorithms.selection.n_clusters`).
AUTO = "auto"
# Tibshirani and Walther (2005), section 3: a k whose prediction strength is at least 0.8-0.9
# has well-separated clusters; the lower end keeps clusters that touch.
STRENGTH_THRESHOLD = 0.8
_NUMBER_OF_CLUSTERS: TypeAdapter[int] = TypeAdapter(NClusters)
_NUMBER_OF_CLUSTERS_SCHEMA = {"type": "integer", "minimum": 2, "maximum": 1000}
# "auto" as a one-value enum (a lone const is not read as a choice by some client generators).
_AUTO_SCHEMA = {"type": "string", "enum": [AUTO]}


def _number_of_clusters_or_auto(value: Any) -> int | str:
    """``"auto"``, or a number of clusters checked as ``NClusters``; one error naming both (a
    union would report one error per member, each under its own location)."""
    if isinstance(value, str) and value == AUTO:
        return AUTO
    try:
        return _NUMBER_OF_CLUSTERS.validate_python(value)
    except ValidationError as error:
        raise PydanticCustomError("n_clusters", "{reason}, or 'auto'",
                                  {"reason": error.errors()[0]["msg"]}) from None


def _number_of_clusters_auto_or_none(value: Any) -> int | str | None:
    return None if value is None else _number_of_clusters_or_auto(value)


# The inner type documents the values (the parameter tables read it); the validator checks them.
NClustersOrAuto = Annotated[
    NClusters | Literal["auto"],
    PlainValidator(_number_of_clusters_or_auto),
    WithJsonSchema({"anyOf": [_NUMBER_OF_CLUSTERS_SCHEMA, _AUTO_SCHEMA]}),
    Field(description=(
        "Number of clusters k, or 'auto': the k in 2..max_clusters whose partition has the "
        "largest prediction strength of at least 0.8 (Tibshirani and Walther 2005); a job's "
        "result extras give the chosen k as n_clusters and the strength of every k as "
        "n_clusters_strengths (the estimator's n_clusters_ and n_clusters_strengths_)."
    )),
]
NClustersAutoOrNone = Annotated[
    NClusters | Literal["auto"] | None,
    PlainValidator(_number_of_clusters_auto_or_none),
    WithJsonSchema({"anyOf": [_NUMBER_OF_CLUSTERS_SCHEMA, _AUTO_SCHEMA, {"type": "null"}]}),
]
MaxClusters = Annotated[
    int, Field(ge=2, le=100, description=(
        "Largest k that n_clusters='auto' considers. Data with more clusters than this gets a "
        "coarser k (often 2): raise it when more clusters are possible."))
]
DEFAULT_MAX_CLUSTERS = 50
KernelParam = Annotated[
    Literal["rbf", "linear"], Field(description="Kernel: 'rbf' exp(-gamma ||x-x'||^2) or 'linear'.")
]
# A width must be a positive finite number: 1e400 parses as inf and NaN is valid JSON to Python,
# and either would only fail later in a worker (and echo back as invalid JSON).
PositiveFloat = Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)]
# The named widths. Only 'scale' is scikit-learn's rule; scikit-learn's 'auto' (1 / n_features)
# is none of these, so no width here is called 'auto'.
LOCAL_SCALING = "local_scaling"
GAMMA_DESCRIPTION = (
    "RBF width, exp(-gamma ||x - x'||^2) (a number means what it means in scikit-learn). "
    "'local_scaling': gamma = 1 / (2 sigma^2), sigma the median distance from a point to its "
    "7th nearest neighbour; 'paper': the width heuristic of the algorithm's paper; 'scale': "
    "scikit-learn's 1 / (n_features * X.var())."
)
GammaParam = Annotated[
    PositiveFloat | Literal["local_scaling", "paper", "scale"],
    Field(description=GAMMA_DESCRIPTION),
]
RandomStateParam = Annotated[
    int | None, Field(ge=0, le=2**32 - 1, description="Seed for reproducible runs.")
]
PortfolioParam = Annotated[bool, Field(description=(
    "Keep, among the method's own partition and the candidate partitions of other families "
    "(Genie at three Gini thresholds, a Gaussian mixture, k-means, kNN spectral at two "
    "neighbourhood sizes), the one of the best margin score "
    "(algorithms.selection.portfolio); where a candidate wins, the out-of-sample model is "
    "the SVM trained on it. With more than two clusters, the bisection methods (itersvr, "
    "sdp_mmc, gmmc) start from the best candidate and refine it. False: the method's own "
    "partition, as in its paper. Ignored when partial labels are given."))]
# The types of the names several algorithms share (their meanings: algorithms.params.vocabulary).
ExactMaxN = Annotated[int | None, Field(ge=2, le=20000)]
MaxAlternations = Annotated[int, Field(ge=1, le=1000)]
CuttingPlaneTol = Annotated[float, Field(gt=0, le=1)]
SDPTol = Annotated[float, Field(gt=0, le=1e-1)]
SDPMaxIter = Annotated[int, Field(ge=10, le=200000)]


# The default of a renamed parameter that ``__init__`` still accepts for one release.
DEPRECATED = "deprecated"


def is_unset(value: Any) -> bool:
    """Whether a renamed parameter was left at its ``DEPRECATED`` default (not passed)."""
    return isinstance(value, str) and value == DEPRECATED


# Values renamed in every model that has the parameter (old value -> new value); a model's
# ``renamed_values`` adds to them or overrides them.
RENAMED_VALUES: dict[str, dict[str, str]] = {
    "gamma": {"seed": "paper", "auto": LOCAL_SCALING},
    "solver": {"cvxpy": "scs", "SCS": "scs", "CLARABEL": "clarabel"},
}

# What a conversion of a renamed parameter returns when the old value asks for nothing that the
# new parameter does not already say (``solver="auto"`` beside ``exact_max_n``).
UNCHANGED = object()

# Old parameter name -> (new name, conversion of the value or None).
Renames = Mapping[str, tuple[str, Callable[[Any], Any] | None]]
RenamedValues = Mapping[str, Mapping[str, str]]


def exact_max_n_of_sampling(solver: Any) -> Any:
    """The ``exact_max_n`` of the sampling mode that iterSVR and SVC called ``solver``:
    ``"exact"`` clusters every point (``exact_max_n=None``); ``"auto"`` and ``"sample"`` sampled
    above ``exact_max_n`` points alike, which ``exact_max_n`` alone says now."""
    if solver == "exact":
        return None
    if solver in ("auto", "sample"):
        return UNCHANGED
    raise ValueError(f"solver={solver!r} was never a sampling mode; give exact_max_n (null: "
                     "every point)")


def reciprocal(value: Any) -> Any:
    """``1 / value`` for a number (``beta = 1 / C``); anything else is left for validation."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value != 0:
        return 1.0 / value
    return value


def most_clusters(n_clusters: int | str, max_clusters: int) -> int:
    """The most clusters a fit may form: ``n_clusters``, or ``max_clusters`` for "auto"."""
    return max_clusters if n_clusters == AUTO else int(n_clusters)


def sample_size_problem(exact_max_n: int | None, n_clusters: int | str,
                        max_clusters: int = DEFAULT_MAX_CLUSTERS) -> str | None:
    """Why a sample of ``exact_max_n`` points cannot hold ``n_clusters`` clusters (at most
    ``max_clusters`` for "auto"), or None."""
    n_clusters = most_clusters(n_clusters, max_clusters)
    if exact_max_n is not None and exact_max_n < n_clusters:
        return (f"exact_max_n={exact_max_n} is fewer than n_clusters={n_clusters}: a sampled fit "
                f"could not form every cluster")
    return None


class AlgorithmParams(BaseModel):
    """Base of every algorithm's parameter model: unknown parameters are an error.

    A model is the one source of truth for its algorithm's parameters: name, default, bounds and
    a one-line meaning (``description``); the estimator's ``__init__`` and docstring agree with
    it (``tests/test_params.py``). Renamed parameters and values keep working for one release:
    ``renamed`` maps an old name to ``(new name, conversion or None)`` (a conversion that
    returns ``UNCHANGED`` leaves the new parameter as given); the values of ``RENAMED_VALUES``
    and of the model's ``renamed_values`` are translated; either raises a
    ``DeprecationWarning``. This is the one place where a deprecated spelling is translated.
    """

    # Every float parameter is finite: no inf or NaN reaches a worker or a stored record.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    renamed: ClassVar[Renames] = {}
    renamed_values: ClassVar[RenamedValues] = {}
    # Parameters of ``__init__`` that only the library takes (an estimator object, say): not
    # part of the API's schema.
    library_only: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _translate_renamed(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = {key: value for key, value in data.items() if key not in cls.library_only}
        for old, (new, convert) in cls.renamed.items():
            if old not in data:
                continue
            value = data.pop(old)
            if is_unset(value):
                continue
            warnings.warn(f"parameter {old!r} is renamed {new!r}"
                          + (" (with the value converted)" if convert else "")
                          + "; the old name stops working in the next release",
                          DeprecationWarning, stacklevel=4)
            value = convert(value) if convert else value
            if value is not UNCHANGED:
                data[new] = value
        for name in cls.model_fields:
            values = {**RENAMED_VALUES.get(name, {}), **cls.renamed_values.get(name, {})}
            value = data.get(name)
            if isinstance(value, str) and value in values:
                warnings.warn(f"{name}={value!r} is renamed {name}={values[value]!r}; the old "
                              "value stops working in the next release",
                              DeprecationWarning, stacklevel=4)
                data[name] = values[value]
        return data

    def estimator_kwargs(self) -> dict[str, Any]:
        return self.model_dump()


class SampledFitParams(AlgorithmParams):
    """Base of the parameters of a method that solves its relaxation over a sample of
    ``exact_max_n`` points (SDP MMC, GMMC): the sample must hold every cluster (at most
    ``max_clusters`` for "auto")."""

    @model_validator(mode="after")
    def _sample_holds_the_clusters(self):
        # The subclass declares n_clusters, max_clusters and exact_max_n.
        if problem := sample_size_problem(self.exact_max_n, self.n_clusters, self.max_clusters):
            raise ValueError(problem)
        return self


def format_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "parameters"
        parts.append(f"invalid parameter {where}: {item['msg']}")
    return "; ".join(parts)
