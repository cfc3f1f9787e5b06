"""Progress reports of a fit: the callback a caller passes as ``fit(X, progress=...)``."""

from __future__ import annotations

import math
from collections.abc import Callable

# progress(step, objective or None, message)
ProgressCallback = Callable[[int, float | None, str], None]


def report(progress: ProgressCallback | None, step: int, objective: float | None, message: str):
    """Forward a progress event when a callback was given."""
    if progress is not None:
        value = None if objective is None or not math.isfinite(objective) else float(objective)
        progress(int(step), value, message)
