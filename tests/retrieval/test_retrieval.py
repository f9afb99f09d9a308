"""Staged retrieval on the real store: seed scenarios from the issue, isolation, switches."""

from __future__ import annotations

import asyncio
import threading

import pytest
from psycopg import sql

from memory.ops import threads
from memory.retrieval import retriever as retrieval_mod
from memory.retrieval.retriever import Retriever
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S, make_service

COLOUR = "你喜欢的颜色: 蓝色"
DISTRACTORS = ("我下周要去上海出差", "我的猫叫咪咪", "明天早上八点开会")


def retriever(store: MemoryStore, **overrides: object) -> Retriever:
    """A retriever with the cut at the junk floor: these tests are about the ranking (the
    relevance cut, MEMORY_RETRIEVAL_THRESHOLD, is tested in test_block_rules.py)."""
    return Retriever(store, store.settings.tuned(**{"retrieval_threshold": 0.02, **overrides}))


def seed(store: MemoryStore, user_id: str, *texts: str) -> None:
    for text in texts:
        store.add_raw(user_id, text)


def test_first_person_question_finds_second_person_memory_with_a_high_score(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, COLOUR, *DISTRACTORS)
    hits = retriever(store).retrieve(user_id, "我喜欢的颜色是什么", top_k=3)
    assert hits[0].text == COLOUR
    assert hits[0].score >= 0.7
    assert hits[0].score > hits[1].score + 0.2
    assert hits[0].created_at and "lex" not in hits[0].metadata


def test_short_query_finds_memory_through_the_substring_stage(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, COLOUR, *DISTRACTORS)
    r = retriever(store)
    cands = {c.payload["data"]: c for c in r.candidates(user_id, "颜色", top_k=5)}
    assert "substring" in cands[COLOUR].stages  # full text found < half of 5: the fallback ran
    assert r.retrieve(user_id, "颜色", top_k=1)[0].text == COLOUR


def test_memory_written_before_the_lexical_field_is_still_found(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, COLOUR, *DISTRACTORS)
    with store.pool.connection() as conn:  # as if written by an older version
        conn.execute(
            sql.SQL("UPDATE {} SET payload = payload - 'lex' - 'lex_v' WHERE payload->>'user_id' = %s").format(
                sql.Identifier(store.table)
            ),
            [user_id],
        )
    r = retriever(store, retrieval_vector=False)  # lexical stages only
    cands = {c.payload["data"]: c for c in r.candidates(user_id, "颜色", top_k=5)}
    assert cands[COLOUR].stages == {"substring"}
    assert r.retrieve(user_id, "我喜欢的颜色是什么", top_k=1)[0].text == COLOUR


def _as_if_indexed_by_an_older_version(store: MemoryStore, *users: str) -> None:
    with store.pool.connection() as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET payload = payload - 'lex' - 'lex_v' WHERE payload->>'user_id' = ANY(%s)").format(
                sql.Identifier(store.table)
            ),
            [list(users)],
        )


def _lex_versions(store: MemoryStore, user: str) -> list[str | None]:
    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL("SELECT payload->>'lex_v' FROM {} WHERE payload->>'user_id' = %s").format(
                sql.Identifier(store.table)
            ),
            [user],
        ).fetchall()
    return [r[0] for r in rows]


async def test_session_start_brings_older_rows_back_into_full_text_recall(store: MemoryStore, user_id: str) -> None:
    other = f"{user_id}-other"
    seed(store, user_id, COLOUR, *DISTRACTORS)
    seed(store, other, COLOUR)
    _as_if_indexed_by_an_older_version(store, user_id, other)
    r = retriever(store, retrieval_vector=False, retrieval_substring=False)  # full text alone
    assert COLOUR not in {c.payload["data"] for c in r.candidates(user_id, "颜色", top_k=5)}
    colour_id = next(m.id for m in store.list_user(user_id) if m.text == COLOUR)
    history_before = store.history(colour_id)

    await make_service(store, MemoryMode.NORMAL).prepare(user_id)

    found = {c.payload["data"]: c for c in r.candidates(user_id, "颜色", top_k=5)}
    assert "fulltext" in found[COLOUR].stages
    assert {m.text for m in store.list_user(user_id)} == {COLOUR, *DISTRACTORS}  # texts as they were
    assert store.history(colour_id) == history_before  # a derived field: no history entry
    assert _lex_versions(store, other) == [None]  # another user's rows wait for their own session


def test_reindex_works_through_a_backlog_in_bounded_steps(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, *DISTRACTORS)
    _as_if_indexed_by_an_older_version(store, user_id)
    assert store.reindex_lex(user_id, limit=2, batch=1, pause_s=0) == 2
    assert sorted(_lex_versions(store, user_id), key=str).count(None) == 1
    assert store.reindex_lex(user_id, batch=1, pause_s=0) == 1
    assert store.reindex_lex(user_id) == 0  # nothing left: one cheap query


def test_part_of_a_word_gets_a_partial_score(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, "编程语言偏好: Python", *DISTRACTORS)
    cands = {c.payload["data"]: c for c in retriever(store).candidates(user_id, "编程", top_k=5)}
    assert 0 < cands["编程语言偏好: Python"].lexical < 1.0
    assert "fulltext" in cands["编程语言偏好: Python"].stages  # `lex` holds the sub-word 编程
    assert retriever(store).retrieve(user_id, "编程", top_k=1)[0].text == "编程语言偏好: Python"


def test_formal_you_in_memory_matches_plain_you_in_query(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, "您的生日是五月三日", *DISTRACTORS)
    r = retriever(store)
    cands = {c.payload["data"]: c for c in r.candidates(user_id, "你的生日是哪天", top_k=5)}
    assert cands["您的生日是五月三日"].lexical == 1.0
    assert r.retrieve(user_id, "你的生日是哪天", top_k=1)[0].text == "您的生日是五月三日"


def test_a_question_in_traditional_characters_finds_a_memory_in_simplified(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, "你的女儿叫小美", "你的头发是自然卷", *DISTRACTORS)
    r = retriever(store, retrieval_vector=False)  # what the lexical stages find on their own
    cands = {c.payload["data"]: c for c in r.candidates(user_id, "我女兒叫什麼名字", top_k=5)}
    assert "fulltext" in cands["你的女儿叫小美"].stages
    assert cands["你的女儿叫小美"].lexical > 0.5
    assert r.retrieve(user_id, "我的頭髮是什麼樣的", top_k=1)[0].text == "你的头发是自然卷"


def test_a_memory_in_traditional_characters_is_found_by_every_lexical_stage(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, "我女兒最喜歡吃麵條", *DISTRACTORS)
    full_text = retriever(store, retrieval_vector=False, retrieval_substring=False)
    substring = retriever(store, retrieval_vector=False, retrieval_fulltext=False)
    for r in (full_text, substring):
        assert [h.text for h in r.retrieve(user_id, "面条", top_k=1)] == ["我女兒最喜歡吃麵條"]


def test_english_name_is_found_by_its_exact_spelling(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, "My dentist is Dr. Okonkwo", "I like hiking in the Alps", "My sister is called Anna")
    assert retriever(store).retrieve(user_id, "Okonkwo", top_k=1)[0].text == "My dentist is Dr. Okonkwo"
    assert retriever(store).retrieve(user_id, "hikes", top_k=1)[0].text == "I like hiking in the Alps"


def test_no_stage_returns_another_users_memories(store: MemoryStore, user_id: str) -> None:
    other = user_id + "-other"
    seed(store, other, COLOUR, "编程语言偏好: Python")
    seed(store, user_id, "我的猫叫咪咪")
    for overrides in ({}, {"retrieval_vector": False}, {"retrieval_fulltext": False}, {"retrieval_lexical": False}):
        r = retriever(store, **overrides)
        for query in ("颜色", "我喜欢的颜色是什么", "编程", "猫"):
            assert all(h.user_id == user_id for h in r.retrieve(user_id, query, top_k=10)), (overrides, query)
            for cand in r.candidates(user_id, query, top_k=10) if overrides.get("retrieval_lexical", True) else []:
                assert cand.payload["user_id"] == user_id
    assert retriever(store).retrieve(user_id + "-nobody", "颜色") == []


def test_categories_filter_holds_in_every_stage(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "我喜欢的颜色是绿色")
    store.upsert_fact(user_id, "用户喜欢的颜色是蓝色", category="preferences", slot="favorite_color")
    store.upsert_fact(user_id, "用户的妹妹叫小雪", category="relationships", slot="sister_name")
    for overrides in ({}, {"retrieval_vector": False}, {"retrieval_fulltext": False}):
        hits = retriever(store, **overrides).retrieve(user_id, "颜色", top_k=5, categories=["preferences"])
        assert [h.text for h in hits] == ["用户喜欢的颜色是蓝色"], overrides
        assert hits[0].category == "preferences"


def test_updated_fact_is_found_by_its_new_words_only(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "用户住在巴黎", category="personal_facts", slot="home_city")
    store.upsert_fact(user_id, "用户住在柏林", category="personal_facts", slot="home_city")
    r = retriever(store, retrieval_vector=False)
    assert [h.text for h in r.retrieve(user_id, "柏林")] == ["用户住在柏林"]
    assert r.retrieve(user_id, "巴黎") == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"retrieval_lexical": False},
        {"retrieval_fusion": "rrf"},
        {"retrieval_fulltext": False, "retrieval_substring": False},
        {"retrieval_pronouns": False},
        {"retrieval_partial": False},
        {"retrieval_rarity": 0.0},
        {"retrieval_density": 0.0},
    ],
)
def test_every_switch_still_retrieves(store: MemoryStore, user_id: str, overrides: dict[str, object]) -> None:
    seed(store, user_id, COLOUR, *DISTRACTORS)
    hits = retriever(store, **overrides).retrieve(user_id, "我喜欢的颜色是什么", top_k=2)
    assert hits[0].text == COLOUR and len(hits) == 2


def test_threshold_drops_weak_matches_and_blank_query_returns_nothing(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, COLOUR, *DISTRACTORS)
    strict = retriever(store, retrieval_threshold=0.6)
    assert [h.text for h in strict.retrieve(user_id, "我喜欢的颜色是什么", top_k=5)] == [COLOUR]
    assert retriever(store).retrieve(user_id, "   ") == []


def test_long_message_embeds_only_its_last_sentences_within_the_token_budget(store: MemoryStore) -> None:
    r = retriever(store, retrieval_embed_tokens=24)
    short = "我喜欢的颜色是什么？"
    assert r.embedding_text(short) == short
    chatter = "今天天气真好，适合出去走走。昨天看的那个电视剧太精彩了，我都想一口气看完。"
    assert r.embedding_text(chatter * 3 + short).endswith(short)
    assert len(r.embedding_text(chatter * 3 + short)) < len(chatter)
    unbroken = "这是一个没有任何标点符号的很长很长的句子" * 4
    assert unbroken.endswith(r.embedding_text(unbroken)) and r.embedding_text(unbroken)
    assert retriever(store, retrieval_embed_tokens=0).embedding_text(chatter * 3) == chatter * 3


def test_retrieval_settings_come_from_memory_retrieval_variables() -> None:
    from memory.settings import ConfigError, load_settings

    s = load_settings(
        {"MEMORY_RETRIEVAL_FULLTEXT": "off", "MEMORY_RETRIEVAL_FUSION": "RRF", "MEMORY_RETRIEVAL_THRESHOLD": "0.2"},
        dotenv=False,
    )
    assert (s.retrieval.fulltext, s.retrieval.fusion, s.retrieval.threshold) == (False, "rrf", 0.2)
    assert s.retrieval.substring and s.recall_threshold == 0.0  # the others keep their defaults
    for env, name in (
        ({"MEMORY_RETRIEVAL_VECTOR": "maybe"}, "MEMORY_RETRIEVAL_VECTOR"),
        ({"MEMORY_RETRIEVAL_FUSION": "max"}, "MEMORY_RETRIEVAL_FUSION"),
        ({"MEMORY_RETRIEVAL_COS_CEIL": "0.5"}, "MEMORY_RETRIEVAL_COS_CEIL"),
    ):
        with pytest.raises(ConfigError, match=name):
            load_settings(env, dotenv=False)


def test_earlier_turn_of_the_session_picks_the_memory_a_vague_question_means(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, "For the wedding I will wear my navy suit", "My running shoes are red", "I wear glasses")
    r = retriever(store)
    question = "What should I wear?"
    earlier = "I'm going to a wedding on Saturday"
    r.retrieve(user_id, earlier)  # its own look-up when it was said
    with_context = r.retrieve(user_id, question, top_k=3, context=[earlier])
    assert with_context[0].text == "For the wedding I will wear my navy suit"
    without = {m.text: m.score for m in r.retrieve(user_id, question, top_k=3)}
    assert max(without, key=without.__getitem__) != with_context[0].text  # alone, the question is ambiguous
    off = retriever(store, retrieval_context_turns=0)
    assert {m.text: m.score for m in off.retrieve(user_id, question, top_k=3, context=["wedding"])} == without


def _turns(store: MemoryStore, user_id: str, session: str, *texts: str) -> None:
    for seq, text in enumerate(texts):
        store.add_raw(user_id, text, metadata={"session_id": session, "seq": seq})


def test_turn_that_answers_the_one_before_is_recalled_with_it(store: MemoryStore, user_id: str) -> None:
    _turns(store, user_id, "s1", "I took my two turtles for a walk by the pond", "It's been three years now")
    _turns(store, user_id, "s2", "My sister has had her car for five years", "We watched a film about space")
    _turns(store, user_id, "s3", "I've been learning piano for two years", "The weather was lovely")
    question = "How long has the user had the turtles?"
    answer = "It's been three years now"
    # a pool of one: the answer is no candidate of its own, only the turtle turn's neighbour
    on = retriever(store, retrieval_pool=1).retrieve(user_id, question, top_k=3)
    off = retriever(store, retrieval_pool=1, retrieval_neighbours=0.0).retrieve(user_id, question, top_k=3)
    assert answer in [m.text for m in on[:2]]
    rank_off = [m.text for m in off].index(answer) if answer in [m.text for m in off] else len(off)
    assert [m.text for m in on].index(answer) < rank_off


def test_each_stage_switch_turns_its_stage_off(store: MemoryStore, user_id: str) -> None:
    """The MEMORY_RETRIEVAL_* switches are there to measure a stage and to roll it back:
    switched off, a stage finds nothing (its name is on no candidate of the look-up)."""
    _turns(store, user_id, "s1", "I took my two turtles for a walk by the pond", "It's been three years now")
    _turns(store, user_id, "s2", "My sister Anna lives in Lisbon", "We keep a beehive on the roof")
    question = "How long has the user had the turtles?"

    def stages(query: str = question, **knobs: object) -> set[str]:
        found = retriever(store, retrieval_pool=1, **knobs).explain(user_id, query, top_k=3).considered
        return {stage for c in found for stage in c.stages}

    assert {"fulltext", "vector", "neighbour"} <= stages()  # every stage finds something here
    assert "fulltext" not in stages(fulltext=False) and "substring" in stages(fulltext=False)
    assert not {"fulltext", "substring"} & stages(fulltext=False, substring=False)
    hive = "Where is the hive?"  # only part of a word: full text finds nothing, so the substring stage runs
    assert "substring" in stages(hive) and "substring" not in stages(hive, substring=False)
    assert "vector" not in stages(vector=False)
    assert "neighbour" not in stages(neighbours=0.0)
    assert stages(lexical=False) == {"mem0"}  # Mem0's own search alone, in `explain` and in `retrieve`
    dense = retriever(store, lexical=False).retrieve(user_id, question, top_k=3)
    mem0 = store.search(user_id, question, top_k=3, threshold=store.settings.recall_threshold)
    assert [(m.id, round(m.score, 6)) for m in dense] == [(m.id, round(m.score, 6)) for m in mem0]


def test_neighbour_lookup_stays_within_the_user_and_the_session(store: MemoryStore, user_id: str) -> None:
    _turns(store, user_id, "s1", "I took my two turtles for a walk by the pond", "The weather was lovely")
    _turns(store, user_id + "-other", "s1", "zero", "It's been three years now")
    _turns(store, user_id, "s2", "It's been three years now")
    found = retriever(store).fetch_turns(user_id, [("s1", 1), ("s1", 2)], None)
    assert [(c.text, c.turn) for c in found] == [("The weather was lovely", ("s1", 1))]


def test_earlier_turns_cost_no_extra_embedding(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store, user_id, "For the wedding I will wear my navy suit")
    model = store.mem0.embedding_model
    calls: list[str] = []
    real = model.embed
    monkeypatch.setattr(model, "embed", lambda text, action=None: calls.append(text) or real(text, action))
    retriever(store).retrieve(user_id, "What should I wear?", context=["never looked up before", "nor this"])
    assert calls == ["What should I wear?"]


def test_memories_of_the_current_session_are_not_recalled_again(store: MemoryStore, user_id: str) -> None:
    _turns(store, user_id, "now", "My sister Anna lives in Oslo")
    _turns(store, user_id, "before", "My sister Anna is a doctor")
    r = retriever(store)
    assert {m.text for m in r.retrieve(user_id, "Tell me about Anna", exclude_session="now")} == {
        "My sister Anna is a doctor"
    }
    assert len(r.retrieve(user_id, "Tell me about Anna")) == 2
    dense = retriever(store, retrieval_lexical=False)
    assert [m.text for m in dense.retrieve(user_id, "Tell me about Anna", exclude_session="now")] == [
        "My sister Anna is a doctor"
    ]


def test_a_rare_keyword_counts_more_than_an_everyday_one(store: MemoryStore, user_id: str) -> None:
    everyday, rare = "I feel tired today", "Pottery is my new hobby"
    seed(store, user_id, everyday, rare)
    question = "How did I feel about pottery?"  # each memory holds one of the two keywords
    on = {c.text: c.lexical for c in retriever(store).candidates(user_id, question, top_k=5)}
    off = {c.text: c.lexical for c in retriever(store, retrieval_rarity=0.0).candidates(user_id, question, top_k=5)}
    assert on[rare] > on[everyday]
    assert off[rare] == pytest.approx(off[everyday])
    assert retriever(store).retrieve(user_id, question, top_k=1)[0].text == rare


def test_a_memory_in_a_crowded_neighbourhood_no_longer_outranks_a_lone_one(store: MemoryStore, user_id: str) -> None:
    generic = [f"I walked the dog at {hour} o'clock" for hour in range(1, 25)]  # the user's usual chatter
    specific = "My passport expires in March"
    seed(store, user_id, *generic, specific)
    question = "When did I walk the dog or renew the passport?"

    def margin(**overrides: object) -> float:
        r = retriever(store, **overrides)
        r.prepare(user_id)  # session start
        hits = {m.text: m.score for m in r.retrieve(user_id, question, top_k=30)}
        return hits[specific] - max(hits[t] for t in generic)

    assert margin() > margin(retrieval_density=0.0) + 0.05


def test_a_look_up_before_the_densities_are_ready_is_not_held_up(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store, user_id, *[f"I walked the dog at {hour} o'clock" for hour in range(1, 25)], COLOUR)
    r = retriever(store)
    release, started = threading.Event(), threading.Event()
    compute = r._compute_density

    def slow_compute(uid: str):
        started.set()
        release.wait(timeout=HANG_GUARD_S)  # a large store, a slow machine
        return compute(uid)

    monkeypatch.setattr(r, "_compute_density", slow_compute)
    waiting = threading.Thread(target=r.prepare, args=(user_id,))  # session start, in the background
    waiting.start()
    assert started.wait(timeout=HANG_GUARD_S)
    got = [(m.text, m.score) for m in r.retrieve(user_id, "我喜欢的颜色是什么", top_k=3)]  # the first turn
    assert not release.is_set()  # answered while the computation was still running...
    plain = [
        (m.text, m.score)
        for m in retriever(store, retrieval_density=0.0).retrieve(user_id, "我喜欢的颜色是什么", top_k=3)
    ]
    assert got == plain  # ...uncorrected
    release.set()
    waiting.join(timeout=HANG_GUARD_S)
    assert len(r.density(user_id).of) == 25  # and the next turn has them


async def test_a_session_closing_during_its_start_leaves_the_shared_densities_to_the_others(
    store: MemoryStore, user_id: str
) -> None:
    # One retriever per worker process: a session that closes while its start-up waits
    # for the user's densities must not cancel that computation for the other sessions.
    seed(store, user_id, *[f"I walked the dog at {hour} o'clock" for hour in range(1, 25)], COLOUR)
    shared = retriever(store)
    closing_session = make_service(store, MemoryMode.NORMAL, retriever=shared)
    hold = threading.Event()
    busy = threads.DENSITY_POOL.submit(hold.wait, 30)  # this user's computation waits its turn
    start = asyncio.create_task(closing_session.prepare(user_id))
    await asyncio.sleep(0)  # the session start is now waiting on the computation
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    hold.set()
    busy.result(timeout=HANG_GUARD_S)
    density = await asyncio.to_thread(shared.prepare, user_id)  # the next session of this process
    assert len(density.of) == 25


@pytest.mark.parametrize("too", ["small", "large"])
def test_the_density_correction_leaves_too_small_and_too_large_stores_alone(
    store: MemoryStore, user_id: str, too: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    seed(store, user_id, COLOUR, *DISTRACTORS)  # too few memories for a meaningful density
    if too == "large":
        monkeypatch.setattr(retrieval_mod, "_DENSITY_MIN", 2)
        monkeypatch.setattr(retrieval_mod, "_DENSITY_MAX", len(DISTRACTORS))  # one memory too many
    assert retriever(store).prepare(user_id).of == {}
    on = [(m.text, m.score) for m in retriever(store).retrieve(user_id, "我喜欢的颜色是什么", top_k=4)]
    off = [
        (m.text, m.score)
        for m in retriever(store, retrieval_density=0.0).retrieve(user_id, "我喜欢的颜色是什么", top_k=4)
    ]
    assert on == off


def test_densities_are_computed_where_connections_hand_back_pgvector_values(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared database whose connections have pgvector's adapters registered (its
    owner's pool configuration) returns `Vector` objects, not bytes."""
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool

    monkeypatch.setattr(retrieval_mod, "_DENSITY_MIN", 2)
    seed(store, user_id, COLOUR, *DISTRACTORS)
    plain = retriever(store).prepare(user_id).of
    with ConnectionPool(store.url, min_size=1, max_size=1, configure=register_vector) as pool:
        adapted = MemoryStore(store.settings, store.url, pool, store.mem0)
        assert retriever(adapted).prepare(user_id).of == pytest.approx(plain)
    assert len(plain) == 4


def test_expired_densities_are_served_while_fresh_ones_are_computed_in_the_background(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    seed(store, user_id, *[f"I walked the dog at {hour} o'clock" for hour in range(1, 25)])
    r = retriever(store)
    first = r.prepare(user_id)  # session start
    assert len(first.of) == 24
    monkeypatch.setattr(retrieval_mod, "_DENSITY_TTL", 0.0)  # every cached density is now expired
    seed(store, user_id, "My passport expires in March")
    assert r.density(user_id) is first  # the caller gets the cached ones at once...
    refresh = r._refreshing.get(user_id)
    if refresh is not None:
        refresh.result(timeout=HANG_GUARD_S)
    fresh = r._densities[user_id][1]
    assert fresh is not first and len(fresh.of) == 25  # ...and the new memory counts from then on


def test_a_failing_store_gets_no_stream_of_density_reads(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store, user_id, *[f"I walked the dog at {hour} o'clock" for hour in range(1, 25)])
    r = retriever(store)
    reads: list[str] = []

    def broken(*args: object, **kwargs: object):
        reads.append("read")
        raise OSError("store unreachable")

    with monkeypatch.context() as m:
        m.setattr(store.pool, "connection", broken)
        assert r.prepare(user_id).of == {}  # session start: no densities, no exception
        for _ in range(5):  # the turns that follow
            assert r.density(user_id).of == {}
        assert reads == ["read"]  # one try, not one per look-up

    assert r.prepare(user_id).of == {}  # the store is back, but the pause is not over...
    monkeypatch.setattr(retrieval_mod, "_DENSITY_TTL", 0.0)  # ...now it is
    assert len(r.prepare(user_id).of) == 24


def test_the_word_a_question_asks_for_counts_less_than_whom_it_is_about(store: MemoryStore, user_id: str) -> None:
    boss = "我的上司是研发总监"  # the answer: it never says 职位
    others = ("李明是我的下属，其职位是工程师", "王强是我的叔叔，其职位是快递员", "张丽是我的婶婶，其职位是教师")
    seed(store, user_id, boss, *others)
    question = "我上司是啥职位来着？"

    def lead(**overrides: object) -> float:
        hits = {m.text: m.score for m in retriever(store, **overrides).retrieve(user_id, question, top_k=4)}
        return hits[boss] - max(hits[t] for t in others)

    assert retriever(store).retrieve(user_id, question, top_k=1)[0].text == boss
    assert lead() > lead(retrieval_focus_weight=1.0) + 0.05  # 职位 in the others counts for less


@pytest.mark.parametrize(
    ("said_often", "also_said", "chit_chat", "query"),
    [
        (
            "I'm vegetarian.",
            "I'm allergic to peanuts.",
            ("ok", "thanks!", "haha", "yeah"),
            "What should I cook for dinner?",
        ),
        ("我是素食者。", "我对花生过敏。", ("好的", "哈哈", "对", "嗯嗯"), "晚饭我该做点什么？"),
    ],
)
def test_a_fact_said_in_many_sessions_shows_once_and_chit_chat_never(
    store: MemoryStore, user_id: str, said_often: str, also_said: str, chit_chat: tuple[str, ...], query: str
) -> None:
    # NORMAL keeps every turn: five copies of "I'm vegetarian." filled the five slots and
    # pushed out the peanut allergy, and "ok" or 好的 came back as memories.
    seed(store, user_id, also_said, *chit_chat)
    for _ in range(5):
        seed(store, user_id, said_often.lower() if _ % 2 else said_often)  # as STT writes it, each time
    texts = [m.text for m in retriever(store).retrieve(user_id, query, top_k=5)]
    assert sum(1 for t in texts if t.lower() == said_often.lower()) == 1
    assert also_said in texts
    assert not set(texts) & set(chit_chat)


@pytest.mark.parametrize(
    "text",
    [
        "Ty's birthday is June 3.",
        "谢谢你记得我对花生过敏",
        "У меня аллергия на арахис",
        "Buddy.",
        "Nice.",
        "Morning runs",
    ],
)
def test_short_or_thankful_memories_that_say_something_are_still_shown(
    store: MemoryStore, user_id: str, text: str
) -> None:
    # A name that looks like "ty" (thanks), a fact that opens with 谢谢, a script the
    # acknowledgement lists do not cover, a dog called Buddy: none is an "ok".
    seed(store, user_id, text, *DISTRACTORS)
    assert text in [m.text for m in retriever(store).retrieve(user_id, text, top_k=5)]


def test_a_fact_said_again_shows_the_date_it_was_last_said(store: MemoryStore, user_id: str) -> None:
    # Paris (2024), Berlin (2025), Paris again (2026): the copy kept was often the 2024
    # one, and "the later note is current" then made Berlin the answer.
    said = {"I live in Paris.": ["2024-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00"],
            "I live in Berlin.": ["2025-01-01T00:00:00+00:00"]}  # fmt: skip
    for text, dates in said.items():
        for when in dates:
            store.add_raw(user_id, text)
            with store.pool.connection() as conn:
                conn.execute(
                    sql.SQL(
                        "UPDATE {} SET payload = payload || "
                        "jsonb_build_object('created_at', %s::text, 'updated_at', %s::text) "
                        "WHERE payload->>'user_id' = %s AND payload->>'data' = %s AND NOT payload ? 'dated'"
                    ).format(sql.Identifier(store.table)),
                    [when, when, user_id, text],
                )
                conn.execute(
                    sql.SQL("UPDATE {} SET payload = payload || '{{\"dated\": true}}' WHERE payload->>'user_id' = %s")
                    .format(sql.Identifier(store.table)), [user_id],
                )  # fmt: skip
    shown = {m.text: (m.updated_at or m.created_at)[:4] for m in retriever(store).retrieve(user_id, "Where do I live?")}
    assert shown == {"I live in Paris.": "2026", "I live in Berlin.": "2025"}
