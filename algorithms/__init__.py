"""Maximum margin clustering algorithms with the scikit-learn estimator API (no web or queue code)."""
