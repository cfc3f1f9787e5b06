"""Label vectors of every estimator on the benchmark sets, to prove a refactor changes no label.

Run ``python -m benchmarks.label_check dump before.npz`` on the old tree and
``python -m benchmarks.label_check dump after.npz`` on the new one, then
``python -m benchmarks.label_check compare before.npz after.npz``: it lists every (method, set)
whose labels differ. Labels are compared exactly, not up to a relabelling.

The sets are the 74 of :mod:`benchmarks.defaults` (public, held-out and sweep) with only
``n_clusters`` and ``random_state`` given, the papers' settings of each method on the public
sets, and the supervised (``robust_svm``) and sequence (``m3n``) methods on their own data.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

from benchmarks.defaults import heldout_sets, public_sets, sweep_sets

METHODS = ("itersvr", "cpm3c", "svc", "gmmc", "sdp_mmc", "robust_svm", "m3n")


def _paper_setting(name: str) -> dict:
    """The paper's own setting of a clustering method (empty where it has none)."""
    import importlib

    module = importlib.import_module(f"algorithms.{name}")
    return dict(getattr(module, "PAPER_SETTING", {}))


def _vector_runs(methods):
    from algorithms.registry import get_spec

    sets = [("public", s) for s in public_sets()] + [("heldout", s) for s in heldout_sets()]
    sets += [("sweep", s) for s in sweep_sets()]
    for name in [m for m in ("itersvr", "cpm3c", "svc", "gmmc", "sdp_mmc") if m in methods]:
        spec = get_spec(name)
        for family, data in sets:
            params = {"n_clusters": data.n_clusters, "random_state": 0}
            yield f"{name}/{family}/{data.name}", lambda p=params, d=data, s=spec: \
                s.build(p).fit(d.X).labels_
        paper = _paper_setting(name)
        if paper:
            for _, data in sets[:10]:
                params = {"n_clusters": data.n_clusters, "random_state": 0, **paper}
                yield f"{name}/paper/{data.name}", lambda p=params, d=data, s=spec: \
                    s.build(p).fit(d.X).labels_


def _other_runs(methods):
    from algorithms.m3n import UnsupervisedM3N, sample_switching_hmm
    from algorithms.robust_svm import RobustSVM, gaussians_with_ring_outliers

    rng = np.random.RandomState(0)
    X, y, _ = gaussians_with_ring_outliers(rng, radius=5.0)
    for method in ("reh", "rod", "ramp") if "robust_svm" in methods else ():
        yield f"robust_svm/{method}", lambda m=method: RobustSVM(method=m).fit(X, y).predict(X)
    sequences = sample_switching_hmm(0.1, random_state=0)[0]
    for method in ("alternating", "exact") if "m3n" in methods else ():
        yield f"m3n/{method}", lambda m=method: UnsupervisedM3N(
            method=m, random_state=0).fit(sequences[:8] if m == "exact" else sequences).labels_


def dump(path: str, methods: list[str]) -> None:
    labels: dict[str, np.ndarray] = {}
    for key, run in [*_vector_runs(methods), *_other_runs(methods)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out = run()
                labels[key] = (np.concatenate([np.ravel(np.asarray(part)) for part in out])
                               if isinstance(out, list) else np.asarray(out))
            except Exception as error:  # a refusal is a result too
                labels[key] = np.array([f"{type(error).__name__}"])
        print(key, file=sys.stderr)
    np.savez(path, **{key.replace("/", "|"): value for key, value in labels.items()})


def compare(before: str, after: str) -> int:
    """Every vector of ``after`` against ``before`` (``after`` may hold only some methods)."""
    b, a = np.load(before), np.load(after)
    differ = [key for key in a.files if key not in b.files or a[key].shape != b[key].shape
              or not np.array_equal(a[key], b[key])]
    for key in differ:
        print("differs:", key.replace("|", "/"))
    print(f"{len(a.files) - len(differ)} of {len(a.files)} label vectors identical")
    return 1 if differ else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dumping = sub.add_parser("dump")
    dumping.add_argument("path")
    dumping.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    comparing = sub.add_parser("compare")
    comparing.add_argument("before")
    comparing.add_argument("after")
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.path, args.methods)
    else:
        sys.exit(compare(args.before, args.after))


if __name__ == "__main__":
    main()
