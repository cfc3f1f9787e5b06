"""Conic solvers (SCS, Clarabel) through cvxpy, and the error every SDP solver of the package
raises when a solve ends without a usable solution."""

from __future__ import annotations

import warnings
from typing import Any, Literal


class SDPSolverError(RuntimeError):
    """A numerical solver ended without a usable solution; the message carries its status."""


def check_solver_status(status: str | None, *, solver: str, what: str) -> list[str]:
    """Map a cvxpy status to warnings or an error, so that no solve is trusted silently.

    ``"optimal"`` -> no warning; ``"optimal_inaccurate"`` -> one warning to report with the
    result; anything else (infeasible, unbounded, iteration limit, ...) -> :class:`SDPSolverError`.
    """
    if status == "optimal":
        return []
    if status == "optimal_inaccurate":
        return [f"{solver} solved {what} only to reduced accuracy (status optimal_inaccurate); "
                "labels may be less reliable"]
    raise SDPSolverError(f"{solver} failed on {what}: status {status!r}")


# The conic solvers by their names in the parameters, and cvxpy's name of each (which messages
# show): the one place the two spellings meet.
ConicSolver = Literal["scs", "clarabel"]
CVXPY_SOLVER_NAMES: dict[str, str] = {"scs": "SCS", "clarabel": "CLARABEL"}


def cvxpy_solver_name(solver: str) -> str:
    """cvxpy's name of a conic solver named as in the parameters (``"scs"`` -> ``"SCS"``); any
    other name is taken as cvxpy's own, which cvxpy refuses if it has no such solver."""
    return CVXPY_SOLVER_NAMES.get(solver, solver)


def solve_conic(problem, solver: ConicSolver, tol: float, max_iter: int, what: str
                ) -> tuple[list[str], int]:
    """Solve a cvxpy problem with SCS or Clarabel (``"scs"``, ``"clarabel"``) at ``tol`` and
    ``max_iter``; its status becomes warnings or an :class:`SDPSolverError`
    (:func:`check_solver_status`).

    Returns ``(warnings, solver iterations)``.
    """
    import cvxpy as cp

    name = cvxpy_solver_name(solver)
    options: dict[str, Any]
    if name == "SCS":
        options = {"eps_abs": tol, "eps_rel": tol, "max_iters": max_iter}
    else:
        options = {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol, "max_iter": max_iter}
    try:
        with warnings.catch_warnings():  # cvxpy's "may be inaccurate": reported via the status
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=name, **options)
    except cp.error.SolverError as exc:
        raise SDPSolverError(f"{name} failed on {what}: {exc}") from None
    notes = check_solver_status(problem.status, solver=name, what=what)
    return notes, int(problem.solver_stats.num_iters or 0)

