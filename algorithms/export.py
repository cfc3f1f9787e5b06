"""The portable model format: JSON metadata and numeric arrays, never a pickle."""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np

from algorithms.inputs import arrays_to_npz_bytes

MODEL_FORMAT = "mmc-model/1"


class Exportable(Protocol):
    """An estimator with a portable model (:meth:`algorithms.base.MMCEstimatorMixin.to_model`)."""

    def to_model(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]: ...


def save_model(estimator: Exportable, path_prefix: str) -> tuple[str, str]:
    """Write ``<prefix>.json`` and ``<prefix>.npz``; returns both paths."""
    meta, arrays = estimator.to_model()
    json_path, npz_path = f"{path_prefix}.json", f"{path_prefix}.npz"
    with open(json_path, "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
    with open(npz_path, "wb") as handle:
        handle.write(arrays_to_npz_bytes(arrays))
    return json_path, npz_path


def jsonable(value: Any) -> Any:
    """Make parameter values JSON-safe (numpy scalars to Python, RandomState instances dropped)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return None

