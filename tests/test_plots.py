"""Plots of finished jobs: drawn by the API when first asked for (``service/plots.py``), kept
in the plot store, served as SVG or PNG by ``GET /v1/jobs/{id}/plot``, one tenant's only.

The SVGs keep their text as text (``svg.fonttype: none``), so a test reads what the plot says.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import httpx
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import load_digits, make_blobs

from core.blobs import LocalBlobStore
from core.keys import BlobKeys
from service.plots import job_plot
from tests.conftest import TENANT_KEYS
from tests.helpers import submit_job, wait_for_job

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def svg_text(svg: bytes) -> str:
    """All text of an SVG document (parsing it also proves it is well-formed XML)."""
    return " ".join(ET.fromstring(svg).itertext())


def digits_3_8() -> np.ndarray:
    X, y = load_digits(return_X_y=True)
    return X[np.isin(y, (3, 8))]


# -- drawing (no service) --------------------------------------------------------------------


def test_two_feature_data_is_drawn_itself_over_the_models_predicted_regions():
    X, _ = make_blobs(n_samples=60, centers=[[-3, 0], [3, 0]], random_state=0)
    labels = (X[:, 0] > 0).astype(int)
    calls = []

    def predict(points):
        calls.append(len(points))
        return (points[:, 0] > 0).astype(int)

    images = job_plot("itersvr", X, labels, predict=predict)
    text = svg_text(images["svg"])
    assert "regions the model predicts" in text
    assert "PCA" not in text
    assert "cluster 0 (30)" in text and "cluster 1 (30)" in text
    assert b"<image" in images["svg"]  # the region raster under the points
    assert max(calls) >= 40 * 40  # the grid went through predict
    assert images["png"].startswith(PNG_MAGIC)


def test_data_with_more_features_is_a_pca_projection_said_in_the_title():
    X = digits_3_8()
    images = job_plot("itersvr", X, np.arange(len(X)) % 2,
                      predict=lambda points: pytest.fail("no regions beyond 2-D"))
    text = svg_text(images["svg"])
    assert "PCA projection of 64 features" in text
    assert "regions" not in text


def test_outliers_are_marked_from_labels_and_from_the_results_outlier_indices():
    X, _ = make_blobs(n_samples=40, centers=2, random_state=1)
    labels = np.zeros(40, dtype=int)
    labels[:3] = -1
    assert "outlier (3)" in svg_text(job_plot("svc", X, labels)["svg"])
    # A classifier's -1 is a class; its outliers come as indices (robust_svm's extras).
    classes = np.where(np.arange(40) % 2 == 0, -1, 1)
    text = svg_text(job_plot("robust_svm", X, classes, outlier_label=None,
                             outliers=[4, 7])["svg"])
    assert "outlier (2)" in text and "class -1 (19)" in text


def test_a_clusterers_listed_outliers_that_have_a_cluster_are_counted_in_it():
    # svc's extras list the points outside the sphere; under bounded_svs="chain" each has a
    # cluster, so the legend counts 25 + 15 points in clusters and none as an outlier.
    X, _ = make_blobs(n_samples=40, centers=2, random_state=1)
    labels = np.repeat([0, 1], [25, 15])
    text = svg_text(job_plot("svc", X, labels, outliers=list(range(30)))["svg"])
    assert "cluster 0 (25)" in text and "cluster 1 (15)" in text
    assert "outlier" not in text


def test_sequences_get_a_state_by_position_plot():
    labels = [np.array([0, 0, 1, 1, 0]), np.array([1, 1, 0]), np.array([0, 1, 0, 1])]
    text = svg_text(job_plot("m3n", [np.zeros(5), np.zeros(3), np.zeros(4)], labels)["svg"])
    assert "state by position" in text and "position" in text
    assert "state 0" in text and "state 1" in text


# -- the endpoint ----------------------------------------------------------------------------


def finished_job(base_url: str, payload: dict) -> str:
    job = submit_job(base_url, payload)
    final = wait_for_job(base_url, job["id"])
    assert final["status"] == "succeeded", final
    return job["id"]


def test_plot_of_2d_job_is_svg_by_default_and_png_on_accept(service_url, service_env):
    X, _ = make_blobs(n_samples=80, centers=2, random_state=0)
    job_id = finished_job(service_url, {"algorithm": {"name": "itersvr",
                                                      "params": {"random_state": 0}},
                                        "data": {"X": X.tolist()}})
    blobs = LocalBlobStore(service_env["MMC_BLOB_URL"])
    plot = BlobKeys.plot("anonymous", job_id, "svg")
    assert not blobs.exists(plot)  # the job drew none: the first GET does
    svg = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", timeout=30)
    assert blobs.exists(plot)
    assert svg.status_code == 200
    assert svg.headers["content-type"] == "image/svg+xml"
    assert "regions the model predicts" in svg_text(svg.content)
    png = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", headers={"Accept": "image/png"},
                    timeout=30)
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png.content.startswith(PNG_MAGIC)
    # The browser's <img> Accept ranks SVG first; ?format= overrides any header.
    browser = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", timeout=30, headers={
        "Accept": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"})
    assert browser.headers["content-type"] == "image/svg+xml"
    forced = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot?format=png", timeout=30)
    assert forced.content.startswith(PNG_MAGIC)
    again = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", timeout=30)
    assert again.content == svg.content  # served from the plot store
    job = httpx.get(f"{service_url}/v1/jobs/{job_id}", timeout=30).json()
    assert job["links"]["plot"] == f"/v1/jobs/{job_id}/plot"
    assert job["timing"]["plot_seconds"] is None  # deprecated: no job draws a plot


def test_plot_of_64_feature_digits_is_a_pca_projection(service_url):
    job_id = finished_job(service_url, {"algorithm": {"name": "itersvr",
                                                      "params": {"random_state": 0}},
                                        "data": {"X": digits_3_8().tolist()}})
    response = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", timeout=30)
    assert response.status_code == 200
    text = svg_text(response.content)
    assert "PCA projection of 64 features" in text and "357 points" in text


def test_plot_of_sequences_is_state_by_position(service_url):
    rng = np.random.default_rng(0)
    sequences = [rng.integers(0, 3, size=int(rng.integers(6, 12))).tolist() for _ in range(12)]
    job_id = finished_job(service_url, {"algorithm": {"name": "m3n",
                                                      "params": {"n_states": 2,
                                                                 "random_state": 0}},
                                        "data": {"sequences": sequences}})
    response = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", timeout=30)
    assert response.status_code == 200
    assert "state by position" in svg_text(response.content)


def test_plot_of_another_tenants_job_is_a_404_and_of_an_unfinished_job_a_409(keyed_service_url):
    acme = {"X-API-Key": TENANT_KEYS["acme"]}
    globex = {"X-API-Key": TENANT_KEYS["globex"]}
    X, _ = make_blobs(n_samples=40, centers=2, random_state=2)
    response = httpx.post(f"{keyed_service_url}/v1/jobs", headers=acme, timeout=30, json={
        "algorithm": {"name": "itersvr", "params": {"random_state": 0}},
        "data": {"X": X.tolist()}})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    early = httpx.get(f"{keyed_service_url}/v1/jobs/{job_id}/plot", headers=acme, timeout=30)
    final = httpx.get(f"{keyed_service_url}/v1/jobs/{job_id}?wait=30", headers=acme,
                      timeout=60).json()
    while final["status"] not in ("succeeded", "failed", "canceled"):
        final = httpx.get(f"{keyed_service_url}/v1/jobs/{job_id}?wait=30", headers=acme,
                          timeout=60).json()
    assert final["status"] == "succeeded"
    if early.status_code != 200:  # unless the job had already finished
        assert early.status_code == 409
        assert "succeeded" in early.json()["detail"]
    own = httpx.get(f"{keyed_service_url}/v1/jobs/{job_id}/plot", headers=acme, timeout=30)
    assert own.status_code == 200
    for path in ("plot", "labels.csv"):
        other = httpx.get(f"{keyed_service_url}/v1/jobs/{job_id}/{path}", headers=globex,
                          timeout=30)
        assert other.status_code == 404, path
        assert other.headers["content-type"] == "application/problem+json"
        assert other.content != own.content
    anonymous = httpx.get(f"{keyed_service_url}/v1/jobs/{job_id}/plot", timeout=30)
    assert anonymous.status_code == 401


def test_labels_csv_is_one_label_per_line(service_url):
    X, _ = make_blobs(n_samples=50, centers=2, random_state=3)
    job_id = finished_job(service_url, {"algorithm": {"name": "itersvr",
                                                      "params": {"random_state": 0}},
                                        "data": {"X": X.tolist()}})
    response = httpx.get(f"{service_url}/v1/jobs/{job_id}/labels.csv", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert f'filename="{job_id}.labels.csv"' in response.headers["content-disposition"]
    result = httpx.get(f"{service_url}/v1/jobs/{job_id}/result", timeout=30).json()
    assert [int(line) for line in response.text.splitlines()] == result["labels"]


def test_plot_whose_dataset_has_expired_is_a_404_that_says_so(service_url, redis_url):
    X, _ = make_blobs(n_samples=30, centers=2, random_state=4)
    job_id = finished_job(service_url, {"algorithm": {"name": "itersvr",
                                                      "params": {"random_state": 0}},
                                        "data": {"X": X.tolist()}})
    redis = Redis.from_url(redis_url)
    dataset_id = json.loads(redis.get(f"mmc:job:{job_id}:input"))["dataset_id"]
    redis.delete(f"mmc:dataset:{dataset_id}")
    response = httpx.get(f"{service_url}/v1/jobs/{job_id}/plot", timeout=30)
    assert response.status_code == 404
    assert "has expired" in response.json()["detail"]
    assert httpx.get(f"{service_url}/v1/jobs/{job_id}/labels.csv", timeout=30).status_code == 200
