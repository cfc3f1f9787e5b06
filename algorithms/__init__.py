"""Maximum margin clustering algorithms, scikit-learn estimator API; no web or queue code."""
