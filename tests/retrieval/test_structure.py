"""Structure in retrieval, on the real store: a turn found by the question it answers, a
memory by the day it is about, a turn by its conversation; the shown text unchanged."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime

import numpy as np
import pytest
from psycopg import sql

from memory.livekit.blocks import format_memories
from memory.retrieval.retriever import Retriever
from memory.service import profile_order
from memory.settings import MemoryMode, load_settings
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, Turn
from tests.conftest import make_service

ANSWER = "I've had them for three years now."
QUESTION = "assistant: How long have you had the turtles?"
OTHERS = (
    "I've been learning the piano for two years.",
    "My sister has had her car for five years.",
    "We watched a film about space last night.",
    "The weather was lovely on the walk.",
)


@pytest.fixture
def structured(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    """The shared store, writing the index form with both write-time switches on; its look-ups
    at the junk floor (these tests are about the ranking; the relevance cut has its own)."""
    monkeypatch.setattr(
        store,
        "settings",
        store.settings.tuned(retrieval_index_context=True, retrieval_index_dates=True, retrieval_threshold=0.02),
    )
    return store


def _payload(store: MemoryStore, user_id: str, text: str) -> tuple[dict, np.ndarray]:
    with store.pool.connection() as conn, conn.cursor(binary=True) as cur:
        payload, vector = cur.execute(
            sql.SQL("SELECT payload, vector FROM {} WHERE payload->>'user_id' = %s AND payload->>'data' = %s").format(
                sql.Identifier(store.table)
            ),
            [user_id, text],
        ).fetchone()
    from memory.storage.mem0_table import vector_array

    return payload, vector_array(vector)


def test_a_turn_is_found_by_the_question_it_answers_and_shown_as_said(structured: MemoryStore, user_id: str) -> None:
    structured.add_raw(user_id, ANSWER, context=["user: I love animals", QUESTION])
    for text in OTHERS:
        structured.add_raw(user_id, text, context=["assistant: And what else?"])
    payload, vector = _payload(structured, user_id, ANSWER)
    assert payload["ctx"] == "How long have you had the turtles?"
    # The vector is the index form's (turn + question), not the bare turn's.
    contextual = np.asarray(structured.passages.embed(f"{ANSWER}\n{payload['ctx']}", "add"))
    bare = np.asarray(structured.passages.embed(ANSWER, "add"))
    assert np.allclose(vector, contextual, atol=1e-4) and not np.allclose(vector, bare, atol=1e-3)
    hits = Retriever(structured, structured.settings).retrieve(user_id, "How long have I had the turtles?", top_k=3)
    assert hits[0].text == ANSWER  # shown as said: the question is index only
    assert "ctx" not in hits[0].metadata and "turtles" not in hits[0].text


def test_without_the_switch_the_turn_is_indexed_alone(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "settings", store.settings.tuned(retrieval_index_context=False))
    store.add_raw(user_id, ANSWER, context=[QUESTION])
    payload, _ = _payload(store, user_id, ANSWER)
    assert "ctx" not in payload


async def test_the_normal_write_path_indexes_a_spoken_turn_with_what_it_answers(
    structured: MemoryStore, user_id: str
) -> None:
    service = make_service(structured, MemoryMode.NORMAL)
    turn = Turn(user_id, ANSWER, "s1", "t1", "2024-04-02T10:00:00+00:00", context=("user: hi", QUESTION), seq=1)
    report = await service.remember(turn)
    assert [w.event for w in report.writes] == ["ADD"]
    payload, _ = _payload(structured, user_id, ANSWER)
    assert payload["ctx"] == "How long have you had the turtles?" and payload["data"] == ANSWER


def test_a_memory_is_found_by_the_day_its_yesterday_names(structured: MemoryStore, user_id: str) -> None:
    said = "2024-04-02T10:00:00+00:00"
    structured.add_raw(user_id, "I went to the dentist yesterday.", metadata={"timestamp": said})
    for text in ("I went to the gym.", "I went to the cinema.", "I went to the bakery."):
        structured.add_raw(user_id, text, metadata={"timestamp": "2024-03-20T10:00:00+00:00"})
    payload, _ = _payload(structured, user_id, "I went to the dentist yesterday.")
    assert payload["when"] == [["2024-04-01", "2024-04-01"]] and payload["dates"] == ["1 April 2024"]
    asked = datetime(2024, 4, 10, tzinfo=UTC)
    on = Retriever(structured, structured.settings.tuned(retrieval_time_weight=0.3))
    top = on.retrieve(user_id, "Where did I go on April 1st?", top_k=4, now=asked)
    assert top[0].text == "I went to the dentist yesterday."
    last_week = on.retrieve(user_id, "Where did I go last week?", top_k=4, now=asked)
    assert last_week[0].text == "I went to the dentist yesterday."  # said on 2 April, about 1 April: that week
    off = Retriever(structured, structured.settings.tuned(retrieval_time_weight=0.0))
    assert off.retrieve(user_id, "Where did I go last week?", top_k=4, now=asked)[0].score < last_week[0].score


def test_a_turn_is_lifted_by_a_conversation_that_matches_the_query(structured: MemoryStore, user_id: str) -> None:
    def session(name: str, *texts: str) -> None:
        for seq, text in enumerate(texts):
            structured.add_raw(user_id, text, metadata={"session_id": name, "seq": seq})

    session("trip", "We spent a week in Rome in March.", "The food was wonderful.", "Here are some pictures.",
            "Lovely, thanks for sharing.")  # fmt: skip
    session("garden", "I planted tomatoes in the garden.", "The soil was dry.", "Here are some of the pictures.",
            "Lovely, thanks for sharing.")  # fmt: skip
    query = "pictures of the Rome trip"

    def gap(sessions: float) -> float:
        """How far the trip's picture turn leads the garden's."""
        r = Retriever(structured, structured.settings.tuned(retrieval_sessions=sessions, retrieval_neighbours=0.0))
        scores = {m.text: m.score for m in r.retrieve(user_id, query, top_k=8)}
        return scores["Here are some pictures."] - scores["Here are some of the pictures."]

    off, on = gap(0.0), gap(0.3)
    assert abs(off) < 0.1  # nearly the same words: alone, the two turns are a toss-up
    assert on > 0 and on - off > 0.05  # the conversation about Rome lifts its own


def test_recalled_lines_say_the_days_a_memory_is_about() -> None:
    rec = MemoryRecord("1", "I went to the dentist yesterday.", "u", created_at="2024-04-02T10:00:00+00:00",
                       metadata={"dates": ["1 April 2024"]})  # fmt: skip
    assert '"about": "1 April 2024"' in format_memories([rec]) or '"about":"1 April 2024"' in format_memories([rec])


def test_the_profile_puts_facts_about_days_gone_by_after_the_current_ones() -> None:
    def fact(i: int, text: str, when: list | None = None) -> MemoryRecord:
        meta = {"when": when} if when else {}
        return MemoryRecord(str(i), text, "u", category="personal_facts", metadata=meta)

    past = fact(1, "User has a dentist appointment tomorrow", [["2024-04-03", "2024-04-03"]])
    current = fact(2, "User works as a nurse")
    coming = fact(3, "User flies to Oslo next week", [["2024-05-06", "2024-05-12"]])
    today = date(2024, 5, 1)
    assert profile_order([past, current, coming], 3, today=today) == [current, coming, past]
    assert profile_order([past, current, coming], 2, today=today) == [current, coming]
    assert profile_order([past, current, coming], 3) == [past, current, coming]  # no day known: newest first


def test_the_structure_switches_come_from_memory_retrieval_variables() -> None:
    s = load_settings(
        {"MEMORY_RETRIEVAL_INDEX_CONTEXT": "off", "MEMORY_RETRIEVAL_INDEX_DATES": "on",
         "MEMORY_RETRIEVAL_TIME_WEIGHT": "0.2", "MEMORY_RETRIEVAL_SESSIONS": "0",
         "MEMORY_RETRIEVAL_WHEN_WEIGHT": "0.05", "MEMORY_RETRIEVAL_CONTEXT_SHARE": "0.4"},
        dotenv=False,
    ).retrieval  # fmt: skip
    assert (s.index_context, s.index_dates, s.time_weight, s.sessions, s.when_weight, s.context_share) == (
        False, True, 0.2, 0.0, 0.05, 0.4)  # fmt: skip
    assert dataclasses.replace(s, sessions=0.5).sessions == 0.5
