"""Defaults against scikit-learn's clusterers: only ``n_clusters`` and ``random_state`` given.

Run: ``python -m benchmarks.defaults [--algorithms itersvr cpm3c svc] [--heldout | --sweep]``;
``--at-scale 1000000`` prints ARI, seconds and peak memory on larger data (``large_sets``), each
fit in its own process, beside k-means and MiniBatchKMeans;
``--grid 500 2000`` the same on data with repeated rows (``grid_sets``);
``--auto [--heldout]`` each algorithm with ``n_clusters="auto"``, and ``--auto-seeds 0 1 2 3 4``
the choice alone at several random states (``auto_seed_table``).

A user of the service sends data and ``n_clusters``. This script runs every clustering algorithm
of the registry that way beside scikit-learn's KMeans(n_init=10),
SpectralClustering(affinity="nearest_neighbors"), GaussianMixture and
AgglomerativeClustering (Ward), in one run and one process, and prints a Markdown table of the
adjusted Rand index (ARI) and seconds per set, then a summary line per algorithm: mean ARI, and
the sets within 0.05 ARI of the best scikit-learn clusterer and of k-means.

The ten public sets (``public_sets``) are those of scikit-learn's "Comparing different clustering
algorithms on toy datasets" example at 300 points (blobs ``random_state=8``; noisy moons
``noise=0.05``; noisy circles ``factor=0.5, noise=0.05``; anisotropic blobs (transformation
``[[0.6, -0.6], [-0.4, 0.8]]``); blobs of varied spread ``cluster_std=[1.0, 2.5, 0.5]``; all with
``random_state=170`` unless said; standardized as in the example), iris and wine standardized,
300 standardized breast-cancer points (``numpy.random.default_rng(0)``), digits 4-9 and every
second digit of {0, 1, 2}. ``heldout_sets`` makes other data of the same kinds (other seeds,
noise, sizes, scales and offsets, and more standardized real data); no default was tuned on it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
from sklearn.cluster import (
    HDBSCAN,
    AgglomerativeClustering,
    KMeans,
    MiniBatchKMeans,
    SpectralClustering,
)
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_blobs,
    make_circles,
    make_moons,
)
from sklearn.metrics import adjusted_rand_score, silhouette_score
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler

from benchmarks import docs_pages

ANISOTROPIC = np.array([[0.6, -0.6], [-0.4, 0.8]])


@dataclass(frozen=True)
class ClusteringSet:
    name: str
    X: np.ndarray
    y: np.ndarray

    @property
    def n_clusters(self) -> int:
        return int(np.unique(self.y).size)


def _standardized(name: str, X: np.ndarray, y: np.ndarray) -> ClusteringSet:
    return ClusteringSet(name, StandardScaler().fit_transform(X), np.asarray(y))


def _digits(name: str, digits: tuple[int, ...], every: int = 1) -> ClusteringSet:
    X, y = load_digits(return_X_y=True)
    index = np.flatnonzero(np.isin(y, digits))[::every]
    return ClusteringSet(name, X[index], y[index])


def toy_sets(n: int = 300, seed: int = 170, noise: float = 0.05,
             blobs_seed: int = 8) -> list[ClusteringSet]:
    """The five generated sets of scikit-learn's comparison example, standardized as there."""
    blobs = make_blobs(n_samples=n, random_state=blobs_seed)
    moons = make_moons(n_samples=n, noise=noise, random_state=seed)
    circles = make_circles(n_samples=n, factor=0.5, noise=noise, random_state=seed)
    X, y = make_blobs(n_samples=n, random_state=seed)
    varied = make_blobs(n_samples=n, cluster_std=[1.0, 2.5, 0.5], random_state=seed)
    return [
        _standardized("blobs", *blobs),
        _standardized("noisy moons", *moons),
        _standardized("noisy circles", *circles),
        _standardized("anisotropic blobs", X @ ANISOTROPIC, y),
        _standardized("varied blobs", *varied),
    ]


def public_sets() -> list[ClusteringSet]:
    """The ten public sets the defaults are compared on against scikit-learn."""
    cancer_X, cancer_y = load_breast_cancer(return_X_y=True)
    pick = np.random.default_rng(0).choice(cancer_X.shape[0], size=300, replace=False)
    return [
        *toy_sets(),
        _standardized("iris", *load_iris(return_X_y=True)),
        _standardized("wine", *load_wine(return_X_y=True)),
        _standardized("breast cancer 300", cancer_X[pick], cancer_y[pick]),
        _digits("digits 4-9", (4, 9)),
        _digits("digits 0,1,2 (every 2nd)", (0, 1, 2), every=2),
    ]


def heldout_sets() -> list[ClusteringSet]:
    """Data of the same kinds as :func:`public_sets`, never used to choose a default."""
    rng = np.random.default_rng(12345)
    sets: list[ClusteringSet] = []
    for n, seed, noise, blobs_seed in ((200, 3, 0.05, 1), (500, 11, 0.08, 21), (400, 29, 0.03, 5)):
        for s in toy_sets(n=n, seed=seed, noise=noise, blobs_seed=blobs_seed):
            sets.append(ClusteringSet(f"{s.name} n={n} seed={seed}", s.X, s.y))
    # Scale and offset: the same moons in raw units far from the origin.
    X, y = make_moons(n_samples=300, noise=0.06, random_state=7)
    sets.append(ClusteringSet("moons x1000 + 1e6", X * 1000.0 + 1e6, y))
    X, y = make_blobs(n_samples=400, centers=4, cluster_std=[0.5, 1.0, 1.5, 0.8], random_state=4)
    sets.append(ClusteringSet("4 blobs, raw units + 1e8", X + 1e8, y))
    X, y = make_circles(n_samples=300, factor=0.4, noise=0.04, random_state=9)
    sets.append(ClusteringSet("circles x 0.001", X * 1e-3, y))
    # Unbalanced clusters: 1:3 and 1:5 at k = 4 and 6.
    X, y = make_blobs(n_samples=[50, 150, 150, 150], cluster_std=0.6, random_state=2)
    sets.append(ClusteringSet("4 blobs 1:3", X, y))
    X, y = make_blobs(n_samples=[40, 200, 200, 200, 200, 200], cluster_std=0.5, random_state=6)
    sets.append(ClusteringSet("6 blobs 1:5", X, y))
    cancer_X, cancer_y = load_breast_cancer(return_X_y=True)
    pick = rng.choice(cancer_X.shape[0], size=300, replace=False)
    sets.append(_standardized("breast cancer 300 (other draw)", cancer_X[pick], cancer_y[pick]))
    sets.append(_standardized("breast cancer (all)", cancer_X, cancer_y))
    sets.append(_digits("digits 3-8", (3, 8)))
    sets.append(_digits("digits 1-7", (1, 7)))
    sets.append(_digits("digits {0,6,8,9}", (0, 6, 8, 9), every=2))
    digits_X, digits_y = load_digits(return_X_y=True)
    pick = rng.choice(digits_X.shape[0], size=600, replace=False)
    sets.append(ClusteringSet("digits 10 classes (600)", digits_X[pick], digits_y[pick]))
    iris_X, iris_y = load_iris(return_X_y=True)
    sets.append(_standardized("iris (petals)", iris_X[:, 2:], iris_y))
    wine_X, wine_y = load_wine(return_X_y=True)
    sets.append(_standardized("wine (5 features)", wine_X[:, :5], wine_y))
    return sets


def sweep_sets() -> list[ClusteringSet]:
    """36 more sets of the public kinds for checking a rule before it is adopted: the example's
    five shapes at four other seeds, seven digit pairs, three digit triples (every second
    point) and two 80 % subsamples each of standardized iris, wine and breast cancer. Like the
    held-out sets, no default was chosen on them."""
    rng = np.random.default_rng(777)
    sets: list[ClusteringSet] = []
    for seed in (1, 2, 4, 6):
        for s in toy_sets(n=300, seed=seed, noise=0.05, blobs_seed=seed + 30):
            sets.append(ClusteringSet(f"{s.name} s{seed}", s.X, s.y))
    for pair in [(0, 8), (2, 7), (5, 6), (3, 9), (4, 7), (1, 8), (6, 8)]:
        sets.append(_digits(f"digits {pair[0]}-{pair[1]}", pair))
    for triple in [(3, 5, 8), (1, 4, 7), (0, 6, 9)]:
        name = "digits {" + ",".join(map(str, triple)) + "} (every 2nd)"
        sets.append(_digits(name, triple, every=2))
    for name, loader in (("iris", load_iris), ("wine", load_wine),
                         ("breast cancer", load_breast_cancer)):
        X, y = loader(return_X_y=True)
        for draw in range(2):
            pick = rng.choice(X.shape[0], size=int(0.8 * X.shape[0]), replace=False)
            sets.append(_standardized(f"{name} 80 % #{draw}", X[pick], y[pick]))
    return sets


# ---------------------------------------------------------------------------------------------
# The clusterers: scikit-learn's peers and the registry's algorithms, each with defaults only
# ---------------------------------------------------------------------------------------------

Clusterer = Callable[[np.ndarray, int, int], np.ndarray]


def scikit_learn_peers() -> dict[str, Clusterer]:
    return {
        "k-means": lambda X, k, seed: KMeans(k, n_init=10, random_state=seed).fit_predict(X),
        "spectral": lambda X, k, seed: SpectralClustering(
            k, affinity="nearest_neighbors", random_state=seed).fit_predict(X),
        "GMM": lambda X, k, seed: GaussianMixture(k, random_state=seed).fit_predict(X),
        "Ward": lambda X, k, seed: AgglomerativeClustering(k).fit_predict(X),
    }


def registry_clusterer(name: str) -> Clusterer:
    from algorithms.registry import get_spec

    spec = get_spec(name)

    seeded = "random_state" in spec.params_model.model_fields

    def run(X: np.ndarray, k: int, seed: int) -> np.ndarray:
        params = {"n_clusters": k, **({"random_state": seed} if seeded else {})}
        return spec.build(params).fit(X).labels_

    return run


def clustering_algorithms() -> list[str]:
    from algorithms.registry import REGISTRY

    return [name for name, spec in REGISTRY.items()
            if spec.input_kind == "vectors" and spec.labels != "required"]


@dataclass
class Score:
    ari: float
    seconds: float
    error: str | None = None


def score(clusterer: Clusterer, data: ClusteringSet, seed: int = 0) -> Score:
    start = time.perf_counter()
    try:
        labels = clusterer(data.X, data.n_clusters, seed)
    except Exception as error:  # a refusal (k > 2 unsupported, too many points) scores 0
        return Score(0.0, time.perf_counter() - start, f"{type(error).__name__}: {error}")
    return Score(adjusted_rand_score(data.y, labels), time.perf_counter() - start)


def run_suite(sets: list[ClusteringSet], algorithms: list[str], seed: int = 0,
              with_peers: bool = True) -> dict[str, list[Score]]:
    clusterers: dict[str, Clusterer] = dict(scikit_learn_peers()) if with_peers else {}
    clusterers.update({name: registry_clusterer(name) for name in algorithms})
    return {name: [score(fn, s, seed) for s in sets] for name, fn in clusterers.items()}


def markdown_table(sets: list[ClusteringSet], scores: dict[str, list[Score]]) -> str:
    names = list(scores)
    lines = ["| set | n | k | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for i, s in enumerate(sets):
        cells = [f"{scores[m][i].ari:.3f}" + ("!" if scores[m][i].error else "") for m in names]
        lines.append(f"| {s.name} | {s.X.shape[0]} | {s.n_clusters} | " + " | ".join(cells) + " |")
    means = [f"**{np.mean([v.ari for v in scores[m]]):.3f}**" for m in names]
    lines.append("| mean ARI | | | " + " | ".join(means) + " |")
    seconds = [f"{sum(v.seconds for v in scores[m]):.2f}" for m in names]
    lines.append("| seconds, all sets | | | " + " | ".join(seconds) + " |")
    return "\n".join(lines)


def summary(scores: dict[str, list[Score]], algorithms: list[str]) -> list[str]:
    peers = [p for p in scikit_learn_peers() if p in scores]
    lines = []
    for name in algorithms:
        ari = np.array([v.ari for v in scores[name]])
        best_peer = np.max([[v.ari for v in scores[p]] for p in peers], axis=0)
        kmeans = np.array([v.ari for v in scores["k-means"]])
        spectral = np.mean([v.ari for v in scores["spectral"]])
        errors = [v.error for v in scores[name] if v.error]
        lines.append(
            f"- {name}: mean ARI {ari.mean():.3f} (spectral {spectral:.3f}); within 0.05 of the "
            f"best scikit-learn clusterer on {int(np.sum(ari >= best_peer - 0.05))} of {ari.size};"
            f" within 0.05 of k-means or better on {int(np.sum(ari >= kmeans - 0.05))} of "
            f"{ari.size}; {sum(v.seconds for v in scores[name]):.2f} s"
            + (f"; {len(errors)} refused ({errors[0]})" if errors else "")
        )
    return lines


def large_sets(n: int) -> list[ClusteringSet]:
    """Data for seconds, ARI and memory against n: noisy moons (noise 0.08, k-means ARI about
    0.26) and four separated blobs in 16 dimensions, unscaled."""
    moons = make_moons(n, noise=0.08, random_state=0)
    wide = make_blobs(n, n_features=16, centers=4, random_state=0)
    return [ClusteringSet("noisy moons", *moons), ClusteringSet("4 blobs, 16-D", *wide)]


def grid_sets(n: int) -> list[ClusteringSet]:
    """Data on a grid, as counts, ratings and rounded measurements are: two 2-D blobs (centres
    4 apart per coordinate, unit spread) rounded to steps 0.5 and 1, and three (a third centre
    at (0, 5)) rounded to 0.5. Rows repeat: 2,000 points hold about 200 and 70 distinct rows."""
    sets = []
    for centres, step in (([[0, 0], [4, 4]], 0.5), ([[0, 0], [4, 4]], 1.0),
                          ([[0, 0], [4, 4], [0, 5]], 0.5)):
        X, y = make_blobs(n, centers=centres, cluster_std=1.0, random_state=0)
        sets.append(ClusteringSet(f"{len(centres)} blobs, step {step}",
                                  np.round(X / step) * step, y))
    return sets


def grid_blobs(n_clusters: int, size: int, step: float, seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """``n_clusters`` 2-D blobs of ``size`` points (unit spread), centred ``step`` apart on a
    square grid filled row by row; points and their blob."""
    side = int(np.ceil(np.sqrt(n_clusters)))
    grid = np.array([(i, j) for i in range(side) for j in range(side)][:n_clusters], float)
    y = np.repeat(np.arange(n_clusters), size)
    noise = np.random.RandomState(seed).randn(y.size, 2)
    return np.repeat(step * grid, size, axis=0) + noise, y


def many_cluster_sets(n_clusters: int, size: int = 20) -> list[ClusteringSet]:
    """:func:`grid_blobs` 6 apart (separated) and 4 apart (touching: k-means ARI about 0.8)."""
    return [ClusteringSet(f"{n_clusters} blobs {step:g} apart",
                          *grid_blobs(n_clusters, size, step)) for step in (6.0, 4.0)]


def at_scale(algorithms: list[str], sizes: list[int], seed: int = 0,
             make_sets: Callable[[int], list[ClusteringSet]] = large_sets,
             peers: tuple[str, ...] = ("k-means",), in_processes: bool = False) -> None:
    """Print, row by row, a Markdown table of ARI (seconds) of the scikit-learn ``peers`` and of
    each algorithm with its defaults on ``make_sets(size)`` (:func:`large_sets`) at every size;
    an algorithm is skipped above the service's limit for it. The ``n`` column is the number of
    points. ``in_processes``: each fit in a fresh process of its own, whose peak resident memory
    (data, imports and fit) is printed too, with each fit's seconds over k-means'."""
    from algorithms.registry import get_spec

    clusterers = {**{name: peer_clusterer(name) for name in peers},
                  **{name: registry_clusterer(name) for name in algorithms}}
    limits = {name: get_spec(name).max_n_for(get_spec(name).params_model())
              for name in algorithms}
    print("| set | n | " + " | ".join(clusterers) + " |\n|---|---|" + "---|" * len(clusterers))
    for n in sizes:
        for data in make_sets(n):
            cells, kmeans_seconds = [], None
            for name, clusterer in clusterers.items():
                if data.y.size > limits.get(name, data.y.size):
                    cells.append("above max_n")
                    continue
                if not in_processes:
                    result = score(clusterer, data, seed)
                    cells.append(f"{result.ari:.3f} ({result.seconds:.1f} s)"
                                 + (" !" if result.error else ""))
                    continue
                result, peak = score_in_process(name, data, seed)
                kmeans_seconds = kmeans_seconds or (result.seconds if name == "k-means" else None)
                ratio = f", {result.seconds / kmeans_seconds:.1f}x" if kmeans_seconds else ""
                cells.append(f"{result.ari:.3f} ({result.seconds:.1f} s{ratio}, "
                             f"{peak / 2**30:.2f} GB)" + (" !" if result.error else ""))
            print(f"| {data.name} | {data.y.size:,} | " + " | ".join(cells) + " |", flush=True)


def through_service(algorithms: list[str], n: int, seed: int = 0) -> None:
    """Print a Markdown table of :func:`large_sets` jobs of ``n`` points sent as a user sends
    them: ``mmc serve --workers-per-queue 1`` started here, the matrix uploaded by the client
    (in parts above 32 MiB), one job per algorithm with only ``n_clusters`` and
    ``random_state``. Per job: its seconds from submit to result, the longest time between two
    progress reports, and the share of its labels equal to the library's for the same
    ``random_state`` (fitted here after the job)."""
    from datetime import datetime

    from benchmarks.service_load import ROOT, mmc_serve
    from mmc_client import Client

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    print("| set | n | upload s | stored MB | algorithm | job s | longest report gap s | "
          "labels equal to the library's | ARI |\n|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, \
            mmc_serve(Path(tmp), env, "--workers-per-queue", "1") as (url, _), \
            Client(url, timeout=600) as client:
        for data in large_sets(n):
            started = time.perf_counter()
            dataset_id = client.upload(data.X)
            uploaded = time.perf_counter() - started
            stored = httpx.get(f"{url}/v1/datasets/{dataset_id}").json()["stored_bytes"]
            for name in algorithms:
                started = time.perf_counter()
                job = client.submit(dataset_id=dataset_id, algorithm=name,
                                    n_clusters=data.n_clusters, random_state=seed)
                reports = set()
                while job["status"] not in ("succeeded", "failed", "canceled"):
                    if job["progress"]["updated_at"]:
                        reports.add(job["progress"]["updated_at"])
                    time.sleep(0.2)
                    job = client.job(job["id"])
                seconds = time.perf_counter() - started
                times = sorted(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
                               for t in [*reports, job["timing"]["started_at"],
                                         job["timing"]["finished_at"]] if t)
                gap = max(np.diff(times), default=0.0)
                if job["status"] != "succeeded":
                    print(f"| {data.name} | {n:,} | {uploaded:.1f} | {stored / 2**20:.1f} | "
                          f"{name} | {job['status']}: {job.get('error')} | | | |", flush=True)
                    continue
                labels = client.result(job["id"]).labels
                local = registry_clusterer(name)(data.X, data.n_clusters, seed)
                print(f"| {data.name} | {n:,} | {uploaded:.1f} | {stored / 2**20:.1f} | {name} | "
                      f"{seconds:.1f} | {gap:.1f} | {np.mean(labels == local):.4f} | "
                      f"{adjusted_rand_score(data.y, labels):.3f} |", flush=True)


# ---------------------------------------------------------------------------------------------
# n_clusters="auto": k hidden from every clusterer but "spectral, true k"
# ---------------------------------------------------------------------------------------------

AutoClusterer = Callable[[np.ndarray, int], tuple[np.ndarray, int]]
SILHOUETTE_KS = range(2, 11)


def hdbscan_labels(X: np.ndarray, seed: int) -> tuple[np.ndarray, int]:
    """scikit-learn's HDBSCAN with its defaults; noise (-1) counts as one more label for ARI."""
    labels = HDBSCAN().fit_predict(X)
    return labels, int(np.unique(labels[labels >= 0]).size)


def silhouette_spectral_labels(X: np.ndarray, seed: int) -> tuple[np.ndarray, int]:
    """SpectralClustering(affinity="nearest_neighbors") at the k of 2..10 of largest silhouette."""
    best: tuple[float, np.ndarray, int] | None = None
    for k in SILHOUETTE_KS:
        labels = SpectralClustering(k, affinity="nearest_neighbors",
                                    random_state=seed).fit_predict(X)
        if np.unique(labels).size < 2:
            continue
        value = silhouette_score(X, labels)
        if best is None or value > best[0]:
            best = (value, labels, k)
    assert best is not None
    return best[1], best[2]


def auto_clusterer(name: str) -> AutoClusterer:
    """A registry algorithm with ``n_clusters="auto"`` (and ``random_state``): its labels and the
    k it chose."""
    from algorithms.registry import get_spec

    spec = get_spec(name)

    def run(X: np.ndarray, seed: int) -> tuple[np.ndarray, int]:
        estimator = spec.build({"n_clusters": "auto", "random_state": seed}).fit(X)
        return estimator.labels_, int(estimator.n_clusters_)

    return run


@dataclass
class AutoScore:
    ari: float
    k: int
    seconds: float
    seconds_true_k: float | None = None


def score_auto(clusterer: AutoClusterer, data: ClusteringSet, seed: int,
               true_k: Clusterer | None = None) -> AutoScore:
    """ARI, chosen k and seconds of ``clusterer``; with ``true_k``, also the seconds of the same
    method given the true k (the cost of "auto" is the ratio)."""
    started = time.perf_counter()
    labels, k = clusterer(data.X, seed)
    seconds = time.perf_counter() - started
    result = AutoScore(adjusted_rand_score(data.y, labels), k, seconds)
    if true_k is not None:
        started = time.perf_counter()
        true_k(data.X, data.n_clusters, seed)
        result.seconds_true_k = time.perf_counter() - started
    return result


def warm_up_auto(algorithms: list[str], data: ClusteringSet, seed: int) -> None:
    """One untimed "auto" fit and one fit given the true k of each algorithm on ``data``: a warm
    process, as a worker is (imports and compiled code loaded before anything is timed)."""
    for name in algorithms:
        score_auto(auto_clusterer(name), data, seed, true_k=registry_clusterer(name))


def auto_suite(sets: list[ClusteringSet], algorithms: list[str], seed: int = 0) -> str:
    """A Markdown table of ARI (chosen k) per set with k hidden: HDBSCAN, silhouette-chosen
    spectral clustering and each algorithm with ``n_clusters="auto"`` (its seconds over those of
    a fit given the true k in brackets), beside spectral clustering given the true k; then per
    clusterer its mean ARI, the sets where it found the true k, and the cost of "auto"."""
    spectral = scikit_learn_peers()["spectral"]
    peers: dict[str, AutoClusterer] = {"HDBSCAN": hdbscan_labels,
                                       "spectral, silhouette k": silhouette_spectral_labels}
    scores: dict[str, list[AutoScore]] = {"spectral, true k": [], **{p: [] for p in peers},
                                          **{a: [] for a in algorithms}}
    warm_up_auto(algorithms, sets[0], seed)
    for data in sets:
        scores["spectral, true k"].append(AutoScore(adjusted_rand_score(
            data.y, spectral(data.X, data.n_clusters, seed)), data.n_clusters, 0.0))
        for name, peer in peers.items():
            scores[name].append(score_auto(peer, data, seed))
        for name in algorithms:
            scores[name].append(score_auto(auto_clusterer(name), data, seed,
                                           true_k=registry_clusterer(name)))
    names = list(scores)
    lines = ["| set | n | k | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for i, data in enumerate(sets):
        cells = []
        for name in names:
            value = scores[name][i]
            cost = (f", {value.seconds / value.seconds_true_k:.1f}x"
                    if value.seconds_true_k else "")
            cells.append(f"{value.ari:.3f} ({value.k}{cost})")
        lines.append(f"| {data.name} | {data.X.shape[0]} | {data.n_clusters} | "
                     + " | ".join(cells) + " |")
    lines.append("| mean ARI | | | " + " | ".join(
        f"**{np.mean([v.ari for v in scores[name]]):.3f}**" for name in names) + " |")
    lines.append("| true k found | | | " + " | ".join(
        f"{sum(v.k == d.n_clusters for v, d in zip(scores[name], sets, strict=True))} "
        f"of {len(sets)}"
        for name in names) + " |")
    lines.append("")
    for name in algorithms:
        ratios = [v.seconds / v.seconds_true_k for v in scores[name] if v.seconds_true_k]
        lines.append(f"- {name}: auto costs {np.mean(ratios):.1f}x a fit given the true k on "
                     f"average, at most {np.max(ratios):.1f}x "
                     f"({sum(v.seconds for v in scores[name]):.1f} s against "
                     f"{sum(v.seconds_true_k or 0.0 for v in scores[name]):.1f} s)")
    return "\n".join(lines)


def auto_cost(algorithms: list[str], sizes: list[int], seed: int = 0) -> None:
    """Print, row by row, a Markdown table of how the cost of ``n_clusters="auto"`` grows with n
    on :func:`large_sets`: the choice alone (the chosen k, the random splits it drew, seconds),
    and for each algorithm the seconds of an "auto" fit and their ratio to a fit given the true
    k, after one untimed warm-up of both on a thousand points."""
    from algorithms.params.common import DEFAULT_MAX_CLUSTERS
    from algorithms.selection.n_clusters import choose_n_clusters

    warm_up_auto(algorithms, large_sets(1000)[0], seed)
    print("| set | n | choice alone: k, splits, seconds | " + " | ".join(algorithms)
          + " |\n|---|---|---|" + "---|" * len(algorithms))
    for n in sizes:
        for data in large_sets(n):
            started = time.perf_counter()
            choice = choose_n_clusters(data.X, DEFAULT_MAX_CLUSTERS, random_state=seed)
            seconds = time.perf_counter() - started
            cells = [f"{choice.n_clusters}, {choice.n_splits}, {seconds:.2f} s"]
            for name in algorithms:
                result = score_auto(auto_clusterer(name), data, seed,
                                    true_k=registry_clusterer(name))
                cells.append(f"{result.k}, {result.seconds:.1f} s, "
                             f"{result.seconds / result.seconds_true_k:.1f}x")
            print(f"| {data.name} | {n:,} | " + " | ".join(cells) + " |", flush=True)


def auto_seed_table(groups: dict[str, list[ClusteringSet]], seeds: list[int]) -> str:
    """The choice of ``n_clusters="auto"`` alone (the selection layer every method calls) at each
    of ``seeds``: per set the k chosen at each random state and the random splits it averaged;
    per group of sets, at each random state, spectral clustering's mean ARI given the chosen k
    and the true k found; and the share of choices that agree with their set's most frequent k
    (how much the answer depends on ``random_state``)."""
    from algorithms.params.common import DEFAULT_MAX_CLUSTERS
    from algorithms.selection.n_clusters import choose_n_clusters

    spectral = scikit_learn_peers()["spectral"]
    lines = ["| set | n | k | " + " | ".join(f"k, splits at {seed}" for seed in seeds) + " |",
             "|---|---|---|" + "---|" * len(seeds)]
    summary_lines, agreeing, total = [], 0, 0
    for group, sets in groups.items():
        ari = {seed: [] for seed in seeds}
        found = dict.fromkeys(seeds, 0)
        for data in sets:
            choices = {seed: choose_n_clusters(data.X, DEFAULT_MAX_CLUSTERS,
                                                random_state=seed) for seed in seeds}
            ks = [choice.n_clusters for choice in choices.values()]
            agreeing += max(ks.count(k) for k in ks)
            total += len(ks)
            for seed, choice in choices.items():
                ari[seed].append(adjusted_rand_score(
                    data.y, spectral(data.X, choice.n_clusters, 0)))
                found[seed] += choice.n_clusters == data.n_clusters
            lines.append(f"| {data.name} | {data.X.shape[0]} | {data.n_clusters} | " + " | ".join(
                f"{choice.n_clusters}, {choice.n_splits}" for choice in choices.values()) + " |")
        means = [float(np.mean(ari[seed])) for seed in seeds]
        summary_lines.append(
            f"- {group}: spectral ARI at the chosen k "
            + ", ".join(f"{value:.3f}" for value in means)
            + f" (mean {np.mean(means):.3f}); true k on "
            + ", ".join(str(found[seed]) for seed in seeds) + f" of {len(sets)}")
    summary_lines.append(f"- choices that agree with their set's most frequent k: {agreeing} of "
                         f"{total} ({agreeing / total:.0%})")
    return "\n".join([*lines, "", *summary_lines])


def peer_clusterer(name: str) -> Clusterer:
    """A scikit-learn peer by name: those of :func:`scikit_learn_peers` and MiniBatchKMeans."""
    if name == "minibatch k-means":
        return lambda X, k, seed: MiniBatchKMeans(k, random_state=seed).fit_predict(X)
    return scikit_learn_peers()[name]


def _score_here(name: str, data: ClusteringSet, seed: int) -> tuple[Score, int]:
    """:func:`score` of the clusterer ``name`` in this (fresh) process after a warm-up fit, and
    the process's peak resident memory in bytes."""
    clusterer = (registry_clusterer(name) if name in clustering_algorithms()
                 else peer_clusterer(name))
    # A warm process, as a worker is: imports, compiled code and thread pools are loaded by a
    # fit on a thousand points first, and not counted in the seconds.
    score(clusterer, ClusteringSet(data.name, data.X[:1000], data.y[:1000]), seed)
    result = score(clusterer, data, seed)
    return result, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def score_in_process(name: str, data: ClusteringSet, seed: int) -> tuple[Score, int]:
    """:func:`score` in a fresh process (spawned, so it shares no memory with this one) and its
    peak resident memory."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(_score_here, name, data, seed).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algorithms", nargs="*", default=None,
                        help="registry names (default: every clustering algorithm)")
    parser.add_argument("--heldout", action="store_true", help="the held-out sets instead")
    parser.add_argument("--sweep", action="store_true",
                        help="the 36 sweep sets instead (sweep_sets)")
    parser.add_argument("--seed", type=int, default=0, help="random_state of every clusterer")
    parser.add_argument("--at-scale", nargs="+", type=int, metavar="N",
                        help="instead: ARI, seconds and peak memory on large_sets at these sizes, "
                        "each fit in its own process (k-means and MiniBatchKMeans too)")
    parser.add_argument("--through-service", action="store_true",
                        help="with --at-scale: the jobs through mmc serve and the client instead "
                        "(through_service)")
    parser.add_argument("--grid", nargs="+", type=int, metavar="N",
                        help="instead: ARI and seconds on grid_sets at these sizes (k-means too)")
    parser.add_argument("--many-clusters", nargs="+", type=int, metavar="K",
                        help="instead: ARI and seconds on many_cluster_sets with these numbers "
                        "of clusters (k-means too)")
    parser.add_argument("--auto", action="store_true",
                        help="instead: k hidden, each algorithm with n_clusters='auto' beside "
                        "HDBSCAN, silhouette-chosen spectral and spectral given the true k "
                        "(auto_suite), on the public sets (or --heldout, --sweep)")
    parser.add_argument("--auto-cost", nargs="+", type=int, metavar="N",
                        help="instead: the seconds of n_clusters='auto' against a fit given the "
                        "true k on large_sets at these sizes (auto_cost)")
    parser.add_argument("--auto-seeds", nargs="+", type=int, metavar="SEED",
                        help="instead: the choice of n_clusters='auto' alone at these random "
                        "states on the public and held-out sets (auto_seed_table)")
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    # The algorithms' warnings (a schedule that overshot, a solver near its tolerance) are part of
    # their results, not of this table.
    warnings.simplefilter("ignore")
    algorithms = args.algorithms if args.algorithms is not None else clustering_algorithms()
    page, module = docs_pages.DOCS / "defaults.md", "benchmarks.defaults"
    if args.at_scale and args.through_service:
        with docs_pages.record(args.write_docs, page, "defaults-at-scale-service", module):
            for n in args.at_scale:
                through_service(algorithms, n, seed=args.seed)
        return
    if args.at_scale:
        with docs_pages.record(args.write_docs, page, "defaults-at-scale", module):
            at_scale(algorithms, args.at_scale, seed=args.seed,
                     peers=("k-means", "minibatch k-means"), in_processes=True)
        return
    if args.grid:
        with docs_pages.record(args.write_docs, page, "defaults-grid", module):
            at_scale(algorithms, args.grid, seed=args.seed, make_sets=grid_sets)
        return
    if args.many_clusters:
        with docs_pages.record(args.write_docs, page, "defaults-many-clusters", module):
            at_scale(algorithms, args.many_clusters, seed=args.seed,
                     make_sets=many_cluster_sets, peers=("k-means", "spectral"))
        return
    if args.auto_cost:
        with docs_pages.record(args.write_docs, page, "auto-cost", module):
            auto_cost(algorithms, args.auto_cost, seed=args.seed)
        return
    if args.auto_seeds:
        with docs_pages.record(args.write_docs, page, "auto-seeds", module):
            print(auto_seed_table({"public": public_sets(), "held-out": heldout_sets()},
                                  args.auto_seeds))
        return
    region = "defaults-heldout" if args.heldout else "defaults-sweep" if args.sweep else (
        "defaults-public")
    sets = heldout_sets() if args.heldout else sweep_sets() if args.sweep else public_sets()
    if args.auto:
        with docs_pages.record(args.write_docs, page, region.replace("defaults", "auto"), module):
            print(auto_suite(sets, algorithms, seed=args.seed))
        return
    with docs_pages.record(args.write_docs, page, region, module):
        scores = run_suite(sets, algorithms, seed=args.seed)
        print(markdown_table(sets, scores))
        print()
        print("\n".join(summary(scores, algorithms)))
    if args.write_docs and region == "defaults-public":
        write_algorithm_pages(sets, scores, algorithms)


def write_algorithm_pages(sets: list[ClusteringSet], scores: dict[str, list[Score]],
                          algorithms: list[str]) -> None:
    """Each algorithm's page gets its own column beside scikit-learn's, from the same run."""
    line = docs_pages.provenance(docs_pages.command_line("benchmarks.defaults"))
    peers = {name: scores[name] for name in scikit_learn_peers()}
    for name in algorithms:
        table = markdown_table(sets, {**peers, name: scores[name]})
        body = f"{line}\n\n{table}\n\n{summary(scores, [name])[0]}"
        docs_pages.write_region(docs_pages.algorithm_page(name), f"{name}-defaults", body)

if __name__ == "__main__":
    main()
