"""A look-up takes the path measured faster for its user (memory/storage/lookup_paths.py):
the session index when its recent look-ups were quicker, SQL when SQL's were."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from memory.retrieval.retriever import Retriever
from memory.storage.lookup_paths import INDEX, KEEP, SQL, PathTimes
from memory.storage.store import MemoryStore


def test_the_faster_measured_path_is_preferred() -> None:
    times = PathTimes()
    assert times.prefers_index("u")  # nothing measured: no round trip
    for stage in ("lexical", "vector"):
        times.add("u", INDEX, stage, 6.0)
    assert times.prefers_index("u")  # SQL not measured yet
    times.add("u", SQL, "lexical", 2.0)
    assert times.prefers_index("u")  # SQL's vector stage not measured yet
    times.add("u", SQL, "vector", 3.0)
    assert not times.prefers_index("u")  # 5 ms against 12
    for _ in range(KEEP):
        times.add("u", INDEX, "vector", 1.0)  # the index's recent look-ups got quicker: 7 ms against 5
    assert not times.prefers_index("u")
    for _ in range(KEEP):
        times.add("u", INDEX, "lexical", 1.0)  # 2 ms against 5
    assert times.prefers_index("u")
    assert times.cost("u", SQL) == 5.0 and times.cost("v", SQL) is None  # per user


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    seen: list[str] = []
    lock = threading.Lock()
    real = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        text = query.as_string(self.connection) if hasattr(query, "as_string") else str(query)
        with lock:
            seen.append(" ".join(text.split())[:80])
        return real(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    yield seen


def test_a_user_whose_sql_measured_faster_is_looked_up_in_sql(
    store: MemoryStore, user_id: str, indexes, statements
) -> None:
    for text in ["I like tea", "I like coffee", "I like cocoa"]:
        store.add_raw(user_id, text)
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.open_session_index(user_id)
    assert indexes.paths.cost(user_id, INDEX) is not None  # session start timed both paths
    assert indexes.paths.cost(user_id, SQL) is not None
    indexes.paths.forget(user_id)
    for stage in ("lexical", "vector"):
        indexes.paths.add(user_id, INDEX, stage, 500.0)  # the index slow for this user
        indexes.paths.add(user_id, SQL, stage, 100.0)
    statements.clear()
    assert "I like cocoa" in [r.text for r in retriever.retrieve(user_id, "cocoa")]
    assert [s for s in statements if s.startswith("WITH c AS")]  # the SQL path's vector stage
    for _ in range(KEEP):
        for stage in ("lexical", "vector"):
            indexes.paths.add(user_id, INDEX, stage, 0.001)  # now the index is the faster one
    indexes.wait_idle(user_id)
    statements.clear()
    assert "I like coffee" in [r.text for r in retriever.retrieve(user_id, "coffee")]
    assert not [s for s in statements if s.startswith("WITH")]  # no look-up statement


def test_a_path_not_taken_for_keep_look_ups_is_due_for_timing_again() -> None:
    times = PathTimes()
    for path in (INDEX, SQL):
        for stage in ("lexical", "vector"):
            times.add("u", path, stage, 1.0)
    assert times.due("u") is None
    for n in range(KEEP):
        assert times.due("u") is None, n  # SQL timed within the last KEEP look-ups
        for stage in ("lexical", "vector"):
            times.add("u", INDEX, stage, 1.0)
    assert times.due("u") == SQL  # 8 look-ups on the index since SQL was last timed
    assert times.due("v") is None  # per user


def test_a_bad_first_timing_of_sql_does_not_keep_a_user_on_the_index_for_good(
    store: MemoryStore, user_id: str, indexes, statements
) -> None:
    for text in ["I like tea", "I like coffee", "I like cocoa"]:
        store.add_raw(user_id, text)
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.open_session_index(user_id)
    indexes.wait_idle(user_id)
    indexes.paths.forget(user_id)
    for stage in ("lexical", "vector"):
        indexes.paths.add(user_id, SQL, stage, 5_000.0)  # one bad moment at session start
        indexes.paths.add(user_id, INDEX, stage, 0.001)
    for _ in range(KEEP):
        retriever.retrieve(user_id, "cocoa")  # each on the index, which measured faster
    indexes.wait_idle(user_id)
    # SQL timed again in the background: the bad moment no longer decides.
    assert indexes.paths.cost(user_id, SQL) != 10_000.0
    assert [s for s in statements if s.startswith("WITH c AS")]
