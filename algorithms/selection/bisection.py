"""Recursive bisection: ``n_clusters > 2`` from a two-class maximum margin method.

iterSVR (Zhang, Tsang and Kwok 2007, section 4.4, following Shi and Malik 2000), GMMC and SDP
MMC cluster into two; more clusters come from splitting one current cluster at a time. The leaves
that may be split next get their best binary split (by the method's own objective); the one split
is the leaf with the lowest objective *per point*: the objectives are sums over points, so
dividing by the size makes clusters of different sizes comparable (a cluster that is really two
groups splits with a wide margin and few violations, a homogeneous one does not).

A guide steers the order and the sides: a k-partition of all the data made by a multi-class
method that the caller passes in (:func:`guide_partition`). Leaves that still hold several of its
clusters are split first, and a split may be asked to keep guide clusters whole
(:func:`keep_guide_clusters_whole`), so bisection can end at a k-partition instead of cutting
through one cluster to balance the two sides (three equal clusters need a 1:2 split, which a
balanced two-class program will not make).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from sklearn.base import clone

from algorithms.progress import ProgressCallback, report
from algorithms.selection.candidates import spectral_partition


class BinarySplit(Protocol):
    """What a two-class method returns for one leaf: labels in {-1, +1} over the leaf's points
    and the objective they reach (lower is better)."""

    y: np.ndarray
    objective: float


@dataclass
class LeafSplit:
    """A :class:`BinarySplit` with the method's own record of how it was found."""

    y: np.ndarray
    objective: float
    detail: Any = None


@dataclass
class Node:
    index: np.ndarray  # training points in this node
    split: Any | None = None  # the BinarySplit of its points, once computed
    left: int | None = None  # child node ids (negative side, positive side)
    right: int | None = None
    label: int | None = None  # cluster id of a leaf


def keep_guide_clusters_whole(positive: np.ndarray, guide: np.ndarray | None) -> np.ndarray:
    """A split (``positive``: boolean per point) moved so that no guide cluster is cut: each
    guide cluster goes to the side holding most of its points, and when that leaves one side
    empty the least decided cluster changes side. Returns labels in {-1, +1}."""
    positive = np.asarray(positive, dtype=bool)
    if guide is None or np.unique(guide).size < 2:
        return np.where(positive, 1.0, -1.0)
    groups, group_of = np.unique(guide, return_inverse=True)
    share = np.bincount(group_of, weights=positive, minlength=groups.size) / np.bincount(group_of)
    side = share > 0.5
    if side.all() or not side.any():
        side[np.argmin(np.abs(share - 0.5))] = not side[0]
    return np.where(side[group_of], 1.0, -1.0)


def guide_partition(X: np.ndarray, n_clusters: int, guide, rng,
                    progress: ProgressCallback | None = None, step: int = 0) -> np.ndarray:
    """The k-partition that guides the splits: the labels of ``guide``, a clustering estimator
    with ``n_clusters`` and ``random_state`` parameters (the methods pass CPM3C, the multi-class
    maximum margin clustering of Zhao, Wang and Zhang 2008), fitted to ``X``.

    A binary method has no k-way objective of its own; the guide supplies the k clusters and the
    binary programs order the splits and train the tree. When the guide cannot offer a
    k-partition (it reports ``warnings_``, or leaves a cluster empty), the spectral partition of
    the kNN graph guides instead. ``progress`` hears of the guide's fit at ``step``.
    """
    report(progress, step, None, f"{type(guide).__name__}'s {n_clusters}-cluster partition of "
           f"{X.shape[0]} points to guide the splits")
    seed = rng.randint(2**31 - 1)
    estimator = clone(guide).set_params(n_clusters=n_clusters, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # class elimination: read from warnings_
        partition = estimator.fit(X)
    if getattr(partition, "warnings_", None) or np.unique(partition.labels_).size < n_clusters:
        return spectral_partition(X, n_clusters, random_state=rng)
    return partition.labels_


def guided_split(X: np.ndarray, guide: np.ndarray | None, rng) -> np.ndarray:
    """The spectral start of one split in {-1, +1}.

    Without a guide, the spectral split of the points' kNN graph. With ``guide`` (the points'
    clusters in the k-partition of :func:`guide_partition`, for ``n_clusters > 2``) the split keeps
    guide clusters whole: each goes to the side of the 2-way spectral split that holds most of its
    points, so recursive bisection can end at the k-partition instead of cutting through it.
    """
    split = spectral_partition(X, 2, random_state=rng)
    if guide is None or np.unique(guide).size < 2:
        return np.where(split == split[0], -1.0, 1.0)
    return keep_guide_clusters_whole(split == 1, guide)


def guide_rank(node: Node, guide: np.ndarray | None) -> int:
    """First part of the order in which leaves are split: the leaves that still hold several
    clusters of the guide (-2), one cluster and strays (-1); 0 without a guide."""
    if guide is None:
        return 0
    sizes = np.bincount(guide[node.index])
    # A guide cluster counts where it has more than a stray point or two in this leaf.
    whole = int(np.sum(sizes >= max(2, 0.1 * node.index.size / max(1, np.sum(sizes > 0)))))
    return -min(whole, 2)


def recursive_bisection(
    n_points: int,
    n_clusters: int,
    split_leaf: Callable[[np.ndarray], BinarySplit],
    *,
    guide: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    on_split: Callable[[int, float], None] | None = None,
) -> list[Node]:
    """Split leaves until there are ``n_clusters``; returns the tree's nodes (node 0 the root).

    ``split_leaf(index)`` computes the best binary split of the points ``index``. The leaf split
    next is, among the leaves of the best :func:`guide_rank`, the one whose split has the lowest
    objective per point; splits are computed only for those leaves, each at most once (a leaf
    holding one guide cluster is not solved while another holds several: homogeneous leaves are
    the slow solves). Leaves are numbered
    ``0..n_clusters-1`` by their first point, and the ``y > 0`` side of a split is its right
    child. ``on_split(n_leaves, total objective)`` reports progress.

    ``rows`` (each point's distinct row, :func:`algorithms.kernels.distinct_rows`): a leaf of
    copies of one point is never split, since a balanced binary program would halve it.
    """
    nodes = [Node(np.arange(n_points))]
    leaves = [0]
    objective = 0.0

    def divisible(leaf: int) -> bool:
        index = nodes[leaf].index
        if rows is None:
            return index.size >= 2
        return bool(np.any(rows[index] != rows[index[0]]))

    while len(leaves) < n_clusters:
        candidates = [leaf for leaf in leaves if divisible(leaf)]
        if not candidates:
            raise ValueError(f"cannot form {n_clusters} clusters: every cluster is copies of "
                             "a single point")
        ranks = {leaf: guide_rank(nodes[leaf], guide) for leaf in candidates}
        front = [leaf for leaf in candidates if ranks[leaf] == min(ranks.values())]
        for leaf in front:
            if nodes[leaf].split is None:
                nodes[leaf].split = split_leaf(nodes[leaf].index)
        chosen = min(front, key=lambda i: nodes[i].split.objective / nodes[i].index.size)
        node = nodes[chosen]
        node.left, node.right = len(nodes), len(nodes) + 1
        nodes.append(Node(node.index[node.split.y < 0]))
        nodes.append(Node(node.index[node.split.y > 0]))
        leaves.remove(chosen)
        leaves += [node.left, node.right]
        objective += node.split.objective
        if on_split is not None:
            on_split(len(leaves), objective)
    for label, leaf in enumerate(sorted(leaves, key=lambda i: nodes[i].index.min())):
        nodes[leaf].label = label
    return nodes


def tree_labels(nodes: list[Node], n_points: int) -> np.ndarray:
    """Cluster of every training point: the label of the leaf holding it."""
    labels = np.empty(n_points, dtype=np.int64)
    for node in nodes:
        if node.label is not None:
            labels[node.index] = node.label
    return labels


def tree_objective(nodes: list[Node]) -> float:
    """Sum of the objectives of the splits made (the internal nodes)."""
    return float(sum(node.split.objective for node in nodes if node.left is not None))
