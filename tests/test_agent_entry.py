"""The worker's per-process prewarm works offline and shares one store."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture(autouse=True)
def _unfreeze_after() -> Iterator[None]:
    """prewarm freezes the whole heap (memory/heap.py); in a test process that would
    keep every later test's leftovers from the collector, so undo it."""
    yield
    gc.unfreeze()


def test_prewarm_loads_vad_embedder_and_store_once_per_process(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent
    from memory.store import MemoryStore

    monkeypatch.setenv("MEMORY_DATA_DIR", str(data_dir))
    monkeypatch.setenv("MEM0_SETTING", "gated")
    proc = SimpleNamespace(userdata={})
    agent.prewarm(proc)  # type: ignore[arg-type]
    store = proc.userdata["store"]
    try:
        assert isinstance(store, MemoryStore)
        assert proc.userdata["settings"].mode.value == "GATED"
        assert proc.userdata["vad"] is not None
        # one retriever per process over that store: sessions share its per-user densities
        assert proc.userdata["retriever"].store is store
        # the store is usable at once: a write and a search, offline
        store.add_raw("prewarm-user", "I keep bees on my roof")
        assert store.search("prewarm-user", "bees")[0].text == "I keep bees on my roof"
    finally:
        store.close()


def test_prewarm_takes_what_it_loaded_out_of_full_garbage_collections(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full collection holds the GIL while it scans every tracked object. After
    prewarm, the worker's long-lived objects (LiveKit, Mem0, jieba, the embedder, the
    store) must not be among them: scanning them stalled replies by ~130 ms a pass
    (bench/latency.py)."""
    import agent
    from memory import lexical

    monkeypatch.setenv("MEMORY_DATA_DIR", str(data_dir))
    monkeypatch.setattr(lexical, "_jieba_ready", False)
    gc.unfreeze()  # start from a process where nothing is frozen
    proc = SimpleNamespace(userdata={})
    try:
        agent.prewarm(proc)  # type: ignore[arg-type]
        frozen, scanned = gc.get_freeze_count(), len(gc.get_objects())
        assert scanned < frozen / 20, (scanned, frozen)
        # the segmenter is loaded (and frozen) by prewarm, not by the first session
        assert lexical._jieba_ready
    finally:
        if "store" in proc.userdata:
            proc.userdata["store"].close()
