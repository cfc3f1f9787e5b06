"""Principal components: the leading directions of a matrix, with a fixed sign convention."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def principal_directions(X: np.ndarray, n_components: int) -> np.ndarray:
    """The leading ``n_components`` right singular vectors of ``X`` (centre ``X`` first for the
    principal directions), as rows of unit length.

    An SVD fixes each singular vector only up to its sign; the sign is chosen so that the entry
    of largest magnitude of each row is positive, which gives the same projection on every fit
    of the same data."""
    _, _, Vt = np.linalg.svd(X, full_matrices=False)
    directions = Vt[:n_components]
    signs = np.sign(directions[np.arange(directions.shape[0]),
                               np.argmax(np.abs(directions), axis=1)])
    return directions * signs[:, None]


@dataclass
class PrincipalComponents:
    """The leading principal directions of coordinates ``Z`` and their mean:
    ``transform(Z) = (Z - mean) @ components.T``.

    Applied to the Nystrom coordinates of a kernel this is kernel PCA truncated to the leading
    components (Zhao, Wang and Zhang 2008, section 2.1): with every point a landmark the Nystrom
    coordinates reproduce the kernel matrix exactly, and their principal components are the
    kernel-PCA coordinates."""

    mean: np.ndarray
    components: np.ndarray  # (n_components, n_coordinates)

    @classmethod
    def fit(cls, Z: np.ndarray, n_components: int) -> PrincipalComponents:
        """The mean of ``Z`` and the leading ``n_components`` directions of ``Z - mean``."""
        mean = Z.mean(axis=0)
        return cls(mean, principal_directions(Z - mean[None, :], n_components))

    def transform(self, Z: np.ndarray) -> np.ndarray:
        """``Z`` in the coordinates of the components."""
        return (Z - self.mean[None, :]) @ self.components.T
