"""What the user said before what the user asked (issue 38; memory/retrieval/ranking.py):
a turn that only asks, or only repeats the message, ranks below what states something;
near-copies take one place; every score is in [0, 1]. The rules alone, then on the real
store and embedder."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from psycopg import sql

from memory.retrieval import ranking
from memory.retrieval.retriever import Retriever
from memory.storage.store import MemoryStore

FACT = "My sister is called Anna, and I'm allergic to peanuts."
FACT_ZH = "我妹妹叫安娜，我对花生过敏。"
ASKED = ("What's my sister's name?", "Do you remember what my sister is called?")
ASKED_ZH = ("我妹妹叫什么名字？", "你还记得我妹妹叫什么吗？")
DISTRACTORS = ("I took the bus to work", "The weather is nice today", "我今天很忙")


def retriever(store: MemoryStore, **overrides: object) -> Retriever:
    """A retriever with the cut at the junk floor: these tests are about the ranking (the
    relevance cut, MEMORY_RETRIEVAL_THRESHOLD, is tested in test_block_rules.py)."""
    return Retriever(store, store.settings.tuned(**{"retrieval_threshold": 0.02, **overrides}))


# --------------------------------------------------------------------- the rules alone
def test_scores_up_to_the_knee_are_kept_and_the_rest_stay_below_one() -> None:
    assert [ranking.bounded(x) for x in (0.0, 0.3, 0.75)] == [0.0, 0.3, 0.75]
    above = [ranking.bounded(x) for x in (0.76, 0.95, 1.053, 1.5, 3.0, 50.0)]
    assert all(0.75 < y <= 1.0 for y in above)
    assert above == sorted(above) and len(set(above[:5])) == 5  # the order is kept


def test_a_memory_that_only_repeats_the_message_is_an_echo() -> None:
    def echo(message: str, memory: str) -> bool:
        return ranking.echo(ranking.words(message), memory)

    assert not echo("What's my sister's name again?", "What's my sister's name?")  # two words: too short to tell
    asked = "When did Caroline go to the LGBTQ support group?"
    assert echo(asked, "When did Caroline go to the LGBTQ support group?!")
    assert not echo(asked, "Caroline went to the LGBTQ support group on the 7th of May.")  # the answer
    assert not echo(asked, "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.")
    said = "I got a perfect score on my math test today! I'm so happy! I did practice problems every day."
    assert echo(said, "As I said, I did practice problems every day. I got a perfect score on my math test today! "
                      "I'm so happy!")  # fmt: skip
    zh = "金融科技精英论坛的主要内容是什么来着？"
    assert echo(zh, "我想问一下，金融科技精英论坛的主要内容是什么？")
    assert not echo(zh, "金融科技精英论坛的主要内容是探讨数字货币。")
    # one word more than the question is its answer; a memory the question quotes is a bridge
    assert not echo("首席记者能力提升营的地点是什么？", "首席记者能力提升营的地点是上海。")


def test_near_copies_are_alike_in_their_vectors_and_in_their_words() -> None:
    @dataclass
    class Memory:
        id: str
        text: str

    def unit(*xs: float) -> np.ndarray:
        v = np.asarray(xs, dtype=np.float32)
        return (v / np.linalg.norm(v)).astype(np.float16)

    a = Memory("a", "I'm vegetarian and I love cooking pasta.")
    b = Memory("b", "I am vegetarian, and I love to cook pasta!")  # a.b = 0.995
    c = Memory("c", "My sister lives in Lisbon.")
    d = Memory("d", "I am vegetarian, I love cooking.")  # a.d = 0.894
    e = Memory("e", "Anna's phone number is 12345.")  # a.e = 0.995, but other words
    vectors = {"a": unit(1, 0, 0), "b": unit(1, 0.1, 0), "c": unit(0, 1, 0), "d": unit(1, 0.5, 0),
               "e": unit(1, 0, 0.1)}  # fmt: skip
    near = ranking.NearCopies(0.99, vectors.get)
    assert near.of(b, [c, a]) == 1
    assert near.of(d, [c, a]) is None  # vectors not alike enough
    assert near.of(e, [c, a]) is None  # words not alike enough
    assert near.of(Memory("new", b.text), [a]) is None  # written after the vectors were read: nobody's copy
    assert ranking.NearCopies(0.89, vectors.get).of(d, [c, a]) == 1


# ------------------------------------------------------------------ on the real store
@pytest.mark.parametrize(("fact", "asked", "query"), [(FACT, ASKED, ASKED[0]), (FACT_ZH, ASKED_ZH, ASKED_ZH[0])])
def test_the_fact_outranks_the_questions_the_user_asked_about_it(
    store: MemoryStore, user_id: str, fact: str, asked: tuple[str, ...], query: str
) -> None:
    for text in (fact, *asked, *DISTRACTORS):
        store.add_raw(user_id, text)
    floor = {"retrieval_threshold": 0.0}  # the ranking, whatever the relevance cut
    texts = [m.text for m in retriever(store, **floor).retrieve(user_id, query, top_k=5)]
    assert texts[0] == fact
    assert not set(asked) & set(texts)  # beside the fact, out of the block (issue 51)...
    considered = {c.record.text for c in retriever(store, **floor).explain(user_id, query, top_k=5).considered}
    assert set(asked) <= considered  # ...but still found, and on the operator's page
    # With both switched off (MEMORY_RETRIEVAL_QUESTION_WEIGHT=1, _ECHO_WEIGHT=1) the questions come first.
    off = retriever(store, retrieval_question_weight=1.0, retrieval_echo_weight=1.0, **floor)
    assert off.explain(user_id, query, top_k=5).considered[0].record.text in asked


def test_a_question_stored_before_the_flag_existed_ranks_below_the_fact(store: MemoryStore, user_id: str) -> None:
    for text in (FACT, *ASKED, *DISTRACTORS):
        store.add_raw(user_id, text)
    with store.pool.connection() as conn:  # as an older version wrote them: no flag
        conn.execute(
            sql.SQL("UPDATE {} SET payload = payload - 'asks' - 'idx_v' WHERE payload->>'user_id' = %s").format(
                sql.Identifier(store.table)
            ),
            [user_id],
        )
    assert [m.text for m in retriever(store).retrieve(user_id, ASKED[1], top_k=3)][0] == FACT


@pytest.mark.parametrize(
    ("request_turn", "question", "query"),
    [
        ("Can you find a vet for my dog Max?", "What should I feed my dog?", "What's my dog's name?"),
        ("你能帮我的狗旺财找个兽医吗？", "我的狗应该吃什么？", "我的狗叫什么名字？"),
    ],
)
def test_what_a_question_tells_is_kept(
    store: MemoryStore, user_id: str, request_turn: str, question: str, query: str
) -> None:
    # The request says there is a dog called Max; the plain question says nothing new.
    for text in (question, request_turn, *DISTRACTORS):
        store.add_raw(user_id, text)
    assert store.list_user(user_id)  # written through the product's write path
    assert retriever(store).retrieve(user_id, query, top_k=3)[0].text == request_turn


@pytest.mark.parametrize(
    ("copies", "others", "query"),
    [
        (("I'm vegetarian and I love cooking pasta.", "I am vegetarian, and I love to cook pasta!"),
         ("I live in Paris.", "I live in Berlin."), "What should I cook for dinner? I live in Paris."),
        (("我参观的那家医院是肿瘤医院。", "我参观的医院是一家肿瘤医院。"), ("我参观的医院在北京。",),
         "我参观的医院是什么医院？在哪里？"),
    ],
)  # fmt: skip
def test_near_copies_take_one_place_and_the_line_lists_them(
    store: MemoryStore, user_id: str, copies: tuple[str, ...], others: tuple[str, ...], query: str
) -> None:
    for text in (*copies, *others, *DISTRACTORS):
        store.add_raw(user_id, text)
    r = retriever(store, retrieval_near_copies=0.975)
    r.prepare(user_id)  # what session start does: the user's vectors are read with the densities
    shown = r.retrieve(user_id, query, top_k=4)
    texts = [m.text for m in shown]
    kept = [m for m in shown if m.text in copies]
    assert len(kept) == 1 and len(kept[0].metadata["copies"]) == len(copies) - 1
    assert set(others) <= set(texts)  # the same thing's other facts are not copies
    off = retriever(store, retrieval_near_copies=0.0).retrieve(user_id, query, top_k=4)
    assert sum(1 for m in off if m.text in copies) >= 2  # off: each wording takes a place


def test_every_score_stays_within_zero_and_one(store: MemoryStore, user_id: str) -> None:
    # A conversation about the trip whose turns all match: the fused score plus its
    # conversation's share and its neighbours' went past 1 (the page showed 1.053).
    turns = ["My trip to Rome was amazing", "Rome trip photos are on my laptop", "The Rome trip was in May",
             "I loved the food on my Rome trip"]  # fmt: skip
    for i, text in enumerate(turns):
        store.add_raw(user_id, text, metadata={"session_id": "trip", "seq": i})
    query = "Tell me about my trip to Rome"
    raw = retriever(store, retrieval_unit_score=False).retrieve(user_id, query, top_k=4)
    assert max(m.score for m in raw) > 1.0  # the case the guard is for
    r = retriever(store)
    shown = r.retrieve(user_id, query, top_k=4)
    assert [m.text for m in shown] == [m.text for m in raw]  # the same order
    explained = r.explain(user_id, query, top_k=4)
    for c in explained.considered:
        assert 0.0 <= c.record.score <= 1.0 and 0.0 <= c.lexical <= 1.0 and 0.0 <= c.vector <= 1.0
        assert c.cosine is None or -1.0 <= c.cosine <= 1.0


def test_the_switches_come_from_memory_retrieval_variables() -> None:
    from memory.settings import ConfigError, load_settings

    env = {"MEMORY_RETRIEVAL_QUESTION_WEIGHT": "0.4", "MEMORY_RETRIEVAL_ECHO_WEIGHT": "1",
           "MEMORY_RETRIEVAL_NEAR_COPIES": "0.98", "MEMORY_RETRIEVAL_UNIT_SCORE": "off"}  # fmt: skip
    r = load_settings(env, dotenv=False).retrieval
    assert (r.question_weight, r.echo_weight, r.near_copies, r.unit_score) == (0.4, 1.0, 0.98, False)
    with pytest.raises(ConfigError, match="MEMORY_RETRIEVAL_QUESTION_WEIGHT"):
        load_settings({"MEMORY_RETRIEVAL_QUESTION_WEIGHT": "1.5"}, dotenv=False)
