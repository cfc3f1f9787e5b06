"""The vocabulary of the public parameters: one meaning per name across every algorithm, and why
each name was chosen.

Every field of every params model has an entry here. A name that several algorithms share means
one thing in all of them; where their descriptions differ (a paper's equation number, a default
that only one method has), the entry says what differs (``varies``), so that the difference is
a decision and not a drift. :func:`vocabulary_problems` checks the models against this table
(``tests/test_params.py``) and ``python -m benchmarks.docs_pages --params`` writes it to
``docs/parameters.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from algorithms.params.common import RENAMED_VALUES, AlgorithmParams


@dataclass(frozen=True)
class Term:
    """One public parameter name: what it means in every algorithm that has it, why it has
    this name, and (``varies``) what, if anything, the algorithms' descriptions are allowed to
    say differently. An empty ``varies`` means every algorithm describes it in the same words."""

    meaning: str
    why: str
    varies: str = ""


_SKLEARN = "scikit-learn's name for the same thing"
_PAPER = "the paper's own symbol or name"

TERMS: dict[str, Term] = {
    # -- what to find ---------------------------------------------------------------------------
    "n_clusters": Term(
        "Number of clusters k, or 'auto': the k in 2..max_clusters of largest prediction "
        "strength.", _SKLEARN,
        "how a method reaches k (bisection, the SVC schedule) and which modes take 'auto'"),
    "max_clusters": Term("Largest k that n_clusters='auto' considers.",
                         "the upper end of n_clusters' range"),
    "n_states": Term("Number of hidden states k of the sequence model.",
                     "the HMM's word for its clusters (Xu 2007, chapter 5)"),
    # -- the kernel and its width ----------------------------------------------------------------
    "kernel": Term("The kernel: 'rbf' exp(-gamma ||x - x'||^2) or 'linear'.", _SKLEARN,
                   "which kernels a method offers (GMMC: 'rbf' only)"),
    "gamma": Term(
        "RBF width in exp(-gamma ||x - x'||^2). A number means what it means in scikit-learn; "
        "the strings name this package's rules: 'local_scaling' (gamma = 1 / (2 sigma^2), sigma "
        "the median distance to the 7th nearest neighbour), 'wide_local_scaling' (CPM3C: that "
        "sigma doubled), 'schedule' (SVC: the schedule of section 4 searches gamma), 'paper' (the "
        "paper's heuristic) and 'scale' (scikit-learn's 1 / (n_features * X.var())).",
        "scikit-learn's name and convention for a number; none of the rules is called 'auto', "
        "which in scikit-learn is 1 / n_features",
        "which rules a method offers and what its paper's heuristic is"),
    "width_factor": Term(
        "For gamma='paper': sigma = width_factor x D, D the paper's reference distance.",
        "one multiplier of one reference distance in every paper (was width_fraction in GMMC)",
        "D: the bounding-box diagonal (iterSVR, CPM3C's default), the largest pairwise distance "
        "(CPM3C's width_reference) or the range of pairwise distances (GMMC)"),
    "width_reference": Term("For gamma='paper': which distance D width_factor multiplies.",
                            "names what width_factor refers to"),
    "n_landmarks": Term("Nystrom landmarks (coordinates) of the RBF kernel map.",
                        "the Nystrom method's own word"),
    "kpca_components": Term("Top principal components kept of the kernel coordinates.",
                            "kernel PCA's components, distinct from SVC's n_components"),
    "n_components": Term("Leading principal components of the centred data the sphere is fit "
                         "on.", "scikit-learn's PCA name"),
    "normalize": Term("Row preprocessing before the kernel map.", "scikit-learn's Normalizer"),
    # -- the margin -------------------------------------------------------------------------------
    "C": Term(
        "Soft-margin weight of the method's own objective: 1/2 ||w||^2 + C x slack (the "
        "papers' 1 / beta).", _SKLEARN,
        "each paper's equation and default; SVC: the bound on the dual (9) (or p)"),
    "p": Term("SVC's 1 / (N C), the share of points allowed outside the sphere.", _PAPER),
    "C_e": Term("Weight of the balance term (z^T e)^2 in (5).", _PAPER),
    "C_delta": Term("Bound on the dual variables in (10).", _PAPER),
    "C_svm": Term(
        "C of the out-of-sample SVM trained on the found labels (GMMC).",
        "GMMC's objective has no C (its weights are C_e and C_delta), so the SVM's C gets a "
        "name of its own beside them (was C)"),
    "class_balance": Term(
        "l / n in the two-class balance -l <= e^T y <= l.", "the papers' class balance l, as a "
        "fraction of n", "the equation number and default of each paper"),
    "score_balance": Term(
        "l / n in CPM3C's balance of the clusters' mean scores (16).",
        "a balance of scores, not of labels, so not class_balance"),
    "size_band": Term(
        "Every cluster (state) holds between (1/k - size_band) n and (1/k + size_band) n.",
        "a band around the even size 1/k, unlike class_balance's two-class l",
        "the equation: (4.8) of SDP MMC, (5.25) of M3N"),
    "pair_size_band": Term("size_band of the pairs of adjacent states (5.25).",
                           "size_band for pairs"),
    # -- starts and restarts ----------------------------------------------------------------------
    "init": Term("Starting labels: 'spectral' (the kNN graph's spectral partition) or "
                 "'k-means' (the paper's).", _SKLEARN, "how each method uses the start"),
    "n_init": Term("k-means runs from which the starting partitions are taken.",
                   "scikit-learn's KMeans n_init, the runs it is passed to",
                   "whether the best run or a pool of distinct runs is kept"),
    "n_restarts": Term(
        "Runs of the whole method from distinct starts; the best objective is kept.",
        "a restart of the method, not of k-means (was n_init in M3N)",
        "where the starts come from (k-means partitions, EM runs)"),
    "supervised_start": Term("Fit the supervised SVM of the starting partition first.",
                             "says what the start is"),
    "portfolio": Term("Keep the best, by margin, of the method's partition and other families' "
                      "candidates.", "the set of candidate partitions it draws on"),
    "random_state": Term("Seed for reproducible runs.", _SKLEARN),
    # -- stopping ---------------------------------------------------------------------------------
    "max_alternations": Term(
        "Most rounds of an alternating minimisation (fit a model to the labels or indicators, "
        "then update them from it); it stops earlier at a fixed point.",
        "counts alternations, where max_iter counted five different things",
        "what alternates: SVR and labels (iterSVR), SVM and eta (ramp), M3N and labels"),
    "max_cutting_plane_iter": Term(
        "Most cutting-plane iterations, one most violated constraint added each.",
        "counts cutting planes (was max_iter in CPM3C)"),
    "cutting_plane_tol": Term(
        "Cutting-plane precision: stop when no constraint is violated by more than this (per "
        "point or position).", "the tolerance of the cutting planes (was epsilon in CPM3C and "
        "tol in M3N; epsilon is the papers' symbol of several things)",
        "per point (CPM3C) or per position (M3N); M3N's alternation also stops on it"),
    "cccp_tol": Term("CCCP stops when the objective improves by less than this fraction.",
                     "the tolerance of the CCCP loop"),
    "max_cccp_iter": Term("Most CCCP steps per cutting-plane iteration.",
                          "max_<loop>_iter, as max_cutting_plane_iter"),
    "max_spheres": Term(
        "Most spheres (one per width) that SVC's gamma='schedule' solves in one space.",
        "counts spheres (was max_iter)"),
    "em_iter": Term("Baum-Welch iterations per EM run.", "the EM loop"),
    "tol": Term("libsvm's stopping tolerance of the dual (11).", "scikit-learn's OneClassSVM tol"),
    # -- solvers ----------------------------------------------------------------------------------
    "solver": Term(
        "The SDP solver: 'lowrank' (this package's factorised augmented Lagrangian with a "
        "duality-gap certificate), 'scs' or 'clarabel' (the cvxpy formulation).",
        "one meaning: the backend of the semidefinite program (itersvr's and svc's sampling "
        "mode, also called solver, is now said by exact_max_n alone)",
        "which backends a method offers; robust_svm's 'auto' is 'lowrank'"),
    "sdp_tol": Term("Stopping tolerance of the SDP solver.",
                    "the SDP solver's tol (was tol in SDP MMC and GMMC)",
                    "what the tolerance bounds in each backend"),
    "sdp_max_iter": Term(
        "Iteration limit of the cvxpy solver (scs, clarabel) of the SDP.",
        "the SDP solver's max_iter (was max_iter in SDP MMC)",
        "where the cvxpy solver runs in each method"),
    "lowrank_max_iter": Term(
        "Most augmented-Lagrangian iterations of one solve by solver='lowrank' (GMMC).",
        "GMMC's low-rank solver has its own iteration (was max_iter)"),
    "kernel_max_iter": Term("Most kernel-learning steps of (12).", "the kernel-learning loop"),
    "rank": Term("Starting rank of the low-rank factor.", "the factor's rank"),
    "exact_max_n": Term(
        "Largest n solved over every point; above it a random sample of exact_max_n points is "
        "solved and every point labelled by the out-of-sample model. null: always every point.",
        "says both the threshold and the sample size (it replaces itersvr's and svc's "
        "solver='exact'|'sample'|'auto')",
        "how the sample is drawn and which model labels the rest"),
    # -- method-specific choices ------------------------------------------------------------------
    "method": Term("Which of the thesis's formulations is solved.", "the thesis's methods",
                   "the formulations of each chapter"),
    "multiclass": Term("How SDP MMC forms more than two clusters.", "its one choice"),
    "rounding": Term("Two-class label recovery from the relaxed label matrix.",
                     "the SDP literature's word"),
    "n_rounding": Term("Random hyperplanes of randomized rounding.", "n_ + what it counts"),
    "spectral_candidate": Term(
        "Two clusters: also score the kNN graph's spectral partition by the method's margin "
        "objective and keep the smaller.", "says what is added",
        "the objective it is scored by"),
    "degree_regularization": Term("Regularisation of the Laplacians' degrees.",
                                  "regularized spectral clustering's term"),
    "kernel_learning": Term("Learn weights of n_widths Laplacians with the labels (12).",
                            "the paper's title"),
    "n_widths": Term("Widths of kernel learning.", "n_ + what it counts"),
    "rho": Term("ROD's least share of inliers; ramp: share kept by the second start.", _PAPER),
    "fit_intercept": Term("Fit an unregularised offset.", _SKLEARN),
    "labeling": Term("Which segments SVC tests.", "the paper's labeling step"),
    "n_neighbors": Term("Neighbours per point of SVC's segment tests.", _SKLEARN),
    "n_segment_points": Term("Points sampled on each segment.", "n_ + what it counts"),
    "bounded_svs": Term("Where SVC's bounded support vectors go.", "the paper's term"),
}


def vocabulary_problems(models: Mapping[str, type[AlgorithmParams]],
                        terms: Mapping[str, Term] | None = None) -> list[str]:
    """What breaks "one name, one meaning" in ``models`` (algorithm name -> params model): a
    field without an entry in ``terms``, an entry no model has, and a name that two algorithms
    describe in different words without its entry saying what ``varies``."""
    terms = TERMS if terms is None else terms
    descriptions: dict[str, dict[str, str]] = {}
    for algorithm, model in models.items():
        for name, field in model.model_fields.items():
            descriptions.setdefault(name, {})[algorithm] = field.description or ""
    problems = [f"{name}: no entry in the vocabulary" for name in descriptions
                if name not in terms]
    problems += [f"{name}: in the vocabulary but no algorithm has it" for name in terms
                 if name not in descriptions]
    for name, by_algorithm in descriptions.items():
        if len(set(by_algorithm.values())) > 1 and name in terms and not terms[name].varies:
            problems.append(f"{name}: {', '.join(sorted(by_algorithm))} describe it differently, "
                            "but the vocabulary does not list it as one concept that varies")
    return problems


def renames(models: Mapping[str, type[AlgorithmParams]]) -> list[tuple[str, str, str]]:
    """``(old spelling, new spelling, algorithm)`` of every renamed parameter and value that the
    models still accept (for one release)."""
    rows = []
    for algorithm, model in sorted(models.items()):
        rows += [(old, new, algorithm) for old, (new, _) in model.renamed.items()]
        for name in model.model_fields:
            values = {**RENAMED_VALUES.get(name, {}), **model.renamed_values.get(name, {})}
            rows += [(f"{name}={old!r}", f"{name}={new!r}", algorithm)
                     for old, new in values.items() if _accepts(model, name, new)]
    return rows


def _accepts(model: type[AlgorithmParams], name: str, value: str) -> bool:
    """Whether ``model`` takes ``value`` for ``name`` (a shared value rename applies only where
    the new value exists)."""
    try:
        model.model_validate({name: value})
    except ValidationError:
        return False
    return True
