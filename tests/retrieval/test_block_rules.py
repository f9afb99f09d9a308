"""The block a reply is given (issue 51; memory/retrieval/ranking.py, retriever.py): the
user's own questions take no statement's place in the candidate pool and are left out of a
block that states something; of two statements about the same thing the later is marked
newer. The rules alone, then on the real store and embedder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory.retrieval import ranking
from memory.retrieval.retriever import QUESTION, RECALLED, Retriever
from memory.storage.store import MemoryStore

FACT = "My sister is called Anna."
# The same question asked many times over, in many calls.
ASKED = [f"{opening}what's my sister's name{ending}" for opening in ("", "Hey, ", "Sorry, ", "Quick one: ", "Um, ")
         for ending in ("?", " again?", ", do you remember?", ", can you tell me?")]  # fmt: skip


@dataclass
class Cand:
    text: str
    payload: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0


def test_questions_leave_a_block_that_states_something_and_stay_in_one_that_does_not() -> None:
    fact, asked = Cand(FACT), Cand("What's my sister's name?")
    assert ranking.beside_statements([asked, fact]) == [fact]
    assert ranking.beside_statements([asked]) == [asked]  # nothing stated: what the user asked before
    fact_zh, asked_zh = Cand("我妹妹叫安娜。"), Cand("我妹妹叫什么名字？")
    assert ranking.beside_statements([asked_zh, fact_zh]) == [fact_zh]
    told = Cand("Can you find a vet for my dog Max?")  # a request that tells something is kept
    assert ranking.beside_statements([told, fact]) == [told, fact]


def test_the_later_of_two_statements_about_the_same_thing_is_marked_newer() -> None:
    paris = Cand("I live in Paris.", {"created_at": "2025-03-01T10:00:00+00:00"})
    berlin = Cand("I live in Berlin now.", {"created_at": "2026-01-05T10:00:00+00:00"})
    cello = Cand("I play the cello.", {"created_at": "2026-02-01T10:00:00+00:00"})
    ranking.mark_newer([paris, berlin, cello])
    assert berlin.payload.get(ranking.NEWER_KEY) == "2025-03-01"
    assert ranking.NEWER_KEY not in paris.payload and ranking.NEWER_KEY not in cello.payload
    # facts (GATED) are not marked: a changed fact replaced its value when it was stored
    a = Cand("User lives in Paris", {"category": "personal_facts", "created_at": "2025-03-01"})
    b = Cand("User lives in Berlin", {"category": "personal_facts", "created_at": "2026-01-05"})
    ranking.mark_newer([a, b])
    assert ranking.NEWER_KEY not in b.payload


def test_a_users_many_questions_take_no_place_of_the_fact_in_the_pool(store: MemoryStore, user_id: str) -> None:
    pool = 5
    asked = ASKED[: pool + 1]  # more questions than a stage's pool: alone they would fill it
    store.add_raw(user_id, FACT)
    for text in asked:
        store.add_raw(user_id, text)
    query = "Remind me what my sister's name is?"

    def texts(quota: int) -> list[str]:
        r = Retriever(store, store.settings.tuned(retrieval_pool=pool, retrieval_question_pool=quota,
                                                  retrieval_threshold=0.0))  # fmt: skip
        return [c.text for c in r.candidates(user_id, query, top_k=pool)]

    assert FACT not in texts(-1)  # no quota: the questions fill the pool (the case the quota is for)
    kept = texts(3)
    assert FACT in kept and sum(1 for t in kept if t in asked) <= 2 * 3  # at most the quota per stage


def test_the_page_says_why_a_question_was_left_out(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, FACT)
    store.add_raw(user_id, ASKED[0])
    explained = Retriever(store, store.settings.tuned(retrieval_threshold=0.0)).explain(user_id, ASKED[1])
    outcome = {c.record.text: c.outcome for c in explained.considered}
    assert outcome == {FACT: RECALLED, ASKED[0]: QUESTION}
