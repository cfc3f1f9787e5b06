"""The web console: server-rendered pages at ``/`` (jobs and the upload form) and
``/ui/jobs/{id}`` (one job), with one small script vendored beside them (no CDN: it runs offline).

The pages hold no tenant data: the script fetches it from the API with the key the user entered
once (kept in the tab's ``sessionStorage`` and sent as ``X-API-Key``), so the console sees exactly
what that key may see through the API, and a page can be served without authentication.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from algorithms.registry import REGISTRY
from service.deps import AppApiKeys, AppStores

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
STATIC_PATH = "/ui/static"
templates = Jinja2Templates(directory=CONSOLE_DIR / "templates")

# Pages and script come from this origin only; plots and downloads are blob: URLs the script
# makes from authenticated fetches.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' blob: data:; script-src 'self'; "
        "style-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


def uploadable_algorithms() -> list[dict[str, object]]:
    """Algorithms that can run on an uploaded matrix alone (no sequences, no required labels),
    with their default number of clusters for the form."""
    choices = []
    for spec in REGISTRY.values():
        if spec.input_kind != "vectors" or spec.labels == "required":
            continue
        fields = spec.params_model.model_fields
        default = fields["n_clusters"].default if "n_clusters" in fields else None
        choices.append({"name": spec.name, "summary": spec.summary, "n_clusters": default})
    return choices


def page(request: Request, template: str, auth_required: bool, status_code: int = 200,
         **context) -> HTMLResponse:
    response = templates.TemplateResponse(request, template, {
        "static": STATIC_PATH,
        "auth_required": auth_required,
        **context,
    }, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


@router.get("/", response_class=HTMLResponse)
def home(request: Request, api_keys: AppApiKeys):
    return page(request, "home.html", bool(api_keys), algorithms=uploadable_algorithms(),
                algorithm_names=list(REGISTRY))


@router.get("/ui")
def ui_root():
    return RedirectResponse("/", status_code=307)


@router.get("/ui/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str, stores: AppStores, api_keys: AppApiKeys):
    """The job's page, or a 404 page when no tenant has a job of that id (ids are random, so
    existence says nothing about whose it is; the script fetches the job with the user's key)."""
    if not stores.jobs.exists(job_id):
        return page(request, "job_missing.html", bool(api_keys), status_code=404, job_id=job_id)
    return page(request, "job.html", bool(api_keys), job_id=job_id)


def mount_static(app) -> None:
    app.mount(STATIC_PATH, StaticFiles(directory=CONSOLE_DIR / "static"), name="console-static")
