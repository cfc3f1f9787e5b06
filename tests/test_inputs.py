"""Input checks every fit makes (algorithms.inputs) and the npz format of stored
models."""

import numpy as np
import pytest

from algorithms.inputs import (
    arrays_to_npz_bytes,
    as_float_matrix,
    check_clustering_input,
    npz_bytes_to_arrays,
)


def test_portable_arrays_round_trip_without_pickle():
    arrays = {"a": np.arange(6.0).reshape(2, 3), "b": np.array([1, 2, 3])}
    loaded = npz_bytes_to_arrays(arrays_to_npz_bytes(arrays))
    for key, value in arrays.items():
        np.testing.assert_array_equal(loaded[key], value)
    with pytest.raises(TypeError, match="numeric"):
        arrays_to_npz_bytes({"bad": np.array([{"x": 1}], dtype=object)})


@pytest.mark.parametrize(
    ("X", "message"),
    [
        ([[1.0, np.nan], [0.0, 1.0]], "NaN"),
        ([[1.0, np.inf], [0.0, 1.0]], "NaN or infinity"),
        ([[1.0 + 1j, 0.0], [0.0, 1.0]], "Complex data not supported"),
        (np.empty((0, 3)), "0 sample"),
        ([1.0, 2.0, 3.0], "2D"),
        ([[1.0, 2.0], [3.0]], "ragged"),
        ([["a", "b"], ["c", "d"]], "numbers"),
        ([[1e200, 0.0], [0.0, 1.0]], "magnitude 1e\\+200.*rescale"),
    ],
)
def test_bad_matrices_are_refused_with_a_message_that_names_the_problem(X, message):
    with pytest.raises(ValueError, match=message):
        as_float_matrix(X)


def test_clustering_input_needs_enough_distinct_points():
    with pytest.raises(ValueError, match="n_samples=2 is fewer than n_clusters=3"):
        check_clustering_input(np.array([[0.0], [1.0]]), 3)
    with pytest.raises(ValueError, match="identical"):
        check_clustering_input(np.ones((5, 2)), 2)
    # Distinct points whose squared distances underflow: rescale, not "identical".
    with pytest.raises(ValueError, match=r"spans at most 2e-300.*rescale"):
        check_clustering_input(np.array([[0.0], [1e-300], [2e-300]]), 2)


def test_fewer_distinct_points_than_clusters_are_refused():
    # 10 x (0, 0) and 10 x (1, 1) in three clusters: sdp_mmc failed on a leaf of one repeated
    # point, itersvr and gmmc gave identical points different labels.
    X = np.repeat([[0.0, 0.0], [1.0, 1.0]], 10, axis=0)
    with pytest.raises(ValueError, match="2 distinct points, fewer than n_clusters=3"):
        check_clustering_input(X, 3)
    check_clustering_input(X, 2)


def test_sparse_matrices_are_held_to_the_same_magnitude():
    from scipy import sparse

    with pytest.raises(ValueError, match="magnitude"):
        as_float_matrix(sparse.csr_matrix([[1e120, 0.0], [0.0, 1.0]]), accept_sparse=True)
