"""Shared estimator base (parameter validation, portable model export), fitting helpers and
clustering metrics. The input checks and the npz format live in :mod:`algorithms.inputs`, the
parameter models in :mod:`algorithms.params`; their names are re-exported here.

Every algorithm in this package is a scikit-learn estimator built on :class:`MMCEstimatorMixin`:

* hyper-parameters live in ``__init__`` only and are validated in ``fit`` against the algorithm's
  pydantic params model (the same model the service uses for its request schema, so the library
  and the API accept exactly the same parameters);
* ``fit(X, y=None, *, progress=None)`` calls ``progress(step, objective, message)`` at least once
  per outer iteration;
* ``to_model()`` returns ``(meta, arrays)``: JSON-serialisable metadata and plain numeric arrays,
  stored as JSON + ``.npz`` and loaded with ``allow_pickle=False``; ``from_model(meta, arrays)``
  rebuilds a fitted estimator. Nothing a client stores can execute code.
"""

from __future__ import annotations

import json
import math
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp
from pydantic import ValidationError
from scipy.optimize import linear_sum_assignment
from scipy.sparse.linalg import eigsh
from sklearn.svm import SVC
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

# Their home is algorithms.inputs and algorithms.params.common; the names stay importable from
# here (the library's earlier paths).
from algorithms.inputs import (  # noqa: F401
    MAX_ABS_VALUE,
    MIN_SPREAD,
    arrays_to_npz_bytes,
    as_float_matrix,
    check_clustering_input,
    check_partial_labels,
    npz_bytes_to_arrays,
)
from algorithms.kernels import local_scaling_gamma, pairwise_kernel
from algorithms.params.common import (  # noqa: F401
    AUTO,
    DEPRECATED,
    RENAMED_VALUES,
    AlgorithmParams,
    GammaParam,
    KernelParam,
    NClusters,
    PositiveFloat,
    RandomStateParam,
    Renames,
    format_validation_error,
    is_unset,
    reciprocal,
)
from algorithms.progress import ProgressCallback, report
from algorithms.selection.bisection import guide_partition
from algorithms.selection.n_clusters import choose_n_clusters
from algorithms.selection.portfolio import Portfolio

MODEL_FORMAT = "mmc-model/1"

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


def save_model(estimator: MMCEstimatorMixin, path_prefix: str) -> tuple[str, str]:
    """Write ``<prefix>.json`` and ``<prefix>.npz``; returns both paths."""
    meta, arrays = estimator.to_model()
    json_path, npz_path = f"{path_prefix}.json", f"{path_prefix}.npz"
    with open(json_path, "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
    with open(npz_path, "wb") as handle:
        handle.write(arrays_to_npz_bytes(arrays))
    return json_path, npz_path


def _jsonable(value: Any) -> Any:
    """Make parameter values JSON-safe (numpy scalars to Python, RandomState instances dropped)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return None


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

    # Fitted attributes reported with a job's result when present (the result's algorithm extras).
    _result_attributes: ClassVar[tuple[str, ...]] = (
        "n_clusters_", "n_clusters_strengths_", "n_clusters_clear_", "objective_", "n_iter_",
        "gamma_", "solver_", "n_fit_samples_", "n_support_",
        "objective_history_", "kernel_weights_", "outlier_scores_", "outliers_", "warnings_",
        "candidate_", "candidate_scores_",
    )

    def result_extras(self) -> dict[str, Any]:
        """JSON-ready fitted extras for the job result (objective, iterations, solver warnings...).

        Subclasses add names to ``_result_attributes``; arrays become lists.
        """
        extras = {}
        for name in self._result_attributes:
            if hasattr(self, name):
                value = getattr(self, name)
                extras[name.rstrip("_")] = _jsonable(
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
        train = _stratified_rows(labels, PARTITION_MODEL_MAX_N, rng)
        gamma = local_scaling_gamma(X[train], random_state=rng)
        self.partition_model_ = KernelExpansionClassifier.fit(
            X[train], labels[train], kernel="rbf", gamma=gamma, C=PARTITION_MODEL_C)
        decision = self.partition_model_.decision_function(X)
        self.labels_ = self.partition_model_.labels_from_decision(decision).astype(np.int64)
        self._fit_decision = (weakref.ref(X), self._decision_form(decision))
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
    # every point by its model) keeps them, beside a weak reference to the array it was given.
    _fit_decision: tuple[weakref.ref, np.ndarray] | None = None

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
        self._fit_decision = (weakref.ref(X), decision)
        self.labels_ = np.concatenate(labels)

    def __getstate__(self):
        # The kept decision values belong to the array in memory, not to the model. (The state
        # may be the instance's own __dict__: a copy leaves the instance as it is.)
        state = super().__getstate__()  # type: ignore[misc]
        return {name: value for name, value in state.items() if name != "_fit_decision"}

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
            "params": _jsonable(params),
            "n_features_in": int(getattr(self, "n_features_in_", 0)),
            "state": _jsonable(state),
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


# ---------------------------------------------------------------------------------------------
# Metrics and class balance
# ---------------------------------------------------------------------------------------------


def clustering_error(y_true: Any, y_pred: Any) -> float:
    """Share of points misassigned after the best one-to-one matching of clusters to classes.

    The matching is Hungarian (``linear_sum_assignment``) on the contingency table, so it works when
    the numbers of clusters and classes differ; points labeled ``-1`` (outliers) count as errors.
    """
    truth = np.asarray(y_true).ravel()
    pred = np.asarray(y_pred).ravel()
    if truth.shape != pred.shape:
        raise ValueError(f"y_true and y_pred differ in length: {truth.shape[0]} vs {pred.shape[0]}")
    if truth.size == 0:
        raise ValueError("cannot score an empty labeling")
    classes, truth_index = np.unique(truth, return_inverse=True)
    assigned = pred != -1
    clusters, pred_index = np.unique(pred[assigned], return_inverse=True)
    table = np.zeros((clusters.size, classes.size), dtype=np.int64)
    np.add.at(table, (pred_index, truth_index[assigned]), 1)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return 1.0 - table[rows, cols].sum() / truth.size


def _stratified_rows(labels: np.ndarray, size: int, rng: np.random.RandomState) -> np.ndarray:
    """Sorted indices of at most ``size`` rows, each cluster of ``labels`` giving its share (by
    :func:`_cell_shares`, so at least one row each); all rows when there are at most ``size``."""
    if labels.size <= size:
        return np.arange(labels.size)
    clusters, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    return np.sort(_draw_by_cell(inverse, counts, max(size, clusters.size), rng))


# Cells of a stratified sample (fit_sample with X): each of a few clusters spans several cells, and
# a sample of a few hundred points still gives each cell a handful.
SAMPLE_CELLS = 64


def fit_sample(n_samples: int, exact_max_n: int | None, rng: np.random.RandomState,
               keep: np.ndarray | None = None,
               X: np.ndarray | None = None) -> np.ndarray | None:
    """Sorted indices of the random sample of ``exact_max_n`` points that a large-n fit clusters,
    or None when every point is clustered (``exact_max_n=None``, or at most ``exact_max_n``
    points).

    The rows ``keep`` (partially labelled points) are always in the sample. The rest is drawn
    from the other rows: uniformly, or, given their coordinates ``X``, stratified. Then the rows
    are split into ``SAMPLE_CELLS`` cells by k-means and each cell gives its share of the draw
    (largest remainders, and at least one point), uniformly within the cell. A uniform sample's
    clusters differ from the data's proportions by about ``sqrt(exact_max_n)`` points; a
    stratified one's by a few, which matters to methods that split their sample evenly (GMMC's
    (10)).
    """
    if exact_max_n is None or n_samples <= exact_max_n:
        return None
    keep = np.zeros(0, dtype=np.int64) if keep is None else np.asarray(keep, dtype=np.int64)
    if keep.size > exact_max_n:
        raise ValueError(f"{keep.size} labelled points do not fit in a sample of exact_max_n="
                         f"{exact_max_n} points; raise exact_max_n or label fewer points")
    others = np.arange(n_samples) if keep.size == 0 else np.setdiff1d(np.arange(n_samples), keep)
    size = exact_max_n - keep.size
    if X is None or size < SAMPLE_CELLS:
        drawn = rng.choice(others, size=size, replace=False)
    else:
        drawn = _stratified_draw(X[others], size, rng)
        drawn = others[drawn]
    return np.sort(np.concatenate([keep, drawn]))


def _stratified_draw(X: np.ndarray, size: int, rng: np.random.RandomState) -> np.ndarray:
    """``size`` row indices of ``X``, each k-means cell's share of them drawn within it."""
    from sklearn.cluster import MiniBatchKMeans

    cells = MiniBatchKMeans(SAMPLE_CELLS, n_init=1, batch_size=4096,
                            random_state=rng).fit_predict(X)
    return _draw_by_cell(cells, np.bincount(cells, minlength=SAMPLE_CELLS), size, rng)


def _draw_by_cell(cells: np.ndarray, counts: np.ndarray, size: int,
                  rng: np.random.RandomState) -> np.ndarray:
    """``size`` row indices, cell by cell (``cells``: each row's cell, ``counts``: the rows of
    each), each cell's share of them (:func:`_cell_shares`) drawn uniformly within it."""
    take = _cell_shares(counts, size)
    order = np.argsort(cells, kind="stable")
    starts = np.r_[0, np.cumsum(counts)]
    return np.concatenate([
        rng.choice(order[starts[c]:starts[c + 1]], size=take[c], replace=False)
        for c in range(counts.size) if take[c]])


def _cell_shares(counts: np.ndarray, size: int) -> np.ndarray:
    """Points drawn from each cell of ``counts`` points: its share of ``size`` by largest
    remainders, and at least one from every non-empty cell (``size`` is at least the number of
    cells). A cell is a region of the data; a sample without it cannot give it a cluster, and a
    sample of a few copies of one row (a row repeated thousands of times beside a rare one)
    cannot be clustered at all. The points a small cell gains come from the largest cells."""
    quota = size * counts / counts.sum()
    take = np.where(counts > 0, np.maximum(np.floor(quota), 1), 0).astype(np.int64)
    if take.sum() <= size:  # the rest to the largest remainders
        take[np.argsort(take - quota, kind="stable")[:size - take.sum()]] += 1
    else:  # one fewer from each of the largest cells
        take[np.argsort(-take, kind="stable")[:take.sum() - size]] -= 1
    return take


def balance_limit(n_samples: int, class_balance: float) -> float:
    """The papers' ``l`` in ``-l <= e^T y <= l`` from the fraction ``class_balance = l / n``."""
    return float(class_balance) * n_samples


def labels_from_leading_eigenvector(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``{0, 1}`` from the sign of ``sqrt(lambda_1) v_1`` of a label matrix ``M ~ yy^T``.

    Returns ``(labels, scores)``; ``scores = sqrt(lambda_1) v_1`` is the relaxed ``y``. The sign
    of an eigenvector is arbitrary, so it is fixed to make the first point's score non-negative.
    """
    eigvals, eigvecs = np.linalg.eigh((M + M.T) / 2.0)
    scores = np.sqrt(max(eigvals[-1], 0.0)) * eigvecs[:, -1]
    if scores[0] < 0:
        scores = -scores
    return (scores < 0).astype(np.int64), scores


def two_cluster_labels(y: np.ndarray) -> np.ndarray:
    """Labels ``{0, 1}`` of a two-cluster labeling given with any two values, cluster 0 holding
    the first point (as :func:`labels_from_leading_eigenvector` names them)."""
    y = np.asarray(y)
    return (y != y[0]).astype(np.int64)


def balanced_signs(scores: np.ndarray, limit: float) -> np.ndarray:
    """``y = sign(scores - t)`` in ``{-1, +1}`` with the threshold ``t`` nearest 0 that keeps
    ``-limit <= e^T y <= limit`` (both classes non-empty)."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.size
    low = max(1, math.ceil((n - limit) / 2))
    high = min(n - 1, math.floor((n + limit) / 2))
    if low > high:  # limit below the parity gap: the most balanced split
        low = high = n // 2
    n_positive = int(np.clip(np.count_nonzero(scores > 0), low, high))
    y = -np.ones(n)
    y[np.argsort(-scores, kind="stable")[:n_positive]] = 1.0
    return y


def psd_factor(M: np.ndarray, rank: int | None = None) -> np.ndarray:
    """``V`` with ``V V^T ~ M``: eigenvectors scaled by ``sqrt`` of the non-negligible eigenvalues
    (the largest ``rank`` of them when given), largest first. With ``rank`` only those
    eigenpairs are computed, by Lanczos from a fixed start: a relaxed label matrix has low rank,
    so a full eigendecomposition wastes most of its work, and LAPACK's ``evr`` for a few
    eigenpairs is slow on the matrix's large cluster of zero eigenvalues."""
    symmetric = (M + M.T) / 2.0
    n = symmetric.shape[0]
    if rank is not None and n > 4 * rank + 20:
        # A fixed random start: ones would be orthogonal to a balanced labeling's y (M e = 0).
        start = np.random.default_rng(0).standard_normal(n)
        eigvals, eigvecs = eigsh(symmetric, k=rank, which="LA", v0=start)
        order = np.argsort(eigvals)
        eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    else:
        eigvals, eigvecs = np.linalg.eigh(symmetric)
    eigvals, eigvecs = eigvals[::-1], eigvecs[:, ::-1]
    keep = eigvals > max(eigvals[0], 0.0) * 1e-6
    if rank is not None:
        keep[rank:] = False
    return eigvecs[:, keep] * np.sqrt(eigvals[keep])[None, :]


def randomized_rounding(
    M: np.ndarray,
    objective: Callable[[np.ndarray], float],
    *,
    limit: float,
    n_trials: int = 50,
    random_state: int | np.random.RandomState | None = None,
) -> tuple[np.ndarray, float, int]:
    """Hard labels ``y in {-1, +1}`` from a relaxed ``M ~ yy^T`` by randomized hyperplane rounding.

    Candidates: the leading eigenvector and ``n_trials`` random hyperplanes ``sign(V r)`` with
    ``V V^T = M``, ``r ~ N(0, I)`` (Goemans-Williamson), each thresholded by
    :func:`balanced_signs` so it meets the balance constraint. Returns the candidate of smallest
    ``objective(y)``, its objective, and the index of the winner (0 = the eigenvector).
    """
    rng = check_random_state(random_state)
    V = psd_factor(M)
    best_y = balanced_signs(V[:, 0], limit)
    best_value, best_index = float(objective(best_y)), 0
    for trial in range(1, n_trials + 1):
        y = balanced_signs(V @ rng.standard_normal(V.shape[1]), limit)
        value = float(objective(y))
        if value < best_value:
            best_y, best_value, best_index = y, value, trial
    return best_y, best_value, best_index


def labels_from_label_matrix(
    M: np.ndarray, n_clusters: int, random_state: int | np.random.RandomState | None = None
) -> np.ndarray:
    """Cluster labels ``0..k-1`` from a relaxed equivalence matrix ``M ~ DD^T`` (``M_ij ~ 1`` when
    i and j share a cluster): k-means (20 starts) on the rows of its rank-k factor."""
    from sklearn.cluster import KMeans  # local: k-means is only needed by multi-class recovery

    embedding = psd_factor(M, rank=n_clusters)
    seed = check_random_state(random_state).randint(2**31 - 1)
    labels = KMeans(n_clusters, n_init=20, random_state=seed).fit_predict(embedding)
    return _first_seen_order(labels)


def _first_seen_order(labels: np.ndarray) -> np.ndarray:
    """Renumber labels ``0..k-1`` in the order clusters first appear (deterministic names)."""
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(np.argsort(first))
    return order[np.unique(labels, return_inverse=True)[1]].astype(np.int64)


class SDPSolverError(RuntimeError):
    """A numerical solver ended without a usable solution; the message carries its status."""


def check_solver_status(status: str | None, *, solver: str, what: str) -> list[str]:
    """Map a cvxpy status to warnings or an error, so that no solve is trusted silently.

    ``"optimal"`` -> no warning; ``"optimal_inaccurate"`` -> one warning to report with the
    result; anything else (infeasible, unbounded, iteration limit, ...) -> :class:`SDPSolverError`.
    """
    if status == "optimal":
        return []
    if status == "optimal_inaccurate":
        return [f"{solver} solved {what} only to reduced accuracy (status optimal_inaccurate); "
                "labels may be less reliable"]
    raise SDPSolverError(f"{solver} failed on {what}: status {status!r}")


# The conic solvers by their names in the parameters, and cvxpy's name of each (which messages
# show): the one place the two spellings meet.
ConicSolver = Literal["scs", "clarabel"]
CVXPY_SOLVER_NAMES: dict[str, str] = {"scs": "SCS", "clarabel": "CLARABEL"}


def cvxpy_solver_name(solver: str) -> str:
    """cvxpy's name of a conic solver named as in the parameters (``"scs"`` -> ``"SCS"``); any
    other name is taken as cvxpy's own, which cvxpy refuses if it has no such solver."""
    return CVXPY_SOLVER_NAMES.get(solver, solver)


def solve_conic(problem, solver: ConicSolver, tol: float, max_iter: int, what: str
                ) -> tuple[list[str], int]:
    """Solve a cvxpy problem with SCS or Clarabel (``"scs"``, ``"clarabel"``) at ``tol`` and
    ``max_iter``; its status becomes warnings or an :class:`SDPSolverError`
    (:func:`check_solver_status`).

    Returns ``(warnings, solver iterations)``.
    """
    import warnings

    import cvxpy as cp

    name = cvxpy_solver_name(solver)
    options: dict[str, Any]
    if name == "SCS":
        options = {"eps_abs": tol, "eps_rel": tol, "max_iters": max_iter}
    else:
        options = {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol, "max_iter": max_iter}
    try:
        with warnings.catch_warnings():  # cvxpy's "may be inaccurate": reported via the status
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=name, **options)
    except cp.error.SolverError as exc:
        raise SDPSolverError(f"{name} failed on {what}: {exc}") from None
    notes = check_solver_status(problem.status, solver=name, what=what)
    return notes, int(problem.solver_stats.num_iters or 0)


# ---------------------------------------------------------------------------------------------
# Out-of-sample model: SVMs trained on found labels (iterSVR section 3.2.1, thesis section 3.4)
# ---------------------------------------------------------------------------------------------


# Kernel entries evaluated at once by KernelExpansionClassifier.decision_function: bounds the
# memory of one block (16 million float64 entries).
DECISION_BLOCK_ENTRIES = 16_000_000


def with_intercept(expansion: np.ndarray, reach: np.ndarray, intercept: np.ndarray
                   ) -> np.ndarray:
    """Decision values ``f = expansion + b`` of :meth:`KernelExpansionClassifier.expansion`,
    except far from every support vector.

    An RBF expansion decays to zero away from the support vectors, so there ``f`` tends to the
    bias ``b`` alone, and every far point would take the class of the bias's sign (or of the
    largest bias), whatever side of the data it lies on. Where the expansion cannot outweigh
    the bias in any column (``sum_j K(x, s_j) |a_jc| < |b_c|`` for every ``c``) the bias is left
    out, so that the nearest support vectors decide, as they do near the data.
    """
    intercept = np.asarray(intercept, dtype=np.float64)[None, :]
    values = expansion.reshape(expansion.shape[0], -1)
    far = np.all(reach.reshape(values.shape) < np.abs(intercept), axis=1)
    values = values + np.where(far[:, None], 0.0, intercept)
    return values[:, 0] if values.shape[1] == 1 else values


class KernelExpansionClassifier:
    """``f_c(x) = sum_j K(x, s_j) a_jc + b_c`` over support vectors ``s_j``, one column per class.

    Built from libsvm (``sklearn.svm.SVC``) one-vs-rest on labels found by a clustering algorithm,
    reusing the training kernel matrix when it is given. Two classes use one column (positive means
    label 1). Exported as plain arrays, so predict needs numpy only.
    """

    def __init__(
        self,
        support_vectors: np.ndarray,
        dual_coef: np.ndarray,
        intercept: np.ndarray,
        classes: np.ndarray,
        kernel: str,
        gamma: float,
    ):
        self.support_vectors = np.asarray(support_vectors, dtype=np.float64)
        self.dual_coef = np.asarray(dual_coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.classes = np.asarray(classes, dtype=np.int64)
        self.kernel = kernel
        self.gamma = float(gamma)

    @classmethod
    def fit(
        cls,
        X: np.ndarray,
        labels: np.ndarray,
        *,
        kernel: str,
        gamma: float,
        C: float = 1.0,
        K: np.ndarray | None = None,
    ) -> KernelExpansionClassifier:
        """Train on the points labeled ``>= 0``; ``K`` is the kernel of ``X`` if precomputed."""
        labels = np.asarray(labels)
        known = np.flatnonzero(labels >= 0)
        classes = np.unique(labels[known])
        if classes.size < 2:
            raise ValueError("an out-of-sample SVM needs at least two non-empty clusters")
        if K is None:
            K = pairwise_kernel(X[known], kernel=kernel, gamma=gamma)
        else:
            K = K[np.ix_(known, known)]
        targets = [classes[1]] if classes.size == 2 else list(classes)
        columns, intercepts, support = [], [], set()
        for target in targets:
            svm = SVC(C=C, kernel="precomputed", tol=1e-4)
            svm.fit(K, (labels[known] == target).astype(int))
            coef = np.zeros(known.size)
            coef[svm.support_] = svm.dual_coef_[0]
            columns.append(coef)
            intercepts.append(svm.intercept_[0])
            support.update(svm.support_.tolist())
        support_index = np.array(sorted(support), dtype=np.int64)
        dual = np.stack(columns, axis=1)[support_index]
        return cls(X[known][support_index], dual, np.array(intercepts), classes, kernel, gamma)

    @classmethod
    def from_binary_svc(cls, X: np.ndarray, svm: SVC, kernel: str, gamma: float
                        ) -> KernelExpansionClassifier:
        """The classifier of an ``SVC(kernel="precomputed")`` already trained on the kernel of
        ``X`` with two classes (positive decision means the second), instead of a second fit."""
        return cls(X[svm.support_], svm.dual_coef_[0][:, None], svm.intercept_[:1],
                   np.array([0, 1]), kernel, gamma)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """``f(x)``, one column per class (one value for two classes), by
        :meth:`expansion` and :func:`with_intercept`."""
        return with_intercept(*self.expansion(X), self.intercept)

    def expansion(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(sum_j K(x, s_j) a_jc, sum_j K(x, s_j) |a_jc|)``, each ``(n, n_columns)``: the
        kernel expansion without the bias, and how far it can move ``f`` (for a nonnegative
        kernel). In row blocks, so a large X never holds its whole n x n_support kernel."""
        rows = max(1, DECISION_BLOCK_ENTRIES // max(1, self.support_vectors.shape[0]))
        values = np.empty((X.shape[0], self.dual_coef.shape[1]))
        reach = np.full_like(values, np.inf)
        for start in range(0, X.shape[0], rows):
            block = pairwise_kernel(X[start:start + rows], self.support_vectors,
                                    kernel=self.kernel, gamma=self.gamma)
            values[start:start + rows] = block @ self.dual_coef
            if self.kernel == "rbf":
                reach[start:start + rows] = block @ np.abs(self.dual_coef)
        return values, reach

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.labels_from_decision(self.decision_function(X))

    def labels_from_decision(self, values: np.ndarray) -> np.ndarray:
        """The class of each row of :meth:`decision_function`'s values."""
        if values.ndim == 1:
            return np.where(values > 0, self.classes[1], self.classes[0])
        return self.classes[np.argmax(values, axis=1)]

    @property
    def n_support(self) -> int:
        return int(self.support_vectors.shape[0])

    def to_export(self, prefix: str = "svm_") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {"kernel": self.kernel, "gamma": self.gamma}
        arrays = {
            f"{prefix}support_vectors": self.support_vectors,
            f"{prefix}dual_coef": self.dual_coef,
            f"{prefix}intercept": self.intercept,
            f"{prefix}classes": self.classes,
        }
        return meta, arrays

    @classmethod
    def from_export(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], prefix: str = "svm_"
    ) -> KernelExpansionClassifier:
        return cls(
            arrays[f"{prefix}support_vectors"],
            arrays[f"{prefix}dual_coef"],
            arrays[f"{prefix}intercept"],
            arrays[f"{prefix}classes"],
            meta["kernel"],
            meta["gamma"],
        )
