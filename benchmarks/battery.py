"""The clustering methods on Gagolewski's Benchmark Suite for Clustering Algorithms, beside the
standard clusterers a user would pick instead.

Run: ``python -m benchmarks.battery --data-dir DIR [--batteries fcps graves] [--heldout]
[--no-auto] [--write]``. ``DIR`` is a local copy of the suite (``git clone
https://github.com/gagolews/clustering-data-v1``; the fcps and graves batteries ship in the
development folder ``shared/battery``); sets of more than 10,000 points are left out, as in the
suite's published results. ``--heldout`` adds sets of our own (``benchmarks.battery_data``).

Every clustering method of the registry runs at the reference k with its defaults, and with
``n_clusters="auto"``; beside them, in the same run, Genie (``genieclust``, a benchmark-only
peer of the ``bench`` extra), kNN spectral clustering (scikit-learn, 10 neighbours), a Gaussian
mixture, k-means and HDBSCAN (which finds k). Each fit runs in its own process, two at a time
with half the CPUs' threads each (as the service's two workers), killed after ``--timeout``
seconds (scored 0). ``--write`` writes ``docs/battery.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algorithms.threads import limit_process_threads, share_of_cpus
from benchmarks.battery_data import BatterySet, battery_ari, heldout_sets, load_suite

METHODS = ("itersvr", "cpm3c", "sdp_mmc", "gmmc", "svc")
PEERS = ("genie", "spectral", "gmm", "kmeans")
DOCS = Path(__file__).resolve().parent.parent / "docs" / "battery.md"


@dataclass
class Fit:
    """One fit's result: ARI (0 on a timeout or error), seconds, the k found, and extras."""

    ari: float
    seconds: float
    k: int
    note: str = ""


def peer_labels(name: str, X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """A standard clusterer's labels at k (``hdbscan``: without k)."""
    if name == "genie":
        import genieclust

        return genieclust.Genie(n_clusters=k, verbose=False).fit_predict(X)
    if name == "spectral":
        from sklearn.cluster import SpectralClustering

        return SpectralClustering(k, affinity="nearest_neighbors", random_state=seed
                                  ).fit_predict(X)
    if name == "gmm":
        from sklearn.mixture import GaussianMixture

        return GaussianMixture(k, random_state=seed).fit(X).predict(X)
    if name == "kmeans":
        from sklearn.cluster import KMeans

        return KMeans(k, n_init=10, random_state=seed).fit_predict(X)
    if name == "hdbscan":
        from sklearn.cluster import HDBSCAN

        return HDBSCAN().fit_predict(X)
    raise ValueError(f"unknown peer {name!r}")


def method_fit(name: str, X: np.ndarray, k: int | str, seed: int) -> tuple[np.ndarray, str]:
    """A registry method's labels with its defaults, and the name of the candidate it kept."""
    from algorithms.registry import get_spec

    estimator = get_spec(name).estimator(n_clusters=k, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X)
    return np.asarray(estimator.labels_), str(getattr(estimator, "candidate_", ""))


def _run(task: tuple[str, str, BatterySet, int], out, threads: int) -> None:
    limit_process_threads(threads)  # a worker's share of the CPUs, as the service sizes a job
    kind, name, data, seed = task
    start = time.perf_counter()
    k = data.n_clusters
    note = ""
    if kind == "peer":
        labels = peer_labels(name, data.X, k, seed)
    else:
        labels, note = method_fit(name, data.X, "auto" if kind == "auto" else k, seed)
    seconds = time.perf_counter() - start
    found = int(np.unique(labels[labels >= 0]).size)
    if name == "hdbscan" or kind == "auto":
        # a k-free answer is scored against the references of its k, else the first one;
        # HDBSCAN's noise points (-1) count as one more cluster
        score = battery_ari(data, labels, found)
    else:
        score = battery_ari(data, labels, k)
    out.send(Fit(score, seconds, found, note))


def run_tasks(tasks: list[tuple[str, str, BatterySet, int]], timeout: float, workers: int = 2
              ) -> list[Fit]:
    """Each task in its own process, ``workers`` at a time, killed after ``timeout`` s, each
    with its share of the CPUs in BLAS and OpenMP threads."""
    threads = share_of_cpus(workers)
    context = multiprocessing.get_context("fork")
    results: list[Fit | None] = [None] * len(tasks)
    running: dict[int, tuple] = {}
    pending = list(range(len(tasks)))
    while pending or running:
        while pending and len(running) < workers:
            index = pending.pop(0)
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_run, args=(tasks[index], send, threads),
                                      daemon=True)
            process.start()
            running[index] = (process, receive, time.perf_counter())
        for index, (process, receive, started) in list(running.items()):
            if receive.poll():
                try:
                    results[index] = receive.recv()
                except EOFError:  # the task died (its traceback is on stderr)
                    results[index] = Fit(0.0, time.perf_counter() - started, 0, "error")
            elif process.is_alive() and time.perf_counter() - started < timeout:
                continue
            elif not process.is_alive() and results[index] is None:
                results[index] = Fit(0.0, time.perf_counter() - started, 0, "error")
            if results[index] is None:
                process.kill()
                results[index] = Fit(0.0, timeout, 0, "timeout")
            process.join()
            del running[index]
            kind, name, data, _ = tasks[index]
            fit = results[index]
            print(f"  {data.name:28s} {kind:6s} {name:9s} ARI {fit.ari:6.3f} "
                  f"{fit.seconds:6.1f} s k={fit.k} {fit.note}", flush=True)
        time.sleep(0.02)
    return [r for r in results if r is not None]


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def column_label(column: tuple[str, str]) -> str:
    """A column's name in the tables: the method or peer, "auto" after a method's k-free run."""
    kind, name = column
    return f"{name} auto" if kind == "auto" else name


def markdown(sets: list[BatterySet], table: dict[tuple[str, str], dict[str, Fit]],
             columns: list[tuple[str, str]]) -> list[str]:
    """ARI per set and column, then the means, and wins/ties/losses against Genie and against
    the per-set best peer."""
    head = ["set", "n", "k"] + [column_label(column) for column in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for data in sets:
        row = [data.name, str(data.X.shape[0]), str(data.n_clusters)]
        for column in columns:
            fit = table[column][data.name]
            cell = f"{fit.ari:.2f}"
            if column[0] == "method" and fit.note not in ("", column[1]):
                cell += f" ({fit.note})"
            if column[0] == "auto" or column[1] == "hdbscan":
                cell += f" k={fit.k}"
            if fit.note == "timeout":
                cell += " timeout"
            row.append(cell)
        lines.append("| " + " | ".join(row) + " |")
    return lines


def summary(groups: dict[str, list[BatterySet]], table, columns) -> list[str]:
    """Mean ARI per group and column; wins, ties (within 0.01) and losses against Genie and the
    per-set best of the peers; seconds in total and of the longest fit."""
    lines = ["| sets | column | mean ARI | vs Genie (w/t/l) | vs best peer (w/t/l) | seconds |"
             " longest fit (s) |",
             "|---|---|---|---|---|---|---|"]
    for group, sets in groups.items():
        if not sets:
            continue
        for column in columns:
            fits = [table[column][d.name] for d in sets]
            genie = [table[("peer", "genie")][d.name].ari for d in sets]
            best = [max(table[("peer", p)][d.name].ari for p in PEERS) for d in sets]
            record = []
            for reference in (genie, best):
                diffs = np.array([f.ari for f in fits]) - np.array(reference)
                record.append(f"{int(np.sum(diffs > 0.01))}/{int(np.sum(abs(diffs) <= 0.01))}/"
                              f"{int(np.sum(diffs < -0.01))}")
            lines.append(f"| {group} ({len(sets)}) | {column_label(column)}"
                         f" | {_mean([f.ari for f in fits]):.3f}"
                         f" | {record[0]} | {record[1]} | {sum(f.seconds for f in fits):.0f}"
                         f" | {max(f.seconds for f in fits):.1f} |")
        best = [max(table[("peer", p)][d.name].ari for p in PEERS) for d in sets]
        lines.append(f"| {group} ({len(sets)}) | per-set best peer | {_mean(best):.3f} | | | | |")
    return lines


# The longest a fit of at most 10,000 points may take at defaults (issue's speed bar).
SLOW_FIT_SECONDS = 30.0


def slow_fits(sets: list[BatterySet], table, columns) -> list[str]:
    """The fits of the clustering methods that took longer than ``SLOW_FIT_SECONDS``, longest
    first (measured two fits at a time on the machine's cores, as two workers run them)."""
    slow = sorted(((table[column][d.name].seconds, d.name, column) for column in columns
                   if column[0] != "peer" for d in sets
                   if table[column][d.name].seconds > SLOW_FIT_SECONDS), reverse=True)
    if not slow:
        return [f"No fit of a clustering method took longer than {SLOW_FIT_SECONDS:.0f} s."]
    fits = "1 fit" if len(slow) == 1 else f"{len(slow)} fits"
    lines = [f"{fits} took longer than {SLOW_FIT_SECONDS:.0f} s:", "",
             "| set | n | column | seconds |", "|---|---|---|---|"]
    sizes = {d.name: d.X.shape[0] for d in sets}
    for seconds, name, column in slow:
        lines.append(f"| {name} | {sizes[name]} | {column_label(column)} | {seconds:.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--batteries", nargs="*", default=None)
    parser.add_argument("--heldout", action="store_true")
    parser.add_argument("--no-auto", action="store_true")
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    public = load_suite(args.data_dir, args.batteries)
    held = heldout_sets() if args.heldout else []
    sets = public + held
    columns = [("peer", p) for p in (*PEERS, "hdbscan")] + [("method", m) for m in args.methods]
    if not args.no_auto:
        columns += [("auto", m) for m in args.methods]
    tasks = [(kind, name, data, args.seed) for kind, name in columns for data in sets]
    started = time.perf_counter()
    fits = run_tasks(tasks, args.timeout)
    table: dict[tuple[str, str], dict[str, Fit]] = {c: {} for c in columns}
    for (kind, name, data, _), fit in zip(tasks, fits, strict=True):
        table[(kind, name)][data.name] = fit
    groups = {"public": public, "held-out": held}
    text = [
        "# The clustering methods on the benchmark suite",
        "",
        "Written by `python -m benchmarks.battery --data-dir DIR"
        + (" --heldout" if args.heldout else "") + (" --no-auto" if args.no_auto else "")
        + " --write`"
        f" ({time.strftime('%Y-%m-%d')}, random_state {args.seed},"
        f" {time.perf_counter() - started:.0f} s on 2 cores). Public: the sets of Gagolewski's"
        " Benchmark Suite for Clustering Algorithms"
        " v1.1.0 under DIR (at most 10,000 points), with the suite's preprocessing; held-out: sets"
        " of our own (`benchmarks/battery_data.py`), on which no rule was chosen except"
        " `n_clusters=\"auto\"`'s for many clusters (its spared share of clusters and its gain"
        " rule were set looking at the blobs_k15/k30/k50 sets: their \"auto\" cells are"
        " selected on this data) and the portfolio criterion's unit-variance columns (adopted"
        " after seeing the wine and breast cancer cells: selected on this data too). ARI at the"
        " reference k (the best over the references with that k; noise points not scored); "
        "\"auto\" and HDBSCAN are scored at the k they find. A method's cell names the candidate"
        " partition it kept when that is not its own (`algorithms.selection.portfolio`). Peers:"
        " Genie (genieclust, gini 0.3), kNN spectral (scikit-learn, 10 neighbours), GMM, k-means"
        " (10 starts), HDBSCAN (defaults, no k). A fit over "
        f"{args.timeout:.0f} s counts 0.",
        "",
        "## Means",
        "",
        *summary(groups, table, columns),
        "",
        "## Per set",
        "",
        *markdown(sets, table, columns),
        "",
        f"## Fits over {SLOW_FIT_SECONDS:.0f} s",
        "",
        *slow_fits(sets, table, columns),
        "",
    ]
    print("\n".join(text))
    if args.write:
        DOCS.write_text("\n".join(text))


if __name__ == "__main__":
    main()
