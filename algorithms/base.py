"""The estimator base shared by every algorithm: parameter validation, portable export, the
portfolio's partition, and labelling every point after a sampled fit.

Every algorithm in this package is a scikit-learn estimator built on :class:`MMCEstimatorMixin`:

* hyper-parameters live in ``__init__`` only and are validated in ``fit`` against the algorithm's
  pydantic params model (the same model the service uses for its request schema, so the library
  and the API accept exactly the same parameters);
* ``fit(X, y=None, *, progress=None)`` calls ``progress(step, objective, message)`` at least once
  per outer iteration;
* ``to_model()`` returns ``(meta, arrays)``: JSON-serialisable metadata and plain numeric arrays,
  stored as JSON + ``.npz`` and loaded with ``allow_pickle=False`` (:mod:`algorithms.export`);
  ``from_model(meta, arrays)`` rebuilds a fitted estimator. Nothing a client stores can execute
  code.
"""

from __future__ import annotations

import importlib
import json
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import ValidationError
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.export import MODEL_FORMAT, jsonable
from algorithms.inputs import as_float_matrix, check_clustering_input
from algorithms.kernels import local_scaling_gamma
from algorithms.out_of_sample import KernelExpansionClassifier
from algorithms.params.common import AUTO, AlgorithmParams, format_validation_error, is_unset
from algorithms.progress import ProgressCallback, report
from algorithms.sampling import stratified_rows
from algorithms.selection.bisection import guide_partition
from algorithms.selection.n_clusters import choose_n_clusters
from algorithms.selection.portfolio import Portfolio

# The out-of-sample SVM of a partition adopted from the portfolio: trained on at most this many
# points, at the C of the margin criterion that chose it.
PARTITION_MODEL_MAX_N = 2000
PARTITION_MODEL_C = 100.0

# Rows labelled at once after a sampled fit (a million points report progress every few seconds).
LABEL_BLOCK_ROWS = 100_000


def in_row_blocks(method: Callable[[np.ndarray], np.ndarray], X: np.ndarray, block_rows: int,
                  on_block: Callable[[int, int], None]) -> np.ndarray:
    """``method(X)`` (a per-row method such as ``predict``) ``block_rows`` rows at a time,
    ``on_block(done, total)`` after each block: on a million points it takes seconds, and a job
    reports its progress every few seconds."""
    blocks = []
    for start in range(0, X.shape[0], block_rows):
        blocks.append(np.asarray(method(X[start:start + block_rows])))
        on_block(start + blocks[-1].shape[0], X.shape[0])
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]


# ---------------------------------------------------------------------------------------------
# Estimator base
# ---------------------------------------------------------------------------------------------


class MMCEstimatorMixin:
    """Parameter validation and portable export shared by every estimator of the package.

    Subclasses set ``params_model`` and implement ``_export_state`` / ``_import_state``.
    """

    params_model: ClassVar[type[AlgorithmParams]]

    # The parameters of the fit, as the params model validated them (renamed names and values
    # translated): a fit and the methods of the fitted estimator read them here, never from
    # ``self.<name>``, so that a deprecated spelling is translated in one place.
    _params: AlgorithmParams

    def _validated_params(self) -> AlgorithmParams:
        """``get_params()`` checked by the params model; a ``ValueError`` names the field.

        (Not scikit-learn's ``BaseEstimator._validate_params``, which checks
        ``_parameter_constraints``: the params model takes that role here.)"""
        params = dict(self.get_params(deep=False))  # type: ignore[attr-defined]
        # random_state may be a RandomState instance in library use; validate it the sklearn way.
        if "random_state" in params:
            check_random_state(params["random_state"])
            if not (params["random_state"] is None or isinstance(params["random_state"], int)):
                params["random_state"] = None
        try:
            validated = self.params_model.model_validate(params)
        except ValidationError as error:
            raise ValueError(format_validation_error(error)) from None
        return validated

    @property
    def _beta(self) -> float:
        """The thesis's ``beta = 1 / C`` (Xu 2007, (2.47)), of the parameters being fitted."""
        return 1.0 / self._params.C

    # Fitted attributes reported with a job's result when the fit set them (the result's
    # algorithm extras). A deprecated alias is a property, not an instance attribute, and is
    # not reported.
    _result_attributes: ClassVar[tuple[str, ...]] = (
        "n_clusters_", "n_clusters_strengths_", "n_clusters_clear_", "objective_", "n_iter_",
        "gamma_", "solver_", "exact_", "n_fit_samples_", "n_support_",
        "objective_history_", "kernel_weights_", "outlier_scores_", "outliers_", "warnings_",
        "candidate_", "candidate_scores_",
    )

    def result_extras(self) -> dict[str, Any]:
        """JSON-ready fitted extras for the job result (objective, iterations, solver warnings...).

        Subclasses add names to ``_result_attributes``; arrays become lists.
        """
        extras = {}
        fitted = vars(self)
        for name in self._result_attributes:
            if name in fitted:
                value = fitted[name]
                extras[name.rstrip("_")] = jsonable(
                    value.tolist() if isinstance(value, np.ndarray) else value
                )
        return extras

    def _resolve_n_clusters(self, X, progress: ProgressCallback | None = None) -> int:
        """Check ``X`` for clustering and set ``n_clusters_``: the ``n_clusters`` parameter, or
        for ``"auto"`` the k of :func:`~algorithms.selection.n_clusters.choose_n_clusters` (its
        strengths in ``n_clusters_strengths_``, ``n_clusters_clear_`` whether one reached the
        threshold)."""
        self._forget_n_clusters_choice()
        n_clusters = self._params.n_clusters
        if n_clusters != AUTO:
            check_clustering_input(X, n_clusters)
            self.n_clusters_ = int(n_clusters)
            return self.n_clusters_
        check_clustering_input(X, 2)
        report(progress, 0, None, f"choosing the number of clusters (2 to "
                                  f"{self._params.max_clusters})")
        choice = choose_n_clusters(X, self._params.max_clusters, self._params.random_state)
        check_clustering_input(X, choice.n_clusters)
        self.n_clusters_ = choice.n_clusters
        self.n_clusters_strengths_ = choice.strengths
        self.n_clusters_clear_ = choice.clear
        return self.n_clusters_

    # -- the portfolio of candidate partitions (algorithms.selection.portfolio) -----------------
    # The SVM trained on the portfolio's partition where a candidate beat the method's own; it
    # then answers predict and decision_function.
    partition_model_: KernelExpansionClassifier | None = None

    # The name of the method's own partition among the candidates (its name in the API).
    portfolio_name: ClassVar[str]

    # The fit's portfolio, from the guide of a bisection to the final choice; dropped after.
    _portfolio: Portfolio | None = None

    def _portfolio_applies(self, X, partial_labels: bool = False) -> bool:
        """Whether the portfolio takes part in this fit: off for ``portfolio=False``, with
        partial labels, and on sparse data (whose candidates would need a dense copy)."""
        return bool(self._params.portfolio) and not partial_labels and not sp.issparse(X)

    def _portfolio_start(self, X, rng, progress: ProgressCallback | None, step: int,
                         role: str) -> np.ndarray | None:
        """The portfolio's best candidate partition of ``X``, from which the method's own
        optimisation starts (the portfolio is kept for the end of the fit); None where the
        portfolio does not apply (:meth:`_portfolio_applies`). ``role`` ends the progress
        message."""
        if not self._portfolio_applies(X):
            return None
        self._portfolio = Portfolio(X, self.n_clusters_, rng)
        name, labels = self._portfolio.best()
        report(progress, step, None, f"the {name} candidate {role}")
        return labels

    def _bisection_guide(self, X: np.ndarray, default_guide, rng,
                         progress: ProgressCallback | None = None, step: int = 0) -> np.ndarray:
        """The k-partition of ``X`` that guides a recursive bisection
        (:mod:`algorithms.selection.bisection`). The estimator ``guide`` where one is given;
        else, with the portfolio on, the portfolio's best candidate, which the method's splits
        then refine (its result competes with the candidates at the end of the fit); else
        ``default_guide``'s partition (the binary methods pass CPM3C)."""
        if self.guide is None:
            start = self._portfolio_start(X, rng, progress, step, "guides the splits")
            if start is not None:
                return start
        estimator = self.guide if self.guide is not None else default_guide
        return guide_partition(X, self.n_clusters_, estimator, rng, progress, step)

    def _keep_portfolio_partition(self, X, progress: ProgressCallback | None, step: int,
                                  *, partial_labels: bool = False,
                                  n_clusters: int | None = None) -> None:
        """End a fit over all of ``X`` (``labels_`` set): score the method's partition against
        the portfolio's candidates (:class:`~algorithms.selection.portfolio.Portfolio`, the
        one that guided the fit when it was built on ``X``) and, where a candidate wins, adopt
        it (:meth:`_adopt_partition`). Off where :meth:`_portfolio_applies` says so.
        ``n_clusters``: the k asked for, where the method's own partition may have another
        (``n_clusters_`` otherwise); a partition with another k is no candidate."""
        for name in ("candidate_", "candidate_scores_"):
            self.__dict__.pop(name, None)
        self.partition_model_ = None
        portfolio, self._portfolio = self._portfolio, None
        if not self._portfolio_applies(X, partial_labels):
            return
        own = np.asarray(self.labels_)
        name = self.portfolio_name
        extra = {name: own} if own.min() >= 0 else {}
        report(progress, step, getattr(self, "objective_", None),
               "scoring the partition against the candidates of other families")
        rng = check_random_state(getattr(self._params, "random_state", None))
        k = self.n_clusters_ if n_clusters is None else n_clusters
        if portfolio is None or portfolio.source is not X or portfolio.n_clusters != k:
            portfolio = Portfolio(X, k, rng)
        choice = portfolio.choose(extra)
        self.candidate_ = choice.chosen
        self.candidate_scores_ = {key: float(value) for key, value in choice.scores.items()}
        if choice.chosen != name:
            self._adopt_partition(X, choice.labels, rng)
            self.n_clusters_ = k

    def _adopt_partition(self, X: np.ndarray, labels: np.ndarray,
                         rng: np.random.RandomState) -> None:
        """Make ``labels`` (a k-partition of ``X``) the fit's answer: the out-of-sample SVM of
        thesis section 3.4 trained on it (one-vs-rest, local-scaling RBF, at most
        ``PARTITION_MODEL_MAX_N`` points with every cluster in them) becomes the model, and
        ``labels_`` its labels of ``X``, so that ``predict`` on the training points returns
        them."""
        train = stratified_rows(labels, PARTITION_MODEL_MAX_N, rng)
        gamma = local_scaling_gamma(X[train], random_state=rng)
        self.partition_model_ = KernelExpansionClassifier.fit(
            X[train], labels[train], kernel="rbf", gamma=gamma, C=PARTITION_MODEL_C)
        decision = self.partition_model_.decision_function(X)
        self.labels_ = self.partition_model_.labels_from_decision(decision).astype(np.int64)
        self._keep_fit_decision(X, self._decision_form(decision))
        if hasattr(self, "n_support_"):
            self.n_support_ = self.partition_model_.n_support
        if hasattr(self, "outliers_"):  # the adopted partition marks no point as an outlier
            self.outliers_ = np.zeros(0, dtype=np.int64)

    def _decision_form(self, values: np.ndarray) -> np.ndarray:
        """The partition model's decision values in the shape of the method's own (the same
        by default: one column for two clusters, else one per cluster)."""
        return values

    def _partition_predict(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, decision values)`` of new points by :attr:`partition_model_`."""
        X = validate_data(self, as_float_matrix(X), reset=False)  # type: ignore[arg-type]
        decision = self.partition_model_.decision_function(X)
        return (self.partition_model_.labels_from_decision(decision).astype(np.int64),
                self._decision_form(decision))

    def _forget_n_clusters_choice(self) -> None:
        """Drop an earlier fit's choice of k (a refit with a fixed k must not report it)."""
        for name in ("n_clusters_strengths_", "n_clusters_clear_"):
            self.__dict__.pop(name, None)

    # A fit that computed the decision values of every point anyway (a sampled fit labelling
    # every point by its model, a fit whose solver scored every point) keeps them, beside a weak
    # reference to the array it was given.
    _fit_decision: tuple[weakref.ref, np.ndarray] | None = None
    # The array the caller passed to fit, before any conversion (a float32 array becomes a
    # float64 copy): the one a caller then asks the decision values of.
    _fit_input: weakref.ref | None = None

    def _note_fit_input(self, X) -> None:
        """Remember the array ``fit`` was called with (a weak reference: the fitted estimator
        must not keep the data alive), and forget an earlier fit's decision values and
        partition model (the new fit labels its points by its own model until the portfolio
        says otherwise)."""
        self._fit_decision = None
        self.partition_model_ = None
        try:
            self._fit_input = weakref.ref(X)
        except TypeError:  # a list or another object without weak references
            self._fit_input = None

    def _keep_fit_decision(self, X, values: np.ndarray) -> None:
        """Keep ``values``, the decision values of every row of ``X`` (the fit's array), for
        :meth:`fit_decision_values`: they answer for the caller's array where ``X`` is its
        converted copy."""
        self._fit_decision = (self._fit_input or weakref.ref(X), values)

    def fit_decision_values(self, X, block_rows: int,
                            on_block: Callable[[int, int], None]) -> np.ndarray:
        """``decision_function(X)``, ``block_rows`` rows at a time with ``on_block(done, total)``
        after each block (:func:`in_row_blocks`); the values the fit computed when ``X`` is the
        very array it fitted."""
        if self._fit_decision is not None and self._fit_decision[0]() is X:
            on_block(X.shape[0], X.shape[0])
            return self._fit_decision[1]
        return in_row_blocks(self.decision_function, X, block_rows, on_block)

    def _label_every_point(self, X: np.ndarray, sample: np.ndarray | None,
                           progress: ProgressCallback | None, step: int) -> None:
        """End a fit over ``X[sample]``: label every row of ``X`` by ``predict_with_decision``,
        ``LABEL_BLOCK_ROWS`` rows at a time with progress, and keep the decision values for
        :meth:`fit_decision_values`. ``sample=None`` (the fit clustered all of ``X``) keeps the
        fit's labels and forgets the values of any earlier fit."""
        self._fit_decision = None
        if sample is None:
            return
        labels = []

        def label_block(block: np.ndarray) -> np.ndarray:
            block_labels, decision = self.predict_with_decision(block)  # type: ignore[attr-defined]
            labels.append(block_labels)
            return decision

        decision = in_row_blocks(
            label_block, X, LABEL_BLOCK_ROWS, lambda done, total: report(
                progress, step, getattr(self, "objective_", None),
                f"labelled {done:,} of {total:,} points with the out-of-sample model"))
        self._keep_fit_decision(X, decision)
        self.labels_ = np.concatenate(labels)

    def __getstate__(self):
        # The kept decision values belong to the array in memory, not to the model. (The state
        # may be the instance's own __dict__: a copy leaves the instance as it is.)
        state = super().__getstate__()  # type: ignore[misc]
        return {name: value for name, value in state.items()
                if name not in ("_fit_decision", "_fit_input")}

    # -- export ---------------------------------------------------------------------------------
    def _export_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        raise NotImplementedError

    def _import_state(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def to_model(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Portable model: ``(meta, arrays)``, JSON metadata and numeric arrays (no pickle)."""
        check_is_fitted(self)
        state, arrays = self._export_state()
        params = {name: value for name, value in self.get_params(deep=False).items()  # type: ignore[attr-defined]
                  if name not in self.params_model.library_only
                  and not is_unset(value)}
        if hasattr(self, "n_clusters_"):
            state.setdefault("n_clusters_", int(self.n_clusters_))
        if self.partition_model_ is not None:
            model_meta, model_arrays = self.partition_model_.to_export(prefix="partition_")
            state["partition_model"] = model_meta
            arrays = {**arrays, **model_arrays}
        meta = {
            "format": MODEL_FORMAT,
            "estimator": type(self).__name__,
            "params": jsonable(params),
            "n_features_in": int(getattr(self, "n_features_in_", 0)),
            "state": jsonable(state),
        }
        json.dumps(meta)  # fail here, not in the store, if something is not JSON
        return meta, {key: np.asarray(value) for key, value in arrays.items()}

    @classmethod
    def from_model(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]):
        """Rebuild a fitted estimator from :meth:`to_model` output."""
        if meta.get("format") != MODEL_FORMAT:
            raise ValueError(f"unsupported model format {meta.get('format')!r}")
        if meta.get("estimator") != cls.__name__:
            raise ValueError(f"model is a {meta.get('estimator')}, not a {cls.__name__}")
        with warnings.catch_warnings():  # a model stored before a rename loads as it was fitted
            warnings.simplefilter("ignore", DeprecationWarning)
            validated = cls.params_model.model_validate(dict(meta["params"]))
        params = validated.model_dump()
        estimator = cls(**params)
        estimator._params = validated
        estimator.n_features_in_ = int(meta.get("n_features_in", 0))
        # Models stored before n_clusters="auto" hold the number in their parameters.
        fitted_k = meta.get("state", {}).get("n_clusters_", params.get("n_clusters"))
        if isinstance(fitted_k, int):
            estimator.n_clusters_ = fitted_k
        state = dict(meta.get("state", {}))
        estimator._import_state(state, dict(arrays))
        if state.get("partition_model") is not None:
            estimator.partition_model_ = KernelExpansionClassifier.from_export(
                state["partition_model"], arrays, prefix="partition_")
        return estimator



# Names this module held before they moved to modules of their own; importable from here, with a
# DeprecationWarning, until the next release.
_MOVED: dict[str, str] = {
    **dict.fromkeys(("MAX_ABS_VALUE", "MIN_SPREAD", "arrays_to_npz_bytes", "check_partial_labels",
                     "npz_bytes_to_arrays"), "algorithms.inputs"),
    **dict.fromkeys(("DEPRECATED", "RENAMED_VALUES", "GammaParam", "KernelParam", "NClusters",
                     "PositiveFloat", "RandomStateParam", "Renames", "reciprocal"),
                    "algorithms.params.common"),
    "pairwise_kernel": "algorithms.kernels",
    "save_model": "algorithms.export",
    "clustering_error": "algorithms.metrics",
    **dict.fromkeys(("SAMPLE_CELLS", "fit_sample"), "algorithms.sampling"),
    **dict.fromkeys(("balance_limit", "balanced_signs", "labels_from_label_matrix",
                     "labels_from_leading_eigenvector", "psd_factor", "randomized_rounding",
                     "two_cluster_labels"), "algorithms.rounding"),
    **dict.fromkeys(("CVXPY_SOLVER_NAMES", "ConicSolver", "SDPSolverError",
                     "check_solver_status", "cvxpy_solver_name", "solve_conic"),
                    "algorithms.conic"),
    **dict.fromkeys(("DECISION_BLOCK_ENTRIES", "with_intercept"), "algorithms.out_of_sample"),
}


def __getattr__(name: str) -> Any:
    """A name of :data:`_MOVED`, from its module, with a ``DeprecationWarning``."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"algorithms.base.{name} is deprecated and will be removed in the next "
                  f"release; import it from {home}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(home), name)
