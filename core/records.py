"""The public form of a job record: what ``GET /v1/jobs/{id}`` answers and a webhook carries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.job_record import JobRecord, JobStatus


def iso_time(timestamp: float | None) -> str | None:
    """Epoch seconds as the API writes every time: ISO 8601 UTC with a ``Z``."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def render_job(record: JobRecord) -> dict[str, Any]:
    """The job resource of ``record``: its times in ISO 8601, the links that apply to it."""
    job_id = record["id"]
    timing: dict[str, Any] = dict(record.get("timing") or {})
    links = {"self": f"/v1/jobs/{job_id}", "result": f"/v1/jobs/{job_id}/result"}
    if record.get("model_id"):
        links["model"] = f"/v1/models/{record['model_id']}"
    if record["status"] == JobStatus.SUCCEEDED:
        links["plot"] = f"/v1/jobs/{job_id}/plot"
        links["labels"] = f"/v1/jobs/{job_id}/labels.csv"
    return {
        "id": job_id,
        "status": record["status"],
        "algorithm": {"name": record["algorithm"], "params": record["params"]},
        "queue": record["queue"],
        "n_samples": record["n_samples"],
        "n_features": record.get("n_features"),
        "progress": _progress(record),
        "timing": {
            "queued_at": iso_time(record.get("queued_at")),
            "started_at": iso_time(record.get("started_at")),
            "finished_at": iso_time(record.get("finished_at")),
            "fit_seconds": record.get("fit_seconds"),
            "load_seconds": timing.get("load_seconds"),
            "store_seconds": timing.get("store_seconds"),
            "plot_seconds": None,  # deprecated: plots are drawn on request, not by the job
        },
        "error": record.get("error"),
        "model_id": record.get("model_id"),
        "links": links,
    }


def _progress(record: JobRecord) -> dict[str, Any]:
    progress: dict[str, Any] = dict(record.get("progress") or {})
    return {**progress, "updated_at": iso_time(progress.get("updated_at"))}
