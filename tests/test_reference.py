"""The API reference works offline: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) reference no
host but the service's own, and a real browser with every other request blocked renders every
operation of the OpenAPI document."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

BROWSER_TIMEOUT_MS = 120_000
PAGES = ("/docs", "/redoc")


@pytest.mark.parametrize("path", PAGES)
def test_reference_page_loads_its_assets_from_the_service_itself(service_url, path):
    page = httpx.get(f"{service_url}{path}", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert not re.search(r"https?://", page.text), "a URL with a host in the page"
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assets = re.findall(r"""(?:src|href)=["']?([^"' >]+)""", page.text)
    assert any(url.endswith(".js") for url in assets), assets
    for url in assets:
        assert url.startswith("/"), url
        response = httpx.get(f"{service_url}{url}", timeout=30)
        assert response.status_code == 200, url


def operations(service_url: str) -> list[tuple[str, str, str]]:
    """(METHOD, path, summary) of every operation in the live OpenAPI document."""
    document = httpx.get(f"{service_url}/openapi.json", timeout=30).json()
    return [(method.upper(), path, operation["summary"])
            for path, methods in document["paths"].items()
            for method, operation in methods.items()]


@contextlib.contextmanager
def offline_page(browser, service_url: str, path: str, screenshot: Path):
    """The page at ``path``, with any request to another host aborted. On leaving: a
    screenshot, then no request may have been blocked and no script may have failed."""
    own = urlsplit(service_url).netloc
    blocked: list[str] = []
    failures: list[str] = []
    page = browser.new_page()
    page.set_default_timeout(BROWSER_TIMEOUT_MS)

    def route(route):
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda error: failures.append(f"script error: {error}"))
    try:
        page.goto(f"{service_url}{path}")
        yield page
        page.screenshot(path=str(screenshot), full_page=False)
        assert screenshot.stat().st_size > 10_000
    finally:
        page.close()
    assert blocked == [] and failures == [], (blocked, failures)


def test_swagger_ui_lists_and_expands_every_operation_offline(browser, service_url, tmp_path):
    with offline_page(browser, service_url, "/docs", tmp_path / "docs.png") as page:
        page.wait_for_selector(".opblock")
        shown = {(block.locator(".opblock-summary-method").inner_text().strip(),
                  block.locator(".opblock-summary-path").inner_text().strip().replace("\u200b", ""))
                 for block in page.locator(".opblock").all()}
        assert {(method, path) for method, path, _ in operations(service_url)} <= shown
        create = page.locator("#operations-jobs-create_job")
        create.locator(".opblock-summary").click()
        create.locator(".opblock-body").wait_for()
        body = create.locator(".opblock-body").inner_text()
        assert "Request body" in body and "itersvr" in body


def test_redoc_lists_every_operation_offline(browser, service_url, tmp_path):
    with offline_page(browser, service_url, "/redoc", tmp_path / "redoc.png") as page:
        page.wait_for_selector("[data-section-id^='operation/']")
        text = page.locator("body").inner_text()
        for _, _, summary in operations(service_url):
            assert summary in text, summary
        create = page.locator("[data-section-id='operation/create_job']")
        create.scroll_into_view_if_needed()
        assert "/v1/jobs" in create.inner_text()
