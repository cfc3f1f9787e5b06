"""The out-of-sample model: SVMs trained on the labels a clustering found (Zhang, Tsang and
Kwok 2007, section 3.2.1; Xu 2007, section 3.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.svm import SVC

from algorithms.kernels import KernelColumns, pairwise_kernel

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
        columns = KernelColumns(self.support_vectors, self.kernel, self.gamma,
                                min(rows, X.shape[0]))
        for start in range(0, X.shape[0], rows):
            block = columns.block(X[start:start + rows])
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
