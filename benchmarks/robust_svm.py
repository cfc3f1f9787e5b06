"""Thesis section 6.5: robust SVMs on two Gaussians with ring outliers, and solver timings.

Usage: python -m benchmarks.robust_svm [--repetitions 50] [--radii 15 35 55 75] [--timing]
       python -m benchmarks.robust_svm --timing-only
       python -m benchmarks.robust_svm --robust-C 0.1  (robust methods at a fixed C)

Per R: 20 points per class + 10 ring outliers (random labels), 1,000 test points per class.
The soft-margin SVM (scikit-learn SVC, linear) uses the best C of the thesis' grid
(beta = 1e-4..1e4) on the test set, and the robust methods use that C, as in the thesis. REH and
ROD are the offset-free classifiers of the thesis; ROD uses rho = 0.8. Prints mean test error
with a 95 % interval, ROD outlier precision/recall/F (truth: points the Bayes rule
misclassifies; detected: RobustSVM.outliers_, and the best F over the relaxed eta ranking),
seconds, and how many fits reported a solver warning. Timings are wall-clock on whatever
machine runs this; --timing also compares SCS (the default) with Clarabel at n = 50.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.svm import SVC

from algorithms.robust_svm import (
    RobustSVM,
    gaussian_test_set,
    gaussians_with_ring_outliers,
    outlier_f_measure,
)
from benchmarks import docs_pages

C_GRID = (1e-4, 1e-2, 1.0, 1e2, 1e4)  # C = 1 / beta for the thesis' beta grid
# libsvm at C = 1e4 on ring outliers needs 6e7-2.4e8 iterations (8-31 s per fit at R = 35); the
# cap keeps a repetition to seconds, a capped (unconverged) fit is not the SVM at that C and is
# left out of the choice of the best C, and the table counts the capped fits.
SVM_MAX_ITER = 10_000_000


def ring_draw(seed: int, radius: float, n_outliers: int):
    """Section 6.5 at the size of the tests: 20 training points per class and ``n_outliers`` on
    the ring of ``radius``, 1,000 test points per class; returns ``X, y, is_outlier, X_test,
    y_test``."""
    rng = np.random.RandomState(seed)
    X, y, is_outlier = gaussians_with_ring_outliers(rng, radius=radius, n_per_class=20,
                                                    n_outliers=n_outliers)
    X_test, y_test = gaussian_test_set(rng, n_per_class=1000)
    return X, y, is_outlier, X_test, y_test


def interval(values) -> str:
    values = np.asarray(values, dtype=float)
    half = 1.96 * values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else 0.0
    return f"{100 * values.mean():.1f} ± {100 * half:.1f}"


def best_eta_f(is_outlier: np.ndarray, eta: np.ndarray) -> float:
    order = np.argsort(eta)
    return max(outlier_f_measure(is_outlier, np.isin(np.arange(eta.size), order[:k]))[2]
               for k in range(1, eta.size))


def run_radius(radius: float, repetitions: int, robust_C: float | None = None) -> dict:
    rows = {name: [] for name in ("svm", "reh", "rod", "ramp")}
    seconds = {name: 0.0 for name in rows}
    prf, eta_f, n_warned, n_capped = [], [], 0, 0
    for rep in range(repetitions):
        rng = np.random.RandomState(10_000 * int(radius) + rep)
        X, y, is_outlier = gaussians_with_ring_outliers(rng, radius=radius)
        X_test, y_test = gaussian_test_set(rng)
        started = time.perf_counter()
        svm_errors = []
        for C in C_GRID:
            svm = SVC(kernel="linear", C=C, max_iter=SVM_MAX_ITER).fit(X, y)
            capped = svm.n_iter_[0] >= SVM_MAX_ITER
            svm_errors.append(np.inf if capped else np.mean(svm.predict(X_test) != y_test))
            n_capped += int(capped)
        seconds["svm"] += time.perf_counter() - started
        best = int(np.argmin(svm_errors))  # capped fits carry an infinite error
        rows["svm"].append(svm_errors[best])
        for method in ("reh", "rod", "ramp"):
            started = time.perf_counter()
            C = C_GRID[best] if robust_C is None else robust_C
            model = RobustSVM(method, C=C, rho=0.8, fit_intercept=False).fit(X, y)
            seconds[method] += time.perf_counter() - started
            rows[method].append(np.mean(model.predict(X_test) != y_test))
            n_warned += bool(model.warnings_)
            if method == "rod":
                detected = np.isin(np.arange(y.size), model.outliers_)
                prf.append(outlier_f_measure(is_outlier, detected))
                eta_f.append(best_eta_f(is_outlier, model.eta_))
    return {"rows": rows, "seconds": seconds, "prf": np.mean(prf, axis=0),
            "eta_f": float(np.mean(eta_f)), "repetitions": repetitions, "n_warned": n_warned,
            "n_capped": n_capped}


def timing() -> None:
    print("\n| solver | n | seconds | test error % |\n|---|---|---|---|")
    rng = np.random.RandomState(0)
    X_test, y_test = gaussian_test_set(rng)
    runs = ((20, 10, "auto"), (20, 10, "clarabel"), (80, 40, "auto"))
    for n_per_class, n_outliers, solver in runs:
        X, y, _ = gaussians_with_ring_outliers(np.random.RandomState(0), radius=55.0,
                                               n_per_class=n_per_class, n_outliers=n_outliers)
        for method in ("reh", "rod"):
            started = time.perf_counter()
            model = RobustSVM(method, C=0.1, fit_intercept=False, solver=solver).fit(X, y)
            error = 100 * np.mean(model.predict(X_test) != y_test)
            print(f"| {method} SDP ({model.solver_}) | {y.size} | "
                  f"{time.perf_counter() - started:.1f} | {error:.2f} |", flush=True)
    X, y, _ = gaussians_with_ring_outliers(np.random.RandomState(0), radius=55.0,
                                           n_per_class=4500, n_outliers=1000)
    for kernel in ("linear", "rbf"):
        started = time.perf_counter()
        model = RobustSVM("ramp", kernel=kernel, C=1.0).fit(X, y)
        print(f"| ramp alternation, {kernel} ({model.n_iter_} libsvm fits) | {y.size} | "
              f"{time.perf_counter() - started:.1f} | |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--radii", type=float, nargs="+", default=[15, 35, 55, 75])
    parser.add_argument("--timing", action="store_true", help="also time n = 50, 200, 10,000")
    parser.add_argument("--timing-only", action="store_true", help="only the timings")
    parser.add_argument("--robust-C", type=float, default=None,
                        help="C of REH/ROD/ramp (default: the SVM's best C of each draw)")
    docs_pages.add_write_docs_option(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    page = docs_pages.algorithm_page("robust_svm")
    if args.timing_only:
        with docs_pages.record(args.write_docs, page, "robust_svm-timing",
                               "benchmarks.robust_svm"):
            timing()
        return
    with docs_pages.record(args.write_docs, page, "robust_svm-paper", "benchmarks.robust_svm"):
        paper_table(args)


def paper_table(args: argparse.Namespace) -> None:
    print("| R | SVM (best C) | REH | ROD (rho 0.8) | ramp | ROD P / R / F (outliers_) "
          "| ROD best F (eta) | seconds SVM grid / REH / ROD / ramp | robust fits warned "
          "| SVM fits capped |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for radius in args.radii:
        result = run_radius(radius, args.repetitions, args.robust_C)
        rows, s, (p, r, f) = result["rows"], result["seconds"], result["prf"]
        print(f"| {radius:g} | {interval(rows['svm'])} | {interval(rows['reh'])} | "
              f"{interval(rows['rod'])} | {interval(rows['ramp'])} | {p:.2f} / {r:.2f} / {f:.2f} "
              f"| {result['eta_f']:.2f} | {s['svm']:.1f} / {s['reh']:.1f} / {s['rod']:.1f} / "
              f"{s['ramp']:.1f} | {result['n_warned']} | {result['n_capped']} |", flush=True)
    print("\nThesis (Figure 6.7, 50 repetitions): SVM error grows with R; REH and ROD stay near "
          "the noise-free error (Bayes 2.2 %); ROD F about 0.85 (Figure 6.10). Errors in %.")
    if args.timing:
        timing()


if __name__ == "__main__":
    main()
