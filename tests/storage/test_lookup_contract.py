"""The look-up seam's contract (memory/storage/lookup.py): every source a look-up can read
finds the same memories.

The sources: SQL (`Mem0Table`), the caller's rows held in the process (`Snapshot`), and the
source the store hands the retriever (`RoutedSource`, which sends each call to one of the
two); each with the look-up in two round trips and in one (MEMORY_RETRIEVAL_ONE_TRIP). The
same queries (English and Chinese, categories, superseded values, the session's own turns
left out, neighbours) must give the same ids, stages and order, and the same scores to
float precision (the cosine in numpy's float32 against pgvector's, the query sent to it
with 7 digits). The reference is SQL's two round trips, the path every other test reads.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from memory.retrieval.retriever import Retriever
from memory.storage import snapshot
from memory.storage.lookup import LookupSource, Scope
from memory.storage.store import MemoryStore

ENGLISH = [
    "My cousin plays chess on Monday",
    "My cousin plays chess on Friday",
    "I played chess with my friend Tom",
    "How long have you had the turtles?",
    "I've had them for three years",
    "My sister Anna lives in Lisbon",
    "I don't like spicy food",
]
CHINESE = ["我妹妹下个月要结婚了", "我喜欢蓝色", "我在上海工作", "我养了两只乌龟", "我不吃辣"]
QUERIES = [
    "does my cousin play chess",
    "chess",
    "how long have I had the turtles",
    "where does Anna live",
    "spicy",
    "结婚",
    "我喜欢什么颜色",
    "我在哪里工作",
    "乌龟",
    "Lisbon 上海",
]
SCOPES = ((), (("exclude_session", "s-en"),), (("categories", ("personal_facts", "preferences")),))
SOURCES = ("sql", "snapshot", "routed")


@pytest.fixture(scope="module")
def filled(store: MemoryStore) -> str:
    """One user's memories: raw turns of two sessions, facts, a superseded value."""
    user_id = f"user-{uuid.uuid4().hex[:10]}"
    for seq, text in enumerate(ENGLISH):
        store.add_raw(user_id, text, metadata={"session_id": "s-en", "seq": seq})
    for seq, text in enumerate(CHINESE):
        store.add_raw(user_id, text, metadata={"session_id": "s-zh", "seq": seq})
    store.upsert_fact(user_id, "The user works as a nurse", category="personal_facts", slot="job")
    store.upsert_fact(user_id, "The user works as a teacher", category="personal_facts", slot="job")  # nurse: past
    store.upsert_fact(user_id, "The user loves peanuts", category="preferences")
    return user_id


def _retriever(store: MemoryStore, *, one_trip: bool) -> Retriever:
    # No hubness correction nor near-copies: computed in the background, apart from the look-up.
    return Retriever(store, store.settings.tuned(density=0.0, near_copies=0.0, one_trip=one_trip))


def _looked_up(store: MemoryStore, source: LookupSource, user_id: str, *, one_trip: bool) -> dict:
    """Every query in every scope, read through `source`: (id, stages, score) best first."""
    retriever = _retriever(store, one_trip=one_trip)
    real = store.lookup
    store.lookup = source
    try:
        out = {}
        for q in QUERIES:
            for kw in SCOPES:
                got = retriever.explain(user_id, q, top_k=10, **dict(kw))  # type: ignore[arg-type]
                out[(q, kw)] = [(c.record.id, c.stages, c.record.score) for c in got.considered]
        return out
    finally:
        store.lookup = real


@pytest.fixture(scope="module")
def expected(store: MemoryStore, filled: str) -> dict:
    return _looked_up(store, store.rows, filled, one_trip=False)


@pytest.fixture
def source_of(store: MemoryStore, filled: str, indexes) -> Iterator:
    def make(name: str) -> LookupSource:
        if name == "sql":
            return store.rows
        if name == "snapshot":
            return snapshot.build(filled, [snapshot.Row(*r) for r in store.rows.user_snapshot(filled)], 0)
        store.open_session_index(filled)
        assert indexes.usable(filled) is not None
        return store.lookup

    yield make
    indexes.wait_idle(filled)


@pytest.mark.parametrize("one_trip", [False, True], ids=["two-trips", "one-trip"])
@pytest.mark.parametrize("name", SOURCES)
def test_every_source_finds_the_same_memories(
    store: MemoryStore, filled: str, expected: dict, source_of, name: str, one_trip: bool
) -> None:
    source = source_of(name)
    assert isinstance(source, LookupSource)
    got = _looked_up(store, source, filled, one_trip=one_trip)
    for key, want in expected.items():
        assert [c[:2] for c in got[key]] == [c[:2] for c in want], key
        assert all(abs(a[2] - b[2]) < 1e-5 for a, b in zip(got[key], want, strict=True)), key
        assert want or key[0] == "spicy", key  # the queries find something: the comparison says something


def test_each_call_of_the_snapshot_answers_as_its_statement(store: MemoryStore, filled: str) -> None:
    held = snapshot.build(filled, [snapshot.Row(*r) for r in store.rows.user_snapshot(filled)], 0)
    sql = store.rows
    vector = store.embedder.embed("does my cousin play chess", "search")
    ids = [m for m, _ in sql.user_vectors(filled, 3)]
    for scope in (Scope(filled), Scope(filled, exclude_session="s-en"), Scope(filled, ["preferences"], past=False)):
        for terms, patterns in ((["chess", "cousin"], ["%chess%"]), ([], ["%上海%", "%乌龟%"]), (["nothing"], [])):
            lex = {"scan": 500, "limit": 3, "substring_below": 5.0}
            a, b = held.lexical_hits(scope, terms, patterns, **lex), sql.lexical_hits(scope, terms, patterns, **lex)
            assert (sorted(a[0]), sorted(a[1])) == (sorted(b[0]), sorted(b[1])), (scope, terms)
            one = [held.candidates(scope, vector, terms, patterns, neighbours=True, **lex) for held in (held, sql)]
            assert _rows(one[0]) == _rows(one[1]), (scope, terms)
        a3 = held.nearest_and_ids(scope, vector, 4, ids, neighbours=True)
        assert _rows(a3) == _rows(sql.nearest_and_ids(scope, vector, 4, ids, neighbours=True)), scope
    assert _rows(held.payloads(filled, ids)) == _rows(sql.payloads(filled, ids))
    a4, b4 = held.turns(filled, ["s-en"], ["3", "4"], vector), sql.turns(filled, ["s-en"], ["3", "4"], vector)
    assert sorted((m, round(c or 0, 5)) for m, c, _ in a4) == sorted((m, round(c or 0, 5)) for m, c, _ in b4)
    assert [m for m, _ in held.user_vectors(filled, 5)] == [m for m, _ in sql.user_vectors(filled, 5)]
    rows = len(ENGLISH) + len(CHINESE) + 3  # the teacher, the nurse kept as a past value, the peanuts
    for n in (rows - 1, rows):
        assert held.user_has_more_than(filled, n) == sql.user_has_more_than(filled, n) == (n < rows)
    with pytest.raises(ValueError, match="snapshot asked for"):
        held.payloads("someone-else", ids)


def _rows(rows: list) -> list[tuple[str, str, float]]:
    """(id, stage, cosine to 5 digits), in a fixed order: the statements return them unordered."""
    return sorted((m, stage, round(cos or 0.0, 5)) for m, cos, _, stage in rows)


@pytest.mark.parametrize("one_trip", [False, True], ids=["two-trips", "one-trip"])
def test_the_routed_look_up_reads_the_held_rows_and_runs_no_statement(
    store: MemoryStore, filled: str, indexes, monkeypatch: pytest.MonkeyPatch, one_trip: bool
) -> None:
    store.open_session_index(filled)
    monkeypatch.setattr(indexes.paths, "prefers_index", lambda user_id: True)  # the index measured faster
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()
    real = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        text = query.as_string(self.connection) if hasattr(query, "as_string") else str(query)
        with lock:
            seen.append((threading.current_thread().name, " ".join(text.split())[:80]))
        return real(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    retriever = _retriever(store, one_trip=one_trip)
    for q in QUERIES:
        assert indexes.usable(filled) is not None
        retriever.explain(filled, q, top_k=10)
    assert indexes.wait_idle(filled)  # the refreshes after the look-ups: recorded, so `seen` is complete
    assert seen
    # Not one statement on the look-ups' path: the refreshes after them, and a path not taken
    # for a while timed again (lookup_paths.py), run on the index's thread; the freshness
    # check (the user's generation, one per look-up: test_seen_at_once.py) only reads
    # `_generations`, beside the query's embedding or, with one trip, before it.
    # Before this seam the one-trip path ran its statement whatever rows were held.
    apart = ("memory-index", "pool-")  # and the pool's own workers, setting up a new connection
    stray = [(t, text) for t, text in seen if not t.startswith(apart) and "_generations" not in text]
    assert stray == [], stray
