"""CPM3C: cutting-plane multiclass maximum margin clustering.

Zhao, Wang and Zhang 2008, "Efficient Multiclass Maximum Margin Clustering" (ICML).

The multiclass MMC problem (2), Crammer-Singer form, is rewritten with one slack and one
constraint per ``c = (c_1..c_n)``, ``c_i in {0, e_1..e_k}`` (problem (11), Theorems 1-2)::

    min_{w, xi >= 0}  (beta/2) sum_p ||w_p||^2 + xi
    s.t. (1/n) sum_i [(c_i.1) sum_p z_ip w_p.x_i + sum_p c_ip (z_ip - w_p.x_i)]
             >= (1/n) sum_i c_i.1 - xi      for every c,

with ``z_ip = 1`` iff ``p = argmax_q w_q.x_i``. For the current ``w`` the most violated ``c``
is closed-form (14): with ``p*`` the argmax and ``r*`` the runner-up of ``w_p.x_i``,
``c_i = e_{r*}`` if ``w_{p*}.x_i - w_{r*}.x_i < 1``, else ``c_i = 0``.

* Algorithm 1 (cutting plane): keep a working set ``Omega``; solve (17) = (11) over ``Omega``
  plus the class balance (16); add the most violated constraint of (11), given in closed form by
  (14); stop when it is violated by at most ``epsilon`` more than the working set.
* Algorithm 2 (CCCP): each constraint of (17) is "convex >= affine" because of the
  ``max_p w_p.x_i = sum_p z_ip w_p.x_i`` term; replacing it by its linearization at the current
  iterate ``w^(t)`` (subgradient ``z_ip^(t) x_i``, (18)-(19)) gives the QP (20). Its dual has one
  variable per constraint of ``Omega`` plus the balance multipliers: a tiny dense QP, solved here
  by :func:`solve_cutting_plane_dual`, a primal active-set method warm-started from the previous
  solution, since successive QPs differ by one constraint. CCCP stops when the objective
  improves by less than ``cccp_tol`` (0.01 in the paper).

One CCCP step costs ``O(|Omega| s n k)`` for ``s`` nonzeros per row: the constraint vectors are
``M X`` for a sparse ``(|Omega| k) x n`` matrix ``M`` with at most two entries per point, and the
scores are ``X W^T``. CSR input is never densified: the centering ``x - mean`` is folded into the
products (``(M X) - (M 1) mean^T``), which is what makes the method linear in ``n``
(Theorems 5-7, Fig. 1).

Nonlinear kernels work, as the paper says (section 2.1), on kernel-PCA coordinates: Nystrom
coordinates of the RBF kernel (exact with every point a landmark), optionally truncated to the
leading principal components (``kpca_components``), with the width taken from the paper's grid
``{0.1 sigma_0, ..., sigma_0}``, ``sigma_0`` the largest pairwise distance
(``width_reference="max_distance"``, section 4.2).

Two forms:

* ``n_clusters = 2``: the binary cutting-plane MMC the paper generalizes, one weight vector and a
  bias, ``f(x) = w.x + b``, constraints ``(1/n) sum_i c_i |f(x_i)| >= (1/n) sum_i c_i - xi``,
  linearized by ``sign(f_t(x_i)) f(x_i)``; labels ``f > 0``.
* ``n_clusters > 2``: Crammer-Singer scores ``f_p(x) = w_p.x + b_p``, labels ``argmax_p``.

Data are centered and scaled to unit mean squared norm inside the solver and a bias ``b_p`` is
added (regularized with ``w``). The paper has no bias and uncentered data, where
``sum_i w_p.x_i = w_p.(n mean)`` acts as one; making it explicit keeps the class balance (16),
``-l <= sum_i (f_p(x_i) - f_q(x_i)) <= l``, meaningful for any data (for centered data without a
bias it would be vacuous): with centering it reads ``|b_p - b_q| <= l / n = score_balance``.

The defaults' scores against scikit-learn's clusterers are in ``docs/defaults.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.preprocessing import normalize as normalize_rows
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from algorithms.base import MMCEstimatorMixin
from algorithms.inputs import (
    as_float_matrix,
)
from algorithms.kernels import NystromMap, distinct_rows, resolve_gamma
from algorithms.params.common import (
    DEPRECATED,
    LOCAL_SCALING,
)
from algorithms.params.cpm3c import WIDE_LOCAL_SCALING
from algorithms.params.cpm3c import (
    CPM3CParams as CPM3CParams,
)
from algorithms.pca import PrincipalComponents
from algorithms.progress import ProgressCallback, report
from algorithms.selection.candidates import (
    kmeans_partitions,
    partition_key,
    spectral_partition,
)

# gamma="wide_local_scaling": the shared local width sigma (kernels.local_scaling_gamma) times
# this. CPM3C's classifier is a norm-regularized linear one on Nystrom coordinates; at sigma itself
# the kernel between points of one cluster a few neighbours apart is ~0, so many labelings have
# nearly the same margin and the descent drifts from a correct start. A wider kernel keeps a
# cluster's points correlated at the cost of blurring close clusters.
WIDE_LOCAL_SCALING_MULTIPLE = 2.0
# The paper's setting: linear kernel (the bounding-box width where "rbf" is asked for) and k-means
# starts; reproductions of the paper's tables run with it.
PAPER_SETTING = {"kernel": "linear", "gamma": "paper", "init": "k-means", "supervised_start": False,
                 "portfolio": False}

# ---------------------------------------------------------------------------------------------
# The dual of the QP (20): a small dense QP over the working set
# ---------------------------------------------------------------------------------------------


def solve_cutting_plane_dual(
    Q: np.ndarray,
    q: np.ndarray,
    n_alpha: int,
    C: float,
    v0: np.ndarray | None = None,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> np.ndarray:
    """Solve ``min 1/2 v'Qv - q'v`` s.t. ``v >= 0`` and ``sum(v[:n_alpha]) <= C``.

    This is the dual of (20): ``v = (alpha, mu)``, ``alpha`` one multiplier per working constraint
    (their sum is bounded by the weight ``C`` of the slack), ``mu`` the balance multipliers (16).
    Primal active-set method with a tiny ridge on ``Q`` (Gram matrices are often singular);
    ``v0``, the previous solution padded with zeros, makes a warm start that usually needs a
    handful of steps.
    """
    m = q.size
    if m == 0:
        return np.zeros(0)
    # Small dense problems (|Omega| + a few): the cost is numpy call overhead, so the loop sticks
    # to few calls per step (take instead of ix_, a sorted free set instead of masks on s).
    # The ridge is added to the blocks solved and to the gradient, not to a copy of Q: with many
    # clusters Q is large, and copying it every QP would cost more than the warm-started solve.
    Q = np.asarray(Q, dtype=np.float64)
    ridge = 1e-12 * max(float(np.trace(Q)) / m, 1e-300)
    s = np.zeros(m)
    s[:n_alpha] = 1.0
    v = np.zeros(m) if v0 is None else np.maximum(np.asarray(v0, dtype=np.float64), 0.0)
    total = float(v[:n_alpha].sum())
    if total > C:
        v *= C / total
    free = v > 0
    sum_active = n_alpha > 0 and float(v[:n_alpha].sum()) >= C * (1 - 1e-12)
    limit = max_iter if max_iter is not None else 20 * m + 100
    for _ in range(limit):
        F = np.flatnonzero(free)
        lam = 0.0
        x = np.zeros(m)
        if F.size:
            QF = Q.take(F, axis=0).take(F, axis=1)
            QF.flat[:: F.size + 1] += ridge
            # F is sorted, so it holds an alpha exactly when its first entry is one.
            if sum_active and F[0] < n_alpha:
                sF = s.take(F)
                kkt = np.empty((F.size + 1, F.size + 1))
                kkt[:-1, :-1] = QF
                kkt[:-1, -1] = sF
                kkt[-1, :-1] = sF
                kkt[-1, -1] = 0.0
                sol = np.linalg.solve(kkt, np.append(q.take(F), C))
                x[F], lam = sol[:-1], float(sol[-1])
            else:
                sum_active = False
                x[F] = np.linalg.solve(QF, q.take(F))
        p = x - v
        if np.abs(p).max() <= 1e-12 * (1.0 + np.abs(v).max()):
            # At the minimizer of the current face: check the multipliers and free one.
            grad = Q @ v + ridge * v - q + lam * s
            bound = np.where(free, np.inf, grad)
            i = int(np.argmin(bound))
            worst = float(bound[i])
            if sum_active and lam < min(worst, 0.0) - tol:
                sum_active = False
            elif worst < -tol:
                free[i] = True
            else:
                return v
            continue
        step, blocking = 1.0, None
        decreasing = F[p[F] < 0]
        if decreasing.size:
            ratios = v[decreasing] / -p[decreasing]
            j = int(np.argmin(ratios))
            if ratios[j] < step:
                step, blocking = float(ratios[j]), int(decreasing[j])
        growth = float(p[:n_alpha].sum())
        if not sum_active and growth > 0:
            room = (C - float(v[:n_alpha].sum())) / growth
            if room < step:
                step, blocking = max(room, 0.0), -1
        v = v + step * p
        if blocking is not None and blocking >= 0:
            v[blocking] = 0.0
            free[blocking] = False
        elif blocking == -1:
            sum_active = True
        np.maximum(v, 0.0, out=v)
    return v


# ---------------------------------------------------------------------------------------------
# The data, centered and scaled implicitly (CSR stays CSR)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Data:
    """``x'_i = (x_i - mean) / radius`` without forming it; ``radius^2 = mean ||x - mean||^2``."""

    X: np.ndarray | sp.csr_matrix
    mean: np.ndarray
    radius: float

    @classmethod
    def of(cls, X: np.ndarray | sp.csr_matrix) -> _Data:
        n = X.shape[0]
        mean = np.asarray(X.mean(axis=0, dtype=np.float64)).ravel()
        if sp.issparse(X):
            sq = float(X.multiply(X).sum()) / n
        else:  # float32 coordinates are squared and summed in float64, without a copy
            sq = float(np.einsum("ij,ij->", X, X, dtype=np.float64)) / n
        radius = float(np.sqrt(max(sq - mean @ mean, 0.0)))
        return cls(X, mean, radius if radius > 0 else 1.0)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def scores(self, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``F[i, p] = w_p.x'_i + b_p`` in O(s n k)."""
        F = np.asarray(self.X @ w.T.astype(self.X.dtype, copy=False), dtype=np.float64)
        F -= (self.mean @ w.T)[None, :]
        F /= self.radius
        F += b[None, :]
        return F

    @property
    def dense(self) -> bool:
        return not sp.issparse(self.X)

    def combine(self, M: np.ndarray | sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``(M X', M 1)`` for a row-combination matrix ``M``: O(nnz(M) s)."""
        MX = M @ self.X
        MX = MX.toarray() if sp.issparse(MX) else np.asarray(MX)
        counts = np.asarray(M.sum(axis=1)).ravel()
        MX -= counts[:, None] * self.mean[None, :]
        MX /= self.radius
        return MX, counts


# ---------------------------------------------------------------------------------------------
# Constraints (11): most violated by (14), linearized by (18)-(20)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Constraint:
    """One ``c`` of (11): the points with ``c_i != 0`` and, for k > 2, the class ``r_i``."""

    index: np.ndarray
    rival: np.ndarray | None  # None in the binary form


def labels_from_scores(F: np.ndarray) -> np.ndarray:
    """``argmax_p f_p`` (Crammer-Singer) or ``f > 0`` (binary form, one column)."""
    if F.shape[1] == 1:
        return (F[:, 0] > 0).astype(np.int64)
    return np.argmax(F, axis=1).astype(np.int64)


def _best_and_rival(F: np.ndarray, clamp: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p* = argmax_p f_p`` (or the clamped labels), ``r* = argmax_{r != p*} f_r`` and the gap
    ``f_p* - f_r*`` (negative where a clamped label is not the argmax)."""
    rows = np.arange(F.shape[0])
    best = np.argmax(F, axis=1) if clamp is None else clamp
    masked = F.copy()
    masked[rows, best] = -np.inf
    rival = np.argmax(masked, axis=1)
    return best, rival, F[rows, best] - F[rows, rival]


def _binary_margin(F: np.ndarray, clamp: np.ndarray | None) -> np.ndarray:
    """``|f(x_i)|``, or ``s_i f(x_i)`` for clamped labels ``s_i = +-1`` (binary form)."""
    return np.abs(F[:, 0]) if clamp is None else np.where(clamp == 1, 1.0, -1.0) * F[:, 0]


def most_violated_constraint(F: np.ndarray, clamp: np.ndarray | None = None
                             ) -> tuple[_Constraint, float]:
    """Theorem 3, eq. (14): ``c_i = e_{r*}`` where the margin ``f_p* - f_r* < 1``, else 0.

    Returns the constraint and its left-hand violation ``(1/n) sum_i max(0, 1 - margin_i)``,
    the largest slack any ``c`` can require at these scores. ``clamp``: labels held fixed (the
    margins of a supervised SVM on them) instead of the argmax.
    """
    n = F.shape[0]
    if F.shape[1] == 1:
        margin = _binary_margin(F, clamp)
        index = np.flatnonzero(margin < 1.0)
        return _Constraint(index, None), float(np.sum(1.0 - margin[index])) / n
    _, rival, gap = _best_and_rival(F, clamp)
    index = np.flatnonzero(gap < 1.0)
    return _Constraint(index, rival[index]), float(np.sum(1.0 - gap[index])) / n


def _constraint_on_every_point(F: np.ndarray) -> _Constraint:
    """The ``c`` of (11) with ``c_i != 0`` for all ``i`` (rival ``r*_i`` for k > 2)."""
    index = np.arange(F.shape[0])
    return _Constraint(index, None if F.shape[1] == 1 else _best_and_rival(F)[1])


def constraint_slacks(F: np.ndarray, constraints: list[_Constraint],
                      clamp: np.ndarray | None = None,
                      sums: _ConstraintSums | None = None,
                      W: np.ndarray | None = None) -> np.ndarray:
    """Slack each constraint of (11) needs at scores ``F`` (the exact, non-linearized form), or
    with the labels ``clamp`` held fixed.

    ``sums`` (dense data) with ``W``, the iterate whose scores ``F`` are: the slacks are
    ``d_c - <G_c, W>``, the linearization (20) at the labels of ``F``, which is exact at the
    point it linearizes at. The kept sums then give them without a pass over the points."""
    n = F.shape[0]
    if sums is not None:
        sums.update(constraints, labels_from_scores(F) if clamp is None else clamp)
        G, d = sums.linearized()
        return d - G @ W
    out = np.empty(len(constraints))
    if F.shape[1] == 1:
        margin = _binary_margin(F, clamp)
        for j, c in enumerate(constraints):
            out[j] = (c.index.size - margin[c.index].sum()) / n
        return out
    labels = np.argmax(F, axis=1) if clamp is None else clamp
    top = F[np.arange(n), labels]
    for j, c in enumerate(constraints):
        same = labels[c.index] == c.rival
        gap = top[c.index] - F[c.index, c.rival]
        out[j] = (c.index.size - same.sum() - gap.sum()) / n
    return out


# Largest dense combination matrix (|Omega| rows x n entries) used for dense data; above it the
# matrix is built sparse, which bounds memory at the cost of a slower product.
_DENSE_COMBINATION_LIMIT = 4_000_000


def linearized_constraints(
    data: _Data, F: np.ndarray, constraints: list[_Constraint], n_rows: int,
    clamp: np.ndarray | None = None, sums: _ConstraintSums | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Constraint vectors of the QP (20) at the current iterate, all at once.

    Constraint ``c`` reads ``<G_c, (W, b)> >= d_c - xi`` with, for labels ``y`` of the iterate,
    ``G_c[p] = (1/n) sum_{c_i != 0} (1[y_i = p] - 1[r_i = p]) (x'_i, 1)`` and
    ``d_c = (1/n) #{i: c_i != 0, y_i != r_i}`` (binary form: ``G_c = (1/n) sum sign(f_i)(x'_i, 1)``,
    ``d_c = (1/n) #{c_i != 0}``). Returns ``(G, d)`` with ``G`` of shape
    ``(|Omega|, n_rows * (n_features + 1))``, the bias coordinates last in each row block.
    ``clamp``: the labels ``y`` held fixed instead of read off ``F``. ``sums``: the per-constraint
    arrays of the dense form (:class:`_ConstraintSums`, :func:`keeps_sums`), kept by the caller
    between calls.
    """
    n = data.n
    n_constraints = len(constraints)
    if sums is not None or keeps_sums(data, n_rows):
        if sums is None:
            sums = _ConstraintSums(data, n_rows)
        return _linearized_by_class(F, constraints, clamp, sums)
    d = np.empty(n_constraints)
    rows, cols, vals = [], [], []
    if n_rows == 1:
        sign = np.where((F[:, 0] > 0) if clamp is None else (clamp == 1), 1.0, -1.0)
        sizes = np.array([c.index.size for c in constraints])
        index = np.concatenate([c.index for c in constraints])
        rows.append(np.repeat(np.arange(n_constraints), sizes))
        cols.append(index)
        vals.append(sign[index])
        d[:] = sizes / n
    else:
        labels = np.argmax(F, axis=1) if clamp is None else clamp
        for j, c in enumerate(constraints):
            y = labels[c.index]
            keep = y != c.rival
            idx = c.index[keep]
            rows += [j * n_rows + y[keep], j * n_rows + c.rival[keep]]
            cols += [idx, idx]
            vals += [np.ones(idx.size), -np.ones(idx.size)]
            d[j] = idx.size / n
    rows_, cols_, vals_ = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    shape = (n_constraints * n_rows, n)
    if data.dense and shape[0] * shape[1] <= _DENSE_COMBINATION_LIMIT:
        # Dense data: a dense combination matrix feeds one BLAS product; building a CSR
        # matrix every CCCP step would cost more than the product itself. Each (row, point)
        # pair occurs once per constraint, so plain assignment is exact.
        M = np.zeros(shape)
        M[rows_, cols_] = vals_
    else:
        M = sp.csr_matrix((vals_, (rows_, cols_)), shape=shape)
    MX, counts = data.combine(M)
    G = np.hstack([MX, counts[:, None]]) / n
    return G.reshape(len(constraints), -1), d


class BalanceRows:
    """The balance constraints (16) in force, as rows ``P`` of ``P b <= l / n`` over the biases.

    With centered data ``sum_i f_p(x_i) = n b_p``, so (16) divided by ``n`` is
    ``b_p - b_q <= l / n`` for every ordered pair (binary form: ``+-b <= l / n``, both rows
    always). With ``k > 2`` there are ``k(k - 1)`` pairs but only the extreme biases can bind, so
    the rows are a working set, as the cutting planes are: :meth:`add_most_violated` adds the
    pair of largest and smallest bias while it breaks (16), and the QP is solved again. Its
    optimum then satisfies every pair, so it is the optimum over all of them. All pairs at
    once would give ``Q`` ``O(k^2)`` rows, and memory ``O(k^4)``.
    """

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self.rows = np.array([[1.0], [-1.0]]) if n_rows == 1 else np.zeros((0, n_rows))

    def add_most_violated(self, b: np.ndarray, limit: float) -> bool:
        """Add the row of the pair ``(argmax b, argmin b)`` if ``b`` breaks (16) there and it is
        not in force yet (then the solver's tolerance is the only violation); True if added."""
        if self.n_rows == 1:
            return False
        p, q = int(np.argmax(b)), int(np.argmin(b))
        if b[p] - b[q] <= limit + 1e-9 * max(limit, 1.0):
            return False
        row = np.zeros(self.n_rows)
        row[p], row[q] = 1.0, -1.0
        if np.any(np.all(self.rows == row, axis=1)):
            return False
        self.rows = np.vstack([self.rows, row])
        return True


# ---------------------------------------------------------------------------------------------
# Algorithms 1 and 2
# ---------------------------------------------------------------------------------------------


@dataclass
class CuttingPlaneResult:
    w: np.ndarray  # (n_rows, n_features) in the centered, scaled coordinates
    b: np.ndarray  # (n_rows,)
    objective: float
    n_iter: int  # cutting-plane iterations (constraints added)
    n_cccp: int  # QP solves
    n_constraints: int  # final |Omega|
    history: list[float] = field(default_factory=list)
    # With start_labels: the iterate when the held-labels phase ended (the supervised SVM of
    # the starting partition).
    held: CuttingPlaneResult | None = None


# The binary form keeps its constraint sums from this many points on: below it one dense
# combination product per QP (linearized_constraints) costs about as much as the sums.
BINARY_SUMS_MIN_POINTS = 20_000


def keeps_sums(data: _Data, n_rows: int) -> bool:
    """Whether the working set's sums are kept between QPs (:class:`_ConstraintSums`): dense
    data with k > 2, and the binary form on large dense data."""
    return data.dense and (n_rows > 1 or data.n >= BINARY_SUMS_MIN_POINTS)


# Above this share of the points changing class, the label sums are recomputed, not updated.
_LABEL_SUMS_REFRESH_SHARE = 0.25


class _ConstraintSums:
    """What the dense form needs of the working set, kept between calls of
    :func:`linearized_constraints` and :func:`constraint_slacks`.

    Per constraint ``c``: its membership row (``c_i != 0``) and size, and its label sums
    ``sum_{c_i != 0} e_{y_i} (x) (x_i, 1)`` at the labels of the last call, moved by the rows of
    the points whose label changed. Between two QPs (20) few points change class, so a call
    costs ``|Omega| x changed x s`` instead of ``|Omega| n s``. With ``k > 2`` also its rival
    sums ``sum_{c_i != 0} e_{r_i} (x) (x_i, 1)`` and a row of ``rival_cells`` (a 1 at column
    ``i k + r_i`` of each member), both fixed. The binary form keeps the label sums of ``y_i =
    [f(x_i) > 0]``: its ``sum_{c_i != 0} s_i (x_i, 1)`` is the positive sum less the negative.

    Sums are of the raw rows ``x_i`` and a count; :meth:`linearized` centres and scales them
    (``x'_i = (x_i - mean) / radius``), so no centred copy of the data is formed.
    """

    def __init__(self, data: _Data, n_rows: int):
        self.X, self.mean, self.radius = data.X, data.mean, data.radius
        self.n_rows = n_rows
        self.binary = n_rows == 1
        self.n_labels = 2 if self.binary else n_rows
        n, width = self.X.shape[0], self.X.shape[1] + 1  # the count last
        self.m = 0
        self.labels: np.ndarray | None = None
        self._membership = np.zeros((0, n), dtype=bool)  # 1 byte per point and constraint
        self._rival_sums = np.zeros((0, n_rows, width))
        self._label_sums = np.zeros((0, self.n_labels, width))
        self._sizes = np.zeros(0)
        self.rival_cells = sp.csr_matrix((0, n * n_rows))
        # (G, d) of the last linearize, until a label moves or a constraint joins: the line
        # searches and slacks between two QPs read it many times at the same labels.
        self._linearized: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def membership(self) -> np.ndarray:
        return self._membership[: self.m]

    @property
    def sizes(self) -> np.ndarray:
        return self._sizes[: self.m]

    def _sums(self, weights, rows: np.ndarray | None = None) -> np.ndarray:
        """``weights @ (x_i, 1)`` over ``rows`` of the data (``weights``: dense)."""
        counts = np.asarray(weights.sum(axis=1)).reshape(-1, 1)
        return np.hstack([row_products(weights, self.X, rows), counts])

    def update(self, constraints: list[_Constraint], labels: np.ndarray) -> None:
        """The sums of ``constraints`` (a working set that only grows) at ``labels``."""
        self._move_labels(labels)
        new = constraints[self.m:]
        if not new:
            return
        self._linearized = None
        self._reserve(self.m + len(new))
        n, k = self.X.shape[0], self.n_labels
        for j, c in enumerate(new, start=self.m):
            self._membership[j, c.index] = True
            self._sizes[j] = c.index.size
            # rows 0..k-1 sum the members by label, k..2k-1 by rival: one streaming pass over
            # X by a dense product (X[c.index] would copy half of it, and a sparse product reads
            # its rows in one thread)
            weights = np.zeros((k if self.binary else 2 * k, n))
            weights[labels[c.index], c.index] = 1.0
            if not self.binary:
                weights[k + c.rival, c.index] = 1.0
            by_class = self._sums(weights)
            self._label_sums[j] = by_class[:k]
            if not self.binary:
                self._rival_sums[j] = by_class[k:]
        if not self.binary:
            cells = [sp.csr_matrix((np.ones(c.index.size), (np.zeros(c.index.size, np.int64),
                                                              c.index * k + c.rival)),
                                   shape=(1, self.rival_cells.shape[1])) for c in new]
            self.rival_cells = sp.vstack([self.rival_cells, *cells], format="csr")
        self.m += len(new)

    def _reserve(self, m: int) -> None:
        """Room for ``m`` constraints; capacity doubles, so rows are not copied per constraint."""
        capacity = self._membership.shape[0]
        if m <= capacity:
            return
        capacity = max(m, 2 * capacity, 16)
        for name in ("_membership", "_rival_sums", "_label_sums", "_sizes"):
            old = getattr(self, name)
            if name == "_rival_sums" and self.binary:
                continue
            grown = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            grown[: self.m] = old[: self.m]
            setattr(self, name, grown)

    def _move_labels(self, labels: np.ndarray) -> None:
        if self.labels is None or self.m == 0:
            self.labels = labels.copy()
            self._linearized = None
            return
        changed = np.flatnonzero(labels != self.labels)
        if changed.size:
            self._linearized = None
        if changed.size > _LABEL_SUMS_REFRESH_SHARE * labels.size:
            members = self.membership
            for p in range(self.n_labels):
                in_class = np.flatnonzero(labels == p)
                self._label_sums[: self.m, p] = self._sums(members[:, in_class], in_class)
        elif changed.size:
            members = self.membership[:, changed]
            before, after = self.labels[changed], labels[changed]
            for p in range(self.n_labels):
                gained, lost = after == p, before == p
                if gained.any():
                    self._label_sums[: self.m, p] += self._sums(members[:, gained],
                                                                changed[gained])
                if lost.any():
                    self._label_sums[: self.m, p] -= self._sums(members[:, lost], changed[lost])
        self.labels = labels.copy()

    def rival_agreements(self, values: np.ndarray) -> np.ndarray:
        """``sum_{c_i != 0} values[i, r_i]`` per constraint (``values``: ``n x k``)."""
        return self.rival_cells @ values.ravel()

    def label_one_hot(self) -> np.ndarray:
        """``e_{y_i}`` per point (``n x k``) for the labels of the last :meth:`update`."""
        one_hot = np.zeros((self.X.shape[0], self.n_rows))
        one_hot[np.arange(one_hot.shape[0]), self.labels] = 1.0
        return one_hot

    def linearized(self) -> tuple[np.ndarray, np.ndarray]:
        """``(G, d)`` of (20) at the labels of the last :meth:`update` (read-only arrays)."""
        if self._linearized is None:
            self._linearized = self._linearize()
        return self._linearized

    def _linearize(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.X.shape[0]
        if self.binary:
            d = self.sizes / n
            G = self._label_sums[: self.m, 1:2] - self._label_sums[: self.m, 0:1]
        else:
            d = (self.sizes - self.rival_agreements(self.label_one_hot())) / n
            G = self._label_sums[: self.m] - self._rival_sums[: self.m]
        # sum (x_i - mean) / radius = (sum x_i - count mean) / radius; the count is the bias's
        G[..., :-1] -= G[..., -1:] * self.mean
        G[..., :-1] /= self.radius
        G /= n
        G, d = G.reshape(self.m, -1), np.asarray(d)
        G.flags.writeable = d.flags.writeable = False
        return G, d


def _linearized_by_class(
    F: np.ndarray, constraints: list[_Constraint], clamp: np.ndarray | None,
    sums: _ConstraintSums,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`linearized_constraints` on dense data, from sums kept between calls.

    ``G_c[p] = (1/n) (sum_{c_i != 0, y_i = p} (x'_i, 1) - sum_{c_i != 0, r_i = p} (x'_i, 1))``
    for k > 2: a point with ``y_i = r_i`` adds and removes the same row, so the filter of ``d_c``
    is not needed in ``G_c``; the binary form's ``G_c`` is its positive sum less its negative.
    The sums are kept per constraint (:class:`_ConstraintSums`), the label sums moved by the
    points that changed class: recomputing them every call would cost ``O(|Omega| n (s + 1))``
    per QP, which dominates a fit on large ``n``. The slacks (:func:`constraint_slacks`) are
    read off the same sums for the same reason.
    """
    sums.update(constraints, labels_from_scores(F) if clamp is None else clamp)
    return sums.linearized()


def _first_constraint(F: np.ndarray, start_labels: np.ndarray | None) -> _Constraint:
    """The working set's first ``c`` of (11): the most violated one (14) at the initial scores.

    Where every margin is already >= 1 (identical points, or a start at exactly margin 1) that
    ``c`` is empty and makes ``W = 0`` stationary, so the constraint on every point is taken."""
    first, _ = most_violated_constraint(F, start_labels)
    return first if first.index.size else _constraint_on_every_point(F)


def _dual_system(GG: np.ndarray, G_bias: np.ndarray, P: np.ndarray, d: np.ndarray,
                 score_balance: float) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, q)`` of the dual of the QP (20) over ``(alpha, mu)``: ``alpha`` the multipliers of
    the working set's constraints (Gram matrix ``GG = G G^T``, right-hand sides ``d``), ``mu``
    those of the balance rows ``P`` in force (16), which act on the bias coordinates
    ``G_bias`` only (Zhao, Wang and Zhang 2008, (16) and (20))."""
    n_alpha = GG.shape[0]
    Q = np.empty((n_alpha + P.shape[0],) * 2)
    Q[:n_alpha, :n_alpha] = GG
    Q[:n_alpha, n_alpha:] = -(G_bias @ P.T)
    Q[n_alpha:, :n_alpha] = Q[:n_alpha, n_alpha:].T
    Q[n_alpha:, n_alpha:] = P @ P.T
    return Q, np.concatenate([d, -np.full(P.shape[0], score_balance)])


@dataclass(frozen=True)
class _CCCPOptions:
    """The constants of a :func:`solve_cpm3c` run (see there)."""

    C: float
    score_balance: float
    epsilon: float
    cccp_tol: float
    max_cccp_iter: int


class _CuttingPlaneRun:
    """One run of :func:`solve_cpm3c`: the iterate ``W`` (the blocks ``(w_p, b_p)``, flattened)
    and its scores ``F``, the working set ``Omega`` of (17) with its kept sums, the balance rows
    in force, the last dual solution (the warm start of the next QP) and what the result counts.
    :meth:`cutting_plane` is Algorithm 1, :meth:`cccp` Algorithm 2, :meth:`qp_step` one QP (20)
    (Zhao, Wang and Zhang 2008)."""

    def __init__(self, data: _Data, w0: np.ndarray, b0: np.ndarray, options: _CCCPOptions,
                 start_labels: np.ndarray | None,
                 on_iteration: Callable[[int, float, float], None] | None):
        self.data, self.options, self.on_iteration = data, options, on_iteration
        self.n_rows, n_features = w0.shape
        self.width = n_features + 1
        self.balance = BalanceRows(self.n_rows)
        self.bias = np.arange(self.n_rows) * self.width + n_features  # the coordinates of b in W
        self.W = np.hstack([w0, b0[:, None]]).ravel()
        self.F = data.scores(w0, b0)
        self.constraints = [_first_constraint(self.F, start_labels)]
        self.sums = (_ConstraintSums(data, self.n_rows) if keeps_sums(data, self.n_rows)
                     else None)
        self.v: np.ndarray | None = None
        self.history: list[float] = []
        self.n_cccp = self.n_iter = 0

    def slack(self, W: np.ndarray, F: np.ndarray, clamp: np.ndarray | None) -> float:
        """``xi``: the largest slack the working set needs at ``(W, F)``, at least 0."""
        return max(0.0, float(constraint_slacks(F, self.constraints, clamp, self.sums, W).max()))

    def objective(self, W: np.ndarray, F: np.ndarray, clamp: np.ndarray | None) -> float:
        """``1/2 ||W||^2 + C xi``, the objective of (17) over the working set."""
        return 0.5 * float(W @ W) + self.options.C * self.slack(W, F, clamp)

    def qp_step(self, F: np.ndarray, clamp: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """One QP (20) linearized at the labels of ``F`` (or ``clamp``): ``(W, F)`` after it.

        The dual is solved again with the most violated balance row (16) added while the
        solution breaks one (:class:`BalanceRows`); ``W = G^T alpha - P^T mu`` on the biases."""
        G, d = linearized_constraints(self.data, F, self.constraints, self.n_rows, clamp,
                                      self.sums)
        n_alpha = len(self.constraints)
        G_bias = G[:, self.bias]
        GG = G @ G.T
        self._warm_start(n_alpha)
        while True:
            P = self.balance.rows
            Q, q = _dual_system(GG, G_bias, P, d, self.options.score_balance)
            self.v = solve_cutting_plane_dual(Q, q, n_alpha, self.options.C, self.v)
            alpha, mu = self.v[:n_alpha], self.v[n_alpha:]
            if not self.balance.add_most_violated(G_bias.T @ alpha - P.T @ mu,
                                                  self.options.score_balance):
                break
            self.v = np.append(self.v, 0.0)
        self.n_cccp += 1
        W_new = G.T @ alpha
        W_new[self.bias] -= P.T @ mu
        blocks = W_new.reshape(self.n_rows, self.width)
        return W_new, self.data.scores(blocks[:, :-1], blocks[:, -1])

    def _warm_start(self, n_alpha: int) -> None:
        """The previous dual solution for a working set of ``n_alpha`` constraints: the old
        alphas, a zero for the new constraint, the old balance multipliers."""
        if self.v is not None:
            n_old = self.v.size - self.balance.rows.shape[0]
            self.v = np.concatenate([self.v[:n_old], np.zeros(n_alpha - n_old), self.v[n_old:]])

    def cccp(self, labels_at: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, float]:
        """Algorithm 2 on (17) for the current working set, from ``(W, F)``: QPs (20) until the
        objective improves by less than ``cccp_tol`` (relative) or the labels ``labels_at(F)``
        stop changing. Returns those labels and the objective."""
        clamp = labels_at(self.F)
        current = self.objective(self.W, self.F, clamp)
        for _ in range(self.options.max_cccp_iter):
            W_new, F_new = self.qp_step(self.F, clamp)
            clamp_new = labels_at(F_new)
            new = self.objective(W_new, F_new, clamp_new)
            improved = current - new
            # The linearization (18)-(20) depends on the scores only through the labels: when
            # none changed, the next QP is this one again and CCCP has converged.
            same_labels = np.array_equal(clamp, clamp_new)
            self.W, self.F, clamp = W_new, F_new, clamp_new
            current = new
            if same_labels or improved < self.options.cccp_tol * max(current + improved, 1e-12):
                break
        return clamp, current

    def cutting_plane(self, labels_at: Callable[[np.ndarray], np.ndarray],
                      iterations: int) -> None:
        """Algorithm 1 with the labels ``labels_at(F)`` (the argmax, or held ones; with held
        labels the linearization never changes and each CCCP is one QP): CCCP on the working
        set, then the most violated constraint (14) is added unless it is within ``epsilon``."""
        for _ in range(iterations):
            self.n_iter += 1
            clamp, current = self.cccp(labels_at)
            self.history.append(current)
            candidate, violation = most_violated_constraint(self.F, clamp)
            xi = self.slack(self.W, self.F, clamp)
            if self.on_iteration is not None:
                self.on_iteration(self.n_iter, current, violation - xi)
            if violation <= xi + self.options.epsilon:
                break
            self.constraints.append(candidate)

    def result(self) -> CuttingPlaneResult:
        """The current iterate and the counts so far."""
        blocks = self.W.reshape(self.n_rows, self.width)
        return CuttingPlaneResult(blocks[:, :-1].copy(), blocks[:, -1].copy(), self.history[-1],
                                  self.n_iter, self.n_cccp, len(self.constraints),
                                  list(self.history))


def solve_cpm3c(
    data: _Data,
    w0: np.ndarray,
    b0: np.ndarray,
    *,
    C: float,
    score_balance: float,
    epsilon: float,
    cccp_tol: float,
    max_iter: int,
    max_cccp_iter: int,
    start_labels: np.ndarray | None = None,
    on_iteration: Callable[[int, float, float], None] | None = None,
) -> CuttingPlaneResult:
    """Algorithm 1 (cutting plane over (11)/(17)) with Algorithm 2 (CCCP on (17) via (20)).

    ``w0, b0`` is the initial iterate (Algorithm 2's ``w^(0)``). The objective is
    ``1/2 sum_p ||(w_p, b_p)||^2 + C xi`` (the paper's (11) with ``C = 1 / beta``).

    ``start_labels``: Algorithm 1 first runs with these labels held fixed (the same cutting
    planes, linearized at the given labels instead of the argmax: the supervised SVM of the
    starting partition), then goes on with the argmax labels from that iterate and working set.
    Without it the first QP (20) has one constraint, whose solution weighs each class by its
    number of points: with many clusters that first step moves most labels away from a good
    start, and small clusters can vanish.
    """
    options = _CCCPOptions(C, score_balance, epsilon, cccp_tol, max_cccp_iter)
    run = _CuttingPlaneRun(data, w0, b0, options, start_labels, on_iteration)
    held = None
    if start_labels is not None:
        run.cutting_plane(lambda F: start_labels, max_iter)
        held = run.result()
    # The argmax labels as the "clamp": the same linearization as reading them off F.
    run.cutting_plane(labels_from_scores, max(max_iter - run.n_iter, 1))
    final = run.result()
    final.held = held
    return final


def _eliminated_clusters(labels: np.ndarray, n_clusters: int,
                         first_rows: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """Clusters holding fewer than a tenth of an even share ``n / k`` (at least one point):
    what class elimination leaves behind (an emptied class keeps a stray point or two).

    With ``first_rows`` (the first occurrence of each distinct row,
    :func:`algorithms.kernels.distinct_rows`, asked for only when some cluster is small, since
    finding them costs a pass over the rows) a cluster must also be that small in distinct rows
    (a tenth of ``n_distinct / k``): otherwise one point repeated many times beside a few others
    makes every partition "eliminate" the cluster of the few, and the fallback to the starting
    partition's classifier never applies. A cluster of copies alone is large in points."""
    small = _small_clusters(labels, n_clusters)
    if first_rows is None or small.size == 0:
        return small
    return np.intersect1d(small, _small_clusters(labels[first_rows()], n_clusters))


@dataclass
class _HeldFit:
    """A run's held-labels phase (the supervised SVM of its starting partition), its argmax
    labels and the clusters those leave (nearly) empty."""

    fit: CuttingPlaneResult
    labels: np.ndarray
    eliminated: np.ndarray

    @classmethod
    def of(cls, fit: CuttingPlaneResult, data: _Data, n_clusters: int,
           first_rows: Callable[[], np.ndarray]) -> _HeldFit:
        labels = labels_from_scores(data.scores(fit.w, fit.b))
        return cls(fit, labels, _eliminated_clusters(labels, n_clusters, first_rows))

    @property
    def key(self) -> tuple[int, float]:
        """Fewer emptied clusters first, then the lower objective (11)."""
        return self.eliminated.size, float(self.fit.objective)


def _small_clusters(labels: np.ndarray, n_clusters: int) -> np.ndarray:
    sizes = np.bincount(labels, minlength=n_clusters)
    return np.flatnonzero(sizes < max(1.0, 0.1 * labels.size / n_clusters))


# From this many Nystrom coordinates (points x landmarks) on, they are kept as float32: half the
# memory, and the passes over them (a score per point after each QP, a sum per new constraint)
# take about half the time. Sums over points are still accumulated in float64 (row_products).
FLOAT32_MIN_COORDINATES = 30_000_000


def coordinates_dtype(n_samples: int, n_landmarks: int) -> type:
    """float32 for the Nystrom coordinates of large data, float64 otherwise."""
    return np.float32 if n_samples * n_landmarks >= FLOAT32_MIN_COORDINATES else np.float64


def class_sums(X: np.ndarray | sp.csr_matrix, labels: np.ndarray, n_classes: int
               ) -> np.ndarray:
    """Sum of each class's rows (dense ``n_classes x s``), by one sparse indicator product (CSR
    stays CSR)."""
    indicator = sp.csr_matrix(
        (np.ones(labels.size), (labels, np.arange(labels.size))), shape=(n_classes, labels.size)
    )
    return row_products(indicator, X)


# Rows of float32 coordinates multiplied at a time by row_products: each block's float32 product
# sums that many rows, and the blocks are summed in float64 (a float32 sum of a million rows
# would keep about four digits).
_FLOAT32_BLOCK_ROWS = 16_384


def row_products(weights, X: np.ndarray | sp.csr_matrix,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """``weights @ X[rows]`` as a dense float64 array (``weights``: dense or CSR over the rows
    taken). On float32 ``X`` a float32 product per block of rows, the blocks summed in float64:
    the float32 rows are read as they are (converting them would cost more than the product)."""
    X_rows = X if rows is None else X[rows]
    if sp.issparse(X_rows) or X_rows.dtype == np.float64:
        product = weights @ X_rows
        return product.toarray() if sp.issparse(product) else np.asarray(product)
    out = np.zeros((weights.shape[0], X_rows.shape[1]))
    for start in range(0, X_rows.shape[0], _FLOAT32_BLOCK_ROWS):
        stop = start + _FLOAT32_BLOCK_ROWS
        part = weights[:, start:stop].astype(np.float32) @ X_rows[start:stop]
        out += part.toarray() if sp.issparse(part) else part
    return out


def centre_in_place(X: np.ndarray) -> np.ndarray:
    """Subtract the column means (computed in float64) from float32 ``X`` in place and return
    them: products of centred rows with a weight vector lose no digits to a large mean."""
    mean = X.mean(axis=0, dtype=np.float64)
    for start in range(0, X.shape[0], _FLOAT32_BLOCK_ROWS):
        X[start:start + _FLOAT32_BLOCK_ROWS] -= mean.astype(X.dtype)
    return mean


def cluster_means(X: np.ndarray | sp.csr_matrix, labels: np.ndarray,
                  n_clusters: int) -> np.ndarray:
    """Mean of each cluster's rows (dense)."""
    sums = class_sums(X, labels, n_clusters)
    return sums / np.maximum(np.bincount(labels, minlength=n_clusters), 1)[:, None]


def initial_weights(
    data: _Data, centroids: np.ndarray, binary: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2's ``w^(0)`` from k-means centroids: the linear scores whose argmax is the
    nearest centroid, ``f_p(x') = c'_p.x' - ||c'_p||^2 / 2``, scaled so that the median margin
    ``f_p* - f_r*`` is 1 (about half the points then enter the first constraint (14)).
    """
    c = (centroids - data.mean[None, :]) / data.radius
    w, b = c, -0.5 * np.einsum("ij,ij->i", c, c)
    if binary:
        w, b = w[1:] - w[:1], b[1:] - b[:1]
        margin = np.abs(data.scores(w, b)[:, 0])
    else:
        margin = _best_and_rival(data.scores(w, b))[2]
    median = float(np.median(margin))
    scale = 1.0 / median if median > 0 else 1.0
    return w * scale, b * scale


def _gamma(X, params: CPM3CParams, rng: np.random.RandomState) -> float:
    """The RBF width of ``params.gamma`` on ``X``: the shared rules of
    :func:`algorithms.kernels.resolve_gamma`, and ``"wide_local_scaling"``, the local-scaling
    ``sigma`` times ``WIDE_LOCAL_SCALING_MULTIPLE``."""
    wide = params.gamma == WIDE_LOCAL_SCALING
    gamma = resolve_gamma(X, LOCAL_SCALING if wide else params.gamma, params.width_factor,
                          width_reference=params.width_reference, random_state=rng)
    return gamma / WIDE_LOCAL_SCALING_MULTIPLE**2 if wide else gamma


class CPM3C(MMCEstimatorMixin, ClusterMixin, BaseEstimator):
    """Cutting-plane multiclass maximum margin clustering (CPM3C).

    Parameters
    ----------
    n_clusters : int or "auto", default=2
        Number of clusters ``k``, >= 2; 2 uses the binary form (one ``w`` and a bias), more the
        Crammer-Singer form (one ``w_p`` and ``b_p`` per cluster).
        ``"auto"``: the k in ``2..max_clusters`` of largest prediction strength
        (:func:`algorithms.selection.n_clusters.choose_n_clusters`), read ``n_clusters_``.
    max_clusters : int, default=50
        Largest k that ``n_clusters="auto"`` considers. Data with more clusters than this gets a
        coarser k (often 2): raise it when more clusters are possible.
    kernel : {"rbf", "linear"}, default="rbf"
        "rbf" runs the linear algorithm on ``n_landmarks`` Nystrom coordinates of
        ``exp(-gamma ||x - x'||^2)``, the paper's route to nonlinear kernels (section 2.1);
        "linear" is the setting of the paper's experiments.
    gamma : float or {"wide_local_scaling", "local_scaling", "paper", "scale"}, \
default="wide_local_scaling"
        RBF width. "wide_local_scaling": the local width of
        :func:`algorithms.kernels.local_scaling_gamma` with ``sigma`` times
        ``WIDE_LOCAL_SCALING_MULTIPLE`` (2); "local_scaling": that width itself; "paper":
        ``1 / (width_factor * D)^2``; "scale": scikit-learn's ``1 / (n_features * X.var())``.

        .. versionchanged:: 0.2 ``"wide_local_scaling"`` replaces ``"auto"``.
    width_factor : float, default=1.0
        Multiplier of ``D`` for ``gamma="paper"``, in (0, 100]. The paper's grid (section 4.2)
        is 0.1 to 1 with ``width_reference="max_distance"``.
    init : {"spectral", "k-means"}, default="spectral"
        Start of the first run: the class means of the kNN graph's spectral partition
        (:func:`algorithms.selection.candidates.spectral_partition`); later runs, and all runs with
        "k-means" (the paper's start), start from k-means centroids. With ``portfolio=True``
        the first run starts from the portfolio's best candidate instead (the spectral
        partition is one of them).
    n_landmarks : int, default=300
        Nystrom landmarks, in [10, 5000]; at least ``n`` reproduces the kernel exactly.
    width_reference : {"diameter", "max_distance"}, default="diameter"
        ``D`` for ``gamma="paper"``: the bounding-box diagonal or the largest pairwise distance,
        the paper's ``sigma_0`` (over a random sample of 2,000 points above that size).
    kpca_components : int or None, default=None
        Keep the top principal components of the kernel coordinates (kernel PCA, section 2.1),
        dropping trailing components that are mostly noise. None keeps all.
    C : float, default=100
        Weight of the slack ``xi`` against ``1/2 sum_p ||(w_p, b_p)||^2``, the paper's
        ``1 / beta`` in (11). Data are centered and scaled to unit mean squared norm, so ``C``
        does not depend on the units of ``X``. With ``k > 2`` a large ``C`` lets a cluster vanish.
    score_balance : float, default=0.03
        ``l / n`` in (16), >= 0: the largest difference between two clusters' mean scores.
        0 forces equal mean scores; too loose a balance lets one cluster take every point.
    cutting_plane_tol : float, default=0.01
        Cutting-plane precision, the paper's ``epsilon``: the iterations stop when no constraint
        is violated by more than this; the paper finds 0.01 enough (Fig. 2).

        .. versionchanged:: 0.2 Replaces ``epsilon``.
    cccp_tol : float, default=0.01
        CCCP stops when the objective improves by less than this fraction (the paper's value).
    max_cutting_plane_iter : int, default=200
        Most cutting-plane iterations (one most violated constraint added each).

        .. versionchanged:: 0.2 Replaces ``max_iter``.
    max_cccp_iter : int, default=30
        CCCP steps per cutting-plane iteration.
    n_init : int, default=10
        k-means runs in the one pool the starting partitions come from.
    n_restarts : int, default=1
        Distinct k-means partitions of the pool (lowest inertia first) to run from, besides the
        spectral partition. The run of lowest objective (11) is kept, but one that ends with an
        empty cluster only if every run does: for ``k > 2`` the balance (16) cannot stop a
        cluster from never being the argmax. Lower objectives are not always better clusters.
    supervised_start : bool, default=True
        Each run first solves Algorithm 1 with its starting labels held fixed (the supervised
        Crammer-Singer SVM of that partition), then frees the labels. The paper's one-constraint
        first QP weighs each class by its size and moves most labels away from the start. If
        every run then empties a cluster, the held phase's classifier is kept instead when it
        empties fewer. ``PAPER_SETTING`` turns it off.
    normalize : {"none", "l2"}, default="none"
        Row preprocessing before the kernel map: "l2" scales every point to unit norm.
    portfolio : bool, default=True
        Keep the best, by the margin, of this partition and the portfolio's candidates
        (:mod:`algorithms.selection.portfolio`; ``candidate_``, ``candidate_scores_``);
        False keeps the method's own, as in its paper.

    random_state : int or None, default=None
        Seeds the k-means runs, the Nystrom landmarks and the sampled ``sigma_0``.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point, ``0..n_clusters-1``.
    coef_ : ndarray of shape (n_rows, n_features_model)
        Weights in the input (or Nystrom) coordinates; one row in the binary form.
    intercept_ : ndarray of shape (n_rows,)
        Biases ``b_p``.
    objective_, objective_history_ : float, list of float
        ``1/2 sum_p ||(w_p, b_p)||^2 + C xi`` at the end and after each cutting-plane iteration.
    n_iter_, n_cccp_iter_, n_constraints_ : int
        Cutting-plane iterations, QP (20) solves, and the size of the final working set.
    warnings_ : list of str
        Non-empty when every run left a cluster (nearly) empty; also a ``UserWarning``.
    gamma_ : float
        The RBF width used (0 for the linear kernel).
    nystrom_, kpca_ : NystromMap or None, PrincipalComponents or None
        The feature map of ``kernel="rbf"`` and the kept kernel principal directions.

    References
    ----------
    B. Zhao, F. Wang, C. Zhang. Efficient Multiclass Maximum Margin Clustering. ICML 2008.
    Problem (2) and its one-slack form (11) (Theorems 1-2); most violated constraint (14)
    (Theorem 3); class balance (16); working-set problem (17); CCCP linearization (18)-(19) and
    QP (20); Algorithms 1-2; O(s n k) per iteration (Theorem 5).

    See Also
    --------
    algorithms.itersvr.IterSVR : binary MMC by iterative SVR.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=90, centers=3, random_state=0)
    >>> CPM3C(n_clusters=3, random_state=0).fit(X).labels_.shape
    (90,)
    """

    params_model = CPM3CParams
    portfolio_name = "cpm3c"
    _result_attributes = (
        *MMCEstimatorMixin._result_attributes, "n_cccp_iter_", "n_constraints_",
    )

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int = 50,
        kernel: str = "rbf",
        gamma: float | str = "wide_local_scaling",
        width_factor: float = 1.0,
        init: str = "spectral",
        n_landmarks: int = 300,
        width_reference: str = "diameter",
        kpca_components: int | None = None,
        C: float = 100.0,
        score_balance: float = 0.03,
        cutting_plane_tol: float = 0.01,
        cccp_tol: float = 0.01,
        max_cutting_plane_iter: int = 200,
        max_cccp_iter: int = 30,
        n_init: int = 10,
        supervised_start: bool = True,
        n_restarts: int = 1,
        normalize: str = "none",
        portfolio: bool = True,
        random_state: int | None = None,
        n_components: int | str = DEPRECATED,
        class_balance: float | str = DEPRECATED,
        epsilon: float | str = DEPRECATED,
        max_iter: int | str = DEPRECATED,
    ):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.width_factor = width_factor
        self.init = init
        self.n_landmarks = n_landmarks
        self.width_reference = width_reference
        self.kpca_components = kpca_components
        self.C = C
        self.score_balance = score_balance
        self.cutting_plane_tol = cutting_plane_tol
        self.cccp_tol = cccp_tol
        self.max_cutting_plane_iter = max_cutting_plane_iter
        self.max_cccp_iter = max_cccp_iter
        self.n_init = n_init
        self.supervised_start = supervised_start
        self.n_restarts = n_restarts
        self.normalize = normalize
        self.portfolio = portfolio
        self.random_state = random_state
        self.n_components = n_components
        self.class_balance = class_balance
        self.epsilon = epsilon
        self.max_iter = max_iter

    # -- fitting ----------------------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR is kept sparse through the cutting planes
        return tags

    def _starts(self, X, first: Mapping[str, np.ndarray], rng
                ) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Starting partitions, none twice, each with its origin and centres: the partitions of
        ``first`` by origin (the portfolio's best candidate and the spectral partition, where
        they are used), then the ``n_restarts`` best distinct partitions of one pool of
        ``n_init`` k-means runs (:func:`algorithms.selection.candidates.kmeans_partitions`)."""
        starts, seen = [], set()
        kmeans = kmeans_partitions(X, self.n_clusters_, n_init=self._params.n_init,
                                   n_partitions=self._params.n_restarts,
                                   random_state=rng.randint(2**31 - 1))
        pool = [(origin, labels, None) for origin, labels in first.items()]
        pool += [("a k-means", labels, centres) for labels, centres in kmeans]
        for origin, labels, centres in pool:
            if partition_key(labels) not in seen:
                seen.add(partition_key(labels))
                if centres is None:
                    centres = cluster_means(X, labels, self.n_clusters_)
                starts.append((origin, labels, centres))
        return starts

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Cluster ``X`` (dense or CSR); ``y`` is ignored."""
        self._params = self._validated_params()
        X = as_float_matrix(X, accept_sparse=True)
        X = validate_data(self, X, reset=True, accept_sparse="csr")
        self._resolve_n_clusters(X, progress)
        given = X  # X is normalized and mapped below; copies are copies in the input
        first_rows = cache(lambda: distinct_rows(given)[0])
        rng = check_random_state(self._params.random_state)
        if self._params.normalize == "l2":
            X = normalize_rows(X)
        # The portfolio's best candidate is the first start, which the cutting planes refine;
        # it takes the spectral start's place (the spectral partition is a candidate).
        first_starts: dict[str, np.ndarray] = {}
        best_candidate = self._portfolio_start(given, check_random_state(self._params.random_state),
                                               progress, 0, "is the first start")
        if best_candidate is not None:
            first_starts["the portfolio's best"] = best_candidate
        elif self._params.init == "spectral":
            report(progress, 0, None, "spectral partition of the kNN graph")
            first_starts["the spectral"] = spectral_partition(
                X, self.n_clusters_, random_state=rng,
                on_stage=lambda message: report(progress, 0, None,
                                                f"spectral partition: {message}"))
        self.nystrom_ = None
        self.kpca_ = None
        shift = None  # subtracted from the coordinates fitted on (float32 ones)
        self.gamma_ = 0.0
        if self._params.kernel == "rbf":
            self.gamma_ = _gamma(X, self._params, rng)
            n_landmarks = self._params.n_landmarks
            report(progress, 0, None, f"{n_landmarks} Nystrom coordinates of the rbf kernel")
            self.nystrom_, X = NystromMap.fit_transform(
                X, n_components=n_landmarks, kernel="rbf", gamma=self.gamma_,
                random_state=rng, dtype=coordinates_dtype(X.shape[0], n_landmarks),
                on_rows=lambda done, total: report(
                    progress, 0, None, f"Nystrom coordinates of {done:,} of {total:,} points"))
            if X.dtype == np.float32:  # fitted on centred coordinates; the shift folded back
                shift = centre_in_place(X)
            if self._params.kpca_components is not None:
                self.kpca_ = PrincipalComponents.fit(X, self._params.kpca_components)
                X = self.kpca_.transform(X)
                if shift is not None:
                    self.kpca_.mean = self.kpca_.mean + shift
                    shift = None
        data = _Data.of(X)
        binary = self.n_clusters_ == 2
        step = 0
        result, labels, best_key, eliminated = None, None, None, None
        result_held: _HeldFit | None = None  # the held phase of the run kept, if it emptied any
        fewest_emptied: _HeldFit | None = None  # the held phase that kept the most clusters
        report(progress, 0, None, f"{self._params.n_init} k-means runs for starting partitions")
        starts = self._starts(X, first_starts, rng)
        n_runs = len(starts)
        for restart, (origin, start_labels, centroids) in enumerate(starts):
            report(progress, step, None, f"run {restart + 1} of {n_runs}: from {origin} "
                   "partition")
            w0, b0 = initial_weights(data, centroids, binary)

            def on_iteration(n_iter: int, objective: float, violation: float, _first=step):
                report(progress, _first + n_iter, objective,
                       f"cutting-plane iteration {n_iter}: most violated constraint exceeds the "
                       f"working set by {violation:.4g}")

            run = self._solve(data, w0, b0, start_labels, on_iteration)
            step += run.n_iter
            run_labels = labels_from_scores(data.scores(run.w, run.b))
            # Lowest objective (11) wins, but a run that eliminated a class only if all did: the
            # score-sum balance (16) cannot stop class elimination (see the class docstring).
            run_eliminated = _eliminated_clusters(run_labels, self.n_clusters_, first_rows)
            key = (bool(run_eliminated.size), float(run.objective))
            run_held = None
            if run_eliminated.size and run.held is not None:
                run_held = _HeldFit.of(run.held, data, self.n_clusters_, first_rows)
                if fewest_emptied is None or run_held.key < fewest_emptied.key:
                    fewest_emptied = run_held
            # A later run must improve by more than rounding (sparse and dense agree then).
            if best_key is None or key[0] < best_key[0] or (
                key[0] == best_key[0] and key[1] < best_key[1] * (1 - 1e-6)
            ):
                result, labels, best_key, eliminated = run, run_labels, key, run_eliminated
                result_held = run_held
        self.warnings_ = []
        if eliminated.size and result_held is not None:
            # Every run lost a class once its labels were free. The supervised SVM of the best
            # run's starting partition (its held-labels phase) is kept when it keeps every
            # cluster; otherwise the held phase of any run that empties fewer clusters than the
            # free labels do, since runs differ in which clusters their held phases keep.
            held, whose = result_held, "the best"
            if held.eliminated.size and fewest_emptied.key < held.key:
                held, whose = fewest_emptied, "the fewest-emptying"
            if held.eliminated.size < eliminated.size:
                self.warnings_.append(
                    f"class elimination: every one of the {n_runs} runs emptied a cluster once "
                    f"its labels were free; kept the max-margin classifier of {whose} run's "
                    "starting partition")
                result, labels, eliminated = held.fit, held.labels, held.eliminated
        if eliminated.size:
            # Every run lost a class: say so in the result instead of handing back fewer
            # clusters than asked for without a word.
            sizes = np.bincount(labels, minlength=self.n_clusters_)
            message = (
                f"class elimination: {eliminated.size} of {self.n_clusters_} clusters are empty "
                f"or nearly so in all {n_runs} runs (cluster sizes {sizes.tolist()}); "
                "the balance (16) bounds score sums, not cluster sizes. Try more n_restarts, "
                "another C, or itersvr (recursive bisection) for this data"
            )
            self.warnings_.append(message)
            warnings.warn(message, UserWarning, stacklevel=2)
        # Back to input coordinates: f_p(x) = w_p.(x - mean)/radius + b_p.
        self.coef_ = result.w / data.radius
        self.intercept_ = result.b - self.coef_ @ data.mean
        if shift is not None:
            self.intercept_ -= self.coef_ @ shift
        self.labels_ = labels
        self.objective_ = float(result.objective)
        self.objective_history_ = [float(v) for v in result.history]
        self.n_iter_ = int(result.n_iter)
        self.n_cccp_iter_ = int(result.n_cccp)
        self.n_constraints_ = int(result.n_constraints)
        self._keep_portfolio_partition(given, progress, step + 1)
        report(progress, step + 1, self.objective_, "done")
        return self

    def _solve(self, data: _Data, w0, b0, start_labels, on_iteration) -> CuttingPlaneResult:
        return solve_cpm3c(
            data, w0, b0, C=self._params.C, score_balance=self._params.score_balance,
            epsilon=self._params.cutting_plane_tol,
            cccp_tol=self._params.cccp_tol, max_iter=self._params.max_cutting_plane_iter,
            max_cccp_iter=self._params.max_cccp_iter,
            on_iteration=on_iteration,
            start_labels=start_labels if self._params.supervised_start else None,
        )

    # -- prediction -------------------------------------------------------------------------------
    def _scores(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = as_float_matrix(X, accept_sparse=True)
        X = validate_data(self, X, reset=False, accept_sparse="csr")
        if self._params.normalize == "l2":
            X = normalize_rows(X)
        if self.nystrom_ is not None:
            X = self.nystrom_.transform(X)
        if self.kpca_ is not None:
            X = self.kpca_.transform(X)
        return np.asarray(X @ self.coef_.T) + self.intercept_[None, :]

    def decision_function(self, X) -> np.ndarray:
        """The ``k`` scores ``f_p(x)``, shape (n, n_clusters); the predicted cluster is the argmax.

        For two clusters (binary form, ``f = w.x + b``) the scores are ``(-f/2, f/2)``, the
        Crammer-Singer pair with ``w_1 = -w_0`` that has the same labels and margins.
        """
        if self.partition_model_ is not None:
            return self._partition_predict(X)[1]
        return self._pair_form(self._scores(X))

    def _decision_form(self, values: np.ndarray) -> np.ndarray:
        return self._pair_form(values[:, None] if values.ndim == 1 else values)

    @staticmethod
    def _pair_form(F: np.ndarray) -> np.ndarray:
        return np.hstack([-F / 2, F / 2]) if F.shape[1] == 1 else F

    def predict(self, X) -> np.ndarray:
        """``argmax_p w_p.x + b_p`` (binary: ``w.x + b > 0``), the paper's rule (the portfolio
        partition's SVM where that was kept)."""
        return self.predict_with_decision(X)[0]

    def predict_with_decision(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(predict(X), decision_function(X))`` from one evaluation of the scores."""
        if self.partition_model_ is not None:
            return self._partition_predict(X)
        F = self._scores(X)
        return labels_from_scores(F), self._pair_form(F)

    # -- portable model ---------------------------------------------------------------------------
    def _export_state(self):
        state: dict[str, Any] = {
            "gamma_": self.gamma_, "objective_": self.objective_, "n_iter_": self.n_iter_,
            "n_cccp_iter_": self.n_cccp_iter_, "n_constraints_": self.n_constraints_,
            "objective_history_": self.objective_history_,
            "nystrom": None if self.nystrom_ is None else self.nystrom_.to_meta(),
        }
        arrays = {"coef_": self.coef_, "intercept_": self.intercept_, "labels_": self.labels_}
        if self.nystrom_ is not None:
            arrays.update(self.nystrom_.to_arrays())
        if self.kpca_ is not None:
            arrays.update(kpca_mean=self.kpca_.mean, kpca_components=self.kpca_.components)
        return state, arrays

    def _import_state(self, state, arrays):
        self.gamma_ = float(state["gamma_"])
        self.objective_ = float(state["objective_"])
        self.n_iter_ = int(state["n_iter_"])
        self.n_cccp_iter_ = int(state["n_cccp_iter_"])
        self.n_constraints_ = int(state["n_constraints_"])
        self.objective_history_ = [float(v) for v in state["objective_history_"]]
        self.coef_ = np.asarray(arrays["coef_"], dtype=np.float64)
        self.intercept_ = np.asarray(arrays["intercept_"], dtype=np.float64)
        self.labels_ = np.asarray(arrays["labels_"], dtype=np.int64)
        self.nystrom_ = (
            None if state["nystrom"] is None else NystromMap.from_export(state["nystrom"], arrays)
        )
        self.kpca_ = (
            PrincipalComponents(
                np.asarray(arrays["kpca_mean"], dtype=np.float64),
                np.asarray(arrays["kpca_components"], dtype=np.float64),
            )
            if "kpca_components" in arrays else None
        )
