"""The SQL vector stage of a big user walks the partition's HNSW graph (iterative scan)
instead of ranking every row of the user; it must find what the exact scan finds."""

from __future__ import annotations

import pytest

from memory.storage import mem0_table
from memory.storage.lookup import Scope
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


def _same_partition(store: MemoryStore, user_id: str) -> str:
    """Another user id whose rows share the user's partition (hash of user_id)."""
    query = "SELECT satisfies_hash_partition(%s::regclass, %s, %s, %s::text)"
    with store.pool.connection() as conn:
        mine = next(r for r in range(16) if conn.execute(query, [store.table, 16, r, user_id]).fetchone()[0])
        for n in range(1000):
            other = f"{user_id}-n{n}"
            if conn.execute(query, [store.table, 16, mine, other]).fetchone()[0]:
                return other
    raise AssertionError("no neighbour id in the user's partition")


def test_a_big_users_walk_never_returns_a_partition_neighbours_rows_and_still_returns_k(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "which garden has tulips on the roof"
    for text in TEXTS:
        store.add_raw(user_id, text)
    neighbour = _same_partition(store, user_id)
    for n in range(40):  # the neighbour's rows all nearer the query than any of the user's
        store.add_raw(neighbour, f"{query} {n}")
    monkeypatch.setattr(mem0_table, "WALK_FROM", 10)
    table = store.rows
    table._walks.pop(user_id, None)
    assert table.walks(user_id)
    vector = store.embedder.embed(query, "search")
    with store.pool.connection() as conn:  # a few dozen rows: the planner must still walk the graph
        for off in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(f"SET {off} = off")
        monkeypatch.setattr(table, "_lookup", lambda _user, run: run(conn))
        plan = conn.execute(*_explain(table.nearest_statement(Scope(user_id), vector, 5, [], walk=True))).fetchall()
        assert "Order By: (vector <=>" in str(plan)  # the partition's HNSW index, filtered
        mine = {r[0] for r in table.nearest_and_ids(Scope(user_id), vector, 24, [])}
        theirs = {r[0] for r in table.nearest_and_ids(Scope(neighbour), vector, 40, [])}
        assert len(mine) == 24 and len(theirs) == 40
        assert not mine & theirs
        # A pooler's server connection without the iterative scan: still k rows, still only the user's.
        conn.execute("SET hnsw.iterative_scan = off")
        conn.execute("SET hnsw.ef_search = 10")
        walked = table.nearest_and_ids(Scope(user_id), vector, 5, [])
        conn.rollback()
    assert len(walked) == 5 and {r[0] for r in walked} <= mine


def _explain(statement: tuple) -> tuple:
    query, args = statement
    return mem0_table.sql.SQL("EXPLAIN {}").format(query), args


def test_the_walk_starts_at_walk_from_rows_exactly(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mem0_table, "WALK_FROM", 10)
    for text in TEXTS[:9]:
        store.add_raw(user_id, text)
    store.rows._walks.pop(user_id, None)
    assert not store.rows.walks(user_id)  # 9 rows: WALK_FROM - 1
    store.add_raw(user_id, TEXTS[9])
    store.rows._walks.pop(user_id, None)
    assert store.rows.walks(user_id)  # 10 rows: WALK_FROM
    store.delete_user(user_id)  # a forget after the session start: the held "walk" finds nothing ...
    vector = store.embedder.embed("tulips", "search")
    assert store.rows.walks(user_id, count=False)
    assert store.rows.nearest_and_ids(Scope(user_id), vector, 5, []) == []  # ... and the exact scan neither
