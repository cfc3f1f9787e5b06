"""The web console: its pages over HTTP, then a real headless browser (Debian's ``chromium``,
driven by Playwright) uploading a CSV, watching the job finish without a reload, and opening the
job page with its plot and labels.

The browser test is skipped, saying why, only where chromium cannot be found or launched;
``.ci/run`` installs it when it is missing (``apt-get install chromium``).
"""

from __future__ import annotations

import re

import httpx
import numpy as np
from sklearn.datasets import make_blobs

from tests.conftest import TENANT_KEYS
from tests.helpers import submit_job

BROWSER_TIMEOUT_MS = 120_000


def test_home_page_is_server_rendered_with_the_upload_form_and_no_external_resources(
        service_url):
    response = httpx.get(f"{service_url}/", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'id="upload-form"' in page and 'type="file"' in page
    upload = page[page.index('id="upload-algorithm"'):]
    upload = upload[:upload.index("</select>")]
    for name in ("itersvr", "cpm3c", "svc", "gmmc", "sdp_mmc"):
        assert f'<option value="{name}"' in upload
    assert '<option value="m3n"' not in upload  # sequences do not come as a CSV matrix
    # The job list filters by status and by any algorithm.
    listed = page[page.index('id="filter-algorithm"'):]
    assert '<option value="m3n"' in listed and 'id="filter-status"' in page
    # Everything from this origin: no CDN, so the console works offline.
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "script-src 'self'" in response.headers["content-security-policy"]
    script = httpx.get(f"{service_url}/ui/static/console.js", timeout=30)
    assert script.status_code == 200 and "sessionStorage" in script.text
    assert "X-API-Key" in script.text
    assert httpx.get(f"{service_url}/ui", timeout=30, follow_redirects=True).url.path == "/"


def test_page_of_an_unknown_job_is_a_404_page_that_says_so_and_escapes_the_id(service_url):
    response = httpx.get(f"{service_url}/ui/jobs/\"><b onclick=alert(1)>x", timeout=30)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "does not exist" in response.text and "loading" not in response.text
    assert "<b onclick" not in response.text
    assert "&#34;&gt;&lt;b onclick=alert(1)&gt;x" in response.text
    missing = httpx.get(f"{service_url}/ui/jobs/{'0' * 32}", timeout=30)
    assert missing.status_code == 404 and 'id="job-missing"' in missing.text


def test_page_of_a_job_is_served_with_its_id(service_url):
    job = submit_job(service_url, {"algorithm": {"name": "itersvr", "params": {"n_clusters": 2}},
                                   "data": {"X": [[0.0, 0.0], [0.1, 0.0], [5.0, 5.0],
                                                       [5.1, 5.0]]}})
    response = httpx.get(f"{service_url}/ui/jobs/{job['id']}", timeout=30)
    assert response.status_code == 200
    assert f'data-job-id="{job["id"]}"' in response.text


def test_console_routes_stay_out_of_the_api_document(service_url):
    paths = httpx.get(f"{service_url}/openapi.json", timeout=30).json()["paths"]
    assert "/" not in paths and not any(path.startswith("/ui") for path in paths)


# -- in a browser ----------------------------------------------------------------------------


def test_console_uploads_a_csv_follows_the_job_and_shows_its_plot_and_labels(
        browser, keyed_service_url, tmp_path):
    X, _ = make_blobs(n_samples=120, centers=[[-4, 0], [4, 0]], random_state=7)
    data = tmp_path / "two-blobs.csv"
    np.savetxt(data, X, delimiter=",", header="x,y", comments="")
    page = browser.new_page(accept_downloads=True)
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    failures: list[str] = []  # script errors and failed requests, but the expected 401s
    page.on("pageerror", lambda error: failures.append(f"script error: {error}"))
    page.on("response", lambda response: response.status >= 400 and response.status != 401
            and failures.append(f"{response.status} {response.url}"))
    try:
        page.goto(f"{keyed_service_url}/")
        # Without a key the API says 401 and the console asks for one.
        page.wait_for_selector("text=enter your API key")
        page.fill("#key-input", TENANT_KEYS["acme"])
        page.click("#key-save")
        page.wait_for_selector("#key-state:has-text('key set')")

        page.set_input_files("#upload-file", str(data))
        page.select_option("#upload-algorithm", "itersvr")
        page.fill("#upload-n-clusters", "2")
        page.fill("#upload-params", '{"random_state": 0}')
        page.click("#upload-submit")
        page.wait_for_selector("#notice:has-text('queued')")
        # "job <first 12 characters of the id> queued on ...": this job's row, not the newest row
        # of the list before its refresh (this tenant's jobs from other tests are there).
        prefix = page.locator("#notice").inner_text().split()[1]
        row = page.locator(f"#jobs-body tr[data-job-id^='{prefix}']")
        row.wait_for()
        job_id = row.get_attribute("data-job-id")
        # The list refreshes itself: no reload until the job has succeeded.
        row.locator("[data-status='succeeded']").wait_for()
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        # The filters ask the API again: a failed-jobs view leaves it out, an itersvr view keeps it.
        page.select_option("#filter-status", "failed,canceled")
        row.wait_for(state="detached")
        page.select_option("#filter-status", "")
        page.select_option("#filter-algorithm", "itersvr")
        row.wait_for()
        page.select_option("#filter-algorithm", "")

        row.locator("a").click()
        page.wait_for_url(f"**/ui/jobs/{job_id}")
        page.wait_for_selector("#job-status[data-status='succeeded']")
        plot = page.locator("#job-plot")
        plot.wait_for(state="visible")
        page.wait_for_function(
            "() => { const img = document.getElementById('job-plot');"
            " return img.complete && img.naturalWidth > 0 && img.naturalHeight > 0; }")
        size = page.evaluate("() => [document.getElementById('job-plot').naturalWidth,"
                             " document.getElementById('job-plot').naturalHeight]")
        assert min(size) > 100
        assert page.locator("#job-params").inner_text().count("random_state") == 1
        assert "fit" in page.locator("#job-timing").inner_text()
        # iterSVR keeps no history of its own: the objectives it reported as progress.
        assert page.locator("#job-history tr").count() >= 2
        assert "not recorded" not in page.locator("#job-history").inner_text()
        assert page.locator("#job-warnings li").count() >= 1
        # The partition kept among the portfolio's candidates, and every candidate's score.
        summary = page.locator("#job-summary").inner_text()
        assert "partition kept" in summary and "itersvr:" in summary

        with page.expect_download() as download_info:
            page.click("#download-labels")
        labels_path = tmp_path / "downloaded.labels.csv"
        download_info.value.save_as(labels_path)
        labels = np.loadtxt(labels_path, dtype=int)
        assert labels.shape == (120,) and set(labels.tolist()) == {0, 1}
        with page.expect_download() as download_info:
            page.click("#download-model")
        assert download_info.value.suggested_filename.endswith(".json")

        page.screenshot(path=str(tmp_path / "console-job.png"), full_page=True)
        assert (tmp_path / "console-job.png").stat().st_size > 10_000

        # Another tenant's key shows that tenant's jobs only.
        page.goto(f"{keyed_service_url}/")
        page.fill("#key-input", TENANT_KEYS["globex"])
        page.click("#key-save")
        page.locator(f"#jobs-body tr[data-job-id='{job_id}']").wait_for(state="detached")
        assert page.locator("#key-state").inner_text() == "key set for this tab"
    finally:
        page.close()
    assert not failures, failures
