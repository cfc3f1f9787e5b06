"""Reproduce GMMC's Table 1 (Valizadegan & Jin 2006) and time the low-rank solver against n.

Run: ``python -m benchmarks.gmmc [--only table|readings|equivalence|scaling]``. Prints Markdown
tables: the paper's error beside ours with the best of the 10 widths and with kernel learning (12),
the width each reading of (12) selects (normalized candidates, min instead of max over beta, bare
Laplacians, candidates with zero diagonal, another RBF scale or a tiny null-vector lift), seconds
per fit, the low-rank solver beside a cvxpy/SCS solve of the same scaled SDP, and the largest n
solved within 60 s. Data: the paper's synthetic sets are only shown as a figure, so they are
generated here (80 points each, the size implied by the paper's error steps of 1.25 %); the four
digit pairs come from ``sklearn.datasets.load_digits``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits, make_circles

from algorithms.gmmc import (
    GMMC,
    PAPER_SETTING,
    distance_range,
    eliminate_bias,
    laplacian_precision,
    learn_kernel_weights,
    width_fractions_gammas,
)
from algorithms.gmmc_solver import labels_from_factor, solve_gmmc_lowrank
from algorithms.kernels import normalized_laplacian, squared_distances
from algorithms.metrics import clustering_error
from benchmarks import docs_pages

# Table 1 of the paper, error %: (best width, kernel learning).
TABLE_1 = {
    "two circles": (0.0, 0.0),
    "two jointed circles": (0.0, 0.0),
    "two Gaussians": (1.25, 3.75),
    "digits 3-8": (5.6, 5.6),
    "digits 1-7": (2.2, 3.0),
    "digits 2-7": (0.5, 5.6),
    "digits 8-9": (16.0, 12.0),
}
WIDTH_FRACTIONS = np.arange(1, 11) / 10  # section 4: 10 % ... 100 % of the distance range


def two_circles(n: int = 80, seed: int = 0):
    """Two concentric rings (radius ratio 0.4), small noise."""
    X, y = make_circles(n, noise=0.03, factor=0.4, random_state=seed)
    return X, y


def two_jointed_circles(n: int = 80, seed: int = 0):
    """Two unit rings side by side, centres 2.1 apart, nearly touching at one point."""
    rng = np.random.default_rng(seed)
    m = n // 2
    t = np.r_[np.linspace(0, 2 * np.pi, m, endpoint=False),
              np.linspace(0, 2 * np.pi, n - m, endpoint=False)]
    t = t + rng.uniform(0, 2 * np.pi / m, n)
    X = np.c_[np.cos(t), np.sin(t)]
    y = np.r_[np.zeros(m), np.ones(n - m)].astype(np.int64)
    X[y == 1, 0] += 2.1
    return X + 0.02 * rng.standard_normal(X.shape), y


def two_gaussians(n: int = 80, seed: int = 1):
    """Two unit-variance Gaussians 4 standard deviations apart (Bayes error 2.3 %)."""
    rng = np.random.default_rng(seed)
    m = n // 2
    shift = np.array([4.0, 0.0])
    X = np.r_[rng.standard_normal((m, 2)), rng.standard_normal((n - m, 2)) + shift]
    return X, np.r_[np.zeros(m), np.ones(n - m)].astype(np.int64)


def digit_pair(a: int, b: int):
    X, y = load_digits(return_X_y=True)
    keep = (y == a) | (y == b)
    return X[keep], (y[keep] == b).astype(np.int64)


def datasets():
    return {
        "two circles": two_circles(),
        "two jointed circles": two_jointed_circles(),
        "two Gaussians": two_gaussians(),
        "digits 3-8": digit_pair(3, 8),
        "digits 1-7": digit_pair(1, 7),
        "digits 2-7": digit_pair(2, 7),
        "digits 8-9": digit_pair(8, 9),
    }


def _fit(X, y, **params):
    start = time.perf_counter()
    model = GMMC(random_state=0, **{**PAPER_SETTING, **params}).fit(X)
    return model, 100 * clustering_error(y, model.labels_), time.perf_counter() - start


def table_1():
    print("## Table 1: clustering error % (paper beside ours)\n")
    print("| data | n | paper best width | ours best width (fraction) | s per fit | "
          "paper kernel learning | ours kernel learning | s | largest beta (width) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (X, y) in datasets().items():
        runs = [_fit(X, y, width_factor=f) for f in WIDTH_FRACTIONS]
        best = int(np.argmin([err for _, err, _ in runs]))
        seconds = np.mean([sec for _, _, sec in runs])
        learned, kl_err, kl_sec = _fit(X, y, kernel_learning=True)
        top = int(np.argmax(learned.kernel_weights_))
        paper_best, paper_kl = TABLE_1[name]
        print(f"| {name} | {len(y)} | {paper_best} | {runs[best][1]:.1f} "
              f"({WIDTH_FRACTIONS[best]:.1f}) | {seconds:.2f} | {paper_kl} | {kl_err:.1f} | "
              f"{kl_sec:.1f} | {learned.kernel_weights_[top]:.2f} ({WIDTH_FRACTIONS[top]:.1f}) |")
    print()


def kernel_learning_readings():
    """Which width each reading of (12) selects, and its error (see the gmmc module notes).

    Per width: the optimum ``phi_k`` of (10). A maximum over ``beta`` of ``phi_k / s_k`` and a
    minimum (margin maximization) for the normalizations ``s_k`` = 1, ``tr L_k``,
    ``lambda_max(L_k)``, ``1 / tr L_k^+``; then (12) as printed with the bare Laplacians.
    """
    print("## Readings of kernel learning (12): selected width (error %)\n")
    norms = ("none", "trace", "lambda_max", "tr L^+")
    print("| data | phi_k, 10 % ... 100 % | " + " | ".join(
        f"max {k} | min {k}" for k in norms) + " | bare-Laplacian (12): error, beta > 0.01 |")
    print("|---|---|" + "---|---|" * len(norms) + "---|")
    for name, (X, y) in datasets().items():
        sq = squared_distances(X)
        phi, err, scale = [], [], {k: [] for k in norms}
        bare = []
        for g in width_fractions_gammas(sq, WIDTH_FRACTIONS):
            K = np.exp(-g * sq)
            L = normalized_laplacian(K)
            bare.append(L)
            sol = solve_gmmc_lowrank(eliminate_bias(laplacian_precision(K)), random_state=0,
                                     certify=False)
            phi.append(sol.dual)
            err.append(100 * clustering_error(y, labels_from_factor(sol.V)[0]))
            ev = np.linalg.eigvalsh(L)
            scale["none"].append(1.0)
            scale["trace"].append(ev.sum())
            scale["lambda_max"].append(ev[-1])
            scale["tr L^+"].append(1.0 / np.sum(1.0 / ev[ev > 1e-9]))
        phi = np.array(phi)
        cells = []
        for k in norms:
            value = phi / np.array(scale[k])
            for pick in (int(np.argmax(value)), int(np.argmin(value))):
                cells.append(f"{WIDTH_FRACTIONS[pick]:.1f} ({err[pick]:.1f})")
        learned = learn_kernel_weights(bare, C_e=1e4, C_delta=1e5, rank=None, tol=1e-6,
                                       max_iter=50, kernel_max_iter=30, kernel_tol=1e-4,
                                       random_state=0)
        bare_err = 100 * clustering_error(y, labels_from_factor(learned.solution.V)[0])
        weights = ", ".join(f"{WIDTH_FRACTIONS[i]:.1f}: {b:.2f}"
                            for i, b in enumerate(learned.beta) if b > 0.01)
        print(f"| {name} | {' '.join(f'{v:.3g}' for v in phi)} | {' | '.join(cells)} | "
              f"{bare_err:.1f} ({weights}) |")
    print()


def _variant_precision(sq, spread, fraction, *, form, zero_diagonal, lift):
    """``L + lift u u^T`` for one candidate built another way (module notes, second list)."""
    sigma = fraction * spread
    K = np.exp(-sq / (2 * sigma**2) if form == "2 sigma^2" else -sq / sigma**2)
    if zero_diagonal:
        np.fill_diagonal(K, 0.0)
    u = np.sqrt(K.sum(axis=1))
    return normalized_laplacian(K) + lift * np.outer(u, u) / (u @ u)


CONSTRUCTION_VARIANTS = {
    "zero diagonal": {"form": "2 sigma^2", "zero_diagonal": True, "lift": 1.0},
    "exp(-d^2/sigma^2)": {"form": "sigma^2", "zero_diagonal": False, "lift": 1.0},
    "exp(-d^2/sigma^2), zero diagonal": {"form": "sigma^2", "zero_diagonal": True, "lift": 1.0},
    "u lifted to 1e-3": {"form": "2 sigma^2", "zero_diagonal": False, "lift": 1e-3},
}


def construction_variants():
    """(12) solved jointly with candidates built other ways: error % (largest beta, its width)."""
    print("## (12) with the candidates built other ways: error % (largest beta at width)\n")
    print("| data | " + " | ".join(CONSTRUCTION_VARIANTS) + " |")
    print("|---|" + "---|" * len(CONSTRUCTION_VARIANTS))
    for name, (X, y) in datasets().items():
        sq = squared_distances(X)
        spread = distance_range(sq)
        cells = []
        for options in CONSTRUCTION_VARIANTS.values():
            Ms = [_variant_precision(sq, spread, f, **options) for f in WIDTH_FRACTIONS]
            learned = learn_kernel_weights(Ms, C_e=1e4, C_delta=1e5, rank=None, tol=1e-6,
                                           max_iter=50, kernel_max_iter=30, kernel_tol=1e-4,
                                           random_state=0)
            err = 100 * clustering_error(y, labels_from_factor(learned.solution.V)[0])
            top = int(np.argmax(learned.beta))
            cells.append(f"{err:.1f} ({learned.beta[top]:.2f} at {WIDTH_FRACTIONS[top]:.1f})")
        print(f"| {name} | {' | '.join(cells)} |")
    print()


def solver_equivalence(n: int = 60):
    """Low-rank solver vs cvxpy/SCS on the same scaled SDP: objective, labels, seconds."""
    X, y = digit_pair(3, 8)
    rng = np.random.default_rng(0)
    keep = rng.choice(len(y), size=n, replace=False)
    X, y = X[keep], y[keep]
    print(f"## Low-rank solver vs cvxpy/SCS, digits 3-8 subsample n = {n}, width 50 %\n")
    print("| solver | objective sum(gamma) | error % | seconds |")
    print("|---|---|---|---|")
    for solver in ("lowrank", "cvxpy"):
        model, err, sec = _fit(X, y, solver=solver, width_factor=0.5)
        print(f"| {solver} | {model.objective_:.6f} | {err:.1f} | {sec:.2f} |")
    print()


def scaling(limit_seconds: float = 60.0, sizes=(250, 500, 1000, 1500, 2000, 3000, 4000, 5000)):
    """Seconds per fit (width 20 %) on growing subsets of all digits; largest n within 60 s."""
    X_all, _ = load_digits(return_X_y=True)
    print("## Seconds against n (all ten digits, two-cluster GMMC, width 20 %)\n")
    print("| n | seconds | solver status |")
    print("|---|---|---|")
    largest = 0
    rng = np.random.default_rng(0)
    pool = np.r_[X_all, X_all + rng.normal(0, 0.5, X_all.shape),
                 X_all + rng.normal(0, 0.5, X_all.shape)]  # 5,391 distinct points
    for n in sizes:
        if n > len(pool):
            break
        X = pool[rng.choice(len(pool), size=n, replace=False)]
        start = time.perf_counter()
        model = GMMC(random_state=0).fit(X)
        sec = time.perf_counter() - start
        print(f"| {n} | {sec:.1f} | {model.solver_status_} |")
        if sec <= limit_seconds:
            largest = n
        else:
            break
    print(f"\nLargest n solved within {limit_seconds:.0f} s: {largest}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=("table", "readings", "equivalence", "scaling"),
                        help="run one part (default: all)")
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    with docs_pages.record(args.write_docs, docs_pages.algorithm_page("gmmc"), "gmmc-paper",
                           "benchmarks.gmmc"):
        if args.only in (None, "table"):
            table_1()
        if args.only in (None, "readings"):
            kernel_learning_readings()
            construction_variants()
        if args.only in (None, "equivalence"):
            solver_equivalence()
        if args.only in (None, "scaling"):
            scaling()


if __name__ == "__main__":
    main()
