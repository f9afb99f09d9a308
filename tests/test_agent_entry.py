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


async def test_with_the_database_down_a_session_still_gets_an_agent_and_its_turns_wait_on_disk(
    data_dir: Path, tmp_path: Path, store, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """A fleet database down while a job process starts: prewarm used to fail (after
    9 s), and LiveKit gives up on the job after three processes, so the caller got no
    agent. Now the session runs without memory, and its turns wait in the journal for
    a process that has a store."""
    import logging

    import agent
    from memory.livekit_glue import MemoryAgent, MemorySession
    from memory.service import MemoryService
    from memory.settings import MemoryMode
    from memory.store import UnavailableStore
    from memory.write_queue import DurableWriteQueue
    from tests.conftest import make_service
    from tests.harness import VoiceHarness

    journal_dir = tmp_path / "worker"
    monkeypatch.setenv("MEMORY_DATA_DIR", str(journal_dir))
    # A database that refuses connections: a socket directory with no server in it.
    monkeypatch.setenv("MEMORY_DATABASE_URL", f"postgresql://memory@/memory?host={tmp_path}")
    proc = SimpleNamespace(userdata={})
    with caplog.at_level(logging.ERROR, logger="agent"):
        agent.prewarm(proc)  # type: ignore[arg-type]
    down = proc.userdata["store"]
    assert isinstance(down, UnavailableStore)
    assert "memory store unavailable" in caplog.text

    settings = proc.userdata["settings"]
    service = MemoryService(down, settings, retriever=proc.userdata["retriever"])
    memory = MemorySession(service, user_id=user_id, budget_s=0.5)
    harness = VoiceHarness(MemoryAgent(memory), preflight=True)
    memory.attach(harness.session)
    async with harness:
        turn = await harness.user_says("My sister's name is Anna")
        assert turn.reply  # the agent answered, without memory
    await memory.aclose(drain_timeout_s=0.2)

    # Later, a process whose store is up takes the waiting turn over and writes it.
    up = make_service(store, MemoryMode.NORMAL)
    queue = DurableWriteQueue(settings.journal_path, up.remember, base_backoff_s=0.05)
    queue.start()
    try:
        assert await queue.drain(15.0) is True
    finally:
        await queue.aclose(1.0)
    assert [m.text for m in store.list_user(memory.user_id)] == ["My sister's name is Anna"]
