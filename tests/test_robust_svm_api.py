"""RobustSVM end to end: labels in data.y, ramp on the fast queue and the ROD SDP on the slow
queue, predict; bad labels: 422."""

import httpx
import numpy as np
import pytest

from algorithms.robust_svm import gaussians_with_ring_outliers, outlier_f_measure
from tests.helpers import run_job, submit_job, wait_for_job


def test_robust_svm_ramp_job_trains_on_data_y_and_its_model_predicts(service_url):
    X, y, _ = gaussians_with_ring_outliers(np.random.RandomState(0), radius=35.0)
    labels = np.where(y > 0, 7, 3).tolist()
    payload = {"algorithm": {"name": "robust_svm", "params": {"method": "ramp", "C": 1.0}},
               "data": {"X": X.tolist(), "y": labels}}
    result = run_job(service_url, payload, timeout=180)
    assert set(result["labels"]) <= {3, 7}
    # 40 Gaussian points (Bayes error 2.2 %) and 10 ring points with random labels: the ring
    # points the classifier gets wrong are reported as outliers, the Gaussians mostly right.
    assert np.mean(np.array(result["labels"][:40]) == np.array(labels[:40])) >= 0.85
    assert len(result["extras"]["outlier_scores"]) == len(labels)
    assert result["extras"]["n_outliers"] == len(result["extras"]["outliers"])
    predicted = httpx.post(f"{service_url}/v1/models/{result['model_id']}/predict",
                           json={"X": X[:20].tolist()}, timeout=30.0)
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["labels"] == result["labels"][:20]


def _run_on_the_slow_queue(service_url, payload, timeout):
    """Submit an SDP job, check it went to the slow queue, wait for it and return its result."""
    job = submit_job(service_url, payload)
    assert job["queue"] == "slow"
    final = wait_for_job(service_url, job["id"], timeout=timeout)
    assert final["status"] == "succeeded", final["error"]
    return httpx.get(f"{service_url}/v1/jobs/{job['id']}/result", timeout=30.0).json()


def test_robust_svm_rod_sdp_job_runs_on_the_slow_queue_and_reports_the_outliers(service_url):
    # Section 6.5 draw at the size of the tests (20 + 20 + 10 ring points at R = 55): under 1 s of
    # the low-rank solver.
    X, y, is_outlier = gaussians_with_ring_outliers(np.random.RandomState(1000), radius=55.0)
    payload = {"algorithm": {"name": "robust_svm",
                             "params": {"method": "rod", "C": 0.1, "fit_intercept": False}},
               "data": {"X": X.tolist(), "y": y.astype(int).tolist()}}
    result = _run_on_the_slow_queue(service_url, payload, timeout=240)
    detected = np.isin(np.arange(y.size), result["extras"]["outliers"])
    assert outlier_f_measure(is_outlier, detected)[2] >= 0.75  # same draw in-process: F = 1.0
    assert len(result["extras"]["outlier_scores"]) == y.size
    assert np.mean(np.array(result["labels"][:40]) == y[:40]) >= 0.85


def test_robust_svm_reh_job_above_the_old_scs_limit_runs_on_the_lowrank_solver(service_url):
    # 300 points, above the SCS-era max_n of 250 (SCS needed 39-66 s there): the low-rank solver
    # takes about 4 s in-process and reports its certificate with the result.
    X, y, _ = gaussians_with_ring_outliers(np.random.RandomState(3), radius=35.0,
                                           n_per_class=120, n_outliers=60)
    payload = {"algorithm": {"name": "robust_svm", "params": {"method": "reh", "C": 0.1}},
               "data": {"X": X.tolist(), "y": y.astype(int).tolist()}}
    result = _run_on_the_slow_queue(service_url, payload, timeout=600)
    certificate = result["extras"]["certificate"]
    assert certificate["solver"] == "lowrank" and certificate["relative_gap"] is not None
    assert len(result["labels"]) == 300
    # The Gaussians (the first 240 points) are labeled as the Bayes rule labels them, well
    # above the majority class (50 %).
    assert np.mean(np.array(result["labels"][:240]) == y[:240]) >= 0.9


@pytest.mark.parametrize("y", [None, [1, 1, 1, 1]], ids=["missing", "single-class"])
def test_robust_svm_rejects_missing_or_single_class_labels_with_422(service_url, y):
    data = {"X": [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]]}
    if y is not None:
        data["y"] = y
    payload = {"algorithm": {"name": "robust_svm", "params": {"method": "ramp"}}, "data": data}
    response = httpx.post(f"{service_url}/v1/jobs", json=payload, timeout=30.0)
    assert response.status_code == 422, response.text
    assert "y" in response.text
