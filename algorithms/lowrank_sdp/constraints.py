"""Linear constraints ``<sym(a_k c_k^T), Z> (=|<=) b_k`` of the low-rank SDP solver, evaluated at
``Z = V V^T`` without forming ``Z``."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class BilinearConstraints:
    """Constraints ``a_k^T Z c_k = b_k`` (or ``<= b_k`` where ``inequality[k]``).

    ``A`` holds the vectors ``a_k`` as sparse columns (``N x m``); ``C`` likewise, or is one dense
    vector ``c`` shared by every constraint (row sums ``Z e``: no ``N x N`` block of ones).
    """

    A: sp.csc_matrix
    C: sp.csc_matrix | np.ndarray
    b: np.ndarray
    inequality: np.ndarray

    @property
    def m(self) -> int:
        return int(self.b.size)

    @property
    def _shared(self) -> bool:
        return not sp.issparse(self.C)

    # Transposed once: the solver evaluates the constraints thousands of times.
    @functools.cached_property
    def _a_transposed(self) -> sp.csr_matrix:
        return self.A.T.tocsr()

    @functools.cached_property
    def _c_transposed(self) -> sp.csr_matrix | None:
        return None if self._shared else self.C.T.tocsr()

    def values(self, V: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """``A(V V^T)`` and the projections it was computed from (reused by the adjoint)."""
        AtV = np.asarray(self._a_transposed @ V)
        CtV = (self.C @ V)[None, :] if self._shared else np.asarray(self._c_transposed @ V)
        return (AtV * CtV).sum(axis=1), (AtV, CtV)

    def adjoint_times(self, y: np.ndarray, cache) -> np.ndarray:
        """``(sum_k y_k A_k) V`` from the projections of :meth:`values`."""
        AtV, CtV = cache
        first = self.A @ (y[:, None] * CtV)
        if self._shared:
            second = self.C[:, None] * (y @ AtV)[None, :]
        else:
            second = self.C @ (y[:, None] * AtV)
        return 0.5 * np.asarray(first + second)

    def directions(self, V: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``A_k V`` for the constraints ``index``, stacked as ``N x r x len(index)``."""
        a = self.A[:, index].toarray()
        c = (np.broadcast_to(self.C[:, None], a.shape) if self._shared
             else self.C[:, index].toarray())
        return 0.5 * (np.einsum("nk,kr->nrk", a, c.T @ V) + np.einsum("nk,kr->nrk", c, a.T @ V))

    def adjoint_matrix(self, y: np.ndarray) -> np.ndarray:
        """Dense ``sum_k y_k A_k`` (for the certificate)."""
        if self._shared:
            half = np.outer(np.asarray(self.A @ y).ravel(), self.C)
        else:
            half = (self.A @ sp.diags(y) @ self.C.T).toarray()
        return 0.5 * (half + half.T)


class Constraints:
    """Several :class:`BilinearConstraints` blocks acting as one linear map ``A``."""

    def __init__(self, *blocks: BilinearConstraints):
        self.blocks = [block for block in blocks if block.m]
        self.b = np.concatenate([block.b for block in self.blocks]) if self.blocks else np.zeros(0)
        self.inequality = (np.concatenate([block.inequality for block in self.blocks])
                           if self.blocks else np.zeros(0, dtype=bool))
        self._splits = np.cumsum([block.m for block in self.blocks])[:-1]

    @property
    def m(self) -> int:
        return int(self.b.size)

    def values(self, V: np.ndarray):
        parts = [block.values(V) for block in self.blocks]
        values = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0)
        return values, [part[1] for part in parts]

    def adjoint_times(self, y: np.ndarray, caches) -> np.ndarray:
        if not self.blocks:
            return 0.0
        out = 0.0
        for block, part, cache in zip(self.blocks, np.split(y, self._splits), caches,
                                      strict=True):
            out = out + block.adjoint_times(part, cache)
        return out

    def directions(self, V: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``A_k V`` for the constraints ``index`` (over all blocks): ``N x r x len(index)``."""
        starts = np.concatenate([[0], self._splits])
        parts = []
        for block, start in zip(self.blocks, starts, strict=True):
            local = index[(index >= start) & (index < start + block.m)] - start
            if local.size:
                parts.append(block.directions(V, local))
        return np.concatenate(parts, axis=2)

    def dense(self, N: int) -> tuple[np.ndarray, np.ndarray]:
        """The vectors ``a_k`` and ``c_k`` as rows of two dense ``m x N`` arrays."""
        A, C = np.zeros((self.m, N)), np.zeros((self.m, N))
        start = 0
        for block in self.blocks:
            rows = slice(start, start + block.m)
            A[rows] = block.A.T.toarray()
            C[rows] = block.C[None, :] if block._shared else block.C.T.toarray()
            start += block.m
        return A, C

    def adjoint_matrix(self, y: np.ndarray, N: int) -> np.ndarray:
        out = np.zeros((N, N))
        if not self.blocks:
            return out
        for block, part in zip(self.blocks, np.split(y, self._splits), strict=True):
            out += block.adjoint_matrix(part)
        return out


def _columns(N: int, vectors) -> sp.csc_matrix:
    """Sparse ``N x m`` from an index array (unit vectors) or a dense/sparse ``N x m`` array."""
    if sp.issparse(vectors):
        return sp.csc_matrix(vectors)
    vectors = np.asarray(vectors)
    if vectors.ndim == 1:  # indices of unit vectors
        m = vectors.size
        return sp.csc_matrix((np.ones(m), (vectors, np.arange(m))), shape=(N, m))
    return sp.csc_matrix(vectors)


def bilinear(N: int, a, c, b, *, inequality: bool = False,
             shared_c: np.ndarray | None = None) -> BilinearConstraints:
    """``a_k^T Z c_k (=|<=) b_k``; ``a``/``c`` index arrays (unit vectors) or ``N x m`` columns;
    ``shared_c`` (dense ``N``) instead of ``c`` when every constraint has the same ``c``."""
    A = _columns(N, a)
    C = np.asarray(shared_c, dtype=np.float64) if shared_c is not None else _columns(N, c)
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), (A.shape[1],)).copy()
    return BilinearConstraints(A, C, b, np.full(b.size, inequality))


def map_constraints(constraints: Constraints, T: sp.csr_matrix) -> Constraints:
    """The same constraints on ``W`` with ``Z = T W T^T``: ``a^T Z c = (T^T a)^T W (T^T c)``."""
    Tt = sp.csr_matrix(T).T.tocsr()
    blocks = []
    for block in constraints.blocks:
        C = Tt @ block.C if block._shared else (Tt @ block.C).tocsc()
        blocks.append(BilinearConstraints((Tt @ block.A).tocsc(), np.asarray(C).ravel()
                                          if block._shared else C, block.b, block.inequality))
    return Constraints(*blocks)
