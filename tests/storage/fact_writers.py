"""Two writers of one user's fact slot at once, made to meet by events (the store's tests
run these directly and through PgBouncer).

- `two_writers_at_once`: both write the same slot at the same moment. Without the lock
  both would find the slot empty and both add; a barrier with a time-out (what these tests
  used) let a machine that stalls longer than it pass without the lock.
- `stale_writer_gives_way`: one writer stalls inside the user's lock past its lease while
  another takes the lock and stores a newer value (issue 37: said A000 ... A009 in order,
  one writer stalled 70 s, and the final value was A000). The stall is an event, not 70 s:
  the first writer stops just before Mem0 writes its row (after its look-ups, holding the
  lock), the lease is run out the way 60 s would (the lock row's `until` put in the past),
  the second writer writes, and only then does the first one go on.
"""

from __future__ import annotations

import threading
import time
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


def two_writers_at_once(store: MemoryStore, user_id: str, names: tuple[str, str]) -> tuple[list[WriteResult], int]:
    """Two writers of one slot, each one's look-up held until the other is in `upsert_fact`
    too: inside the look-up as well (no lock kept it out), or seen waiting for the lock
    (`RowLocks.attempts`). Returns their results and the most writers that were inside
    the look-up at once (1 when the lock keeps the second out, 2 without it)."""
    count = threading.Lock()
    arrived, inside, most = 0, 0, 0
    tried = store.locks.attempts
    real_find = store.find_slot

    def find_together(user: str, slot: str | None) -> Any:
        nonlocal arrived, inside, most
        with count:
            arrived += 1
            inside += 1
            most = max(most, inside)
        try:
            deadline = time.monotonic() + STALL_S
            while arrived < 2 and store.locks.attempts == tried:
                assert time.monotonic() < deadline, "the other writer never came"
                time.sleep(0.002)
            return real_find(user, slot)
        finally:
            with count:
                inside -= 1

    def sister(name: str) -> WriteResult:
        return store.upsert_fact(user_id, f"User's sister is {name}", category="relationships", slot="sister")

    store.find_slot = find_together  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(sister, names))
    finally:
        del store.find_slot
    assert arrived == 2 and (most == 2 or store.locks.attempts > tried), "the writers did not meet"
    return results, most


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
) -> tuple[WriteResult, WriteResult, list[str], list[str]]:
    """Anna (said first) stalls past the lease, Maria (said later) is written meanwhile.
    Returns (Anna's result, Maria's result, the slot's value now, its past values kept)."""
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
    now = [m.text for m in store.list_user(user_id, past=False)]
    current = {m.id for m in store.list_user(user_id, past=False)}
    return first, maria, now, [m.text for m in store.list_user(user_id) if m.id not in current]
