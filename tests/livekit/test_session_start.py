"""Session start prepares retrieval (densities, the lexical index) off the reply's
path and off the read slots the turns need."""

from __future__ import annotations

import asyncio

import pytest

from memory.livekit.session import MemorySession
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S, make_service


def _normal_service_with_dog_walks(store: MemoryStore, user_id: str) -> MemoryService:
    """A NORMAL service for a user with 25 memories: enough for densities (20 or more)."""
    for hour in range(1, 26):
        store.add_raw(user_id, f"I walked the dog at {hour} o'clock")
    return make_service(store, MemoryMode.NORMAL)


async def test_session_start_prepares_retrieval_so_the_first_turn_does_no_store_wide_work(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _normal_service_with_dog_walks(store, user_id)
    session = MemorySession(service, user_id=user_id)
    await session.wait_profile()  # the session-start work, in the background
    seen: list[str] = []
    real = store.pool.connection

    def connection(*args, **kwargs):
        seen.append("connection")
        return real(*args, **kwargs)

    monkeypatch.setattr(store.pool, "connection", connection)
    density = service.retriever.density(user_id)
    assert len(density.of) == 25 and seen == []  # ready, with no query of its own
    await session.aclose(drain_timeout_s=1.0)


async def test_computing_densities_at_session_start_leaves_every_read_slot_to_the_turns(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from memory.ops.threads import MAX_READS_IN_FLIGHT, run_read

    service = _normal_service_with_dog_walks(store, user_id)
    release = threading.Event()
    compute = service.retriever._compute_density

    def slow_compute(uid: str):
        release.wait(timeout=HANG_GUARD_S)  # a store of 20,000 memories
        return compute(uid)

    monkeypatch.setattr(service.retriever, "_compute_density", slow_compute)
    preparing = asyncio.ensure_future(service.prepare(user_id))
    try:
        # Every read slot is still there for the turns' look-ups while it runs.
        reads = [run_read(threading.Event().wait, 0.05) for _ in range(MAX_READS_IN_FLIGHT)]
        assert await asyncio.gather(*reads) == [False] * MAX_READS_IN_FLIGHT
        assert not preparing.done()
    finally:
        release.set()
    await asyncio.wait_for(preparing, timeout=HANG_GUARD_S)
    assert len(service.retriever.density(user_id).of) == 25
