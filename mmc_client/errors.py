"""One exception type for everything the service can answer with, carrying its problem+json."""

from __future__ import annotations

from typing import Any


class MMCError(Exception):
    """An error of the service or of reaching it.

    The attributes are the fields of the RFC 9457 ``application/problem+json`` document the
    service answered with: ``status`` (``None`` when no HTTP answer came, or for a failed job),
    ``title``, ``detail`` (what to fix), ``type``, ``instance`` and ``errors`` (one entry per
    offending field: ``{"field", "message", "type"}``); ``job_id`` when it concerns a job.
    """

    def __init__(self, detail: str, *, status: int | None = None, title: str | None = None,
                 type: str = "about:blank", instance: str | None = None,
                 errors: list[dict[str, Any]] | None = None, job_id: str | None = None,
                 problem: dict[str, Any] | None = None):
        self.status, self.title, self.detail = status, title, detail
        self.type, self.instance, self.errors = type, instance, list(errors or [])
        self.job_id = job_id
        self.problem = dict(problem or {})
        prefix = f"{status} {title}" if status else (title or "error")
        super().__init__(f"{prefix}: {detail}")

    @classmethod
    def from_problem(cls, status: int, problem: dict[str, Any], fallback: str = ""
                     ) -> MMCError:
        return cls(
            str(problem.get("detail") or problem.get("title") or fallback or f"HTTP {status}"),
            status=status, title=problem.get("title"), type=problem.get("type", "about:blank"),
            instance=problem.get("instance"), errors=problem.get("errors"), problem=problem)


class JobFailedError(MMCError):
    """The job ended ``failed`` (``type`` is the worker's exception name) or ``canceled``."""


class JobTimeoutError(MMCError):
    """The job did not finish within the caller's timeout (``cluster`` cancels it first)."""
