"""Model selection by the margin criterion.

Every clustering method of the package keeps, among candidate partitions, the one its margin
objective prefers. This package owns that idea once:

* :mod:`~algorithms.selection.candidates`: where candidate partitions come from (the spectral
  partition of the kNN graph, k-means runs);
* :mod:`~algorithms.selection.margin`: how a two-class labeling is scored (the soft-margin
  objective ``omega`` of Xu 2007, (3.1)) and which candidate is kept;
* :mod:`~algorithms.selection.n_clusters`: how many clusters, for ``n_clusters="auto"`` (the k
  whose partition carries over from one half of the data to the other, by an SVM);
* :mod:`~algorithms.selection.bisection`: ``n_clusters > 2`` from a two-class method by recursive
  bisection, steered by a guide partition that the caller passes in (any clustering estimator;
  the methods pass CPM3C).

No module here imports a clustering method: a method that needs another's partition passes the
estimator or the partition in.
"""
