"""SVC's divisive schedule for the width ``q`` and ``p = 1/(NC)`` (section 4).

Ben-Hur, Horn, Siegelmann and Vapnik 2001, "A Support Vector Method for Clustering" (NIPS).
``gamma="schedule"`` starts at ``q = 1 / max_ij ||x_i - x_j||^2`` (one cluster), raises ``q``
until the contours split into ``n_clusters`` clusters, and raises ``p`` whenever single points
break off or support vectors become too many, so a user need not guess ``q``. Each step is one
sphere and its contours (:func:`fit_svc`, on :mod:`algorithms.svc_sphere`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from algorithms.kernels import copies_of_rows, squared_distances
from algorithms.svc_sphere import (
    BATCH_ENTRIES,
    Sphere,
    label_points,
    nearest,
    relabel_by_size,
    solve_enclosing_sphere,
)

# Above this many points the diameter for gamma="schedule" is bounded by 2 max ||x - mean||.
_EXACT_DIAMETER_MAX_N = 5000
# gamma="schedule" stops raising p = 1/(NC) here: at p = 1 every point is a bounded SV.
_MAX_P = 0.95


def max_squared_distance(X: np.ndarray) -> float:
    """``max_ij ||x_i - x_j||^2``: exact up to 5,000 points, else ``(2 max ||x - mean||)^2``."""
    n = X.shape[0]
    if n > _EXACT_DIAMETER_MAX_N:
        return float(4.0 * ((X - X.mean(axis=0)) ** 2).sum(axis=1).max())
    best = 0.0
    step = max(1, BATCH_ENTRIES // n)
    for start in range(0, n, step):
        best = max(best, float(squared_distances(X[start : start + step], X).max()))
    return best


@dataclass
class SphereFit:
    """One sphere at ``q = gamma`` and ``p = 1/(NC)`` and the clusters of its contours."""

    gamma: float
    p: float
    sphere: Sphere
    labels: np.ndarray  # -1 at bounded SVs
    # False when the schedule found no sphere with n_clusters clusters of at least the small size
    # and this fit is its fallback (fewer clusters, or the largest groups of the fullest sphere).
    substantial: bool = True

    def cluster_sizes(self) -> np.ndarray:
        return np.bincount(self.labels[self.labels >= 0])

    @property
    def n_groups(self) -> int:
        """Clusters once the bounded SVs join them (one when nothing is inside the sphere)."""
        return max(int(self.labels.max()) + 1, 1)


def fit_svc(X, gamma, p, labeling, n_neighbors, n_points, tol, cache_size,
            rows=None) -> SphereFit:
    """One run of SVC at fixed ``q = gamma`` and ``p = 1/(NC)``: sphere, then labeling
    (``rows``: see :func:`algorithms.svc_sphere.solve_enclosing_sphere`)."""
    sphere = solve_enclosing_sphere(X, gamma, p, tol, cache_size, rows)
    return SphereFit(gamma, p, sphere,
                     label_points(sphere, X, labeling, n_neighbors, n_points, rows))


def keep_largest_clusters(fit: SphereFit, X: np.ndarray, n_keep: int) -> SphereFit:
    """``fit`` with its ``n_keep`` largest clusters kept and every other cluster joined to the
    cluster of its points' nearest point in a kept one (as bounded SVs join the nearest
    cluster). Cluster ids are ordered by decreasing size
    (:func:`algorithms.svc_sphere.label_points`)."""
    labels = fit.labels.copy()
    labeled = np.flatnonzero(labels >= 0)
    kept = labeled[labels[labeled] < n_keep]
    others = labeled[labels[labeled] >= n_keep]
    if others.size and kept.size:
        labels[others] = labels[kept[nearest(X[kept], X[others], 1)[:, 0]]]
    labels[labeled] = relabel_by_size(labels[labeled])
    return SphereFit(fit.gamma, fit.p, fit.sphere, labels)


def divisive_schedule(X, n_clusters, p, labeling, n_neighbors, n_points, tol, cache_size, *,
                      min_cluster_fraction=0.05, growth=1.1, p_step=0.05, max_sv_fraction=0.5,
                      max_iter=200, on_step=None
                      ) -> tuple[SphereFit, list[dict[str, Any]], list[str]]:
    """Section 4: raise ``q`` from ``1 / max ||x_i - x_j||^2`` until ``n_clusters`` clusters appear.

    At each ``q``: when small groups break off (clusters of fewer than
    :func:`smallest_cluster_size` points, the paper's "single point clusters") or the support
    vectors exceed :func:`most_support_vectors` (overfitting, Figure 2a), ``p = 1/(NC)`` is
    raised by ``p_step`` and the sphere is solved again at the same ``q``; otherwise ``q`` is
    multiplied by ``growth``. When one step jumps past ``n_clusters``, ``q`` is bisected
    (geometrically) between the last two values. Returns the chosen fit, the schedule (one record
    per solved sphere) and warnings.

    When no clean split is reached (small groups keep breaking off at the largest ``p``, a jump
    that bisection cannot resolve, or ``max_iter``), the first sphere that had exactly
    ``n_clusters`` clusters of at least the small size is kept, its small groups joined to the
    nearest of them (:func:`keep_largest_clusters`): on some data the contours never split
    without fragments at any ``p``, and the last clean split is one cluster. When no sphere had
    ``n_clusters`` clusters of that size, the sphere whose ``n_clusters``-th largest group was
    largest is kept the same way and the fit is marked not ``substantial``: a caller who asks for
    ``n_clusters`` gets them whenever any contours had that many groups. When none did, the
    estimator retries on principal components (``n_components="auto"``).
    """
    schedule = _Schedule(X, n_clusters, (labeling, n_neighbors, n_points, tol, cache_size),
                         min_size=smallest_cluster_size(X.shape[0], n_clusters,
                                                        min_cluster_fraction),
                         max_support=most_support_vectors(X.shape[0], n_clusters,
                                                          max_sv_fraction),
                         on_step=on_step)
    fit = schedule.run(1.0 / max_squared_distance(X), p, growth=growth, p_step=p_step,
                       max_iter=max_iter)
    return fit, schedule.history, schedule.warnings


class _Schedule:
    """The state of one :func:`divisive_schedule`: the spheres solved so far (``history``, one
    record each), its warnings, and the fallbacks it keeps in case no clean split comes: the
    first sphere with ``n_clusters`` clusters of at least ``min_size`` points beside smaller
    groups, and the fullest sphere (the most groups, at least two and up to ``n_clusters``,
    and among those the largest smallest one; one group is no split, and the last clean split
    answers that case)."""

    def __init__(self, X: np.ndarray, n_clusters: int, sphere_args: tuple, *, min_size: int,
                 max_support: float,
                 on_step: Callable[[int, float, float, int, int], None] | None):
        self.X, self.n_clusters, self.sphere_args = X, n_clusters, sphere_args
        self.rows = copies_of_rows(X)
        self.min_size, self.max_support, self.on_step = min_size, max_support, on_step
        self.history: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.first_with_fragments: SphereFit | None = None
        self.fullest: SphereFit | None = None
        self.fullest_key = (1, 0)  # (groups kept, size of the smallest kept)
        self.step = 0

    def solve(self, q_value: float, p_value: float) -> tuple[SphereFit, int, int]:
        """The sphere at ``(q, p)``, recorded, with its clusters of at least ``min_size`` points
        and its smaller groups counted."""
        self.step += 1
        fit = fit_svc(self.X, q_value, p_value, *self.sphere_args, self.rows)
        sizes = fit.cluster_sizes()
        n_big = int(np.count_nonzero(sizes >= self.min_size))
        n_small = int(sizes.size - n_big)
        self.history.append({
            "gamma": q_value, "p": p_value, "n_clusters": int(sizes.size), "n_small": n_small,
            "n_support": int(np.count_nonzero(~fit.sphere.bounded)),
            "n_bounded": int(np.count_nonzero(fit.sphere.bounded))})
        if self.on_step is not None:
            self.on_step(self.step, q_value, p_value, sizes.size, n_small)
        if n_big == self.n_clusters and n_small > 0 and self.first_with_fragments is None:
            self.first_with_fragments = fit
        # Cluster ids run by decreasing size (label_points): sizes[kept - 1] is the smallest kept.
        kept = min(sizes.size, self.n_clusters)
        if kept >= 2 and (kept, int(sizes[kept - 1])) > self.fullest_key:
            self.fullest, self.fullest_key = fit, (kept, int(sizes[kept - 1]))
        return fit, n_big, n_small

    def run(self, q: float, p: float, *, growth: float, p_step: float,
            max_iter: int) -> SphereFit:
        """The schedule from ``(q, p)`` (see :func:`divisive_schedule`): the fit it ends with."""
        n_clusters = self.n_clusters
        q_low = None  # last q with fewer clusters than wanted and no small ones
        best: SphereFit | None = None
        fit = None
        while self.step < max_iter:
            fit, n_big, n_small = self.solve(q, p)
            n_sv = int(np.count_nonzero(~fit.sphere.bounded))
            if n_small > 0 or n_sv > self.max_support:
                if p < _MAX_P:
                    p = min(_MAX_P, p + p_step)
                    continue
                self.warnings.append(
                    f"gamma='schedule' could not reach {n_clusters} clusters: small groups keep "
                    f"breaking off at q={q:.4g} even with p={p:.3g}"
                )
                return self.with_fragments_merged(best if best is not None else fit,
                                                  "the last clean split")
            if n_big == n_clusters and n_small == 0:
                return fit
            if n_big > n_clusters and q_low is not None:
                found = _bisect(self.solve, q_low, q, p, n_clusters, max_iter - self.step)
                if found is None:
                    self.warnings.append(
                        f"gamma='schedule' jumped from fewer than {n_clusters} clusters to "
                        f"{n_big} between q={q_low:.4g} and q={q:.4g}")
                    found = self.with_fragments_merged(fit, f"the split into {n_big}")
                return found
            if n_big >= n_clusters:
                self.warnings.append(
                    f"gamma='schedule' found {n_big} clusters where {n_clusters} were asked for "
                    f"(q={q:.4g}, p={p:.3g})"
                )
                return fit
            q_low = q
            best = fit
            q *= growth
        self.warnings.append(
            f"gamma='schedule' stopped after {max_iter} spheres without reaching {n_clusters} "
            "clusters"
        )
        return self.with_fragments_merged(best if best is not None else fit,
                                          "the last clean split")

    def with_fragments_merged(self, fallback: SphereFit, what: str) -> SphereFit:
        """The fit kept when no clean split was reached: the first sphere with ``n_clusters``
        clusters of at least ``min_size`` points, its smaller groups joined to the nearest of
        them; else the fullest sphere, its groups beyond the kept ones joined likewise (not
        ``substantial`` when it has fewer than ``n_clusters`` of that size); else ``fallback``
        (``what`` names it in the warning)."""
        n_clusters, min_size = self.n_clusters, self.min_size
        if self.first_with_fragments is not None:
            first = self.first_with_fragments
            self.warnings.append(
                f"kept the first sphere with {n_clusters} clusters of at least {min_size} points "
                f"(q={first.gamma:.4g}, p={first.p:.3g}); its smaller groups joined the "
                "nearest of them"
            )
            return keep_largest_clusters(first, self.X, n_clusters)
        if self.fullest is not None:
            kept, smallest = self.fullest_key
            self.warnings.append(
                f"no sphere had {n_clusters} clusters of at least {min_size} points; kept the "
                f"one with the most groups up to {n_clusters} and the largest smallest group "
                f"(q={self.fullest.gamma:.4g}, p={self.fullest.p:.3g}: {kept} groups, the "
                f"smallest {smallest} point{'' if smallest == 1 else 's'}), the other groups "
                "joined the nearest of them"
            )
            return replace(keep_largest_clusters(self.fullest, self.X, kept),
                           substantial=self.fullest_key >= (n_clusters, min_size))
        self.warnings.append(f"returning {what}")
        return replace(fallback, substantial=fallback.n_groups >= n_clusters)


def smallest_cluster_size(n: int, n_clusters: int, fraction: float) -> int:
    """Size below which a group of the contours is a fragment, not a cluster: ``fraction`` of the
    points (the paper's "single point clusters", grown with ``n``), but at most half the mean
    cluster size ``n / (2 n_clusters)``, and single points only when the clusters asked for
    average fewer than four points. Without the cap, many small clusters asked for would all
    count as fragments, and a handful of points could never be split."""
    return max(1, min(max(2, math.ceil(fraction * n)), n // (2 * n_clusters)))


def most_support_vectors(n: int, n_clusters: int, fraction: float) -> float:
    """Support vectors above which a sphere overfits (Figure 2a): ``fraction`` of the points, but
    never fewer than two per cluster asked for, the fewest that outline ``n_clusters``
    contours; otherwise on a handful of points ``p`` would rise to its limit before any split
    is tried."""
    return max(fraction * n, 2.0 * n_clusters)


def _bisect(solve, q_low: float, q_high: float, p: float, n_clusters: int, budget: int):
    """Geometric bisection of ``q`` between too few and too many clusters (at most 8 steps)."""
    for _ in range(min(8, budget)):
        q_mid = math.sqrt(q_low * q_high)
        fit, n_big, n_small = solve(q_mid, p)
        if n_big == n_clusters and n_small == 0:
            return fit
        if n_big < n_clusters:
            q_low = q_mid
        else:
            q_high = q_mid
    return None
