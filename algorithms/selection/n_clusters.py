"""How many clusters: ``n_clusters="auto"``, the largest k whose max-margin partition is
reproduced from half of the data (prediction strength).

A partition into k clusters reflects structure of the data, not of the sample, when it can be
learnt from one half of the points and predicted on the other. Prediction strength (Tibshirani
and Walther 2005, "Cluster validation by prediction strength", eq. (2.1)) measures that: split the
points at random into halves A and B and partition each into k clusters; a classifier trained on
A's partition labels B; for each cluster of B's own partition, the share of its pairs of points
that the classifier puts in one cluster. The strength of k is the weakest cluster's share,
averaged over random splits. A split where the classifier gives B fewer than k clusters scores 0
(:func:`reproduced_strength`): the shares do not see clusters merged. The classifier here is
a max-margin one, as the methods' out-of-sample models are: an RBF SVM (scikit-learn's
one-vs-one ``SVC`` at its default width), so a k is kept when its clusters are separated by a
margin that carries over to unseen points.

The average over splits is a Monte Carlo estimate, and the choice compares it with a threshold:
each k is scored on new splits until its mean strength lies at least ``SETTLED_Z`` standard
errors from ``STRENGTH_THRESHOLD`` (on a known side of it), from ``MIN_SPLITS`` to
``MAX_SPLITS`` splits; a settled k is not scored again, nor is a k below one settled at or
above the threshold (the answer is the largest such k, so a smaller one cannot change it), nor
a lone open k whose strength is settled above every other's while none is strong, or that is
the only k considered (it is the answer on either side of the threshold). Data with clear
structure is settled after a few splits; a k near the threshold gets more, so that the answer
depends less on ``random_state`` where the draw of the halves decides it.

Every k up to ``EVERY_K_UP_TO`` is scored; above it, a geometric grid of ks (each k costs a
partition of each half and an SVM whose pairs of clusters grow as k^2), and once the answer is
known the ks between it and its neighbours on the grid. Above ``EVERY_K_UP_TO`` clusters the
strength of k passes over its weakest ``SPARED_SHARE`` of clusters (:func:`spared_clusters`):
with a few points of each of many clusters in a half, the weakest of k noisy shares decides
eq. (2.1) alone, though every other cluster carries over. There a larger strong k replaces a
smaller answer only where it carries over more clusters (:func:`_strong_answer`).

The partitions of each half come from two families, and a k's strength on a split is the larger
of the two: the spectral partitions of the kNN graph
(:func:`~algorithms.selection.candidates.spectral_partition`), one embedding per half serving
every k, and Genie's partitions of the half's minimum spanning tree at the Gini threshold
``GENIE_GINI`` (Gagolewski, Bartoszuk and Cena 2016, Algorithm 1), one tree per half serving
every k. Spectral partitions follow clusters of any shape, but points of background noise bridge
the graph's clusters and move its cut from half to half; Genie's Gini correction merges the
smallest clusters first, so such points join the nearest cluster instead of standing as clusters
of their own, and a partition that noise points hide from one family is reproduced by the other.
A k is kept when some family finds its clusters in both halves. The choice is the largest k
whose strength reaches ``STRENGTH_THRESHOLD``, the paper's recommended threshold (section 3: 0.8
to 0.9). On data with no cluster structure (uniform noise, a round Gaussian) no k reaches it;
"auto" still answers a k >= 2 (the methods partition into two clusters or more), the one of
highest strength, and says the choice is not clear (``NClustersChoice.clear``). One elongated
cloud is the exception: a cut across its long axis is reproducible, so it is answered 2 and
clear.

Identical rows belong to one cluster (every method gives copies one label), so a partition into
k clusters needs k distinct rows: k goes up to the number of distinct rows. Where a row repeats
as often as the kNN graph's neighbour count (data on a grid: counts, ratings, rounded
measurements), each half is partitioned over its distinct rows and every copy takes its row's
cluster, as the methods' own spectral partition does: a half's cluster that held part of a row's
copies would be predicted whole by any classifier, and its strength would say nothing.

Above :func:`sample_size` points the choice is made on a uniform random sample of that size:
the strength of a k is a property of the distribution the points come from, and a few hundred
points per half estimate it. The sample grows with ``max_clusters``, so that at the largest k
each cluster of a half holds more points than a point has neighbours in the kNN graph
(``POINTS_PER_CLUSTER``); with fewer, every point's neighbours reach into other clusters and
the partition into that many clusters cannot be found on a half, however separated they are.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from algorithms.kernels import centred, distinct_rows, scale_gamma_of_distances, squared_distances
from algorithms.params.common import STRENGTH_THRESHOLD
from algorithms.selection.candidates import (
    SPECTRAL_NEIGHBORS,
    best_kmeans_run,
    copies_split_the_graph,
    graph_spectral_embedding,
    knn_graph_of_distances,
    partition_key,
)
from algorithms.selection.genie import (
    genie_labels_from_tree,
    minimum_spanning_tree_of_distances,
)

# Splits averaged: at least MIN_SPLITS (three degrees of freedom for a standard error), at most
# MAX_SPLITS; in between, until its mean strength is SETTLED_Z standard errors from the
# threshold (a two-sided 95 % normal interval), each k on its own. Each split costs one
# embedding per half and an SVM per unsettled k.
MIN_SPLITS = 4
MAX_SPLITS = 16
SETTLED_Z = 2.0
# Lloyd runs per k on an embedding, the best kept: few are needed, since every split draws the
# partition again and the strengths are averaged over the splits.
KMEANS_INIT = 3
SAMPLE_SIZE = 1000
# Points of the sample per cluster at max_clusters: a half's cluster then holds 1.5 times the
# kNN graph's neighbour count.
POINTS_PER_CLUSTER = 3 * SPECTRAL_NEIGHBORS
# Two halves of two points per cluster at k = 2; fewer points get k = 2 unscored.
FEWEST_POINTS = 8
# Every k up to EVERY_K_UP_TO is scored; above it a geometric grid (considered_ks).
EVERY_K_UP_TO = 12
GRID_RATIO = 1.15
# The share of the clusters whose weakest strengths a k above EVERY_K_UP_TO is spared
# (spared_clusters): about one in seven.
SPARED_SHARE = 0.15
# How many more clusters, on average, a strong k above EVERY_K_UP_TO must carry over than a
# smaller strong answer to replace it (_strong_answer).
REPRODUCED_GAIN = 0.5
# Genie's Gini threshold for the second family of partitions: the paper's recommended value.
GENIE_GINI = 0.3
# The soft margin of the transfer SVM: wide enough to follow a partition's curved boundaries.
TRANSFER_C = 10.0
# Its KKT tolerance: scikit-learn's and libsvm's default.
TRANSFER_TOL = 1e-3


@dataclass(frozen=True)
class NClustersChoice:
    """The chosen k, the prediction strength of every k considered, whether some k reached
    ``STRENGTH_THRESHOLD``, and the number of random splits the strengths average."""

    n_clusters: int
    strengths: dict[int, float]
    clear: bool
    n_splits: int = 0


def largest_k_considered(n_samples: int, max_clusters: int) -> int:
    """The largest k "auto" tries on ``n_samples`` points: each half must hold two points per
    cluster."""
    return max(2, min(max_clusters, n_samples // 4))


def sample_size(max_clusters: int) -> int:
    """The points "auto" samples to choose among ``2..max_clusters``: ``SAMPLE_SIZE``, or
    ``POINTS_PER_CLUSTER`` per cluster at ``max_clusters`` where that is more."""
    return max(SAMPLE_SIZE, POINTS_PER_CLUSTER * max_clusters)


def choose_n_clusters(X: np.ndarray | sp.spmatrix, max_clusters: int,
                      random_state=None) -> NClustersChoice:
    """The number of clusters ``2..max_clusters`` of largest prediction strength at or above
    ``STRENGTH_THRESHOLD`` (see the module docstring); the k of highest strength when none
    reaches it; 2, unscored, on fewer than ``FEWEST_POINTS`` points."""
    rng = check_random_state(random_state)
    X = centred(X)
    n = X.shape[0]
    if n > (size := sample_size(max_clusters)):
        X = X[np.sort(rng.choice(n, size, replace=False))]
        n = size
    _, copies_of = distinct_rows(X)
    n_distinct = int(copies_of.max()) + 1
    if n < FEWEST_POINTS or n_distinct < 2:  # too few points to split in halves: no choice
        return NClustersChoice(2, {}, clear=False)
    ks = considered_ks(min(largest_k_considered(n, max_clusters), n_distinct))
    # Copies are partitioned as one point where they split the graph, as in the methods'
    # spectral partition.
    copies = copies_of if copies_split_the_graph(copies_of, SPECTRAL_NEIGHBORS) else None
    # One matrix of squared distances serves every split: its blocks give each half's kNN graph,
    # the training half's width and the transfer SVM's kernels.
    D = squared_distances(X)
    per_split: dict[int, list[float]] = {}
    reproduced: dict[int, list[int]] = {}
    n_splits = _score_ks(D, ks, per_split, reproduced, rng, copies)
    strong = _strong(per_split)
    if strong and (gap := _grid_gaps(_strong_answer(strong, reproduced), ks)):
        n_splits = max(n_splits, _score_ks(D, gap, per_split, reproduced, rng, copies))
        strong = _strong(per_split)
    strengths = {k: round(float(np.mean(per_split[k])), 6) for k in sorted(per_split)}
    if strong:
        return NClustersChoice(_strong_answer(strong, reproduced), strengths,
                               clear=True, n_splits=n_splits)
    # No k is strong: the k of highest strength among those whose strength is eq. (2.1)'s
    # (no cluster spared); a larger k that falls short even with its weakest clusters spared is
    # no answer to prefer.
    plain = [k for k in strengths if spared_clusters(k) == 0] or list(strengths)
    return NClustersChoice(max(plain, key=strengths.__getitem__), strengths, clear=False,
                           n_splits=n_splits)


def considered_ks(largest: int) -> list[int]:
    """The ks "auto" scores up to ``largest``: every k up to ``EVERY_K_UP_TO``, then a geometric
    grid of ratio ``GRID_RATIO`` (each k costs a partition of each half and an SVM per split,
    the SVM's pairs of clusters growing as k^2; the gap of the grid above the answer is scored
    after, :func:`_grid_gaps`)."""
    ks = list(range(2, min(largest, EVERY_K_UP_TO) + 1))
    while ks[-1] < largest:
        ks.append(min(largest, max(ks[-1] + 1, round(ks[-1] * GRID_RATIO))))
    return ks


def _grid_gaps(answer: int, ks: Sequence[int]) -> list[int]:
    """The ks not in the grid ``ks`` between ``answer`` and its neighbours on the grid (none
    up to ``EVERY_K_UP_TO``, where every k is scored)."""
    if answer <= EVERY_K_UP_TO:
        return []
    below = max(k for k in ks if k < answer)
    above = min((k for k in ks if k > answer), default=answer + 1)
    return [k for k in range(below + 1, above) if k not in ks]


def _strong_answer(strong: Sequence[int], reproduced: dict[int, list[int]]) -> int:
    """The answer among the strong ks: the largest up to ``EVERY_K_UP_TO`` (the paper's rule);
    above it, a larger strong k replaces the answer only where it carries over, on average, at
    least ``REPRODUCED_GAIN`` more clusters. A k that cuts one of the answer's clusters in two
    carries over no more of them (one side of the cut carries over whole and the other is
    spared, :func:`spared_clusters`), where a k that separates two clusters the answer merged
    carries over one more."""
    answer = max((k for k in strong if k <= EVERY_K_UP_TO), default=min(strong))
    carried = float(np.mean(reproduced[answer]))
    for k in sorted(k for k in strong if k > answer):
        if (count := float(np.mean(reproduced[k]))) >= carried + REPRODUCED_GAIN:
            answer, carried = k, count
    return answer


def _strong(per_split: dict[int, list[float]]) -> list[int]:
    """The ks whose mean strength reaches ``STRENGTH_THRESHOLD``."""
    return [k for k, values in per_split.items() if np.mean(values) >= STRENGTH_THRESHOLD]


def _score_ks(D: np.ndarray, ks: Sequence[int], per_split: dict[int, list[float]],
              reproduced: dict[int, list[int]], rng: np.random.RandomState,
              copies: np.ndarray | None) -> int:
    """Add the strengths of ``ks`` on new random splits to ``per_split``, and their clusters
    carried over to ``reproduced``, each k until its splits can no longer change the answer
    (:func:`_still_open`); returns the splits drawn."""
    for k in ks:
        per_split[k], reproduced[k] = [], []
    unsettled = list(ks)
    for n_splits in range(1, MAX_SPLITS + 1):
        for k, (strength, carried) in _split_strengths(D, unsettled, rng, copies).items():
            per_split[k].append(strength)
            reproduced[k].append(carried)
        if n_splits >= MIN_SPLITS:  # a k whose splits can no longer change the answer drops out
            unsettled = _still_open(per_split, unsettled)
            if not unsettled:
                break
    return n_splits


def _split_strengths(D: np.ndarray, ks: Sequence[int], rng: np.random.RandomState,
                     copies: np.ndarray | None = None) -> dict[int, tuple[float, int]]:
    """The prediction strength of every k of ``ks`` on one random split into halves of the
    points whose squared distances are ``D``, and its clusters that carried over
    (:func:`reproduction`; ``copies``: each point's distinct row, where copies are partitioned
    as one point). A k for which a half has fewer distinct rows than clusters scores 0 on this
    split."""
    n = D.shape[0]
    order = rng.permutation(n)
    train, test = np.sort(order[: n // 2]), np.sort(order[n // 2:])
    D_train, D_test = D[np.ix_(train, train)], D[np.ix_(test, test)]
    if not D_train.any() or not D_test.any():  # a half of copies of one row: no partition
        return dict.fromkeys(ks, (0.0, 0))
    families = [(_spectral_partitions(D_train, ks, rng, _rows_of(copies, train)),
                 _spectral_partitions(D_test, ks, rng, _rows_of(copies, test)))]
    # Where rows repeat as often as a point has graph neighbours, the spanning tree's edges tie
    # (data on a grid) and its cut between equal edges is arbitrary, while clusters of whole
    # rows carry over whatever the cut: Genie's family is left out there.
    if copies is None:
        families.append((_genie_partitions(D_train, ks), _genie_partitions(D_test, ks)))
    # One RBF kernel serves the SVM of every k, at scikit-learn's SVC default width (set by the
    # spread of all the training half's points). At the methods' local width, set by the densest
    # clusters' neighbour distances, a sparse cluster's unseen points have kernel values near 0
    # to every training point, the decision falls to the SVM's bias (the larger clusters), and a
    # cluster of a few dozen points beside clusters of hundreds was never carried over.
    gamma = scale_gamma_of_distances(D_train)
    K_train = np.exp(-gamma * D_train)
    K_test = np.exp(-gamma * D[np.ix_(test, train)])
    return {k: max((reproduction(_transfer(K_train, train, K_test), test)
                    for train, test in _distinct_pairs(families, k)), default=(0.0, 0))
            for k in ks}


def _distinct_pairs(families: list[tuple[dict[int, np.ndarray], dict[int, np.ndarray]]],
                    k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The families' (training half, test half) partitions into ``k`` clusters, each once: a
    pair that groups both halves as an earlier one does has the same strength (clearly
    separated clusters are found alike by both families), and its SVM is not trained again."""
    pairs: dict[tuple[bytes, bytes], tuple[np.ndarray, np.ndarray]] = {}
    for train_parts, test_parts in families:
        if k in train_parts and k in test_parts:
            train, test = train_parts[k], test_parts[k]
            pairs.setdefault((partition_key(train), partition_key(test)), (train, test))
    return list(pairs.values())


def _rows_of(copies: np.ndarray | None, half: np.ndarray) -> np.ndarray | None:
    """The distinct row of each point of ``half``, or None where copies are not grouped."""
    return None if copies is None else copies[half]


def _still_open(per_split: dict[int, list[float]], unsettled: Sequence[int]) -> list[int]:
    """The ks of ``unsettled`` whose further splits can change the answer: not settled, and
    above every k no longer scored whose mean strength reaches the threshold (the answer is the
    largest strong k, so once k* is settled strong a smaller k cannot change it). None when a
    single k is open, no other k is strong and its mean strength lies ``SETTLED_Z`` standard
    errors above every other k's: it is the answer on either side of the threshold, and only
    ``NClustersChoice.clear`` (its mean at or above the threshold) would still move. None
    either when that k is the only one considered (``max_clusters=2``, or fewer than 12 points)."""
    means = {k: float(np.mean(values)) for k, values in per_split.items()}
    open_ks = [k for k in unsettled if not _settled(per_split[k])]
    strong = [k for k in means if k not in open_ks and means[k] >= STRENGTH_THRESHOLD]
    open_ks = [k for k in open_ks if k > max(strong, default=0)]
    if len(open_ks) == 1 and not strong:
        (lone,) = open_ks
        # With no other k considered, it is above every other's vacuously.
        runner_up = max((mean for k, mean in means.items() if k != lone), default=-np.inf)
        if means[lone] > runner_up and _settled(per_split[lone], about=runner_up):
            return []
    return open_ks


def _settled(values: list[float], about: float = STRENGTH_THRESHOLD) -> bool:
    """Whether the mean of one k's strengths lies ``SETTLED_Z`` standard errors or more from
    ``about`` (by default ``STRENGTH_THRESHOLD``)."""
    values = np.asarray(values)
    standard_error = values.std(ddof=1) / np.sqrt(values.size)
    return abs(values.mean() - about) >= SETTLED_Z * standard_error


def reproduced_strength(predicted: np.ndarray, own: np.ndarray) -> float:
    """:func:`prediction_strength` (sparing :func:`spared_clusters`), or 0 where ``predicted``
    holds fewer clusters than ``own``.

    Prediction strength counts, in each cluster of the test half's own partition, the pairs
    that the classifier keeps together; a classifier that merges two of those clusters keeps
    every pair. Where the classifier cannot carry a cut at all, each side of the test half's own
    cut then scores 1: with many more features than points, the points of a Gaussian blob are
    all about equally far apart, an RBF SVM trained on a cut of the blob predicts one label for
    all of it, and a blob cut in two looked like two clusters. A partition into k clusters is
    reproduced only where the classifier gives the other half k clusters."""
    return reproduction(predicted, own)[0]


def reproduction(predicted: np.ndarray, own: np.ndarray) -> tuple[float, int]:
    """The strength of :func:`reproduced_strength` and the number of clusters of ``own`` whose
    share reaches ``STRENGTH_THRESHOLD`` (both 0 where ``predicted`` has fewer clusters)."""
    k = np.unique(own).size
    if np.unique(predicted).size < k:
        return 0.0, 0
    shares = cluster_shares(predicted, own)
    if not shares:
        return 0.0, 0
    strength = shares[min(spared_clusters(k), len(shares) - 1)]
    return strength, sum(share >= STRENGTH_THRESHOLD for share in shares)


def spared_clusters(n_clusters: int) -> int:
    """How many of the weakest clusters the strength of ``n_clusters`` passes over: none up to
    ``EVERY_K_UP_TO`` clusters (eq. (2.1) as the paper has it), ``floor(SPARED_SHARE * k)``
    above. A cluster's share is estimated from the few points it has in a half, and the
    minimum of k noisy shares falls as k grows even when every cluster carries over: at 30
    clusters of some twenty points a half, the weakest of them alone decides eq. (2.1), and
    data with many clusters was answered a coarse k. A k that cuts a cluster in two is then
    strong too (one side of the cut carries over whole); :func:`choose_n_clusters` prefers the
    fewer clusters that reproduce as many."""
    return 0 if n_clusters <= EVERY_K_UP_TO else int(SPARED_SHARE * n_clusters)


def cluster_shares(predicted: np.ndarray, own: np.ndarray) -> list[float]:
    """Tibshirani and Walther (2005), eq. (2.1)'s terms, ascending: for each cluster of ``own``
    (of two points or more), the share of its pairs of points that ``predicted`` puts in one
    cluster."""
    shares = []
    for cluster in np.unique(own):
        members = predicted[own == cluster]
        m = members.size
        if m < 2:
            continue
        counts = np.bincount(members)
        shares.append(float((counts * (counts - 1)).sum()) / (m * (m - 1)))
    return sorted(shares)


def prediction_strength(predicted: np.ndarray, own: np.ndarray) -> float:
    """Tibshirani and Walther (2005), eq. (2.1): the smallest, over the clusters of ``own``, share
    of a cluster's pairs of points that ``predicted`` puts in one cluster (clusters of fewer than
    two points are skipped)."""
    return min(cluster_shares(predicted, own), default=0.0)


def _spectral_partitions(D: np.ndarray, ks: Sequence[int], rng: np.random.RandomState,
                         copies: np.ndarray | None = None) -> dict[int, np.ndarray]:
    """The spectral partition of the kNN graph, for every k of ``ks`` up to the number of
    points, of the points whose squared distances are ``D``: k-means on the leading k vectors
    of one embedding (the construction of
    :func:`~algorithms.selection.candidates.spectral_partition`). With ``copies`` (each point's
    distinct row), the partition of the distinct rows, every copy in its row's cluster."""
    if copies is not None:
        _, rows, row_of = np.unique(copies, return_index=True, return_inverse=True)
        distinct = _spectral_partitions(D[np.ix_(rows, rows)], ks, rng)
        return {k: labels[row_of] for k, labels in distinct.items()}
    n = D.shape[0]
    partitions = {n: np.arange(n)} if n in ks else {}  # a point per cluster
    embedded = [k for k in ks if k < n]  # the eigensolver needs more points than vectors
    if not embedded:
        return partitions
    graph = knn_graph_of_distances(D, SPECTRAL_NEIGHBORS)
    embedding = graph_spectral_embedding(graph, max(embedded), rng)
    for k in embedded:  # the best of KMEANS_INIT runs of Lloyd's iterations (scikit-learn's n_init)
        partitions[k] = best_kmeans_run(embedding[:, :k], k, n_init=KMEANS_INIT,
                                        random_state=rng)[1]
    return partitions


def _genie_partitions(D: np.ndarray, ks: Sequence[int]) -> dict[int, np.ndarray]:
    """Genie's partition (``GENIE_GINI``) into every k of ``ks`` up to the number of points, of
    the points whose squared distances are ``D``, from one minimum spanning tree. Copies of a
    row are joined first (their edges are the shortest), so each row's copies share a
    cluster."""
    n = D.shape[0]
    tree = minimum_spanning_tree_of_distances(D)
    return {k: genie_labels_from_tree(tree, n, k, GENIE_GINI) for k in ks if k <= n}


def _transfer(K_train: np.ndarray, labels: np.ndarray, K_test: np.ndarray) -> np.ndarray:
    """Labels of the test points by the one-vs-one SVM trained on ``labels`` over the kernel
    ``K_train`` (``K_test``: test rows against training points); one cluster: that cluster."""
    clusters, codes = np.unique(labels, return_inverse=True)
    if clusters.size < 2:
        return np.full(K_test.shape[0], labels[0])
    predicted = np.empty(K_test.shape[0], dtype=np.int64)
    compiled_transfer()(K_train, codes.astype(np.int64), clusters.size, K_test, TRANSFER_C,
                        TRANSFER_TOL, predicted)
    return clusters[predicted]


@functools.cache
def compiled_transfer():
    """The compiled one-vs-one SVM (:mod:`algorithms.selection.transfer_compiled`), loaded on
    first use (numba imported then)."""
    from algorithms.selection.transfer_compiled import one_vs_one_predict

    K, classes = np.eye(2), np.array([0, 1])
    one_vs_one_predict(K, classes, 2, K, TRANSFER_C, TRANSFER_TOL, np.empty(2, dtype=np.int64))
    return one_vs_one_predict
