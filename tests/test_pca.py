"""The principal components shared by CPM3C (kernel PCA) and SVC (its projection)."""

import numpy as np

from algorithms.pca import PrincipalComponents, principal_directions


def test_four_points_on_a_line_have_that_line_as_their_first_direction():
    # Centred points on the line y = 2x: the direction is (1, 2) / sqrt(5), by hand.
    X = np.array([[-3.0, -6.0], [-1.0, -2.0], [1.0, 2.0], [3.0, 6.0]])
    np.testing.assert_allclose(principal_directions(X, 1), [[1 / np.sqrt(5), 2 / np.sqrt(5)]])


def test_the_sign_convention_makes_the_largest_entry_positive_whatever_the_data_sign():
    X = np.random.RandomState(0).standard_normal((50, 6))
    X -= X.mean(axis=0)
    directions = principal_directions(X, 4)
    largest = directions[np.arange(4), np.argmax(np.abs(directions), axis=1)]
    assert np.all(largest > 0)
    np.testing.assert_allclose(principal_directions(-X, 4), directions, atol=1e-12)


def test_principal_components_centre_before_projecting():
    Z = np.array([[10.0, 0.0], [12.0, 0.0], [14.0, 1e-9], [16.0, 0.0]])
    pca = PrincipalComponents.fit(Z, 1)
    np.testing.assert_allclose(pca.mean, [13.0, 2.5e-10])
    np.testing.assert_allclose(pca.transform(Z)[:, 0], [-3.0, -1.0, 1.0, 3.0], atol=1e-8)
