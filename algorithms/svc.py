"""Support vector clustering: the minimal enclosing sphere and its contours.

Ben-Hur, Horn, Siegelmann and Vapnik 2001, "A Support Vector Method for Clustering" (NIPS).

The sphere (the dual (11), libsvm's one-class SVM), the inside test of ``R(x) <= R`` (13)-(14)
and the clusters as the connected components of the adjacency (19) are in
:mod:`algorithms.svc_sphere`; the divisive schedule of section 4 that searches the width ``q``
and ``p = 1/(NC)`` for ``n_clusters`` clusters is in :mod:`algorithms.svc_schedule`. This module
is the estimator: centring, the sample of a large fit, the principal components the sphere may
be fitted in, and prediction.

Out-of-sample: a new point inside the sphere joins the cluster of a support vector it connects to
(the segment test of (19) against its ``n_neighbors`` nearest support vectors); a point outside
joins the cluster of the nearest stored point (support vectors and bounded SVs), or gets ``-1``
with ``bounded_svs="outlier"``.

The defaults' scores against scikit-learn's clusterers are in ``docs/defaults.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.inputs import (
    as_float_matrix,
    check_clustering_input,
)
from algorithms.kernels import (
    SegmentFactors,
    copies_of_rows,
    resolve_gamma,
)
from algorithms.params.common import AUTO, DEPRECATED
from algorithms.params.svc import (
    SAMPLE_SIZE as SAMPLE_SIZE,
)
from algorithms.params.svc import SCHEDULE
from algorithms.params.svc import (
    Labeling as Labeling,
)
from algorithms.params.svc import (
    SupportVectorClusteringParams as SupportVectorClusteringParams,
)
from algorithms.params.svc import (
    soft_margin_problem as soft_margin_problem,
)
from algorithms.pca import principal_directions
from algorithms.progress import ProgressCallback, report
from algorithms.sampling import SampledFitAttributes, fit_sample
from algorithms.svc_schedule import SphereFit, divisive_schedule, fit_svc
from algorithms.svc_sphere import (
    FACTORS_MAX_ENTRIES,
    Sphere,
    first_anchor_joined,
    join_by_chain,
    join_nearest,
    nearest,
    segment_factors,
)

# Points whose segments predict tests at once.
_PREDICT_BLOCK = 4096
_REPORT_EVERY_BLOCKS = 16  # progress while labelling a large data set: every 16 blocks


# ---------------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------------


class SupportVectorClustering(SampledFitAttributes, MMCEstimatorMixin, ClusterMixin,
                              BaseEstimator):
    """Support vector clustering (SVC): clusters are the connected pieces of the sphere's contour.

    Parameters
    ----------
    n_clusters : int, "auto" or None, default=None
        Only used by ``gamma="schedule"`` (where ``None`` means 2): the schedule stops when the
        contours split into this many clusters. With a numeric ``gamma`` the number of clusters is
        whatever the contours give and may differ from ``n_clusters``; read ``n_clusters_``.
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), the target of the schedule.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    gamma : float or {"schedule", "scale"}, default="schedule"
        The paper's width ``q`` of the kernel (10), ``exp(-q ||x - x'||^2)``: ``gamma = q``.
        ``q`` depends on the units of ``X``: the paper's Table 1 values apply to iris projected on
        its principal components in the original centimetres (centred, not whitened or scaled).
        ``"schedule"`` runs the divisive schedule of section 4 (see
        :func:`algorithms.svc_schedule.divisive_schedule`), which searches ``q`` for
        ``n_clusters`` clusters; ``"scale"`` is scikit-learn's ``1 / (n_features * X.var())``.

        .. versionchanged:: 0.2 ``"schedule"`` replaces ``"auto"``.
    C : float or None, default=None
        Soft-margin constant of (9). ``C >= 1`` allows no bounded SVs; ``C`` must be at least
        ``1/N``. Give ``C`` or ``p``; with neither, ``C = 1``.
    p : float or None, default=None
        ``p = 1/(N C)`` in (0, 1], the paper's ``1/(NC)``; an upper bound on the share of bounded
        SVs (16). Under ``gamma="schedule"`` it is the starting value, raised by the schedule.
    labeling : {"complete", "support_vectors", "knn"}, default="support_vectors"
        Which segments of the adjacency (19) are tested (see :mod:`algorithms.svc_sphere`).
    n_neighbors : int, default=10
        Neighbours tested per point by ``"knn"``, ``"support_vectors"`` and ``predict``.
    n_segment_points : int, default=20
        Points sampled on each segment. The paper uses 10; more samples keep a long segment from
        skipping over a narrow gap between two clusters, at a proportional cost per test.
    bounded_svs : {"chain", "nearest", "outlier"}, default="chain"
        Bounded SVs (outside the sphere) join the cluster they are closest to, as in the paper's
        examples. ``"chain"``: the clusters grow outward one point at a time, the point closest
        to a clustered one first, each joining the cluster of that point
        (:func:`algorithms.svc_sphere.join_by_chain`); ``"nearest"``: the cluster of the nearest
        point inside the contours; ``"outlier"``: ``-1``.
    n_components : int, "auto" or None, default="auto"
        Fit the sphere on the leading ``n_components`` principal components of the centred data (not
        whitened), as the paper does on iris (section 5, Table 1: "if the data is sparse, it is
        better to use SVC on a low dimensional representation, obtained, e.g. by principal component
        analysis"). ``"auto"``: the input space; with ``gamma="schedule"``, when its contours never
        give ``n_clusters`` clusters of 5 % of the points, the schedule runs again on the leading
        ``n_clusters`` components (``k`` clusters in ``k`` dimensions, as spectral clustering embeds
        them) and the fit with more clusters is kept (with as many, the one whose clusters all hold
        5 % of the points). ``None``: always the input space.
    tol : float, default=1e-4
        libsvm stopping tolerance for the dual (11).
    max_spheres : int, default=200
        Most spheres (one per ``q``) solved by ``gamma="schedule"`` in one space.

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    exact_max_n : int or None, default=2000
        Largest n whose sphere and contours are fitted on every point; above it they are fitted
        on a uniform random sample of ``exact_max_n`` points, and every point is then labelled by
        :meth:`predict` (the segment test against the sample's support vectors). ``p`` is the
        same share of points either way. None: always every point.

        .. versionchanged:: 0.2 Replaces ``solver``: ``solver="exact"`` is
           ``exact_max_n=None``; ``"auto"`` and ``"sample"`` were the same.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int, RandomState or None, default=None
        Draws the sample.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each point, ``0..n_clusters_-1`` by decreasing size; ``-1`` marks bounded SVs
        when ``bounded_svs="outlier"``.
    n_clusters_ : int
        Number of clusters found.
    gamma_ : float
        The ``q`` used (chosen by the schedule for ``gamma="schedule"``).
    p_ : float
        The ``1/(NC)`` used; ``C_ = 1 / (N p_)``.
    C_ : float
    radius_ : float
        ``R`` of (14): ``R(x)`` on the support vectors.
    support_ : ndarray
        Indices of the support vectors, ``0 < beta < C``. A repeated row is solved once, for
        all its copies (:func:`algorithms.svc_sphere.solve_enclosing_sphere`): its first copy
        stands for it here and in ``support_vectors_``, with the copies' summed ``beta`` (at
        most ``C`` times their number).
    bounded_ : ndarray
        Indices of the bounded SVs, ``beta = C`` (outside the sphere), with every copy.
    n_support_ : int
        Number of support vectors (the paper's ``n_sv``).
    n_bounded_ : int
        Number of bounded SVs (the paper's ``n_bsv``).
    outliers_ : ndarray
        The points outside the sphere: ``bounded_``, and with a sample (``exact_`` False)
        every point outside.
    support_vectors_ : ndarray of shape (n_sv + n_bsv, n_features)
        Every point with ``beta > 0`` (the sphere's centre (4) is their combination), minus
        ``center_``.
    center_ : ndarray of shape (n_features,)
        Mean of the training points, subtracted before every kernel evaluation.
    components_ : ndarray of shape (n_components, n_features) or None
        The principal directions the sphere was fitted in (rows, unit length), or ``None`` when
        it was fitted in the input space. ``support_vectors_`` are in those coordinates.
    dual_coef_ : ndarray
        Their ``beta``.
    objective_ : float
        The dual value (11), ``1 - beta^T K beta``.
    n_iter_ : int
        Spheres solved (1 for a numeric ``gamma``).
    schedule_ : list of dict
        For ``gamma="schedule"``: ``q``, ``p``, clusters, singletons and SV counts at each step.
    warnings_ : list of str
        Schedule problems (the wanted number of clusters was not reached exactly).
    exact_ : bool
        Whether the sphere was fitted on every point (at most ``exact_max_n`` points, or
        ``exact_max_n=None``); False when it was fitted on a sample of ``exact_max_n``.

        .. versionadded:: 0.2 Replaces ``solver_`` (``"exact"``, ``"sample"``), which still
           answers with a ``DeprecationWarning`` until the next release.
    n_fit_samples_ : int
        Points the sphere was fitted on (``exact_max_n`` for a sample, else n).

    References
    ----------
    A. Ben-Hur, D. Horn, H. T. Siegelmann, V. Vapnik. A Support Vector Method for Clustering.
    NIPS 2001. Dual (11), kernel (10), R(x) (13), R (14), adjacency (19), schedule of section 4.

    See Also
    --------
    sklearn.svm.OneClassSVM : the same quadratic program (nu = 1/(N C)), without the clustering.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=60, centers=[[0, 0], [6, 6]], random_state=0)
    >>> SupportVectorClustering(gamma=0.5).fit(X).n_clusters_
    2
    """

    params_model = SupportVectorClusteringParams
    portfolio_name = "svc"
    _result_attributes = (
        *MMCEstimatorMixin._result_attributes,
        "n_clusters_", "p_", "C_", "radius_", "n_bounded_", "schedule_",
    )

    def __init__(
        self,
        n_clusters: int | str | None = None,
        *,
        max_clusters: int = 50,
        gamma: float | str = "schedule",
        C: float | None = None,
        p: float | None = None,
        labeling: str = "support_vectors",
        n_neighbors: int = 10,
        n_segment_points: int = 20,
        bounded_svs: str = "chain",
        n_components: int | str | None = "auto",
        tol: float = 1e-4,
        max_spheres: int = 200,
        exact_max_n: int | None = SAMPLE_SIZE,
        portfolio: bool = True,
        random_state: int | np.random.RandomState | None = None,
        solver: str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.gamma = gamma
        self.C = C
        self.p = p
        self.labeling = labeling
        self.n_neighbors = n_neighbors
        self.n_segment_points = n_segment_points
        self.bounded_svs = bounded_svs
        self.n_components = n_components
        self.tol = tol
        self.max_spheres = max_spheres
        self.exact_max_n = exact_max_n
        self.portfolio = portfolio
        self.random_state = random_state
        self.solver = solver
        self.max_iter = max_iter

    def _start_p(self, n: int) -> float:
        if self._params.p is not None:
            return float(self._params.p)
        if problem := soft_margin_problem(self._params.C, n):
            raise ValueError(problem)
        return 1.0 / (n * (1.0 if self._params.C is None else float(self._params.C)))

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X``; ``y`` is ignored. ``progress(step, objective, message)`` is optional."""
        self._params = self._validated_params()
        X = as_float_matrix(X)
        X = validate_data(self, X, reset=True)
        # libsvm expands ||x - x'||^2 = |x|^2 + |x'|^2 - 2 x.x', which loses every digit of a
        # small distance far from the origin (1e8 + N(0, 1)); the sphere does not move under a
        # shift, so fit and predict work on X - center_.
        X_input = X
        self.center_ = X.mean(axis=0)
        X = X - self.center_
        if self._params.n_clusters == AUTO and self._params.gamma == SCHEDULE:
            k = self._resolve_n_clusters(X, progress)
        else:
            self._forget_n_clusters_choice()
            k = 2 if self._params.n_clusters in (None, AUTO) else int(self._params.n_clusters)
            check_clustering_input(X, k if self._params.gamma == SCHEDULE else 2)
        # p = 1/(NC) is the share of points outside the sphere: a sample keeps the caller's share.
        p = self._start_p(X.shape[0])
        sample = fit_sample(X.shape[0], self._params.exact_max_n,
                            check_random_state(self._params.random_state))
        self.exact_ = sample is None
        if sample is not None:
            X = X[sample]
        self.n_fit_samples_ = X.shape[0]
        self.components_ = None
        if isinstance(self._params.n_components, int) and self._params.n_components < X.shape[1]:
            self.components_ = principal_directions(X, self._params.n_components)
            X = X @ self.components_.T
        n = X.shape[0]
        args = (self._params.labeling, self._params.n_neighbors, self._params.n_segment_points,
                self._params.tol, 200.0)
        self.warnings_: list[str] = []
        if self._params.gamma == SCHEDULE:
            fit, self.schedule_, self.warnings_ = self._schedule(X, k, p, args, progress)
            if self._params.n_components == "auto" and not fit.substantial and k < X.shape[1]:
                fit, X = self._retry_on_components(X, k, p, args, progress, fit)
        else:
            q = resolve_gamma(X, self._params.gamma)
            report(progress, 0, None, f"solving the enclosing sphere for {n} points, q={q:.4g}")
            fit = fit_svc(X, q, p, *args, copies_of_rows(X))
            self.schedule_ = []
        self._store(X, fit)
        report(progress, max(len(self.schedule_), 1), self.objective_,
               f"{self.n_clusters_} clusters, {self.n_support_} SVs, {self.n_bounded_} bounded SVs")
        if sample is not None:
            report(progress, max(len(self.schedule_), 1), self.objective_,
                   f"labelling all {X_input.shape[0]} points by the sample's contours")
            self.support_ = sample[self.support_]
            self.bounded_ = sample[self.bounded_]
            self._sphere = replace(self._sphere, index=sample[self._sphere.index])
            step = max(len(self.schedule_), 1)
            self.labels_, inside = self._labels_and_inside(
                X_input, on_rows=lambda done, total: report(
                    progress, step, self.objective_,
                    f"labelled {done:,} of {total:,} points inside the contours"))
            self.outliers_ = np.flatnonzero(~inside)
        if self._params.n_clusters is not None:  # a k asked for: the candidates' k
            self._keep_portfolio_partition(X_input, progress, max(len(self.schedule_), 1) + 1,
                                           n_clusters=k)
        return self

    def _schedule(self, X, k, p, args, progress, first_step: int = 0):
        def on_step(step, q, p_value, n_found, n_small):
            report(progress, first_step + step, None, f"q={q:.4g}, 1/(NC)={p_value:.3g}: "
                   f"{n_found} clusters, {n_small} small ones")

        return divisive_schedule(X, k, p, *args, max_iter=self._params.max_spheres, on_step=on_step)

    def _retry_on_components(self, X, k, p, args, progress, fit):
        """The schedule again on the leading ``k`` principal components (``n_components="auto"``);
        the fit with more clusters is kept, and between two with as many the one whose clusters all
        hold the small size (:attr:`algorithms.svc_schedule.SphereFit.substantial`). Returns it
        and the points it was fitted on."""
        components = principal_directions(X, k)
        Z = X @ components.T
        reduced, schedule, warnings = self._schedule(Z, k, p, args, progress,
                                                     first_step=len(self.schedule_))
        for record in schedule:
            record["n_components"] = k
        self.schedule_ += schedule
        if (reduced.n_groups, reduced.substantial) <= (fit.n_groups, fit.substantial):
            self.warnings_.append(f"the leading {k} principal components gave no better split; "
                                  "kept the fit in the input space")
            return fit, X
        self.components_ = components
        self.warnings_ = [*self.warnings_, *warnings, (
            f"fitted on the leading {k} principal components (no sphere in the input space had "
            f"{k} clusters of at least 5 % of the points)")]
        return reduced, Z

    def _store(self, X: np.ndarray, fit: SphereFit) -> None:
        sphere = fit.sphere
        self.gamma_ = float(fit.gamma)
        self.p_ = float(fit.p)
        self.C_ = float(sphere.C)
        self.radius_ = float(sphere.radius)
        self.threshold_ = float(sphere.threshold)
        self.support_ = np.sort(sphere.index[~sphere.bounded])
        # Outside the sphere: the bounded SVs and, on a sphere over distinct rows, their copies.
        self.bounded_ = np.flatnonzero(fit.labels < 0)
        self.outliers_ = self.bounded_
        self.n_support_ = int(self.support_.size)
        self.n_bounded_ = int(self.bounded_.size)
        self.support_vectors_ = sphere.points
        self.dual_coef_ = sphere.beta
        self.objective_ = float(1.0 - sphere.beta_k_beta)
        self.n_iter_ = max(len(self.schedule_), 1)
        # With "outlier" the chained clusters still label the stored bounded SVs for predict.
        join = join_nearest if self._params.bounded_svs == "nearest" else join_by_chain
        joined = join(X, fit.labels)
        self.labels_ = fit.labels if self._params.bounded_svs == "outlier" else joined
        self.n_clusters_ = fit.n_groups
        # Stored for prediction: every point with beta > 0 and its cluster (joined for bounded).
        self._sphere = sphere
        self._point_labels = joined[sphere.index]

    # -- prediction -------------------------------------------------------------------------------
    def _centered(self, X) -> np.ndarray:
        """``X`` in the coordinates of the sphere: centred, and projected on ``components_``."""
        check_is_fitted(self, "support_vectors_")
        X = validate_data(self, as_float_matrix(X), reset=False) - self.center_
        return X if self.components_ is None else X @ self.components_.T

    def decision_function(self, X) -> np.ndarray:
        """``R^2 - R^2(x)`` by (13)-(14): positive inside the sphere (inside a cluster contour).
        Where the portfolio's partition was kept, the decision values of its SVM instead."""
        if self.partition_model_ is not None:
            check_is_fitted(self, "support_vectors_")
            return self._partition_predict(X)[1]
        X = self._centered(X)
        return self._sphere.radius**2 - self._sphere.squared_radius_of(X)

    def predict(self, X) -> np.ndarray:
        """Inside the sphere: the cluster of a support vector joined by an inside segment (19)
        among the ``n_neighbors`` nearest; outside: the nearest stored point's cluster, or -1
        with ``bounded_svs="outlier"``. Where the portfolio's partition was kept, its SVM's
        labels."""
        if self.partition_model_ is not None:
            check_is_fitted(self, "support_vectors_")
            return self._partition_predict(X)[0]
        return self._labels_and_inside(X)[0]

    def _labels_and_inside(self, X, on_rows: Callable[[int, int], None] | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict`'s labels, and whether each point is inside the sphere;
        ``on_rows(done, total)`` after each block of the points inside."""
        X = self._centered(X)
        sphere = self._sphere
        # A point counts as inside when within the solver's tolerance of the contour, so the
        # support vectors themselves (on the contour) are inside.
        inside = sphere.kernel_sum(X) >= sphere.threshold - sphere.slack
        labels = self._point_labels[nearest(sphere.points, X, 1)[:, 0]]
        if self._params.bounded_svs == "outlier":
            labels[~inside] = -1
        free = np.flatnonzero(~sphere.bounded)
        anchors = free if free.size else np.arange(sphere.points.shape[0])
        inside_rows = np.flatnonzero(inside)
        n_points = self._params.n_segment_points
        # Half the factors' memory bound for the anchors' and half for a block's.
        m = sphere.points.shape[0]
        matrices = SegmentFactors.matrices(n_points)
        anchor_factors = (segment_factors(sphere, sphere.points, n_points)
                          if 2 * matrices * m * m <= FACTORS_MAX_ENTRIES else None)
        block = _PREDICT_BLOCK if anchor_factors is None else max(
            1, min(_PREDICT_BLOCK, FACTORS_MAX_ENTRIES // (2 * matrices * m)))
        for number, start in enumerate(range(0, inside_rows.size, block)):
            rows = inside_rows[start : start + block]
            near = anchors[nearest(sphere.points[anchors], X[rows], self._params.n_neighbors)]
            joined = first_anchor_joined(sphere, X[rows], near, n_points, anchor_factors)
            reached = np.flatnonzero(joined >= 0)
            labels[rows[reached]] = self._point_labels[near[reached, joined[reached]]]
            if on_rows is not None and number % _REPORT_EVERY_BLOCKS == 0:
                on_rows(start + rows.size, inside_rows.size)
        return labels, inside

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state = {
            "gamma_": self.gamma_, "p_": self.p_, "C_": self.C_, "radius_": self.radius_,
            "threshold_": self.threshold_, "beta_k_beta": self._sphere.beta_k_beta,
            "slack": self._sphere.slack,
            "objective_": self.objective_, "n_iter_": self.n_iter_,
            "n_clusters_": self.n_clusters_, "schedule_": self.schedule_,
            "warnings_": self.warnings_,
        }
        arrays = {
            "labels_": self.labels_, "support_vectors_": self.support_vectors_,
            "dual_coef_": self.dual_coef_, "sv_index": self._sphere.index,
            "sv_bounded": self._sphere.bounded, "sv_labels": self._point_labels,
            "support_": self.support_, "bounded_": self.bounded_, "center_": self.center_,
        }
        if self.components_ is not None:
            arrays["components_"] = self.components_
        return state, arrays

    def _import_state(self, state, arrays):
        for name in ("gamma_", "p_", "C_", "radius_", "threshold_", "objective_"):
            setattr(self, name, float(state[name]))
        self.n_iter_ = int(state["n_iter_"])
        self.n_clusters_ = int(state["n_clusters_"])
        self.schedule_ = list(state["schedule_"])
        self.warnings_ = list(state["warnings_"])
        self.labels_ = np.asarray(arrays["labels_"], dtype=np.int64)
        self.support_vectors_ = np.asarray(arrays["support_vectors_"], dtype=np.float64)
        # Models exported before the centering have their support vectors in input coordinates.
        self.center_ = np.asarray(
            arrays.get("center_", np.zeros(self.support_vectors_.shape[1])), dtype=np.float64
        )
        components = arrays.get("components_")
        self.components_ = None if components is None else np.asarray(components, np.float64)
        self.dual_coef_ = np.asarray(arrays["dual_coef_"], dtype=np.float64)
        self.support_ = np.asarray(arrays["support_"], dtype=np.int64)
        self.bounded_ = np.asarray(arrays["bounded_"], dtype=np.int64)
        self.outliers_ = self.bounded_
        self.n_support_ = int(self.support_.size)
        self.n_bounded_ = int(self.bounded_.size)
        self._sphere = Sphere(
            points=self.support_vectors_, beta=self.dual_coef_,
            index=np.asarray(arrays["sv_index"], dtype=np.int64),
            bounded=np.asarray(arrays["sv_bounded"], dtype=bool),
            threshold=self.threshold_, beta_k_beta=float(state["beta_k_beta"]),
            gamma=self.gamma_, C=self.C_, slack=float(state["slack"]),
        )
        self._point_labels = np.asarray(arrays["sv_labels"], dtype=np.int64)
