"""The worker's per-process prewarm works offline and shares one store."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest


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
        # the store is usable at once: a write and a search, offline
        store.add_raw("prewarm-user", "I keep bees on my roof")
        assert store.search("prewarm-user", "bees")[0].text == "I keep bees on my roof"
    finally:
        store.close()
