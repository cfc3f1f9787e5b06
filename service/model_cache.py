"""In-process LRU cache of decoded models, so predict costs one numpy call, not a Redis decode.

A hit still asks Redis whether the model exists (one ``EXISTS``): a model deleted through any
API process, or expired, is never served from another process's cache."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from algorithms.inputs import npz_bytes_to_arrays
from algorithms.registry import model_from_export
from core.stores import ModelStore
from service.metrics import Metrics


class ModelCache:
    def __init__(self, store: ModelStore, size: int):
        self.store = store
        self.size = size
        self._items: OrderedDict[str, tuple[Any, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, model_id: str) -> tuple[Any, dict[str, Any]] | None:
        """``(estimator, info)`` or ``None`` when the model does not exist."""
        with self._lock:
            cached = self._items.get(model_id)
        if cached is not None:
            if self.store.exists(model_id):
                with self._lock:
                    if model_id in self._items:
                        self._items.move_to_end(model_id)
                    self.hits += 1
                Metrics.model_cache(hit=True)
                return cached
            self.forget(model_id)
            return None
        info = self.store.info(model_id)
        loaded = self.store.load(model_id)
        if info is None or loaded is None:
            return None
        meta, payload = loaded
        entry = (model_from_export(meta, npz_bytes_to_arrays(payload)), info)
        Metrics.model_cache(hit=False)
        with self._lock:
            self.misses += 1
            if self.size > 0:
                self._items[model_id] = entry
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return entry

    def forget(self, model_id: str) -> None:
        with self._lock:
            self._items.pop(model_id, None)
