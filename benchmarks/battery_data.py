"""The data of ``benchmarks/battery.py``: sets of Gagolewski's Benchmark Suite for Clustering
Algorithms read from a local copy, with the suite's preprocessing, and held-out sets of our own
of the kinds the suite has (many clusters, unbalanced sizes, noise points, tabular data).

The suite (v1.1.0, Gagolewski 2022, SoftwareX 20, 101270) keeps a set ``NAME`` of battery
``B`` as ``B/NAME.data.gz`` (one point a line) and ``B/NAME.labels0.gz``, ``labels1``, ... (one
integer a line, 0 = noise, not scored). A method asked for k clusters is scored against the
references with k clusters; the best of those counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_blobs,
    make_moons,
)
from sklearn.metrics import adjusted_rand_score


@dataclass(frozen=True)
class BatterySet:
    """One set: its name (``battery/name``), data and reference labelings (0 = noise)."""

    name: str
    X: np.ndarray
    references: tuple[np.ndarray, ...]

    @property
    def n_clusters(self) -> int:
        """The reference k: that of the first reference labeling (noise not counted)."""
        return reference_k(self.references[0])


def reference_k(labels: np.ndarray) -> int:
    return int(np.unique(labels[labels > 0]).size)


def preprocess(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """The suite's preprocessing of its published results: columns of zero variance dropped,
    white noise of 1e-6 times the overall standard deviation added, every column centred, and
    all entries divided by the one overall standard deviation."""
    X = np.asarray(X, dtype=np.float64)
    X = X[:, X.std(axis=0) > 0]
    X = X + np.random.default_rng(seed).normal(scale=1e-6 * X.std(), size=X.shape)
    X = X - X.mean(axis=0)
    return X / X.std()


def load_suite(data_dir: Path, batteries: list[str] | None = None, max_n: int = 10_000
               ) -> list[BatterySet]:
    """Every set of the batteries under ``data_dir`` (all of them when ``batteries`` is None) of
    at most ``max_n`` points, preprocessed."""
    sets = []
    names = batteries or sorted(p.name for p in data_dir.iterdir() if p.is_dir())
    for battery in names:
        for data_file in sorted((data_dir / battery).glob("*.data.gz")):
            name = data_file.name[: -len(".data.gz")]
            X = np.loadtxt(data_file, ndmin=2)
            if X.shape[0] > max_n:
                continue
            references = tuple(
                np.loadtxt(path, dtype=np.int64)
                for path in sorted((data_dir / battery).glob(f"{name}.labels*.gz")))
            sets.append(BatterySet(f"{battery}/{name}", preprocess(X), references))
    return sets


def battery_ari(data: BatterySet, labels: np.ndarray, n_clusters: int | None = None) -> float:
    """The best ARI over the references with the k of ``labels`` (``n_clusters`` when given),
    noise points left out; 0 when no reference has that k (the "auto" case of a wrong k is
    scored against the first reference instead)."""
    labels = np.asarray(labels)
    k = n_clusters if n_clusters is not None else int(np.unique(labels).size)
    matching = [r for r in data.references if reference_k(r) == k] or [data.references[0]]
    return max(float(adjusted_rand_score(r[r > 0], labels[r > 0])) for r in matching)


def _set(name: str, X: np.ndarray, y: np.ndarray) -> BatterySet:
    return BatterySet(f"heldout/{name}", preprocess(X), (np.asarray(y, dtype=np.int64),))


def heldout_sets(seed: int = 7) -> list[BatterySet]:
    """Sets of our own, of the kinds the suite holds and fcps/graves lack; no rule was chosen on
    them. Labels start at 1; noise points are 0."""
    rng = np.random.default_rng(seed)
    sets = []
    for k, size in ((15, 60), (30, 40), (50, 30)):  # many clusters
        X, y = make_blobs(n_samples=k * size, centers=k, n_features=2, cluster_std=0.6,
                          center_box=(-10 * np.sqrt(k / 15), 10 * np.sqrt(k / 15)),
                          random_state=seed + k)
        sets.append(_set(f"blobs_k{k}", X, y + 1))
    X, y = make_blobs(n_samples=[1500, 300, 60], centers=[[0, 0], [6, 0], [3, 5]],
                      cluster_std=[1.5, 0.8, 0.5], random_state=seed)
    sets.append(_set("unbalanced_25_5_1", X, y + 1))
    X, y = make_blobs(n_samples=[800, 100, 100, 40], n_features=4,
                      cluster_std=[1.0, 0.6, 0.6, 0.4], random_state=seed + 1)
    sets.append(_set("unbalanced_4d", X, y + 1))
    X, y = make_blobs(n_samples=900, centers=4, cluster_std=0.7, random_state=seed + 2)
    noise = rng.uniform(X.min(axis=0) - 2, X.max(axis=0) + 2, size=(90, 2))
    sets.append(_set("blobs_noise", np.vstack([X, noise]), np.r_[y + 1, np.zeros(90, int)]))
    X, y = make_moons(n_samples=800, noise=0.06, random_state=seed)
    noise = rng.uniform(X.min(axis=0) - 0.5, X.max(axis=0) + 0.5, size=(60, 2))
    sets.append(_set("moons_noise", np.vstack([X, noise]), np.r_[y + 1, np.zeros(60, int)]))
    for name, loader in (("iris", load_iris), ("wine", load_wine),
                         ("breast_cancer", load_breast_cancer)):
        data = loader()
        sets.append(_set(name, data.data, data.target + 1))
    digits = load_digits()
    sets.append(_set("digits_10", digits.data, digits.target + 1))
    return sets
