"""Kernels and widths (algorithms.kernels): the RBF kernel, the papers' width heuristics, centring,
the normalized Laplacian, the Nystrom map, distinct rows."""

import numpy as np
import pytest

from algorithms.kernels import (
    NystromMap,
    center_kernel,
    data_diameter,
    normalized_laplacian,
    pairwise_kernel,
    resolve_gamma,
)


def test_gamma_paper_is_the_papers_width_heuristic():
    X = np.array([[0.0, 0.0], [3.0, 0.0], [1.0, 4.0]])
    diameter = np.sqrt(3.0**2 + 4.0**2)  # D = sqrt(sum_k (max_k - min_k)^2) = 5
    assert data_diameter(X) == pytest.approx(diameter)
    assert resolve_gamma(X, "paper", width_factor=2.0) == pytest.approx(1.0 / (2.0 * diameter) ** 2)


def test_rbf_kernel_matches_its_definition():
    rng = np.random.RandomState(0)
    X, Y = rng.randn(5, 3), rng.randn(4, 3)
    expected = np.exp(-0.7 * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(pairwise_kernel(X, Y, kernel="rbf", gamma=0.7), expected, rtol=1e-12)
    np.testing.assert_allclose(pairwise_kernel(X, Y, kernel="linear"), X @ Y.T, rtol=1e-12)


def test_unknown_kernel_and_bad_gamma_are_refused():
    X = np.eye(3)
    with pytest.raises(ValueError, match="unknown kernel"):
        pairwise_kernel(X, kernel="poly")
    with pytest.raises(ValueError, match="positive"):
        resolve_gamma(X, -1.0)


def test_centered_kernel_has_zero_row_sums_and_laplacian_is_psd():
    rng = np.random.RandomState(1)
    K = pairwise_kernel(rng.randn(20, 2), gamma=0.5)
    np.testing.assert_allclose(center_kernel(K).sum(axis=0), 0.0, atol=1e-10)
    assert np.linalg.eigvalsh(normalized_laplacian(K)).min() > -1e-10


def test_nystrom_map_reproduces_the_kernel_on_its_landmarks():
    rng = np.random.RandomState(2)
    X = rng.randn(50, 3)
    fmap = NystromMap.fit(X, n_components=50, gamma=0.3, random_state=0)
    Z = fmap.transform(X)
    np.testing.assert_allclose(Z @ Z.T, pairwise_kernel(X, gamma=0.3), atol=1e-6)


def test_nystrom_features_of_the_fit_are_the_maps_features():
    # fit_transform reads the landmarks' features off the Cholesky factor and maps only the
    # other points: both must be what the exported map gives new points, and a kernel of rank
    # below the landmarks' count (duplicated points) keeps only the pivots it needs.
    rng = np.random.RandomState(3)
    X = np.vstack([rng.randn(40, 3), rng.randn(20, 3)])
    X[40:50] = X[:10]
    for n_components in (30, 60):
        fmap, Z = NystromMap.fit_transform(X, n_components=n_components, gamma=0.3,
                                           random_state=0)
        np.testing.assert_allclose(Z, fmap.transform(X), atol=1e-8)
    assert fmap.landmarks.shape[0] == 50  # 60 landmarks, 10 of them duplicates
    np.testing.assert_allclose(Z @ Z.T, pairwise_kernel(X, gamma=0.3), atol=1e-6)


def test_distinct_rows_of_a_sparse_matrix_are_those_of_its_dense_form():
    import scipy.sparse as sp

    from algorithms.kernels import distinct_rows

    X = sp.random(300, 20, density=0.1, random_state=0, format="csr")
    X = sp.vstack([X, X[:40], sp.csr_matrix((25, 20))]).tocsr()  # copies and empty rows
    X.data[X.indptr[5]] = 0.0  # an explicit zero is no entry
    first, copies_of = distinct_rows(X)
    dense_first, dense_copies_of = distinct_rows(X.toarray())
    np.testing.assert_array_equal(first, dense_first)
    np.testing.assert_array_equal(copies_of, dense_copies_of)
    np.testing.assert_array_equal(X[first].toarray()[copies_of], X.toarray())
