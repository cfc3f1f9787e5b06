"""Name -> algorithm spec: estimator (imported on first use), parameter model, capabilities and
limits.

The service builds its request schema, ``/v1/algorithms`` and queue routing from this table, so
adding an algorithm means adding its module and one entry to ``_SPECS`` below: no service change.
"""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from algorithms.params.common import AlgorithmParams
from algorithms.params.cpm3c import CPM3CParams
from algorithms.params.gmmc import GMMCParams
from algorithms.params.itersvr import IterSVRParams
from algorithms.params.m3n import UnsupervisedM3NParams, exact_relaxation_problem
from algorithms.params.robust_svm import SDP_MAX_N as ROBUST_SDP_MAX_N
from algorithms.params.robust_svm import RobustSVMParams
from algorithms.params.sdp_mmc import (
    LOWRANK_TWO_CLASS_MAX_N,
    MULTICLASS_MAX_N,
    TWO_CLASS_MAX_N,
    SDPMMCParams,
)
from algorithms.params.sdp_mmc import partial_labels_problem as sdp_mmc_partial_labels_problem
from algorithms.params.svc import SAMPLE_SIZE as SVC_SAMPLE_SIZE
from algorithms.params.svc import SupportVectorClusteringParams, soft_margin_problem
from algorithms.params.vocabulary import renames

InputKind = Literal["vectors", "sequences"]
LabelUse = Literal["none", "optional", "required"]
QueueName = Literal["fast", "slow"]

XU_2007 = "Xu 2007, Convex large margin training (PhD thesis, University of Waterloo)"


def _always(params: AlgorithmParams) -> bool:
    return True


@dataclass(frozen=True)
class Limit:
    """One case of an algorithm's limits: where ``condition`` holds, a job goes to ``queue`` and
    may hold at most ``max_n`` points (positions for sequences). The first case that holds
    applies; the last has no condition. ``max_n`` may be a function of the parameters, with its
    formula in words (``formula``) for the API's description."""

    max_n: int | Callable[[AlgorithmParams], int]
    queue: QueueName = "fast"
    condition: str = ""
    holds: Callable[[AlgorithmParams], bool] = _always
    formula: str = ""

    def max_n_for(self, params: AlgorithmParams) -> int:
        return self.max_n(params) if callable(self.max_n) else self.max_n

    def describe(self) -> str:
        size = self.formula or f"{self.max_n:,}"
        return f"{self.condition or 'otherwise'}: queue {self.queue}, max_n {size}"


@dataclass(frozen=True)
class AlgorithmSpec:
    """Everything the service needs to know about one algorithm.

    ``limits`` may depend on the parameters (an SDP method of an algorithm that also has a fast
    method goes to ``slow``): they are cases, stated once, from which the queue, the size limit
    and their description in ``GET /v1/algorithms`` all follow.
    """

    name: str
    # "module.Class": imported on first use, so that the API validates and queues jobs without
    # loading any numerics (the worker and the predict path import it).
    estimator_path: str
    params_model: type[AlgorithmParams]
    summary: str
    # The paper that defines the algorithm, by authors and year.
    paper: str
    input_kind: InputKind = "vectors"
    labels: LabelUse = "none"
    limits: tuple[Limit, ...] = (Limit(50_000),)
    timeout_seconds: int = 600
    retry_safe: bool = True
    accepts_sparse: bool = False
    # A 422 message when the labels a caller sent cannot be used with these parameters, else None.
    check_labels: Callable[[AlgorithmParams, list[int]], str | None] | None = None
    # A 422 message when n points (or positions) cannot be fitted with these parameters, else None.
    check_size: Callable[[AlgorithmParams, int], str | None] | None = None
    # The same for sequence input, given the sequences.
    check_sequences: Callable[[AlgorithmParams, list[list[int]]], str | None] | None = None
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def estimator(self) -> type:
        """The estimator class (imported on first use)."""
        return _import_class(self.estimator_path)

    @property
    def estimator_name(self) -> str:
        return self.estimator_path.rpartition(".")[2]

    def limit_for(self, params: AlgorithmParams) -> Limit:
        return next(limit for limit in self.limits if limit.holds(params))

    def queue_for(self, params: AlgorithmParams) -> QueueName:
        return self.limit_for(params).queue

    def max_n_for(self, params: AlgorithmParams) -> int:
        return self.limit_for(params).max_n_for(params)

    @property
    def queue(self) -> QueueName:
        """The queue of a job with the default parameters."""
        return self.queue_for(self.params_model())

    @property
    def max_n(self) -> int:
        """The size limit of a job with the default parameters."""
        return self.max_n_for(self.params_model())

    @property
    def limits_rule(self) -> str:
        """How queue and max_n follow from the parameters, in words."""
        if len(self.limits) == 1:
            return "queue and max_n do not depend on the parameters"
        return "; ".join(limit.describe() for limit in self.limits)

    def parse_params(self, raw: Mapping[str, Any] | None) -> AlgorithmParams:
        return self.params_model.model_validate(dict(raw or {}))

    def build(self, params: AlgorithmParams | Mapping[str, Any] | None = None):
        """A fresh, unfitted estimator for validated parameters."""
        if not isinstance(params, AlgorithmParams):
            params = self.parse_params(params)
        return self.estimator(**params.estimator_kwargs())

    def describe(self) -> dict[str, Any]:
        """JSON description for ``GET /v1/algorithms``."""
        return {
            "name": self.name,
            "summary": self.summary,
            "paper": self.paper,
            "seed": self.paper,  # deprecated name of "paper", kept for one release
            "estimator": self.estimator_name,
            "input_kind": self.input_kind,
            "labels": self.labels,
            # The limits of the default parameters, as a job without params gets them.
            "queue": self.queue,
            "max_n": self.max_n,
            "limits_rule": self.limits_rule,
            "timeout_seconds": self.timeout_seconds,
            "accepts_sparse": self.accepts_sparse,
            "params_schema": copy.deepcopy(_params_schema(self.params_model)),
            "renamed": {old: new for old, new, _ in renames({self.name: self.params_model})},
            "notes": dict(self.notes),
        }


@functools.cache
def _import_class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@functools.cache
def _params_schema(params_model: type[AlgorithmParams]) -> dict[str, Any]:
    # Building a JSON schema is not free, and GET /v1/algorithms asks for all of them.
    return params_model.model_json_schema()


# SVC's schedule solves tens of spheres of O(N^2) each, and the paper's complete labeling tests
# O(N^2) segments: the points one exact fit may hold within the job timeout, with room for
# high-dimensional data (timed by benchmarks/svc.py --defaults-at-scale).
SVC_EXACT_MAX_N = {"complete": 3_000, "other": 5_000}
# All the points a fit that clusters a sample (``exact_max_n``) labels by its out-of-sample model
# (timed by benchmarks/defaults.py --at-scale and benchmarks/sdp_solver.py --scale).
SAMPLED_MAX_N = 1_000_000
# The same for a sample's model that labels each point in a few products (iterSVR's SVM tree,
# CPM3C's argmax of linear scores on the Nystrom coordinates): the points are labelled a block
# of rows at a time, so a job holds its data, one block and the labels (timed, with the work
# horse's peak memory, by benchmarks/url_dataset.py).
LINEAR_LABELLING_MAX_N = 10_000_000
# The most Nystrom coordinates (points x landmarks) one CPM3C fit holds: 1.2 GB as float32.
CPM3C_MAX_COORDINATES = 300_000_000


def _fits_exactly(limit: int) -> Callable[[AlgorithmParams], bool]:
    """Whether a fit clusters every point where an exact fit may hold ``limit`` points: asked to
    (``exact_max_n=None``), or ``exact_max_n`` allows more."""
    return lambda params: params.exact_max_n is None or params.exact_max_n > limit


def _exactly(limit: int) -> str:
    return f"fitted exactly (exact_max_n null or > {limit:,})"


def _cpm3c_exact_max_n(params: AlgorithmParams) -> int:
    """The most points CPM3C clusters at once: kernel="rbf" holds their n x n_landmarks dense
    coordinates (float32 on large data, and their SVD with kpca_components)."""
    if params.kernel == "linear":
        return SAMPLED_MAX_N
    return min(SAMPLED_MAX_N, CPM3C_MAX_COORDINATES // params.n_landmarks)


_SPECS: tuple[AlgorithmSpec, ...] = (
    AlgorithmSpec(
        name="itersvr",
        estimator_path="algorithms.itersvr.IterSVR",
        params_model=IterSVRParams,
        summary=(
            "Iterative SVR with the Laplacian loss and class balance by bias search; "
            "k > 2 by recursive bisection."
        ),
        paper="Zhang, Tsang and Kwok 2007, Maximum margin clustering made practical (ICML)",
        labels="none",
        # The default exact_max_n fits a sample and labels every point by its SVM tree, in
        # linear time and a block of rows at a time.
        limits=(Limit(LINEAR_LABELLING_MAX_N),),
        timeout_seconds=900,
    ),
    AlgorithmSpec(
        name="cpm3c",
        estimator_path="algorithms.cpm3c.CPM3C",
        params_model=CPM3CParams,
        summary=(
            "Cutting-plane multiclass maximum margin clustering solved with CCCP; "
            "O(s n k) per iteration, linear in n, sparse CSR input."
        ),
        paper="Zhao, Wang and Zhang 2008, Efficient multiclass maximum margin clustering (ICML)",
        labels="none",
        # A fit over every point holds, for kernel="rbf", n x n_landmarks dense coordinates: at
        # most 3e8 entries, to bound a job's memory (timed by benchmarks/defaults.py
        # --at-scale). The default exact_max_n clusters a sample of at most that size and labels
        # every point by the argmax of its scores, a block of rows at a time.
        limits=(
            Limit(_cpm3c_exact_max_n,
                  condition="fitted exactly (exact_max_n null or > the max_n of this case)",
                  holds=lambda p: p.exact_max_n is None or p.exact_max_n > _cpm3c_exact_max_n(p),
                  formula="1,000,000 for kernel='linear', else "
                          "min(1,000,000, 300,000,000 // n_landmarks)"),
            Limit(LINEAR_LABELLING_MAX_N),
        ),
        timeout_seconds=900,
        accepts_sparse=True,
        notes={"large_n": "a fit over every point allows n x n_landmarks <= 3e8 for "
                          "kernel='rbf'; the default exact_max_n=1,000,000 clusters a sample "
                          f"above that and labels every point, up to "
                          f"{LINEAR_LABELLING_MAX_N:,} points"},
    ),
    AlgorithmSpec(
        name="svc",
        estimator_path="algorithms.svc.SupportVectorClustering",
        params_model=SupportVectorClusteringParams,
        summary=(
            "Support vector clustering: minimal enclosing sphere (one-class SVM) and connected "
            "components of the line-segment graph; gamma='schedule' searches q for n_clusters."
        ),
        paper="Ben-Hur, Horn, Siegelmann and Vapnik 2001, Support vector clustering (JMLR)",
        labels="none",
        limits=(
            Limit(SVC_EXACT_MAX_N["complete"],
                  condition=f"labeling='complete' {_exactly(SVC_EXACT_MAX_N['complete'])}",
                  holds=lambda p: p.labeling == "complete"
                  and _fits_exactly(SVC_EXACT_MAX_N["complete"])(p)),
            Limit(SVC_EXACT_MAX_N["other"],
                  condition=_exactly(SVC_EXACT_MAX_N["other"]),
                  holds=_fits_exactly(SVC_EXACT_MAX_N["other"])),
            Limit(SAMPLED_MAX_N),
        ),
        timeout_seconds=900,
        check_size=lambda params, n: soft_margin_problem(params.C, n),
        notes={"large_n": f"the default exact_max_n={SVC_SAMPLE_SIZE} fits a random sample of "
                          f"{SVC_SAMPLE_SIZE} points and labels the rest by predict, up to "
                          f"{SAMPLED_MAX_N:,} points"},
    ),
    AlgorithmSpec(
        name="gmmc",
        estimator_path="algorithms.gmmc.GMMC",
        params_model=GMMCParams,
        summary=(
            "Generalized maximum margin clustering: the SDP (10) over n variables with a "
            "normalized Laplacian for K^-1 (low-rank solver) and kernel learning (12)."
        ),
        paper=("Valizadegan and Jin 2006, Generalized maximum margin clustering and "
               "unsupervised kernel learning (NIPS)"),
        labels="none",
        # Dense n x n matrices (timed by benchmarks/gmmc.py); kernel learning keeps
        # n_widths Laplacians in memory and re-solves (10) for every step of beta.
        limits=(
            Limit(1_500, "slow", f"kernel_learning=true, {_exactly(1_500)}",
                  lambda p: p.kernel_learning and _fits_exactly(1_500)(p)),
            Limit(4_000, "slow", _exactly(4_000), _fits_exactly(4_000)),
            Limit(SAMPLED_MAX_N, "slow"),
        ),
        notes={"large_n": f"the default exact_max_n=800 solves (10) over a random sample of 800 "
                          f"points and labels the rest by the out-of-sample SVM, up to "
                          f"{SAMPLED_MAX_N:,} points"},
        timeout_seconds=1800,
        # The paper's widths are fractions of the range of pairwise distances: two points have
        # one distance and no range.
        check_size=lambda params, n: (
            "gamma='paper' and kernel_learning take their widths from the range of pairwise "
            "distances, which needs at least 3 points" if n < 3 and (
                params.gamma == "paper" or params.kernel_learning) else None),
    ),
    AlgorithmSpec(
        name="sdp_mmc",
        estimator_path="algorithms.sdp_mmc.SDPMMC",
        params_model=SDPMMCParams,
        summary=(
            "SDP maximum margin clustering (Xu thesis ch. 3-4): two-class SDP (3.5), multi-class "
            "SDP (4.8), semi-supervised with partial labels (-1 = unknown)."
        ),
        paper=f"{XU_2007}, chapters 3-4",
        labels="optional",
        # Timed by benchmarks/sdp_mmc.py (SCS) and benchmarks/sdp_solver.py (low-rank). Recursive
        # bisection solves (3.5) on all points, then on ever smaller clusters: the two-class
        # limits hold for it.
        limits=(
            Limit(MULTICLASS_MAX_N, "slow",
                  f"multiclass='joint' with n_clusters > 2 or 'auto', "
                  f"{_exactly(MULTICLASS_MAX_N)}",
                  lambda p: p.n_clusters != 2 and p.multiclass == "joint"
                  and _fits_exactly(MULTICLASS_MAX_N)(p)),
            Limit(TWO_CLASS_MAX_N, "slow",
                  f"solver='scs' or 'clarabel', {_exactly(TWO_CLASS_MAX_N)}",
                  lambda p: p.solver != "lowrank" and _fits_exactly(TWO_CLASS_MAX_N)(p)),
            Limit(LOWRANK_TWO_CLASS_MAX_N, "slow", _exactly(LOWRANK_TWO_CLASS_MAX_N),
                  _fits_exactly(LOWRANK_TWO_CLASS_MAX_N)),
            Limit(SAMPLED_MAX_N, "slow"),
        ),
        timeout_seconds=1800,
        retry_safe=True,
        check_labels=lambda params, y: sdp_mmc_partial_labels_problem(
            params.n_clusters, params.multiclass, y, params.class_balance, params.size_band,
            params.exact_max_n),
        notes={"large_n": f"the default exact_max_n=800 solves the relaxation over a random "
                          f"sample of 800 points and labels the rest by the out-of-sample SVM, up "
                          f"to {SAMPLED_MAX_N:,} points"},
    ),
    AlgorithmSpec(
        name="m3n",
        estimator_path="algorithms.m3n.UnsupervisedM3N",
        params_model=UnsupervisedM3NParams,
        summary=(
            "Unsupervised max-margin Markov network: HMM state labeling of integer sequences; "
            "'alternating' (ACDHMM, EM start then M3N training and balanced Viterbi relabeling) "
            "or 'exact' (CDHMM, the convex SDP relaxation, small problems)."
        ),
        paper=f"{XU_2007}, chapter 5",
        input_kind="sequences",
        labels="none",
        # max_n counts positions over all sequences. The exact SDP has positions x positions
        # matrices and 3 p2^2 pair constraints (5.27), so its cost grows steeply with positions.
        limits=(
            Limit(200, "slow", "method='exact'", lambda p: p.method == "exact"),
            Limit(200_000, "fast"),
        ),
        timeout_seconds=1800,
        check_sequences=lambda params, sequences: None if params.method != "exact" else (
            exact_relaxation_problem(sum(map(len, sequences)),
                                     sum(len(seq) - 1 for seq in sequences), params.n_states,
                                     params.size_band, params.pair_size_band)),
        notes={"max_n": "total positions over all sequences"},
    ),
    AlgorithmSpec(
        name="robust_svm",
        estimator_path="algorithms.robust_svm.RobustSVM",
        params_model=RobustSVMParams,
        summary=(
            "Supervised binary SVM with outlier ablation: 'reh' (robust eta-hinge SDP), 'rod' "
            "(outlier-detection SDP) or 'ramp' (alternating (w, eta) minimisation of the ramp "
            "loss, libsvm steps, large n)."
        ),
        paper=f"{XU_2007}, chapter 6",
        labels="required",
        # The SDPs have an (n+1) x (n+1) matrix variable; ramp is a few libsvm fits, which scale
        # like libsvm (benchmarks/robust_svm.py --timing-only).
        limits=(
            Limit(50_000, "fast", "method='ramp'", lambda p: p.method == "ramp"),
            Limit(ROBUST_SDP_MAX_N, "slow"),
        ),
        timeout_seconds=1800,
        check_labels=lambda params, y: (
            None if len(set(y)) == 2 else
            f"robust SVM is a binary classifier: y must hold exactly two classes, got "
            f"{len(set(y))}"),
    ),
)

REGISTRY: dict[str, AlgorithmSpec] = {spec.name: spec for spec in _SPECS}


def get_spec(name: str) -> AlgorithmSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise KeyError(f"unknown algorithm {name!r}; known: {known}") from None


def algorithm_names() -> list[str]:
    return sorted(REGISTRY)


def import_estimators() -> None:
    """Import every registered estimator now (a worker does, before it forks work horses)."""
    for spec in _SPECS:
        _import_class(spec.estimator_path)


def model_from_export(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]):
    """Rebuild any registered estimator from its portable export, by the class name in ``meta``."""
    by_name = {spec.estimator_name: spec for spec in _SPECS}
    spec = by_name.get(str(meta.get("estimator")))
    if spec is None:
        raise ValueError(f"model names an unknown estimator {meta.get('estimator')!r}")
    return spec.estimator.from_model(meta, arrays)
