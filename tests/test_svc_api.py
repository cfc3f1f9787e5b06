"""SVC end to end: POST /v1/jobs on the fast queue with real Redis and RQ workers, then predict."""

import httpx
import numpy as np
from sklearn.datasets import load_iris, make_moons
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from algorithms.metrics import clustering_error
from algorithms.params.svc import SAMPLE_SIZE
from tests.helpers import run_job


def iris_two_components():
    X, y = load_iris(return_X_y=True)
    return PCA(2).fit_transform(X), y


def test_svc_job_finds_three_iris_clusters_and_its_model_predicts(service_url):
    X, y = iris_two_components()
    payload = {"algorithm": {"name": "svc", "params": {"n_clusters": 3, "gamma": "schedule",
                                                       "portfolio": False}},
               "data": {"X": X.tolist()}}
    result = run_job(service_url, payload, timeout=180)
    labels = np.asarray(result["labels"])
    # Issue acceptance for gamma="schedule", k = 3 on iris (2 components): <= 8 misclassified.
    assert round(clustering_error(y, labels) * len(y)) <= 8
    extras = result["extras"]
    assert extras["n_clusters"] == 3 and extras["n_support"] >= 1
    assert extras["n_bounded"] == len(extras["outliers"])
    assert len(result["decision_values"]) == len(y)
    predicted = httpx.post(f"{service_url}/v1/models/{result['model_id']}/predict",
                           json={"X": X.tolist()}, timeout=30.0)
    assert predicted.status_code == 200, predicted.text
    assert np.mean(np.asarray(predicted.json()["labels"]) == labels) >= 0.9


def test_svc_job_above_exact_max_n_labels_every_point_from_a_sample(service_url):
    # 1,200 noisy moons fitted on 300 of them (k-means cuts both moons, ARI 0.25).
    X, y = make_moons(1200, noise=0.05, random_state=0)
    X = X.round(4)
    params = {"n_clusters": 2, "exact_max_n": 300, "random_state": 0}
    result = run_job(service_url, {"algorithm": {"name": "svc", "params": params},
                                   "data": {"X": X.tolist()}}, timeout=180)
    labels = np.asarray(result["labels"])
    assert labels.shape == (1200,) and adjusted_rand_score(y, labels) >= 0.95
    assert result["extras"]["exact"] is False
    assert result["extras"]["solver"] == "sample"  # the previous release's entry, one more release
    predicted = httpx.post(f"{service_url}/v1/models/{result['model_id']}/predict",
                           json={"X": X.tolist()}, timeout=30.0)
    assert predicted.status_code == 200, predicted.text
    np.testing.assert_array_equal(predicted.json()["labels"], labels)


def test_svc_rejects_c_and_p_together_before_queueing(service_url):
    payload = {"algorithm": {"name": "svc", "params": {"C": 1.0, "p": 0.5}},
               "data": {"X": [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]}}
    response = httpx.post(f"{service_url}/v1/jobs", json=payload, timeout=30.0)
    assert response.status_code == 422, response.text
    assert "C or p" in response.text


def test_svc_exact_complete_labeling_refuses_more_points_than_its_limit(service_url):
    X = np.random.default_rng(0).normal(size=(3001, 2)).round(3)
    params = {"labeling": "complete", "gamma": 1.0, "exact_max_n": None}
    payload = {"algorithm": {"name": "svc", "params": params}, "data": {"X": X.tolist()}}
    response = httpx.post(f"{service_url}/v1/jobs", json=payload, timeout=30.0)
    assert response.status_code == 422, response.text
    assert "max_n=3000" in response.text and f"exact_max_n={SAMPLE_SIZE}" in response.text
