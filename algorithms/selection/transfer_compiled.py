"""The compiled transfer classifier of ``n_clusters="auto"`` (numba): a one-vs-one C-SVM on a
precomputed kernel, fitted and applied in one call.

It is the classifier of scikit-learn's ``SVC(kernel="precomputed")`` (libsvm's formulation): for
each pair of classes ``i < j`` the C-SVM dual, solved by the SMO of :mod:`algorithms.dual_qp` in
the variables ``u = y * alpha`` (``-C <= u <= 0`` on class ``j``, ``0 <= u <= C`` on class ``i``,
``sum u = 0``), its bias from the free support vectors as libsvm's, and a vote per pair; the
class of most votes wins, the lowest index among equals. Choosing a k fits one such classifier
per k on every split of a few hundred points, where ``SVC``'s input validation costs several
times its solver.

Imported on first use (numba's import is slow); compiled once and cached on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.dual_qp import _smo

# The SMO of iterSVR, compiled here as a callee (numba loads it from the disk cache when
# :func:`algorithms.dual_qp.compiled_smo` has compiled the same signature).
_compiled_smo = njit(cache=True, nogil=True)(_smo)
# libsvm's default: no limit a solvable pair reaches.
SMO_MAX_ITER = 10_000_000


@njit(cache=True, nogil=True)
def _bias(u, gradient, lo, hi):
    """libsvm's bias of a solved pair: the mean gradient over the free variables, or the middle
    of the interval the bounded ones leave (``gradient = K u - y``)."""
    free_sum, free_count = 0.0, 0
    upper, lower = np.inf, -np.inf
    for t in range(u.size):
        if u[t] <= lo[t]:
            upper = min(upper, gradient[t])
        elif u[t] >= hi[t]:
            lower = max(lower, gradient[t])
        else:
            free_sum += gradient[t]
            free_count += 1
    if free_count > 0:
        return free_sum / free_count
    return 0.5 * (upper + lower)


@njit(cache=True, nogil=True)
def one_vs_one_predict(K_train, classes, n_classes, K_test, C, tol, predicted):
    """Fit the one-vs-one C-SVM on ``K_train`` with labels ``classes`` (``0..n_classes-1``, each
    present) and write the class of every row of ``K_test`` (test points against training
    points) to ``predicted``."""
    n_test = K_test.shape[0]
    votes = np.zeros((n_test, n_classes), dtype=np.int64)
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            members = np.flatnonzero((classes == i) | (classes == j))
            m = members.size
            K = np.empty((m, m))
            for a in range(m):
                for b in range(m):
                    K[a, b] = K_train[members[a], members[b]]
            y = np.where(classes[members] == i, 1.0, -1.0)
            lo = np.where(y > 0.0, 0.0, -C)
            hi = np.where(y > 0.0, C, 0.0)
            u = np.zeros(m)
            scores = np.empty(m)
            _compiled_smo(K, y, lo, hi, u, scores, tol, np.int64(SMO_MAX_ITER))
            rho = _bias(u, scores - y, lo, hi)
            support = np.flatnonzero(u != 0.0)  # the decision's terms: support vectors only
            weights = u[support]
            columns = members[support]
            for p in range(n_test):
                decision = -rho
                for a in range(support.size):
                    decision += weights[a] * K_test[p, columns[a]]
                if decision > 0.0:
                    votes[p, i] += 1
                else:
                    votes[p, j] += 1
    for p in range(n_test):
        predicted[p] = np.argmax(votes[p])
