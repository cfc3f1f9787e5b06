"""CPM3C's constraints (11): the data they read, the most violated one, their linearization.

Zhao, Wang and Zhang 2008, "Efficient Multiclass Maximum Margin Clustering" (ICML). A constraint
``c = (c_1..c_n)``, ``c_i in {0, e_1..e_k}``, of the one-slack problem (11) is held as the points
with ``c_i != 0`` and, for ``k > 2``, their class ``r_i`` (:class:`Constraint`). For the current
scores the most violated ``c`` is closed-form (14) (:func:`most_violated_constraint`); the CCCP
step linearizes the working set at the labels of the iterate, (18)-(20)
(:func:`linearized_constraints`), and the class balance (16) enters as rows on the biases
(:class:`BalanceRows`). The QPs that use them and Algorithms 1 and 2 are in
:mod:`algorithms.cpm3c_solver`.

One CCCP step costs ``O(|Omega| s n k)`` for ``s`` nonzeros per row: the constraint vectors are
``M X`` for a sparse ``(|Omega| k) x n`` matrix ``M`` with at most two entries per point, and the
scores are ``X W^T``. CSR input is never densified: the centering ``x - mean`` is folded into the
products (``(M X) - (M 1) mean^T``, :class:`ScaledData`), which is what makes the method linear in
``n`` (Theorems 5-7, Fig. 1). On dense data the working set's sums are kept between QPs
(:class:`ConstraintSums`), and float32 coordinates are summed in float64 (:func:`row_products`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

# ---------------------------------------------------------------------------------------------
# The data, centered and scaled implicitly (CSR stays CSR)
# ---------------------------------------------------------------------------------------------


@dataclass
class ScaledData:
    """``x'_i = (x_i - mean) / radius`` without forming it; ``radius^2 = mean ||x - mean||^2``."""

    X: np.ndarray | sp.csr_matrix
    mean: np.ndarray
    radius: float

    @classmethod
    def of(cls, X: np.ndarray | sp.csr_matrix) -> ScaledData:
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
class Constraint:
    """One ``c`` of (11): the points with ``c_i != 0`` and, for k > 2, the class ``r_i``."""

    index: np.ndarray
    rival: np.ndarray | None  # None in the binary form


def labels_from_scores(F: np.ndarray) -> np.ndarray:
    """``argmax_p f_p`` (Crammer-Singer) or ``f > 0`` (binary form, one column)."""
    if F.shape[1] == 1:
        return (F[:, 0] > 0).astype(np.int64)
    return np.argmax(F, axis=1).astype(np.int64)


def best_and_rival(F: np.ndarray, clamp: np.ndarray | None = None
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
                             ) -> tuple[Constraint, float]:
    """Theorem 3, eq. (14): ``c_i = e_{r*}`` where the margin ``f_p* - f_r* < 1``, else 0.

    Returns the constraint and its left-hand violation ``(1/n) sum_i max(0, 1 - margin_i)``,
    the largest slack any ``c`` can require at these scores. ``clamp``: labels held fixed (the
    margins of a supervised SVM on them) instead of the argmax.
    """
    n = F.shape[0]
    if F.shape[1] == 1:
        margin = _binary_margin(F, clamp)
        index = np.flatnonzero(margin < 1.0)
        return Constraint(index, None), float(np.sum(1.0 - margin[index])) / n
    _, rival, gap = best_and_rival(F, clamp)
    index = np.flatnonzero(gap < 1.0)
    return Constraint(index, rival[index]), float(np.sum(1.0 - gap[index])) / n


def _constraint_on_every_point(F: np.ndarray) -> Constraint:
    """The ``c`` of (11) with ``c_i != 0`` for all ``i`` (rival ``r*_i`` for k > 2)."""
    index = np.arange(F.shape[0])
    return Constraint(index, None if F.shape[1] == 1 else best_and_rival(F)[1])


def constraint_slacks(F: np.ndarray, constraints: list[Constraint],
                      clamp: np.ndarray | None = None,
                      sums: ConstraintSums | None = None,
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
    data: ScaledData, F: np.ndarray, constraints: list[Constraint], n_rows: int,
    clamp: np.ndarray | None = None, sums: ConstraintSums | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Constraint vectors of the QP (20) at the current iterate, all at once.

    Constraint ``c`` reads ``<G_c, (W, b)> >= d_c - xi`` with, for labels ``y`` of the iterate,
    ``G_c[p] = (1/n) sum_{c_i != 0} (1[y_i = p] - 1[r_i = p]) (x'_i, 1)`` and
    ``d_c = (1/n) #{i: c_i != 0, y_i != r_i}`` (binary form: ``G_c = (1/n) sum sign(f_i)(x'_i, 1)``,
    ``d_c = (1/n) #{c_i != 0}``). Returns ``(G, d)`` with ``G`` of shape
    ``(|Omega|, n_rows * (n_features + 1))``, the bias coordinates last in each row block.
    ``clamp``: the labels ``y`` held fixed instead of read off ``F``. ``sums``: the per-constraint
    arrays of the dense form (:class:`ConstraintSums`, :func:`keeps_sums`), kept by the caller
    between calls.
    """
    n = data.n
    n_constraints = len(constraints)
    if sums is not None or keeps_sums(data, n_rows):
        if sums is None:
            sums = ConstraintSums(data, n_rows)
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


# The binary form keeps its constraint sums from this many points on: below it one dense
# combination product per QP (linearized_constraints) costs about as much as the sums.
BINARY_SUMS_MIN_POINTS = 20_000


def keeps_sums(data: ScaledData, n_rows: int) -> bool:
    """Whether the working set's sums are kept between QPs (:class:`ConstraintSums`): dense
    data with k > 2, and the binary form on large dense data."""
    return data.dense and (n_rows > 1 or data.n >= BINARY_SUMS_MIN_POINTS)


# Above this share of the points changing class, the label sums are recomputed, not updated.
_LABEL_SUMS_REFRESH_SHARE = 0.25


class ConstraintSums:
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

    def __init__(self, data: ScaledData, n_rows: int):
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

    def update(self, constraints: list[Constraint], labels: np.ndarray) -> None:
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
    F: np.ndarray, constraints: list[Constraint], clamp: np.ndarray | None,
    sums: ConstraintSums,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`linearized_constraints` on dense data, from sums kept between calls.

    ``G_c[p] = (1/n) (sum_{c_i != 0, y_i = p} (x'_i, 1) - sum_{c_i != 0, r_i = p} (x'_i, 1))``
    for k > 2: a point with ``y_i = r_i`` adds and removes the same row, so the filter of ``d_c``
    is not needed in ``G_c``; the binary form's ``G_c`` is its positive sum less its negative.
    The sums are kept per constraint (:class:`ConstraintSums`), the label sums moved by the
    points that changed class: recomputing them every call would cost ``O(|Omega| n (s + 1))``
    per QP, which dominates a fit on large ``n``. The slacks (:func:`constraint_slacks`) are
    read off the same sums for the same reason.
    """
    sums.update(constraints, labels_from_scores(F) if clamp is None else clamp)
    return sums.linearized()


def first_constraint(F: np.ndarray, start_labels: np.ndarray | None) -> Constraint:
    """The working set's first ``c`` of (11): the most violated one (14) at the initial scores.

    Where every margin is already >= 1 (identical points, or a start at exactly margin 1) that
    ``c`` is empty and makes ``W = 0`` stationary, so the constraint on every point is taken."""
    first, _ = most_violated_constraint(F, start_labels)
    return first if first.index.size else _constraint_on_every_point(F)


# ---------------------------------------------------------------------------------------------
# float32 coordinates: products and centring in float64
# ---------------------------------------------------------------------------------------------


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
