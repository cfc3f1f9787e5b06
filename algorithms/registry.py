"""Name -> algorithm spec: estimator class, parameter model, capabilities and limits.

The service builds its request schema, ``/v1/algorithms`` and queue routing from this table, so
adding an algorithm means adding its module and one entry to ``_SPECS`` below: no service change.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from algorithms.base import AlgorithmParams
from algorithms.cpm3c import CPM3C, CPM3CParams
from algorithms.gmmc import GMMC, GMMCParams
from algorithms.itersvr import IterSVR, IterSVRParams
from algorithms.m3n import UnsupervisedM3N, UnsupervisedM3NParams, exact_relaxation_problem
from algorithms.robust_svm import RobustSVM, RobustSVMParams, recommended_max_n
from algorithms.sdp_mmc import SDPMMC, SDPMMCParams
from algorithms.sdp_mmc import partial_labels_problem as sdp_mmc_partial_labels_problem
from algorithms.sdp_mmc import recommended_max_n as sdp_mmc_max_n
from algorithms.svc import (
    SupportVectorClustering,
    SupportVectorClusteringParams,
    soft_margin_problem,
)

InputKind = Literal["vectors", "sequences"]
LabelUse = Literal["none", "optional", "required"]
QueueName = Literal["fast", "slow"]

XU_2007 = "Xu 2007, Convex large margin training (PhD thesis, University of Waterloo)"


@dataclass(frozen=True)
class AlgorithmSpec:
    """Everything the service needs to know about one algorithm.

    ``queue`` and ``max_n`` may depend on the parameters (an SDP method of an algorithm that also
    has a fast method goes to ``slow``), hence the optional callables.
    """

    name: str
    estimator: type
    params_model: type[AlgorithmParams]
    summary: str
    # The paper that defines the algorithm, by authors and year.
    paper: str
    input_kind: InputKind = "vectors"
    labels: LabelUse = "none"
    queue: QueueName = "fast"
    max_n: int = 50_000
    timeout_seconds: int = 600
    retry_safe: bool = True
    accepts_sparse: bool = False
    queue_rule: Callable[[AlgorithmParams], QueueName] | None = None
    max_n_rule: Callable[[AlgorithmParams], int] | None = None
    # How queue and max_n follow from the parameters, in words (for GET /v1/algorithms).
    limits_rule: str = ""
    # A 422 message when the labels a caller sent cannot be used with these parameters, else None.
    check_labels: Callable[[AlgorithmParams, list[int]], str | None] | None = None
    # A 422 message when n points (or positions) cannot be fitted with these parameters, else None.
    check_size: Callable[[AlgorithmParams, int], str | None] | None = None
    # The same for sequence input, given the sequences.
    check_sequences: Callable[[AlgorithmParams, list[list[int]]], str | None] | None = None
    notes: Mapping[str, str] = field(default_factory=dict)

    def queue_for(self, params: AlgorithmParams) -> QueueName:
        return self.queue_rule(params) if self.queue_rule else self.queue

    def max_n_for(self, params: AlgorithmParams) -> int:
        return self.max_n_rule(params) if self.max_n_rule else self.max_n

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
            "estimator": self.estimator.__name__,
            "input_kind": self.input_kind,
            "labels": self.labels,
            # The limits of the default parameters, as a job without params gets them.
            "queue": self.queue_for(self.params_model()),
            "max_n": self.max_n_for(self.params_model()),
            "limits_rule": self.limits_rule or "queue and max_n do not depend on the parameters",
            "timeout_seconds": self.timeout_seconds,
            "accepts_sparse": self.accepts_sparse,
            "params_schema": copy.deepcopy(_params_schema(self.params_model)),
            "notes": dict(self.notes),
        }


@functools.cache
def _params_schema(params_model: type[AlgorithmParams]) -> dict[str, Any]:
    # Building a JSON schema is not free, and GET /v1/algorithms asks for all of them.
    return params_model.model_json_schema()


# SVC's schedule solves tens of spheres of O(N^2) each, and the paper's complete labeling tests
# O(N^2) segments: the points one exact fit may hold within the job timeout, with room for
# high-dimensional data, and all the points a sampled fit labels (timed by
# benchmarks/svc.py --defaults-at-scale).
SVC_EXACT_MAX_N = {"complete": 3_000, "other": 5_000}
SVC_SAMPLED_MAX_N = 50_000


def svc_max_n(params: SupportVectorClusteringParams) -> int:
    exact_limit = SVC_EXACT_MAX_N["complete" if params.labeling == "complete" else "other"]
    if params.solver == "exact" or params.exact_max_n > exact_limit:
        return exact_limit
    return SVC_SAMPLED_MAX_N


_SPECS: tuple[AlgorithmSpec, ...] = (
    AlgorithmSpec(
        name="itersvr",
        estimator=IterSVR,
        params_model=IterSVRParams,
        summary=(
            "Iterative SVR with the Laplacian loss and class balance by bias search; "
            "k > 2 by recursive bisection."
        ),
        paper="Zhang, Tsang and Kwok 2007, Maximum margin clustering made practical (ICML)",
        labels="none",
        queue="fast",
        max_n=100_000,
        timeout_seconds=900,
    ),
    AlgorithmSpec(
        name="cpm3c",
        estimator=CPM3C,
        params_model=CPM3CParams,
        summary=(
            "Cutting-plane multiclass maximum margin clustering solved with CCCP; "
            "O(s n k) per iteration, linear in n, sparse CSR input."
        ),
        paper="Zhao, Wang and Zhang 2008, Efficient multiclass maximum margin clustering (ICML)",
        labels="none",
        queue="fast",
        max_n=200_000,
        timeout_seconds=900,
        accepts_sparse=True,
        # kernel="rbf" holds n x n_landmarks dense coordinates (and their SVD with
        # kpca_components): at most 6e7 float64 entries each, to bound a job's memory.
        max_n_rule=lambda params: (
            200_000 if params.kernel == "linear"
            else min(200_000, 60_000_000 // params.n_landmarks)
        ),
        limits_rule="max_n = 200,000 for kernel='linear'; min(200,000, 60,000,000 // "
                    "n_landmarks) for kernel='rbf'",
        notes={"large_n": "kernel='rbf' allows n x n_landmarks <= 6e7"},
    ),
    AlgorithmSpec(
        name="svc",
        estimator=SupportVectorClustering,
        params_model=SupportVectorClusteringParams,
        summary=(
            "Support vector clustering: minimal enclosing sphere (one-class SVM) and connected "
            "components of the line-segment graph; gamma='auto' searches q for n_clusters."
        ),
        paper="Ben-Hur, Horn, Siegelmann and Vapnik 2001, Support vector clustering (JMLR)",
        labels="none",
        queue="fast",
        max_n=SVC_SAMPLED_MAX_N,
        timeout_seconds=900,
        max_n_rule=svc_max_n,
        check_size=lambda params, n: soft_margin_problem(params.C, n),
        limits_rule=(f"fitted exactly (solver='exact', or n <= exact_max_n): max_n = "
                     f"{SVC_EXACT_MAX_N['complete']:,} for labeling='complete', else "
                     f"{SVC_EXACT_MAX_N['other']:,}; on a sample (the default solver='auto' with "
                     f"exact_max_n at most that): {SVC_SAMPLED_MAX_N:,}"),
        notes={"large_n": f"the default solver='auto' fits a random sample of exact_max_n points "
                          f"and labels the rest by predict, up to {SVC_SAMPLED_MAX_N:,} points"},
    ),
    AlgorithmSpec(
        name="gmmc",
        estimator=GMMC,
        params_model=GMMCParams,
        summary=(
            "Generalized maximum margin clustering: the SDP (10) over n variables with a "
            "normalized Laplacian for K^-1 (low-rank solver) and kernel learning (12)."
        ),
        paper=("Valizadegan and Jin 2006, Generalized maximum margin clustering and "
               "unsupervised kernel learning (NIPS)"),
        labels="none",
        queue="slow",
        max_n=4_000,
        timeout_seconds=1800,
        # Dense n x n matrices (timed by benchmarks/gmmc.py); kernel learning keeps
        # n_widths Laplacians in memory and re-solves (10) for every step of beta.
        max_n_rule=lambda params: 1_500 if params.kernel_learning else 4_000,
        limits_rule="max_n = 1,500 with kernel_learning, else 4,000",
        # The paper's widths are fractions of the range of pairwise distances: two points have
        # one distance and no range.
        check_size=lambda params, n: (
            "gamma='paper' and kernel_learning take their widths from the range of pairwise "
            "distances, which needs at least 3 points" if n < 3 and (
                params.gamma == "paper" or params.kernel_learning) else None),
    ),
    AlgorithmSpec(
        name="sdp_mmc",
        estimator=SDPMMC,
        params_model=SDPMMCParams,
        summary=(
            "SDP maximum margin clustering (Xu thesis ch. 3-4): two-class SDP (3.5), multi-class "
            "SDP (4.8), semi-supervised with partial labels (-1 = unknown)."
        ),
        paper=f"{XU_2007}, chapters 3-4",
        labels="optional",
        queue="slow",
        max_n=sdp_mmc_max_n(2),
        timeout_seconds=1800,
        retry_safe=True,
        # Limits from benchmarks/sdp_mmc.py (SCS) and benchmarks/sdp_solver.py (low-rank).
        max_n_rule=lambda params: sdp_mmc_max_n(params.n_clusters, params.solver,
                                                params.multiclass),
        limits_rule=(f"max_n = {sdp_mmc_max_n(2)} on the low-rank solver (two clusters, or more "
                     f"by multiclass='bisection'), {sdp_mmc_max_n(2, 'scs')} with "
                     f"solver='scs' or 'clarabel', {sdp_mmc_max_n(3, multiclass='joint')} for "
                     "multiclass='joint' with more than two clusters"),
        check_labels=lambda params, y: sdp_mmc_partial_labels_problem(
            params.n_clusters, params.multiclass, y, params.class_balance, params.size_band),
        notes={"alternative": "use itersvr (two clusters) or cpm3c (multi-class) for larger data"},
    ),
    AlgorithmSpec(
        name="m3n",
        estimator=UnsupervisedM3N,
        params_model=UnsupervisedM3NParams,
        summary=(
            "Unsupervised max-margin Markov network: HMM state labeling of integer sequences; "
            "'alternating' (ACDHMM, EM start then M3N training and balanced Viterbi relabeling) "
            "or 'exact' (CDHMM, the convex SDP relaxation, small problems)."
        ),
        paper=f"{XU_2007}, chapter 5",
        input_kind="sequences",
        labels="none",
        queue="fast",
        max_n=200_000,
        timeout_seconds=1800,
        # max_n counts positions over all sequences. The exact SDP has positions x positions
        # matrices and 3 p2^2 pair constraints (5.27), so its cost grows steeply with positions.
        queue_rule=lambda params: "slow" if params.method == "exact" else "fast",
        max_n_rule=lambda params: 200 if params.method == "exact" else 200_000,
        limits_rule="method='exact': queue slow, max_n 200 positions; otherwise queue fast, "
                    "max_n 200,000 positions",
        check_sequences=lambda params, sequences: None if params.method != "exact" else (
            exact_relaxation_problem(sum(map(len, sequences)),
                                     sum(len(seq) - 1 for seq in sequences), params.n_states,
                                     params.size_band, params.pair_size_band)),
        notes={"max_n": "total positions over all sequences"},
    ),
    AlgorithmSpec(
        name="robust_svm",
        estimator=RobustSVM,
        params_model=RobustSVMParams,
        summary=(
            "Supervised binary SVM with outlier ablation: 'reh' (robust eta-hinge SDP), 'rod' "
            "(outlier-detection SDP) or 'ramp' (alternating (w, eta) minimisation of the ramp "
            "loss, libsvm steps, large n)."
        ),
        paper=f"{XU_2007}, chapter 6",
        labels="required",
        queue="slow",
        max_n=50_000,
        timeout_seconds=1800,
        # The SDPs have an (n+1) x (n+1) matrix variable; ramp is a few libsvm fits.
        queue_rule=lambda params: "fast" if params.method == "ramp" else "slow",
        max_n_rule=lambda params: recommended_max_n(params.method),
        limits_rule=f"method='ramp': queue fast, max_n {recommended_max_n('ramp'):,}; 'reh' and "
                    f"'rod' (SDPs): queue slow, max_n {recommended_max_n('reh')}",
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


def model_from_export(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]):
    """Rebuild any registered estimator from its portable export, by the class name in ``meta``."""
    by_class = {spec.estimator.__name__: spec.estimator for spec in _SPECS}
    estimator_class = by_class.get(str(meta.get("estimator")))
    if estimator_class is None:
        raise ValueError(f"model names an unknown estimator {meta.get('estimator')!r}")
    return estimator_class.from_model(meta, arrays)
