"""``POST /v1/models``: a model exported by any deployment (``GET /v1/models/{id}/export``),
checked as strictly as any other input before it is stored for the caller.

The export is JSON metadata plus ``.npz`` arrays. An import is refused (422, naming what is
wrong) unless the arrays decode without pickles, are numeric and finite and no larger than a
bound on their decoded size, the metadata names a registered estimator that rebuilds from them,
and the rebuilt model labels a point (a sequence for m3n).
"""

from __future__ import annotations

import base64
import binascii
import io
import zipfile
from typing import Any

import numpy as np

from algorithms.inputs import npz_bytes_to_arrays
from algorithms.registry import REGISTRY, model_from_export
from service.problems import ProblemError, field_error
from service.schemas import ModelImport

# Decoded arrays of an import may take at most this many times MMC_MAX_BODY_BYTES: the .npz is
# compressed, and a small archive must not unpack into gigabytes.
DECODED_BYTES_PER_BODY_BYTE = 4


def decode_arrays(npz_base64: str, max_decoded_bytes: int) -> tuple[bytes, dict[str, np.ndarray]]:
    """The ``.npz`` bytes and their arrays, or a 422 saying why they cannot be a model's."""
    try:
        payload = base64.b64decode(npz_base64, validate=True)
    except (binascii.Error, ValueError):
        raise field_error(422, "body.npz_base64", "is not valid base64") from None
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile:
        raise field_error(422, "body.npz_base64", "is not an .npz archive") from None
    decoded = sum(member.file_size for member in members)
    if decoded > max_decoded_bytes:
        raise field_error(422, "body.npz_base64", f"its arrays decode to {decoded} bytes, more "
                          f"than {max_decoded_bytes} ({DECODED_BYTES_PER_BODY_BYTE} x "
                          "MMC_MAX_BODY_BYTES)", "too_large")
    try:
        arrays = npz_bytes_to_arrays(payload)
    except Exception as exc:  # object arrays (pickles), truncated or corrupt members
        raise field_error(422, "body.npz_base64", f"cannot be read without pickles: {exc}"
                          ) from None
    for name, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise field_error(422, "body.npz_base64",
                              f"array {name!r} has dtype {array.dtype}; a model holds numbers")
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            raise field_error(422, "body.npz_base64", f"array {name!r} holds NaN or infinity")
    return payload, arrays


def rebuild(body: ModelImport, arrays: dict[str, np.ndarray]) -> tuple[Any, Any]:
    """``(estimator, its algorithm's spec)`` rebuilt from the export, after a smoke predict."""
    if body.meta.get("format") != body.format:
        raise field_error(422, "body.format", f"{body.format!r} differs from meta.format "
                          f"{body.meta.get('format')!r}")
    specs = {spec.estimator_name: spec for spec in REGISTRY.values()}
    spec = specs.get(str(body.meta.get("estimator")))
    if spec is None:
        raise field_error(422, "body.meta.estimator", f"{body.meta.get('estimator')!r} is not "
                          f"one of {sorted(specs)}")
    try:
        estimator = model_from_export(body.meta, arrays)
        if spec.input_kind == "sequences":
            estimator.predict([np.zeros(1, dtype=np.int64)])
        else:
            estimator.predict(np.zeros((1, max(int(estimator.n_features_in_), 1))))
    except ProblemError:
        raise
    except Exception as exc:  # whatever a malformed state makes the estimator raise
        raise field_error(422, "body.meta", f"is not a working {spec.name} model: "
                          f"{type(exc).__name__}: {exc}") from None
    return estimator, spec


def model_info(spec, estimator, body: ModelImport, owner: str) -> dict[str, Any]:
    """What ``GET /v1/models/{id}`` shows of an imported model (no job trained it here)."""
    return {
        "algorithm": spec.name, "estimator": spec.estimator_name, "job_id": None,
        "input_kind": spec.input_kind,
        "n_features_in": int(estimator.n_features_in_) or None,
        "params": dict(body.meta.get("params", {})), "owner": owner, "imported": True,
    }
