"""The caller's memories held in the process (memory/storage/session_index.py), as
invariants, on a clock the test moves: a snapshot not refreshed within its staleness
bound (60 s) is not used, one refreshed exactly 60 s ago still is; at most `keep` users
are held (4 by default), and the least recently opened leaves first."""

from __future__ import annotations

import uuid

from memory.storage.session_index import SessionIndexes
from memory.storage.store import MemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def indexes(store: MemoryStore, clock: Clock, **kw: int) -> SessionIndexes:
    return SessionIndexes(store.rows, max_rows=10_000, enabled=True, clock=clock, **kw)


def test_a_snapshot_past_its_staleness_bound_is_not_used_until_refreshed(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "I like green tea")
    clock = Clock()
    idx = indexes(store, clock)
    idx.open(user_id)
    assert idx.usable(user_id) is not None
    clock.now += 60.0  # the bound itself: still used
    assert idx.usable(user_id) is not None
    clock.now += 0.5  # past it: the SQL path
    assert idx.usable(user_id) is None
    assert idx.held(user_id) is not None  # held still, only not used
    idx.refresh(user_id)
    assert idx.usable(user_id) is not None  # refreshed now
    clock.now += 61.0
    assert idx.usable(user_id) is None


def test_a_write_of_this_process_is_not_looked_up_in_the_snapshot_until_a_refresh_read_it(
    store: MemoryStore, user_id: str
) -> None:
    store.add_raw(user_id, "I like green tea")
    idx = indexes(store, Clock())
    idx.open(user_id)
    with idx._lock:  # the store's hook, without the background refresh it starts
        idx._writes[user_id] = idx._writes.get(user_id, 0) + 1
    assert idx.usable(user_id) is None
    idx.refresh(user_id)
    assert idx.usable(user_id) is not None


def test_at_most_keep_users_are_held_and_the_least_recently_opened_leaves_first(store: MemoryStore) -> None:
    users = [f"keep-{uuid.uuid4().hex[:8]}-{i}" for i in range(6)]
    for user in users:
        store.add_raw(user, f"{user} likes chess")
    clock = Clock()
    idx = indexes(store, clock)  # keep: 4, the default
    for user in users[:4]:
        clock.now += 1.0
        idx.open(user)
    assert all(idx.held(u) is not None for u in users[:4])  # the bound: all four held
    clock.now += 1.0
    idx.open(users[0])  # opened again: now the most recent
    clock.now += 1.0
    idx.open(users[4])  # a fifth: the least recently opened (users[1]) leaves
    assert [idx.held(u) is not None for u in users[:5]] == [True, False, True, True, True]
    assert idx.usable(users[1]) is None
    idx.refresh(users[1])  # not opened any more: not loaded again
    assert idx.held(users[1]) is None


def test_keep_is_honoured_as_given(store: MemoryStore) -> None:
    users = [f"keep1-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    for user in users:
        store.add_raw(user, "I like chess")
    clock = Clock()
    idx = indexes(store, clock, keep=1)
    idx.open(users[0])
    clock.now += 1.0
    idx.open(users[1])
    assert idx.held(users[0]) is None and idx.held(users[1]) is not None
