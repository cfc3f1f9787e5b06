"""The sample that a large-n fit clusters, and stratified draws of rows."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def stratified_rows(labels: np.ndarray, size: int, rng: np.random.RandomState) -> np.ndarray:
    """Sorted indices of at most ``size`` rows, each cluster of ``labels`` giving its share (by
    :func:`_cell_shares`, so at least one row each); all rows when there are at most ``size``."""
    if labels.size <= size:
        return np.arange(labels.size)
    clusters, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    return np.sort(_draw_by_cell(inverse, counts, max(size, clusters.size), rng))


# Cells of a stratified sample (fit_sample with X): each of a few clusters spans several cells, and
# a sample of a few hundred points still gives each cell a handful.
SAMPLE_CELLS = 64


def fit_sample(n_samples: int, exact_max_n: int | None, rng: np.random.RandomState,
               keep: np.ndarray | None = None,
               X: np.ndarray | None = None) -> np.ndarray | None:
    """Sorted indices of the random sample of ``exact_max_n`` points that a large-n fit clusters,
    or None when every point is clustered (``exact_max_n=None``, or at most ``exact_max_n``
    points).

    The rows ``keep`` (partially labelled points) are always in the sample. The rest is drawn
    from the other rows: uniformly, or, given their coordinates ``X``, stratified. Then the rows
    are split into ``SAMPLE_CELLS`` cells by k-means and each cell gives its share of the draw
    (largest remainders, and at least one point), uniformly within the cell. A uniform sample's
    clusters differ from the data's proportions by about ``sqrt(exact_max_n)`` points; a
    stratified one's by a few, which matters to methods that split their sample evenly (GMMC's
    (10)).
    """
    if exact_max_n is None or n_samples <= exact_max_n:
        return None
    keep = np.zeros(0, dtype=np.int64) if keep is None else np.asarray(keep, dtype=np.int64)
    if keep.size > exact_max_n:
        raise ValueError(f"{keep.size} labelled points do not fit in a sample of exact_max_n="
                         f"{exact_max_n} points; raise exact_max_n or label fewer points")
    others = np.arange(n_samples) if keep.size == 0 else np.setdiff1d(np.arange(n_samples), keep)
    size = exact_max_n - keep.size
    if X is None or size < SAMPLE_CELLS:
        drawn = rng.choice(others, size=size, replace=False)
    else:
        drawn = _stratified_draw(X[others], size, rng)
        drawn = others[drawn]
    return np.sort(np.concatenate([keep, drawn]))


def _stratified_draw(X: np.ndarray, size: int, rng: np.random.RandomState) -> np.ndarray:
    """``size`` row indices of ``X``, each k-means cell's share of them drawn within it."""
    from sklearn.cluster import MiniBatchKMeans

    cells = MiniBatchKMeans(SAMPLE_CELLS, n_init=1, batch_size=4096,
                            random_state=rng).fit_predict(X)
    return _draw_by_cell(cells, np.bincount(cells, minlength=SAMPLE_CELLS), size, rng)


def _draw_by_cell(cells: np.ndarray, counts: np.ndarray, size: int,
                  rng: np.random.RandomState) -> np.ndarray:
    """``size`` row indices, cell by cell (``cells``: each row's cell, ``counts``: the rows of
    each), each cell's share of them (:func:`_cell_shares`) drawn uniformly within it."""
    take = _cell_shares(counts, size)
    order = np.argsort(cells, kind="stable")
    starts = np.r_[0, np.cumsum(counts)]
    return np.concatenate([
        rng.choice(order[starts[c]:starts[c + 1]], size=take[c], replace=False)
        for c in range(counts.size) if take[c]])


def _cell_shares(counts: np.ndarray, size: int) -> np.ndarray:
    """Points drawn from each cell of ``counts`` points: its share of ``size`` by largest
    remainders, and at least one from every non-empty cell (``size`` is at least the number of
    cells). A cell is a region of the data; a sample without it cannot give it a cluster, and a
    sample of a few copies of one row (a row repeated thousands of times beside a rare one)
    cannot be clustered at all. The points a small cell gains come from the largest cells."""
    quota = size * counts / counts.sum()
    take = np.where(counts > 0, np.maximum(np.floor(quota), 1), 0).astype(np.int64)
    if take.sum() <= size:  # the rest to the largest remainders
        take[np.argsort(take - quota, kind="stable")[:size - take.sum()]] += 1
    else:  # one fewer from each of the largest cells
        take[np.argsort(-take, kind="stable")[:take.sum() - size]] -= 1
    return take


def sampling_mode(exact: bool) -> str:
    """The sampling mode that ``solver_`` reported before ``exact_``: ``"exact"`` or
    ``"sample"``."""
    return "exact" if exact else "sample"


class SampledFitAttributes:
    """The deprecated ``solver_`` of an estimator whose fit sets ``exact_`` (IterSVR, SVC).

    ``solver_`` said ``"exact"`` or ``"sample"``, the sampling mode that those estimators' old
    ``solver`` parameter chose; ``exact_max_n`` replaced that parameter, and ``exact_`` (True when
    every point was fitted) the attribute. Until the next release ``solver_`` still answers, with
    a ``DeprecationWarning``, and a job's result extras keep their ``solver`` entry beside
    ``exact``. Comes before :class:`~algorithms.base.MMCEstimatorMixin` in the bases.
    """

    exact_: bool

    @property
    def solver_(self) -> str:
        """``"exact"`` if ``exact_`` else ``"sample"``.

        .. deprecated:: 0.2 Use ``exact_``; ``solver_`` goes in the next release.
        """
        mode = sampling_mode(self.exact_)  # AttributeError before a fit, as for exact_ itself
        warnings.warn("solver_ is deprecated: exact_ says whether every point was fitted "
                      "(solver_ == 'exact'); solver_ goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return mode

    def result_extras(self) -> dict[str, Any]:
        """The extras of :meth:`~algorithms.base.MMCEstimatorMixin.result_extras`, with the
        ``solver`` entry of the previous release beside ``exact``."""
        extras = super().result_extras()  # type: ignore[misc]
        if "exact" in extras:
            extras["solver"] = sampling_mode(extras["exact"])
        return extras
