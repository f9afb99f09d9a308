"""The caller's memories held in the job process (memory/storage/session_index.py).

A look-up after the final transcript reads the in-process snapshot instead of running
statements. That it finds exactly what the SQL path finds, and runs no statement, is the
look-up seam's contract (test_lookup_contract.py). Here: it falls back to SQL above the
bound and after the process's own write until a refresh caught up, picks up what another
session wrote or deleted, and never holds another user's rows.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

from memory.retrieval.retriever import Retriever
from memory.storage import snapshot
from memory.storage.store import MemoryStore


class _Seen(list[str]):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def clear(self) -> None:
        super().clear()
        self.threads.clear()


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The start of every statement run from now on, by any thread (`.threads`: whose)."""
    seen = _Seen()
    lock = threading.Lock()
    real = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        text = query.as_string(self.connection) if hasattr(query, "as_string") else str(query)
        with lock:
            seen.append(" ".join(text.split())[:80])
            seen.threads.append(threading.current_thread().name)
        return real(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    yield seen


def _retriever(store: MemoryStore) -> Retriever:
    # No hubness correction: it is computed in the background, apart from the look-up.
    return Retriever(store, store.settings.tuned(density=0.0))


def test_a_user_past_the_bound_is_looked_up_in_sql(store: MemoryStore, user_id: str, indexes, statements) -> None:
    for text in ["I like tea", "I like coffee", "I like cocoa"]:
        store.add_raw(user_id, text)
    retriever = _retriever(store)
    indexes.max_rows = 3  # the limit: held
    store.open_session_index(user_id)
    assert indexes.usable(user_id) is not None
    statements.clear()
    assert "I like cocoa" in [r.text for r in retriever.retrieve(user_id, "cocoa")]
    assert not [s for s in statements if s.startswith("WITH")]  # the look-up's statements
    store.add_raw(user_id, "I like mint tea")  # four: the limit + 1
    indexes.wait_idle(user_id)
    assert indexes.usable(user_id) is None
    statements.clear()
    assert "I like mint tea" in [r.text for r in retriever.retrieve(user_id, "mint tea")]
    assert [s for s in statements if s.startswith("WITH c AS")]  # the SQL path
    other = f"user-{uuid.uuid4().hex[:10]}"
    for text in ["a", "b", "c", "d"]:
        store.add_raw(other, f"I like {text}")
    store.open_session_index(other)  # past the bound from the start: never loaded
    assert indexes.held(other) is None


def test_own_writes_are_found_at_once_and_others_after_the_refresh(store: MemoryStore, user_id: str, indexes) -> None:
    retriever = _retriever(store)
    store.open_session_index(user_id)  # a caller with no memories yet
    assert indexes.usable(user_id) is not None and retriever.retrieve(user_id, "where does Anna live") == []
    store.add_raw(user_id, "My sister Anna lives in Lisbon")
    indexes.wait_idle(user_id)
    # This process's write: found by the very next look-up (SQL until the refresh has it).
    store.add_raw(user_id, "My brother Leo lives in Porto")
    assert "My brother Leo lives in Porto" in [r.text for r in retriever.retrieve(user_id, "where does Leo live")]
    indexes.wait_idle(user_id)
    assert indexes.usable(user_id) is not None
    assert "My brother Leo lives in Porto" in [r.text for r in retriever.retrieve(user_id, "where does Leo live")]
    # Another session of the same user (another process: not through this store's writes).
    store.mem0.add("My aunt Rosa lives in Madrid", user_id=user_id, metadata={}, infer=False)
    anna = next(r for r in store.list_user(user_id) if "Anna" in r.text)
    store.rows.delete_row(user_id, anna.id)
    indexes.wait_idle(user_id)
    snap = indexes.usable(user_id)
    assert snap is not None and "Rosa" not in " ".join(snap.folded[i] for i in np.flatnonzero(snap.alive))
    retriever.retrieve(user_id, "hello there")  # a look-up: the refresh after it reads what changed
    indexes.wait_idle(user_id)
    assert indexes.usable(user_id) is not None
    texts = [r.text for r in retriever.retrieve(user_id, "who lives in Madrid or Lisbon")]
    assert "My aunt Rosa lives in Madrid" in texts
    assert "My sister Anna lives in Lisbon" not in texts


def test_a_snapshot_never_holds_another_users_rows(store: MemoryStore, indexes) -> None:
    mine, theirs = (f"user-{uuid.uuid4().hex[:10]}" for _ in range(2))
    store.add_raw(mine, "I keep bees in the garden")
    store.add_raw(theirs, "I keep bees on the roof")
    store.open_session_index(mine)
    snap = indexes.usable(mine)
    assert snap is not None and snap.rows == 1
    assert [r.text for r in _retriever(store).retrieve(mine, "bees")] == ["I keep bees in the garden"]
    row = snapshot.Row(*store.rows.user_snapshot(theirs)[0])
    with pytest.raises(ValueError, match="another user"):
        snapshot.build(mine, [row], 0)


def test_the_densities_from_the_snapshot_are_the_sql_ones(store: MemoryStore, user_id: str, indexes) -> None:
    for i in range(25):
        store.add_raw(user_id, f"Note {i}: I planted {i} tulips in row {i % 4}")
    settings = dataclasses.replace(store.settings)
    indexes.enabled = False
    from_sql = Retriever(store, settings)._compute_density(user_id)
    indexes.enabled = True
    store.open_session_index(user_id)
    from_index = Retriever(store, settings)._compute_density(user_id)
    assert from_sql.of.keys() == from_index.of.keys() and len(from_sql.of) == 25
    assert all(abs(from_sql.of[k] - from_index.of[k]) < 1e-5 for k in from_sql.of)
