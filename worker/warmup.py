"""A worker's warm-up: what every fit would otherwise set up in each work horse, done once in the
worker so that its horses inherit it (the estimators and scikit-learn imported, the numba kernels
loaded from their disk cache, a tiny fit's one-time set-up, cvxpy for the slow queue).

It runs after the worker has registered and while no job waits (:class:`worker.main.Worker`),
one step at a time, so that ``/readyz`` does not wait on it and a job that arrives meanwhile
waits for one step at most. A horse forked before the warm-up has finished imports what its job
needs itself (and keeps scikit-learn's parameter checks). Each step runs in the worker's main
thread, never beside a fork.

The modules here (numpy, scikit-learn, numba, cvxpy) are imported by the steps, not by this
module: a worker registers before any of them has loaded.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor


def compiled_kernels() -> tuple[Callable[[], object], ...]:
    """The numba kernels' loaders: the RBF kernel blocks and sums of few features, SVC's segment
    tests, iterSVR's SMO, k-means, the box QP's active set, the factored smoothed dual of the
    low-rank SDPs, the robust SDPs' inner problem, and the one-vs-one SVM of n_clusters="auto"
    (on iterSVR's SMO)."""
    from algorithms.dual_qp import compiled_smo
    from algorithms.kernels import (
        compiled_rbf_block,
        compiled_rbf_segments_inside,
        compiled_rbf_segments_inside_from_factors,
        compiled_rbf_sums,
    )
    from algorithms.lowrank_sdp import compiled_active_set, compiled_factored_dual, compiled_lbfgs
    from algorithms.selection.candidates import compiled_kmeans
    from algorithms.selection.n_clusters import compiled_transfer

    return (compiled_rbf_block, compiled_rbf_sums, compiled_rbf_segments_inside,
            compiled_rbf_segments_inside_from_factors, compiled_smo, compiled_kmeans,
            compiled_active_set, compiled_factored_dual, compiled_lbfgs, compiled_transfer)


def compile_rounds() -> tuple[tuple[tuple[Callable[[], object], ...], ...], ...]:
    """The kernels in two rounds of groups that compile side by side: first the callees, the
    active set alone (the longest) beside all the others; then the kernels that call them,
    L-BFGS beside the one-vs-one SVM, which load their compiled callees from the cache instead of
    compiling them again."""
    from algorithms.lowrank_sdp import compiled_active_set, compiled_lbfgs
    from algorithms.selection.n_clusters import compiled_transfer

    callers = (compiled_lbfgs, compiled_transfer)
    others = tuple(load for load in compiled_kernels()
                   if load not in (*callers, compiled_active_set))
    return ((compiled_active_set,), others), tuple((load,) for load in callers)


def _load_kernels(kernels: tuple[Callable[[], object], ...]) -> None:
    for load in kernels:
        load()


def warm_compiled_kernels(processes: int = 1) -> None:
    """Load the numba kernels (compiled and cached on disk the first time). ``processes > 1``
    (``make install``) only fills the disk cache, in two processes side by side."""
    if processes <= 1:
        _load_kernels(compiled_kernels())
        return
    rounds = compile_rounds()
    context = multiprocessing.get_context("fork")
    # One process per group of the widest round.
    with ProcessPoolExecutor(max(map(len, rounds)), mp_context=context) as pool:
        for groups in rounds:
            list(pool.map(_load_kernels, groups))


def import_scikit_learn() -> None:
    """Import scikit-learn and skip its per-call parameter checks: what a job passes to its
    estimators comes from validated params models (input data is still checked by
    ``check_array``)."""
    import sklearn

    sklearn.set_config(skip_parameter_validation=True)


def estimator_imports() -> Iterator[Callable[[], None]]:
    """One step per registered estimator: importing its module (and its solvers)."""
    from algorithms.registry import REGISTRY

    for spec in REGISTRY.values():
        yield lambda spec=spec: spec.estimator


def limit_loaded_threads(threads: int) -> None:
    """Limit the BLAS and OpenMP pools the imports have loaded (they read the environment the
    worker set; this also sets up the controller that later limits them per call)."""
    from algorithms.threads import limit_process_threads

    limit_process_threads(threads)


def warm_up_fit() -> None:
    """A tiny iterSVR fit: it sets up what a fit initialises once per process (the thread-pool
    controllers of threadpoolctl and scikit-learn, lazily loaded modules)."""
    import numpy as np

    from algorithms.registry import get_spec

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(-3.0, 1.0, (8, 2)), rng.normal(3.0, 1.0, (8, 2))])
    get_spec("itersvr").build({"random_state": 0, "n_init": 1}).fit(X)


def import_cvxpy() -> None:
    """The SDPs' general solvers, for a worker on the slow queue."""
    import cvxpy  # noqa: F401


def warm_up_steps(queues: list[str], threads: int) -> Iterator[Callable[[], None]]:
    """The steps in order, each a single import or kernel load, so that a job waiting behind
    one waits little."""
    yield import_scikit_learn
    yield from estimator_imports()
    yield lambda: limit_loaded_threads(threads)
    yield from compiled_kernels()
    yield warm_up_fit
    if "slow" in queues:
        yield import_cvxpy


class WarmUp:
    """The remaining steps of a worker's warm-up, run one at a time by :meth:`step`."""

    def __init__(self, steps: Iterator[Callable[[], None]]):
        self._steps = steps
        self.done = False

    def step(self) -> None:
        """Run the next step; :attr:`done` once none is left."""
        step = next(self._steps, None)
        if step is None:
            self.done = True
            return
        step()
