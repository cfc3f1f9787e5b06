"""Pictures of a finished job, drawn by the API the first time ``GET /v1/jobs/{id}/plot`` asks
for one and then served from the plot store, so no job's turnaround pays for a picture.

Matplotlib's object API (``Figure`` without pyplot) needs no display; ``rc_context`` is global,
so :func:`job_plot` draws one figure at a time per process. Text stays text in the SVG
(``svg.fonttype: none``): smaller, and searchable.

- Vectors with 2 features: the points themselves, coloured by cluster, over the regions the
  job's out-of-sample model predicts on a grid (``estimator.predict``).
- More features: the first two principal components, which the title says.
- Outliers (label ``-1`` of a clusterer, or the indices in the result's ``outliers``) are marked.
- Sequences: one row per sequence, the state at each position.
- ``n_clusters="auto"``: beside the points, the prediction strength of every k considered.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from algorithms.params.common import STRENGTH_THRESHOLD

# A scatter of more points says nothing more and makes the SVG heavy; the title says so.
MAX_POINTS = 5_000
MAX_SEQUENCES = 60
# The predicted-region grid has at most GRID x GRID points, fewer when the model's predict is
# slow (SVC's segment test): its cost is measured on a few points and the grid sized to a budget.
GRID = 150
MIN_GRID = 40
PREDICT_BUDGET_SECONDS = 1.0
RC = {"svg.fonttype": "none", "svg.hashsalt": "mmc", "font.size": 9}


def palette(n_colors: int) -> list[Any]:
    """Distinct colours for ``n_colors`` clusters (tab10, tab20, then an evenly spaced hsv)."""
    if n_colors <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n_colors)]
    if n_colors <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n_colors)]
    return [matplotlib.colormaps["hsv"](i / n_colors) for i in range(n_colors)]


def render(figure: Figure) -> dict[str, bytes]:
    """SVG and PNG bytes; the layout is computed once for both (each layout pass is a draw)."""
    images = {}
    with matplotlib.rc_context(RC):
        figure.tight_layout()
        for fmt in ("svg", "png"):
            buffer = io.BytesIO()
            figure.savefig(buffer, format=fmt, dpi=100,
                           metadata={"Date": None} if fmt == "svg" else None)
            images[fmt] = buffer.getvalue()
    return images


def project_2d(X: np.ndarray) -> tuple[np.ndarray, str | None]:
    """``X`` itself when it has two features, else its first two principal components and the
    words saying so; a single feature is drawn against the point's index."""
    if X.shape[1] == 2:
        return X, None
    if X.shape[1] == 1:
        return np.column_stack([X[:, 0], np.arange(X.shape[0])]), "1 feature against index"
    from sklearn.decomposition import PCA

    pca = PCA(n_components=2, random_state=0).fit(X)
    share = 100.0 * float(pca.explained_variance_ratio_.sum())
    return pca.transform(X), (f"PCA projection of {X.shape[1]} features "
                              f"({share:.0f} % of the variance)")


def grid_size(X: np.ndarray, predict: Callable[[np.ndarray], np.ndarray]) -> int:
    """Points per side of the region grid that ``predict`` labels within the time budget."""
    probe = X[: min(len(X), 256)]
    started = time.perf_counter()
    predict(probe)
    per_point = max(time.perf_counter() - started, 1e-6) / len(probe)
    return int(np.clip(np.sqrt(PREDICT_BUDGET_SECONDS / per_point), MIN_GRID, GRID))


def predicted_regions(X: np.ndarray, predict: Callable[[np.ndarray], np.ndarray]
                      ) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """The model's label on a mesh over the data's bounding box (5 % margin)."""
    low, high = X.min(axis=0), X.max(axis=0)
    margin = 0.05 * np.where(high > low, high - low, 1.0)
    low, high = low - margin, high + margin
    size = grid_size(X, predict)
    xs = np.linspace(low[0], high[0], size)
    ys = np.linspace(low[1], high[1], size)
    xx, yy = np.meshgrid(xs, ys)
    Z = np.asarray(predict(np.column_stack([xx.ravel(), yy.ravel()]))).reshape(xx.shape)
    return Z, (float(low[0]), float(high[0]), float(low[1]), float(high[1]))


def vectors_figure(X: np.ndarray, labels: np.ndarray, *, title: str,
                   predict: Callable[[np.ndarray], np.ndarray] | None = None,
                   outlier_label: int | None = -1,
                   outliers: Sequence[int] = (),
                   strengths: Mapping[str, float] | None = None,
                   chosen_k: int | None = None) -> Figure:
    """Points coloured by cluster; regions of ``predict`` when ``X`` has two features; beside
    them, for ``n_clusters="auto"``, the prediction strength of every k considered and the k
    chosen (which a fit may end with fewer clusters than).

    A clusterer's outliers are the points labelled ``outlier_label``: an index of ``outliers``
    whose point has a cluster (svc's bounded SVs under ``bounded_svs="chain"``) is drawn in that
    cluster. A classifier (``outlier_label=None``) has a class for every point, and its
    ``outliers`` (robust_svm's ablated points) are marked over their class."""
    X = np.asarray(X, dtype=float)
    labels = np.asarray(labels)
    n = X.shape[0]
    is_outlier = np.zeros(n, dtype=bool)
    if outlier_label is not None:
        is_outlier |= labels == outlier_label
    else:
        is_outlier[np.asarray([i for i in outliers if 0 <= int(i) < n], dtype=np.int64)] = True
    classes = np.unique(labels[labels != outlier_label] if outlier_label is not None else labels)
    colors = palette(max(len(classes), 1))
    color_index = {value: i for i, value in enumerate(classes.tolist())}

    points, projection = project_2d(X)
    subtitle = [projection] if projection else []
    shown = np.arange(n)
    if n > MAX_POINTS:
        shown = np.sort(np.random.default_rng(0).choice(n, MAX_POINTS, replace=False))
        subtitle.append(f"{MAX_POINTS} of {n} points shown")

    if strengths:
        figure = Figure(figsize=(9.6, 5.2))
        ax, strength_ax = figure.subplots(1, 2, width_ratios=(2, 1))
        strengths_panel(strength_ax, strengths, chosen=chosen_k)
    else:
        figure = Figure(figsize=(6.4, 5.2))
        ax = figure.add_subplot()
    if predict is not None and X.shape[1] == 2:
        Z, extent = predicted_regions(X, predict)
        codes = np.vectorize(lambda v: color_index.get(v, -1), otypes=[float])(Z)
        codes[codes < 0] = np.nan  # outside every cluster (e.g. SVC's -1): left blank
        ax.imshow(codes, extent=extent, origin="lower", aspect="auto", alpha=0.25,
                  interpolation="nearest", cmap=ListedColormap(colors),
                  vmin=-0.5, vmax=len(colors) - 0.5)
        subtitle.append("shaded: regions the model predicts")
    inliers = shown[~is_outlier[shown]]
    # A classifier's labels are classes (robust_svm), a clusterer's are clusters.
    noun = "cluster" if outlier_label is not None else "class"
    for value, i in color_index.items():
        members = inliers[labels[inliers] == value]
        count = int(np.sum((labels == value) & ~is_outlier))
        ax.scatter(points[members, 0], points[members, 1], s=12, color=colors[i],
                   edgecolors="none", label=f"{noun} {value} ({count})")
    flagged = shown[is_outlier[shown]]
    if flagged.size:
        ax.scatter(points[flagged, 0], points[flagged, 1], s=36, marker="x", color="black",
                   linewidths=1.2, label=f"outlier ({int(is_outlier.sum())})")
    ax.set_xlabel("PC 1" if projection and "PCA" in projection else "feature 0")
    ax.set_ylabel("PC 2" if projection and "PCA" in projection else
                  ("index" if X.shape[1] == 1 else "feature 1"))
    ax.set_title(title + ("\n" + "; ".join(subtitle) if subtitle else ""))
    if len(color_index) <= 20:
        ax.legend(loc="best", fontsize=8, framealpha=0.8)
    return figure


def strengths_panel(ax, strengths: Mapping[str, float], chosen: int | None) -> None:
    """Prediction strength against k (``n_clusters="auto"``), the threshold dashed and the
    chosen k marked."""
    points = sorted((int(k), float(value)) for k, value in strengths.items())
    ks, values = [k for k, _ in points], [value for _, value in points]
    ax.plot(ks, values, marker="o", color="0.3")
    ax.axhline(STRENGTH_THRESHOLD, linestyle="--", color="0.6", linewidth=1)
    if chosen in ks:
        ax.plot([chosen], [values[ks.index(chosen)]], marker="o", markersize=11,
                markerfacecolor="none", markeredgecolor="C3", markeredgewidth=2)
    ax.set_ylim(0, 1.05)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("k")
    ax.set_ylabel("prediction strength")
    ax.set_title("n_clusters='auto'" if chosen is None else f"n_clusters='auto': k = {chosen}")


def sequences_figure(labels: Sequence[Sequence[int]], *, title: str) -> Figure:
    """State by position: one row per sequence (the first ``MAX_SEQUENCES``), blank past its end."""
    rows = [np.asarray(row, dtype=np.int64) for row in labels[:MAX_SEQUENCES]]
    width = max((len(row) for row in rows), default=1)
    grid = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        grid[i, : len(row)] = row
    states = np.unique(np.concatenate(rows)) if rows else np.array([0])
    colors = palette(int(states.max()) + 1 if states.size else 1)
    figure = Figure(figsize=(6.4, 1.2 + 0.18 * max(len(rows), 8)))
    ax = figure.add_subplot()
    ax.imshow(grid, aspect="auto", interpolation="nearest", cmap=ListedColormap(colors),
              vmin=-0.5, vmax=len(colors) - 0.5)
    for state in states.tolist():
        ax.scatter([], [], marker="s", color=colors[int(state)], label=f"state {state}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("position")
    ax.set_ylabel("sequence")
    shown = "" if len(labels) <= MAX_SEQUENCES else f"\nfirst {MAX_SEQUENCES} of {len(labels)}"
    ax.set_title(f"{title}: state by position{shown}")
    return figure


_DRAWING = threading.Lock()


def job_plot(algorithm: str, data: Any, labels: Any, *, predict=None, outlier_label=-1,
             outliers: Sequence[int] = (),
             strengths: Mapping[str, float] | None = None,
             chosen_k: int | None = None) -> dict[str, bytes]:
    """SVG and PNG of a finished job: ``data`` is its matrix or its list of sequences."""
    with _DRAWING:
        if isinstance(data, list):
            figure = sequences_figure(labels, title=algorithm)
        else:
            figure = vectors_figure(data, labels, title=f"{algorithm}: {len(data)} points",
                                    predict=predict, outlier_label=outlier_label,
                                    outliers=outliers, strengths=strengths,
                                    chosen_k=chosen_k)
        return render(figure)
