"""The SQL vector stage of a big user walks the partition's HNSW graph (iterative scan)
instead of ranking every row of the user; it must find what the exact scan finds."""

from __future__ import annotations

import pytest

from memory.storage import mem0_table
from memory.storage.mem0_table import Scope
from memory.storage.store import MemoryStore

TEXTS = [f"I planted {n} tulips in the {place} garden" for n in range(6) for place in ("front", "back", "roof", "side")]


def test_a_big_users_walk_finds_the_exact_scans_nearest(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text in TEXTS:
        store.add_raw(user_id, text)
    monkeypatch.setattr(mem0_table, "WALK_FROM", 10)  # 24 rows: a big user for this test
    table = store.rows
    table._walks.pop(user_id, None)
    assert table.walks(user_id)
    vector = store.embedder.embed("which garden has tulips on the roof", "search")
    walked = table.nearest_and_ids(Scope(user_id), vector, 5, [])
    with store.pool.connection() as conn:
        exact = conn.execute(*table.nearest_statement(Scope(user_id), vector, 5, [])).fetchall()
        walk_only = conn.execute(*table.nearest_statement(Scope(user_id), vector, 5, [], walk=True)).fetchall()
    assert len(exact) == 5
    for got in (walked, walk_only):  # the stage as a look-up runs it, and the walk's statement alone
        assert [r[0] for r in got] == [r[0] for r in exact]
        assert [r[1] for r in got] == pytest.approx([r[1] for r in exact], abs=1e-6)


def test_a_small_user_is_scanned_exactly(store: MemoryStore, user_id: str) -> None:
    for text in TEXTS[:3]:
        store.add_raw(user_id, text)
    store.rows._walks.pop(user_id, None)
    assert not store.rows.walks(user_id)  # fewer than WALK_FROM rows
