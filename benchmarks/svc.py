"""Support vector clustering benchmark (Ben-Hur et al. 2001): the paper's Table 1 (iris on 2, 3,
4 principal components), the rings-with-a-core set of Figure 2, and seconds against n for 2-D data
per labeling strategy;
``--defaults-at-scale``: the defaults (only ``n_clusters``) against n, sampled and exact, beside
k-means.

Run: ``python -m benchmarks.svc [--quick | --defaults-at-scale]``, as a user runs it (the
library sets its own thread limits where they matter). Prints Markdown.
Iris is projected on its principal components in centimetres (centred, not scaled): the scale at
which the paper's q reproduces its SV counts. Timing data: the Figure 2 set grown to n points
(same 1:3:6 proportions), q = 1, 1/(NC) = 0.1. Wall and CPU seconds are both printed because the
machine may be shared; CPU seconds are the better guide to an idle machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_iris
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from algorithms.metrics import clustering_error
from algorithms.svc import SupportVectorClustering
from algorithms.svc_sphere import label_points, solve_enclosing_sphere
from benchmarks import docs_pages
from benchmarks.defaults import large_sets, registry_clusterer, scikit_learn_peers, score

LABELINGS = ("complete", "support_vectors", "knn")
TABLE_1 = {2: (4.2, 0.55, 20, 72, 4), 3: (7.0, 0.70, 23, 94, 4), 4: (9.0, 0.75, 34, 96, 14)}


def rings_with_a_core(n: int = 500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Figure 2: a Gaussian core inside two rings (uniform angle, Gaussian radius), 50/150/300
    points for n = 500. Radii 2 and 4, radial sd 0.2, core sd 0.4: the caption's q = 1 and
    1/(NC) = 0.3 separate the three groups at this scale."""
    rng = np.random.default_rng(seed)
    counts = np.round(np.array([50, 150, 300]) * n / 500).astype(int)
    parts = [rng.normal(0.0, 0.4, size=(counts[0], 2))]
    for count, radius in zip(counts[1:], (2.0, 4.0), strict=True):
        angle = rng.uniform(0.0, 2 * np.pi, count)
        r = radius + rng.normal(0.0, 0.2, count)
        parts.append(np.column_stack([r * np.cos(angle), r * np.sin(angle)]))
    return np.vstack(parts), np.repeat([0, 1, 2], counts)


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def table_1() -> None:
    X, y = load_iris(return_X_y=True)
    print("| Table 1: PCs | q | 1/(NC) | labeling | SVs (paper) | bounded SVs (paper) "
          "| clusters | misclassified (paper) | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for components, (q, p, sv, bsv, miss) in TABLE_1.items():
        Z = PCA(components).fit_transform(X)
        for labeling in LABELINGS:
            model, wall, _ = _timed(lambda Z=Z, q=q, p=p, labeling=labeling: (
                SupportVectorClustering(gamma=q, p=p, labeling=labeling, tol=1e-6).fit(Z)))
            ours = round(clustering_error(y, model.labels_) * len(y))
            print(f"| 1-{components} | {q} | {p} | {labeling} | {model.n_support_} ({sv}) "
                  f"| {model.n_bounded_} ({bsv}) | {model.n_clusters_} | {ours} ({miss}) "
                  f"| {wall:.2f} |")
        model, wall, _ = _timed(lambda Z=Z: SupportVectorClustering(3, gamma="schedule").fit(Z))
        ours = round(clustering_error(y, model.labels_) * len(y))
        print(f"| 1-{components} | auto: {model.gamma_:.2f} | auto: {model.p_:.2f} "
              f"| support_vectors | {model.n_support_} | {model.n_bounded_} | {model.n_clusters_} "
              f"| {ours} | {wall:.2f} |")


def figure_2() -> None:
    X, y = rings_with_a_core()
    print("\n| Figure 2 rings (500 points) | labeling | clusters | outliers | errors among "
          "inliers | ARI vs complete | s |")
    print("|---|---|---|---|---|---|---|")
    reference = None
    for labeling in LABELINGS:
        model, wall, _ = _timed(lambda labeling=labeling: SupportVectorClustering(
            gamma=1.0, p=0.3, labeling=labeling, bounded_svs="outlier").fit(X))
        inliers = model.labels_ >= 0
        errors = round(clustering_error(y[inliers], model.labels_[inliers]) * inliers.sum())
        reference = model.labels_ if reference is None else reference
        print(f"| (b) q=1, 1/(NC)=0.3 | {labeling} | {model.n_clusters_} | {(~inliers).sum()} "
              f"| {errors} | {adjusted_rand_score(reference, model.labels_):.3f} | {wall:.2f} |")
    model = SupportVectorClustering(gamma=3.5, C=1.0).fit(X)
    print(f"| (a) q=3.5, C=1 | support_vectors | {model.n_clusters_} | 0 "
          f"| {round(clustering_error(y, model.labels_) * len(y))} (all points) | - | - |")
    model, wall, _ = _timed(lambda: SupportVectorClustering(3, gamma="schedule",
                                                            bounded_svs="outlier").fit(X))
    inliers = model.labels_ >= 0
    errors = round(clustering_error(y[inliers], model.labels_[inliers]) * inliers.sum())
    print(f"| auto, k=3 (q={model.gamma_:.2f}, 1/(NC)={model.p_:.2f}) | support_vectors "
          f"| {model.n_clusters_} | {(~inliers).sum()} | {errors} | - | {wall:.2f} |")


def scaling(sizes: list[int]) -> None:
    print("\n| n | sphere s (CPU) | labeling | labeling s (CPU) | total s | clusters "
          "| error among inliers |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        X, y = rings_with_a_core(n)
        sphere, s_wall, s_cpu = _timed(lambda X=X: solve_enclosing_sphere(X, 1.0, 0.1))
        for labeling in LABELINGS:
            if labeling == "complete" and n > 3000:
                print(f"| {n} | - | complete | skipped (O(N^2), service limit 3,000) | - | - | - |")
                continue
            labels, l_wall, l_cpu = _timed(
                lambda X=X, sphere=sphere, labeling=labeling: label_points(
                    sphere, X, labeling, 10, 20))
            inliers = labels >= 0
            error = clustering_error(y[inliers], labels[inliers])
            print(f"| {n} | {s_wall:.2f} ({s_cpu:.2f}) | {labeling} | {l_wall:.2f} ({l_cpu:.2f}) "
                  f"| {s_wall + l_wall:.2f} | {max(labels.max() + 1, 1)} | {100 * error:.2f} % |")


def defaults_scaling(sizes: list[int], exact_max_n: int) -> None:
    """Seconds and ARI of SVC with only ``n_clusters`` given, against n: the default
    ``solver="auto"`` (a sample of ``SAMPLE_SIZE`` points above it, labelled by predict), the
    exact fit of every point up to ``exact_max_n``, and k-means in the same run."""
    clusterers = {
        "k-means": scikit_learn_peers()["k-means"],
        "defaults": registry_clusterer("svc"),
        "exact": lambda X, k, seed: SupportVectorClustering(k, exact_max_n=None).fit(X).labels_,
    }
    print("\n| set | n | k-means ARI (s) | svc defaults ARI (s) | svc exact_max_n=None ARI (s) |"
          "\n|---|---|---|---|---|")
    for n in sizes:
        for data in large_sets(n):
            cells = []
            for name, clusterer in clusterers.items():
                if name == "exact" and n > exact_max_n:
                    cells.append("-")
                    continue
                result = score(clusterer, data)
                cells.append(f"{result.ari:.3f} ({result.seconds:.2f})")
            print(f"| {data.name} | {n:,} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="timing only up to 5,000 points")
    parser.add_argument("--defaults-at-scale", action="store_true",
                        help="only the table of the defaults against n (up to 50,000 points)")
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    page = docs_pages.algorithm_page("svc")
    if args.defaults_at_scale:
        with docs_pages.record(args.write_docs, page, "svc-at-scale", "benchmarks.svc"):
            defaults_scaling([2000, 5000, 10000, 50000], exact_max_n=10000)
        return
    with docs_pages.record(args.write_docs, page, "svc-paper", "benchmarks.svc"):
        table_1()
        figure_2()
        scaling([1000, 2000, 5000] if args.quick else [1000, 2000, 5000, 10000, 20000])


if __name__ == "__main__":
    main()
