"""The API reference, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served with their scripts,
stylesheet and favicon from this process, so that it works without internet.

FastAPI's own pages load Swagger UI and ReDoc from a public CDN. The same pages are built here
with FastAPI's ``get_swagger_ui_html`` and ``get_redoc_html``, pointing at the Swagger UI and
ReDoc bundles that the ``fastapi-offline`` package ships (we read its files only, not its app
factory); ReDoc's Google Fonts are left out.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/reference/static"
ASSETS = resources.files("fastapi_offline") / "static"
# The pages may load from this origin only. ReDoc's bundle links its logo from its CDN, which
# the browser then never asks for; both pages start with an inline script, and ReDoc runs its
# search in a blob: worker.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
    "connect-src 'self'; frame-ancestors 'none'"
)


def _own_origin_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return page


def mount_reference(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Add ``docs_url``, ``redoc_url`` and their assets to an app created with
    ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(ASSETS)), name="reference-assets")
    oauth2_redirect_url = f"{docs_url}/oauth2-redirect"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_URL}/{name}"

    def openapi_url(request: Request) -> str:
        return f"{request.scope.get('root_path', '')}{app.openapi_url}"

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        return _own_origin_only(get_swagger_ui_html(
            openapi_url=openapi_url(request), title=f"{app.title}: API reference",
            oauth2_redirect_url=oauth2_redirect_url,
            swagger_js_url=asset(request, "swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
            swagger_ui_parameters={"defaultModelsExpandDepth": 0, "tryItOutEnabled": False},
        ))

    @app.get(oauth2_redirect_url, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        return _own_origin_only(get_redoc_html(
            openapi_url=openapi_url(request), title=f"{app.title}: API reference",
            redoc_js_url=asset(request, "redoc.standalone.js"),
            redoc_favicon_url=asset(request, "favicon.png"), with_google_fonts=False,
        ))
