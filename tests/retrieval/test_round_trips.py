"""A look-up's round trips to the database: what a remote database (or a pooler on another
machine) adds to every reply whose look-up is on its path (the batch STT's).

Each statement a look-up runs after another pays the network's round trip, and a statement
in a transaction pays three (BEGIN, itself, COMMIT). A look-up is two statements outside
transactions: the lexical recall (full text, and substring only when full text finds too
little), beside the query's embedding; then the vector search with the hits' payloads and
the raw turns next to any of them. With MEMORY_RETRIEVAL_ONE_TRIP on, it is one statement
after the embedding. Both ways find the same memories.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import psycopg
import pytest

from memory.retrieval.retriever import Retriever
from memory.storage.store import MemoryStore


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[bool, str]]]:
    """(autocommit, start of the text) of every statement run from now on, by any thread."""
    seen: list[tuple[bool, str]] = []
    lock = threading.Lock()
    real = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        text = query.as_string(self.connection) if hasattr(query, "as_string") else str(query)
        with lock:
            seen.append((self.connection.autocommit, " ".join(text.split())[:60]))
        return real(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    yield seen


def _retriever(store: MemoryStore, *, one_trip: bool = True) -> Retriever:
    # No hubness correction nor near-copies: their background read of the user's vectors is
    # no part of a look-up.
    return Retriever(store, dataclasses.replace(store.settings.tuned(density=0.0, near_copies=0.0, one_trip=one_trip)))


def test_a_look_up_is_two_statements_or_with_one_trip_one_outside_transactions(
    store: MemoryStore, user_id: str, statements
) -> None:
    for seq, text in enumerate(["How long have you had the turtles?", "I've had them for three years",
                                "My sister Anna lives in Lisbon"]):  # fmt: skip
        store.add_raw(user_id, text, metadata={"session_id": "s-earlier", "seq": seq})
    retriever = _retriever(store)
    statements.clear()
    found = retriever.retrieve(user_id, "how long have I had the turtles")
    assert [(auto, text.split()[0]) for auto, text in statements] == [(True, "WITH")], statements
    # ... and the neighbour it brought along took part: the answer said just after the question
    assert "I've had them for three years" in [r.text for r in found]
    # Off (the default): the lexical recall beside the embedding, then the rest.
    assert store.settings.retrieval.one_trip is False
    retriever = _retriever(store, one_trip=False)
    statements.clear()
    assert retriever.retrieve(user_id, "how long have I had the turtles") == found
    assert [(auto, text.split()[0]) for auto, text in statements] == [(True, "WITH"), (True, "WITH")], statements


def test_when_full_text_finds_nothing_the_substring_stage_costs_no_extra_statement(
    store: MemoryStore, user_id: str, statements
) -> None:
    store.add_raw(user_id, "我妹妹下个月要结婚了")
    retriever = _retriever(store)
    statements.clear()
    found = retriever.retrieve(user_id, "结婚")  # full text may miss a Chinese word; the substring finds it
    assert len(statements) == 1 and all(auto for auto, _ in statements), statements
    assert "我妹妹下个月要结婚了" in [r.text for r in found]


def test_one_statement_finds_what_two_find_past_the_pool_and_in_both_languages(
    store: MemoryStore, user_id: str
) -> None:
    # 30 memories share the query's keywords (more than the pool of 20: the full-text hits
    # are cut by rarity, in SQL one way and in Python the other), some also its rarer word;
    # a Chinese question the substring stage answers; raw turns with neighbours.
    texts = [f"My cousin plays chess on {day}" for day in ("Monday", "Tuesday", "Friday")]
    texts += [f"I played chess with friend number {i}" for i in range(27)]
    texts += [
        "我妹妹下个月要结婚了",
        "我喜欢蓝色",
        "How long have you had the turtles?",
        "I've had them for three years",
    ]
    for seq, text in enumerate(texts):
        store.add_raw(user_id, text, metadata={"session_id": "s-one-trip", "seq": seq})
    one, two = _retriever(store), _retriever(store, one_trip=False)
    for query in [
        "does my cousin play chess",
        "chess",
        "结婚",
        "我喜欢什么颜色",
        "how long have I had the turtles",
        "ok",
    ]:
        a, b = one.explain(user_id, query, top_k=10), two.explain(user_id, query, top_k=10)
        assert [(c.record.id, c.stages, round(c.record.score, 9)) for c in a.considered] == [
            (c.record.id, c.stages, round(c.record.score, 9)) for c in b.considered
        ], query
        assert a.recalled or query == "ok", query
