"""Kernels, width heuristics and kernel-derived matrices shared by every algorithm.

Conventions follow scikit-learn: the RBF kernel is ``exp(-gamma * ||x - x'||^2)``. The seeds write
widths differently; the conversions are:

* iterSVR / SDP MMC: ``exp(-||x - x'||^2 / sigma^2)``  ->  ``gamma = 1 / sigma^2``
* GMMC (Gaussian with ``2 sigma^2``):                  ->  ``gamma = 1 / (2 sigma^2)``
* SVC (Ben-Hur et al.): ``exp(-q ||x - x'||^2)``         ->  ``gamma = q``
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances, linear_kernel, rbf_kernel
from sklearn.utils import check_random_state

KernelName = Literal["rbf", "linear"]
KERNELS: tuple[str, ...] = ("rbf", "linear")
GammaSpec = float | Literal["auto", "scale"]


def data_diameter(X: np.ndarray | sp.spmatrix) -> float:
    """The iterSVR seed's crude estimate of the largest pairwise distance (footnote 5).

    ``D = sqrt(sum_k (max_k - min_k)^2)``, the diagonal of the data's bounding box.
    """
    span = np.asarray(X.max(axis=0).todense() if sp.issparse(X) else X.max(axis=0)).ravel()
    low = np.asarray(X.min(axis=0).todense() if sp.issparse(X) else X.min(axis=0)).ravel()
    return float(np.sqrt(np.sum((span - low) ** 2)))


def largest_pairwise_distance(
    X: np.ndarray | sp.spmatrix, random_state=None, max_points: int = 2000
) -> float:
    """The largest distance between two data points (the CPM3C seed's ``sigma_0``, section 4.2).

    Exact for ``n <= max_points``; otherwise the largest distance within ``max_points`` points
    drawn at random (O(max_points^2 d) instead of O(n^2 d)).
    """
    if X.shape[0] > max_points:
        rng = check_random_state(random_state)
        X = X[np.sort(rng.choice(X.shape[0], size=max_points, replace=False))]
    return float(np.sqrt(max(float(squared_distances(X).max()), 0.0)))


WidthReference = Literal["diameter", "max_distance"]


def resolve_gamma(
    X: np.ndarray | sp.spmatrix,
    gamma: GammaSpec,
    width_factor: float = 1.0,
    *,
    width_reference: WidthReference = "diameter",
    random_state=None,
) -> float:
    """Turn a ``gamma`` parameter into the number used by the RBF kernel.

    * ``"auto"``: ``sigma = width_factor * D`` and ``gamma = 1 / sigma^2``, with ``D`` the
      iterSVR heuristic (section 4, :func:`data_diameter`) or, for
      ``width_reference="max_distance"``, :func:`largest_pairwise_distance` (``random_state``
      draws its sample on large data).
    * ``"scale"``: scikit-learn's ``1 / (n_features * X.var())``.
    * a positive number: used as is.
    """
    if isinstance(gamma, str):
        if gamma == "auto":
            if width_reference == "max_distance":
                diameter = largest_pairwise_distance(X, random_state)
            else:
                diameter = data_diameter(X)
            if diameter <= 0:
                raise ValueError("gamma='auto' needs points that are not all identical")
            return 1.0 / (width_factor * diameter) ** 2
        if gamma == "scale":
            variance = (X.multiply(X)).mean() - X.mean() ** 2 if sp.issparse(X) else X.var()
            if variance <= 0:
                raise ValueError("gamma='scale' needs points that are not all identical")
            return 1.0 / (X.shape[1] * float(variance))
        raise ValueError(f"unknown gamma {gamma!r}: use a positive number, 'auto' or 'scale'")
    gamma = float(gamma)
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be a positive number, got {gamma}")
    return gamma


def check_kernel_name(kernel: str) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}: use one of {', '.join(KERNELS)}")
    return kernel


def pairwise_kernel(
    X: np.ndarray | sp.spmatrix,
    Y: np.ndarray | sp.spmatrix | None = None,
    *,
    kernel: str = "rbf",
    gamma: float = 1.0,
) -> np.ndarray:
    """Dense kernel matrix between the rows of ``X`` and ``Y`` (``Y = X`` when omitted)."""
    check_kernel_name(kernel)
    K = linear_kernel(X, Y) if kernel == "linear" else rbf_kernel(X, Y, gamma=gamma)
    return np.asarray(K, dtype=np.float64)


def squared_distances(X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
    """Squared Euclidean distances, clipped at zero against round-off."""
    D = euclidean_distances(X, Y, squared=True)
    np.maximum(D, 0.0, out=D)
    return D


def center_kernel(K: np.ndarray) -> np.ndarray:
    """``H K H`` with ``H = I - ee^T / n``: the feature-space centering that lets the bias drop."""
    row_means = K.mean(axis=0)
    return K - row_means[None, :] - row_means[:, None] + row_means.mean()


def normalized_laplacian(K: np.ndarray) -> np.ndarray:
    """``I - D^{-1/2} K D^{-1/2}`` with ``D = diag(K e)``: the normalized graph Laplacian."""
    degree = K.sum(axis=1)
    if np.any(degree <= 0):
        raise ValueError("the affinity matrix has a row with no positive weight")
    inv_sqrt = 1.0 / np.sqrt(degree)
    L = -K * inv_sqrt[:, None] * inv_sqrt[None, :]
    L[np.diag_indices_from(L)] += 1.0
    return (L + L.T) / 2.0


@dataclass
class NystromMap:
    """Explicit feature map ``phi(x) = K(x, landmarks) @ projection`` approximating a kernel.

    Portable (plain arrays) so that models using it can be exported without pickle; it replaces a
    dense n x n kernel matrix with n x m features for the large-n paths of the algorithms.
    """

    landmarks: np.ndarray
    projection: np.ndarray
    kernel: str
    gamma: float

    @classmethod
    def fit(
        cls,
        X: np.ndarray | sp.spmatrix,
        *,
        n_components: int,
        kernel: str = "rbf",
        gamma: float = 1.0,
        random_state: int | np.random.RandomState | None = None,
    ) -> NystromMap:
        rng = check_random_state(random_state)
        n = X.shape[0]
        m = min(n_components, n)
        index = np.sort(rng.choice(n, size=m, replace=False))
        landmarks = X[index]
        if sp.issparse(landmarks):
            landmarks = landmarks.toarray()
        W = pairwise_kernel(landmarks, kernel=kernel, gamma=gamma)
        eigvals, eigvecs = np.linalg.eigh(W)
        # Drop directions with no energy: they would blow up in W^{-1/2}.
        keep = eigvals > max(eigvals.max(), 0.0) * 1e-10
        projection = eigvecs[:, keep] / np.sqrt(eigvals[keep])[None, :]
        return cls(np.asarray(landmarks, dtype=np.float64), projection, kernel, float(gamma))

    def transform(self, X: np.ndarray | sp.spmatrix) -> np.ndarray:
        K = pairwise_kernel(X, self.landmarks, kernel=self.kernel, gamma=self.gamma)
        return K @ self.projection

    def to_arrays(self, prefix: str = "nystrom_") -> dict[str, np.ndarray]:
        return {f"{prefix}landmarks": self.landmarks, f"{prefix}projection": self.projection}

    def to_meta(self) -> dict:
        return {"kernel": self.kernel, "gamma": self.gamma}

    @classmethod
    def from_export(cls, meta: dict, arrays: dict[str, np.ndarray], prefix: str = "nystrom_"):
        return cls(
            arrays[f"{prefix}landmarks"],
            arrays[f"{prefix}projection"],
            meta["kernel"],
            meta["gamma"],
        )
