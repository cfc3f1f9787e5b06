"""Recursive bisection (algorithms.selection.bisection) on hand-checked cases: which leaf is split,
the guide's order and whole clusters, labels by first point, the objective summed over splits."""

import numpy as np
import pytest

from algorithms.selection.bisection import (
    LeafSplit,
    Node,
    guide_rank,
    keep_guide_clusters_whole,
    recursive_bisection,
    tree_labels,
    tree_objective,
)

# Eight points on a line in three groups: {0, 1, 2}, {3, 4}, {5, 6, 7}.
POINTS = np.array([0.0, 0.1, 0.2, 5.0, 5.1, 10.0, 10.1, 10.2])


def split_at_widest_gap(index: np.ndarray) -> LeafSplit:
    """The cut of a leaf's points at their widest gap; objective: the leaf's size over the gap
    (a wide gap between few points is a cheap split)."""
    x = POINTS[index]
    order = np.argsort(x)
    gaps = np.diff(x[order])
    cut = int(np.argmax(gaps))
    y = np.ones(index.size)
    y[order[: cut + 1]] = -1.0
    return LeafSplit(y, index.size / gaps[cut])


def test_three_groups_on_a_line_come_out_whole_and_numbered_by_their_first_point():
    calls = []

    def counted(index):
        calls.append(tuple(index))
        return split_at_widest_gap(index)

    nodes = recursive_bisection(POINTS.size, 3, counted)
    labels = tree_labels(nodes, POINTS.size)
    assert labels.tolist() == [0, 0, 0, 1, 1, 2, 2, 2]
    # The root's widest gap is 4 | 5 (4.9; 2 | 3 is 4.8). Both leaves are then solved once, and
    # {0..4} (5 / 4.8, per point 0.21) is split before {5, 6, 7} (3 / 0.1, per point 10).
    root_objective = 8 / 4.9
    left_objective = 5 / 4.8  # {0..4}: cut 2 | 3
    assert tree_objective(nodes) == pytest.approx(root_objective + left_objective)
    assert calls[0] == tuple(range(8))
    assert len(calls) == len(set(calls)) == 3  # root, then each of its two leaves, once


def test_a_leaf_of_copies_of_one_point_is_never_split():
    # Four copies of one row, then two distinct rows. The root's halves are {0, 1, 2}, copies
    # only, and {3, 4, 5}; with a third cluster asked for, the second is split, not the first
    # (which the split would halve, though it has a lower objective per point).
    rows = np.array([0, 0, 0, 0, 1, 2])
    nodes = recursive_bisection(6, 3, lambda index: LeafSplit(
        np.where(np.arange(index.size) < index.size // 2, -1.0, 1.0),
        0.0 if (rows[index] == 0).all() else 1.0), rows=rows)
    assert tree_labels(nodes, 6).tolist() == [0, 0, 0, 1, 2, 2]
    with pytest.raises(ValueError, match="copies of a single point"):
        recursive_bisection(4, 2, lambda index: LeafSplit(np.ones(index.size), 0.0),
                            rows=np.zeros(4, dtype=int))


def test_a_split_keeps_each_guide_cluster_on_the_side_of_most_of_its_points():
    guide = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    positive = np.array([False, False, True, True, True, False, True, True])
    assert keep_guide_clusters_whole(positive, guide).tolist() == [-1, -1, -1, 1, 1, 1, 1, 1]
    # Every cluster on one side: the least decided one (cluster 0, 2 of 3) changes side.
    assert keep_guide_clusters_whole(np.array([1, 1, 0, 1, 1, 1, 1, 1], dtype=bool),
                                     guide).tolist() == [-1, -1, -1, 1, 1, 1, 1, 1]


def test_leaves_that_hold_several_guide_clusters_are_split_first():
    guide = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    assert guide_rank(Node(np.arange(10)), guide) == -2  # three clusters
    assert guide_rank(Node(np.arange(8, 10)), guide) == -1  # one cluster
    assert guide_rank(Node(np.arange(10)), None) == 0
