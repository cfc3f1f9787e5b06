"""Reproduce thesis Tables 5.1/5.2 (synthetic Data1-4) and time the alternating method.

Usage: python -m benchmarks.m3n [--repeats 10] [--skip-exact] [--max-positions 100000]

Data1-4: a 2-state HMM emitting 0/1, stay probability 5, 10, 20, 30 %, emission noise equal to
the switch probability, 10 sequences of length 8, 10 repeats (section 5.3). EM is hmmlearn's
CategoricalHMM from 10 random starts (benchmark-only dependency, the ``bench`` extra); the
thesis's EM column matches the error averaged over the starts, so both that mean and the error of
the most likely start are printed. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from algorithms.m3n import UnsupervisedM3N, sample_switching_hmm
from algorithms.metrics import clustering_error
from benchmarks import docs_pages

THESIS = {  # Table 5.2: CDHMM, ACDHMM, EM (error %)
    "Data1": (0.05, 3.38, 14.46, 15.09),
    "Data2": (0.10, 8.12, 17.34, 17.49),
    "Data3": (0.20, 22.12, 26.56, 30.06),
    "Data4": (0.30, 31.50, 38.58, 39.90),
}


def em_errors(sequences, truth, seed, restarts=10):
    from hmmlearn.hmm import CategoricalHMM

    X = np.concatenate(sequences).reshape(-1, 1)
    lengths = [len(s) for s in sequences]
    errors, scores = [], []
    for start in range(restarts):
        model = CategoricalHMM(n_components=2, n_iter=100, random_state=seed * 100 + start,
                               init_params="ste", n_features=2)
        model.fit(X, lengths)
        errors.append(clustering_error(truth, model.predict(X, lengths)))
        scores.append(model.score(X, lengths))
    return float(np.mean(errors)), float(errors[int(np.argmax(scores))])


def synthetic_table(repeats: int, skip_exact: bool) -> None:
    print("| data | stay | CDHMM thesis | CDHMM ours | ACDHMM thesis | ACDHMM ours | EM thesis "
          "| EM ours (mean of 10 starts) | EM ours (most likely start) | exact s/instance |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (stay, t_exact, t_alt, t_em) in THESIS.items():
        exact, alt, em_mean, em_best, seconds = [], [], [], [], []
        for rep in range(repeats):
            sequences, states = sample_switching_hmm(stay, random_state=rep)
            truth = np.concatenate(states)
            if not skip_exact:
                started = time.perf_counter()
                model = UnsupervisedM3N(2, method="exact", random_state=rep).fit(sequences)
                seconds.append(time.perf_counter() - started)
                exact.append(clustering_error(truth, np.concatenate(model.labels_)))
            model = UnsupervisedM3N(2, method="alternating", random_state=rep).fit(sequences)
            alt.append(clustering_error(truth, np.concatenate(model.labels_)))
            mean, best = em_errors(sequences, truth, rep)
            em_mean.append(mean)
            em_best.append(best)

        def cell(values):
            return f"{100 * np.mean(values):.2f} ± {100 * np.std(values):.2f}" if values else "-"

        print(f"| {name} | {stay:.2f} | {t_exact} | {cell(exact)} | {t_alt} | {cell(alt)} | "
              f"{t_em} | {cell(em_mean)} | {cell(em_best)} | "
              f"{np.mean(seconds) if seconds else float('nan'):.1f} |", flush=True)


def scaling_table(max_positions: int) -> None:
    print("\n| positions (sequences x 100) | alternating seconds | error % | alternations |")
    print("|---|---|---|---|")
    size = 100
    while size <= max_positions:
        sequences, states = sample_switching_hmm(0.2, n_sequences=size // 100, length=100,
                                                 random_state=0)
        started = time.perf_counter()
        model = UnsupervisedM3N(2, n_restarts=1, random_state=0).fit(sequences)
        elapsed = time.perf_counter() - started
        error = clustering_error(np.concatenate(states), np.concatenate(model.labels_))
        print(f"| {size} | {elapsed:.2f} | {100 * error:.2f} | {model.n_iter_} |", flush=True)
        size *= 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--skip-exact", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--max-positions", type=int, default=100_000)
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    with docs_pages.record(args.write_docs, docs_pages.algorithm_page("m3n"), "m3n-paper",
                           "benchmarks.m3n"):
        if not args.skip_synthetic:
            synthetic_table(args.repeats, args.skip_exact)
        scaling_table(args.max_positions)


if __name__ == "__main__":
    main()
