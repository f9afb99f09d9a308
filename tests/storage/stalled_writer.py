"""A fact writer that stalls inside the user's lock past its lease, while another writer
takes the lock and stores a newer value (issue 37: said A000 ... A009 in order, one writer
stalled 70 s, and the final value was A000).

The stall is an event, not 70 s: the first writer stops just before Mem0 writes its row
(after its look-ups, holding the lock), the lease is run out the way 60 s would (the lock
row's `until` put in the past), the second writer writes, and only then does the first
one go on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory.storage.locks import locks_table
from memory.storage.store import MemoryStore
from memory.types import WriteResult

STALL_S = 60.0  # only a writer that never reaches its write waits this long (the test then fails)


def said(minutes_ago: int) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat()


def write(store: MemoryStore, user_id: str, sister: str, when: str) -> WriteResult:
    return store.upsert_fact(user_id, f"User's sister is {sister}", category="relationships", slot="sister",
                             metadata={"timestamp": when}, said_at=when)  # fmt: skip


def run_out_the_lease(store: MemoryStore, user_id: str) -> int:
    """What 60 s do to the lock's row; the rows changed (1: the stalled writer held it)."""
    table = locks_table(store.table)
    with store.pool.connection() as conn:
        cur = conn.execute(f"UPDATE {table} SET until = now() - interval '1 second' WHERE key = %s",
                           [f"memory-facts:{user_id}"])  # fmt: skip
        conn.commit()
        return cur.rowcount


@contextmanager
def stalled_before_its_write(store: MemoryStore, text: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The writer of `text` stops where Mem0 is about to write its row; yields (stalled, go)."""
    stalled, go = threading.Event(), threading.Event()
    real = store._write_vector

    @contextmanager
    def write_vector(written: str, form: Any) -> Iterator[None]:
        if written == text and not go.is_set():
            stalled.set()
            go.wait(STALL_S)
        with real(written, form):
            yield

    monkeypatch.setattr(store, "_write_vector", write_vector)
    try:
        yield stalled, go
    finally:
        go.set()


def stale_writer_gives_way(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, *, slot_held: bool
) -> tuple[WriteResult, WriteResult, list[str]]:
    """Anna (said first) stalls past the lease, Maria (said later) is written meanwhile.
    Returns (Anna's result, Maria's result, the slot's values after both)."""
    if slot_held:
        write(store, user_id, "Sofia", said(30))
    with stalled_before_its_write(store, "User's sister is Anna", monkeypatch) as (stalled, go):
        with ThreadPoolExecutor(max_workers=1) as pool:
            anna = pool.submit(write, store, user_id, "Anna", said(20))
            assert stalled.wait(STALL_S), "the first writer never reached its write"
            assert run_out_the_lease(store, user_id) == 1  # it held the lock, and now its lease is over
            maria = write(store, user_id, "Maria", said(10))  # takes the lock the lease gave up
            go.set()
            first = anna.result(timeout=STALL_S)
    return first, maria, [m.text for m in store.list_user(user_id)]
