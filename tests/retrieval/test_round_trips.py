"""A look-up's round trips to the database: what a remote database (or a pooler on another
machine) adds to every reply whose look-up is on its path (the batch STT's).

Each statement a look-up runs after another pays the network's round trip, and a statement
in a transaction pays three (BEGIN, itself, COMMIT). A look-up is two statements, both
outside transactions: the lexical recall (full text, and substring only when full text
finds too little, in one statement), beside the query's embedding; then the vector search
with the lexical hits' payloads and the raw turns next to any of them.
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


def _retriever(store: MemoryStore) -> Retriever:
    # No hubness correction nor near-copies: their background read of the user's vectors is
    # no part of a look-up.
    return Retriever(store, dataclasses.replace(store.settings.tuned(density=0.0, near_copies=0.0)))


def test_a_look_up_is_two_statements_outside_transactions(store: MemoryStore, user_id: str, statements) -> None:
    for seq, text in enumerate(["How long have you had the turtles?", "I've had them for three years",
                                "My sister Anna lives in Lisbon"]):  # fmt: skip
        store.add_raw(user_id, text, metadata={"session_id": "s-earlier", "seq": seq})
    retriever = _retriever(store)
    statements.clear()
    found = retriever.retrieve(user_id, "how long have I had the turtles")
    assert [(auto, text.split()[0]) for auto, text in statements] == [(True, "WITH"), (True, "SET")], statements
    # ... and the neighbour it brought along took part: the answer said just after the question
    assert "I've had them for three years" in [r.text for r in found]


def test_when_full_text_finds_nothing_the_substring_stage_costs_no_extra_statement(
    store: MemoryStore, user_id: str, statements
) -> None:
    store.add_raw(user_id, "我妹妹下个月要结婚了")
    retriever = _retriever(store)
    statements.clear()
    found = retriever.retrieve(user_id, "结婚")  # full text may miss a Chinese word; the substring finds it
    assert len(statements) == 2 and all(auto for auto, _ in statements), statements
    assert "我妹妹下个月要结婚了" in [r.text for r in found]
