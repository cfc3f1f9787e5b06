"""Each algorithm's parameters (one module per algorithm, the shared types in ``common``): name,
default, bounds and meaning, stated once for the estimators and the API's request schema."""
