""" "What would it recall" is what the agent recalls: `Retriever.explain` gives `retrieve`'s
answer with every candidate's scores, and `memory.admin search` (the page's source) ranks
as a session does, with the user's memory densities computed first."""

from __future__ import annotations

import dataclasses

import pytest

from memory.admin.documents import Admin
from memory.retrieval.retriever import RECALLED
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import make_service

FACTS = [
    ("User's sister is Maria", "relationships", "sister"),
    ("User's brother works in Shenzhen", "relationships", "brother"),
    ("User is allergic to peanuts", "personal_facts", "allergy"),
    ("用户最喜欢的颜色是绿色", "preferences", "colour"),
    ("用户在学大提琴", "goals", "cello"),
]
# Everyday turns: enough of them (over 20) that the density correction is on.
TURNS = [f"{t} ({i})" for i, t in enumerate(
    ["I had pasta for lunch", "The weather is nice today", "我今天很忙", "We watched a film last night",
     "I took the bus to work", "我们周末去了公园", "My sister called me yesterday", "I need to buy milk"] * 4
)]  # fmt: skip
QUERIES = ["What's my sister's name?", "我最喜欢什么颜色？", "what did I have for lunch", "ok"]


@pytest.fixture(scope="module")
def person(store: MemoryStore) -> str:
    user = "explain-" + __import__("uuid").uuid4().hex[:8]
    for text, category, slot in FACTS:
        store.upsert_fact(user, text, category=category, slot=slot)
    for i, text in enumerate(TURNS):
        store.add_raw(user, text, metadata={"session_id": f"s{i // 8}", "seq": i % 8})
    return user


@pytest.mark.parametrize("mode", [MemoryMode.NORMAL, MemoryMode.GATED])
@pytest.mark.parametrize("query", QUERIES)
def test_explain_recalls_exactly_what_retrieve_returns(store: MemoryStore, person: str, mode: MemoryMode,
                                                       query: str) -> None:  # fmt: skip
    service = make_service(store, mode)
    service.retriever.prepare(person)
    explained = service.explain_sync(person, query)
    recalled = service.recall_sync(person, query)
    assert [(r.id, r.score) for r in explained.recalled] == [(r.id, r.score) for r in recalled]
    assert [c.record.score for c in explained.considered] == sorted(
        (c.record.score for c in explained.considered), reverse=True
    )  # best first
    for c in explained.considered:
        if c.outcome == RECALLED:
            assert c.record.score >= explained.threshold
        assert c.record.category in (None, *service.settings.durable_categories)
    if mode is MemoryMode.GATED:
        assert all(c.record.category for c in explained.considered)  # GATED recalls facts only


def test_admin_search_ranks_as_a_session_does(store: MemoryStore, person: str) -> None:
    settings = dataclasses.replace(store.settings, mode=MemoryMode.NORMAL)
    session_view = make_service(store, MemoryMode.NORMAL)
    session_view.retriever.prepare(person)  # as MemoryService.prepare at a session's start
    for query in QUERIES[:3]:
        doc = Admin(store, settings).search(person, query)  # a new admin, as each CLI run and page query
        expected = session_view.recall_sync(person, query)
        assert [(m["text"], m["score"]) for m in doc["memories"]] == [(r.text, round(r.score, 4)) for r in expected]
        assert [c["text"] for c in doc["considered"] if c["outcome"] == RECALLED] == [r.text for r in expected]
