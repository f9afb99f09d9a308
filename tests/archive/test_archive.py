"""The conversation archive end to end: a real AgentSession, the real store and embedder.

Only the cloud STT/LLM/TTS (and the summary model) are scripted fakes. Spoken turns go
through LiveKit's preemptive generation (preflight), as in production.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.archive.intent import asks_about_past_conversations
from memory.archive.retention import run_retention
from memory.archive.summarizer import MAX_SUMMARY_CHARS
from memory.archive.writer import archive_turn, message_of
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.livekit.agent import MemoryAgent
from memory.livekit.archive import ArchiveSession
from memory.livekit.blocks import SUMMARY_ID
from memory.livekit.session import MemorySession
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, now_iso
from tests.conftest import HANG_GUARD_S, make_service, wait_until

# These tests check what is injected, not how fast (bench/retrieval/archive.py, bench/latency/run.py).
BUDGET_S = HANG_GUARD_S


def echo(request: LLMRequest) -> str:
    """A reply that names the user message it answers, so each is told apart."""
    user = [text for role, text in request.messages if role == "user"]
    return f"Noted: {user[-1]}" if user else "Hello!"


@dataclass
class Run:
    harness: VoiceHarness
    memory: MemorySession
    archive: ArchiveSession
    service: MemoryService


@asynccontextmanager
async def archived_session(
    store: MemoryStore, user_id: str, *, mode: MemoryMode = MemoryMode.NORMAL, summarizer: RecordingLLM | None = None,
    **settings: object,
) -> AsyncIterator[Run]:  # fmt: skip
    base = make_service(store, mode)
    service = MemoryService(store, dataclasses.replace(base.settings, **settings), gatekeeper=Gatekeeper(None))
    memory = MemorySession(service, user_id=user_id, budget_s=BUDGET_S)
    harness = VoiceHarness(MemoryAgent(memory), llm=RecordingLLM(echo), preflight=True)
    memory.attach(harness.session)
    archive = ArchiveSession(memory, summarizer=summarizer)
    archive.attach(harness.session)
    await memory.wait_profile()
    async with harness:
        yield Run(harness, memory, archive, service)
        assert await memory.drain(HANG_GUARD_S), "background writes did not finish"
    # The close writes the session's end summary; its journal drains until it is written (the
    # product's 5 s bound left it on disk on a loaded machine, and the next session missed it).
    await memory.aclose(drain_timeout_s=HANG_GUARD_S)


def summary_model(text: str) -> RecordingLLM:
    return RecordingLLM(lambda _req: text)


# ------------------------------------------------------------------ archive
async def test_both_sides_of_a_spoken_conversation_are_archived_with_their_types(
    store: MemoryStore, user_id: str
) -> None:
    async with archived_session(store, user_id) as run:
        await run.harness.user_says("I am planning a trip to Kyoto in April")
        await run.harness.user_says("我想学大提琴")
    rows = archive_for(store).messages(user_id)
    assert [(r["message_type"], r["content"]) for r in rows] == [
        ("user", "I am planning a trip to Kyoto in April"),
        ("assistant", "Noted: I am planning a trip to Kyoto in April"),
        ("user", "我想学大提琴"),
        ("assistant", "Noted: 我想学大提琴"),
    ]
    assert {r["chat_id"] for r in rows} == {run.memory.session_id}
    assert run.harness.llm.count == 2  # one request a turn: archiving adds none


async def test_an_archive_row_replayed_is_not_written_twice_and_a_damaged_one_is_refused(
    store: MemoryStore, user_id: str
) -> None:
    turn = archive_turn(message_id=f"{user_id}:m1", chat_id="c1", user_id=user_id, text="hello there",
                        message_type="user", created_at=now_iso())  # fmt: skip
    archive = archive_for(store)
    assert archive.add([message_of(turn)]) == 1
    assert archive.add([message_of(turn)]) == 0  # a journal replay
    assert len(archive.messages(user_id)) == 1
    with pytest.raises(InvalidMemoryText, match="message_type"):
        message_of(dataclasses.replace(turn, extra={"message_type": "system"}))


# ------------------------------------------------------------------- search
async def test_match_conversations_is_per_user_above_the_threshold_and_best_first(
    store: MemoryStore, user_id: str
) -> None:
    archive = archive_for(store)
    other = user_id + "-other"
    texts = ["We planned a trip to Kyoto in April", "My cat is called Miso", "I want to learn the cello",
             "我们讨论了去京都旅行的计划"]  # fmt: skip
    archive.add(
        [
            ArchivedMessage(
                f"{user_id}:{i}",
                "chat-a" if i < 2 else "chat-b",
                user_id,
                t,
                "assistant" if i == 2 else "user",
                now_iso(),
            )
            for i, t in enumerate(texts)
        ]
    )
    archive.add(
        [ArchivedMessage(f"{other}:0", "chat-x", other, "Planning a trip to Kyoto in April", "user", now_iso())]
    )

    everything = archive.match(user_id, "trip to Kyoto", count=10, min_similarity=-1.0)
    assert {m.id for m in everything} == {f"{user_id}:{i}" for i in range(4)}  # never the other user's
    sims = [m.similarity for m in everything]
    assert sims == sorted(sims, reverse=True)
    assert everything[0].content == texts[0]
    assert everything[0].chat_id == "chat-a" and everything[0].created_at.tzinfo is not None

    floor = archive.settings.archive_min_similarity
    above = archive.match(user_id, "trip to Kyoto", count=10)
    assert above and all(m.similarity >= floor for m in above)
    assert [m.id for m in above] == [m.id for m in everything if m.similarity >= floor]
    assert archive.match(user_id, "trip to Kyoto", min_similarity=0.999) == []

    assert {m.chat_id for m in archive.match(user_id, "trip to Kyoto", chat_id="chat-b", min_similarity=-1)} == {
        "chat-b"
    }
    assert [
        m.message_type for m in archive.match(user_id, "cello", message_types=["assistant"], min_similarity=-1)
    ] == ["assistant"]
    with store.pool.connection() as conn, pytest.raises(psycopg.errors.InvalidParameterValue, match="user_id"):
        conn.execute("SELECT * FROM match_conversations(%s::vector, 5, '{\"chat_id\": \"chat-x\"}'::jsonb)",
                     ["[" + ",".join(["0.05"] * 384) + "]"])  # fmt: skip


def test_past_conversation_questions_are_recognised_in_english_and_chinese() -> None:
    asks = ["What did we talk about last time?", "Remind me what we discussed yesterday", "上次我们聊了什么",
            "我们之前谈过什么？", "In our last conversation you mentioned a book"]  # fmt: skip
    others = ["What is my sister's name?", "Tell me a joke", "我喜欢蓝色", "What time is it?", "上次的天气怎么样"]
    assert [asks_about_past_conversations(t) for t in asks] == [True] * len(asks)
    assert [asks_about_past_conversations(t) for t in others] == [False] * len(others)


async def test_asking_about_the_last_conversation_brings_it_back_and_other_turns_pay_nothing(
    store: MemoryStore, user_id: str
) -> None:
    first = summary_model("The user plans a trip to Kyoto in April and wants quiet temples.")
    async with archived_session(store, user_id, summarizer=first) as run:
        await run.harness.user_says("I am planning a trip to Kyoto in April, somewhere quiet")
    async with archived_session(store, user_id, summarizer=summary_model("x")) as run:
        plain = await run.harness.user_says("Tell me a joke")
        asked = await run.harness.user_says("What did we talk about last time?")
        zh = await run.harness.user_says("上次我们聊了什么")
        assert run.harness.llm.count == 3
    block = [t for r, t in asked.requests[-1].messages if t.startswith("<past_conversations>")]
    assert block and "trip to Kyoto in April" in block[0]
    assert asked.requests[-1].messages[-2][1] == block[0]  # right before the question
    assert any(t.startswith("<past_conversations>") and "Kyoto" in t for _, t in zh.requests[-1].messages)
    assert not any(t.startswith("<past_conversations>") for _, t in plain.requests[-1].messages)
    assert run.archive.stats.recalls == 2


# ---------------------------------------------------------------- summaries
async def test_a_long_session_is_summarised_and_the_summary_replaces_the_messages_it_covers(
    store: MemoryStore, user_id: str
) -> None:
    long = "The user is moving to Berlin in May and decided to rent near the office. " * 12  # 900 characters
    model = summary_model(long)
    async with archived_session(store, user_id, summarizer=model) as run:
        said = [f"Fact number {i}: I like colour {i}" for i in range(11)]
        for text in said[:10]:
            await run.harness.user_says(text)  # 20 messages: at the threshold, nothing summarised
        assert model.count == 0 and run.archive.summary is None
        await run.harness.user_says(said[10])  # the 21st message
        await wait_until(lambda: run.archive.summary is not None, what="the summary")
        turn = await run.harness.user_says("And what now?")
        assert run.harness.llm.count == 12  # one request a turn, also after the summary came
        assert await run.memory.drain(HANG_GUARD_S)  # until every write is done
        during = archive_for(store).messages(user_id)

    summary = run.archive.summary
    assert summary is not None and len(summary.text) <= MAX_SUMMARY_CHARS
    request = turn.requests[-1]
    texts = [t for _, t in request.messages]
    blocks = [t for t in texts if t.startswith("<conversation_summary>")]
    assert len(blocks) == 1 and summary.text in blocks[0]
    # Covered (the oldest 11 of 21 messages): the first six user turns and five replies.
    users = [t for r, t in request.messages if r == "user"]
    replies = [t for r, t in request.messages if r == "assistant" and not t.startswith("<")]  # not memory's blocks
    assert not set(said[:6]) & set(users) and users[0] == said[6], users
    assert not {f"Noted: {s}" for s in said[:5]} & set(replies) and replies[0] == f"Noted: {said[5]}", replies
    assert said[10] in texts and "And what now?" == texts[-1]  # the newest stay word for word
    assert len(request.messages) < 22
    assert [it.id for it in request.chat_ctx.items if it.id == SUMMARY_ID]

    rolling = [r for r in during if r["message_type"] == "summary"]
    assert len(rolling) == 1 and len(rolling[0]["content"]) <= MAX_SUMMARY_CHARS
    covered = [r for r in during if r["covered_by"] == rolling[0]["id"]]
    assert len(covered) == 11 and [r["content"] for r in covered if r["message_type"] == "user"] == said[:6]
    assert sum(1 for r in during if r["covered_by"] is None) == 25 - 11  # 12 turns, both sides, and the summary

    rows = archive_for(store).messages(user_id)  # after the session: its summary covers everything
    ended = [r for r in rows if r["message_type"] == "summary" and r["metadata"].get("session_end")]
    assert len(ended) == 1 and [r["id"] for r in rows if r["covered_by"] is None] == [ended[0]["id"]]


async def test_gated_profile_mentions_the_last_conversation_in_one_line(store: MemoryStore, user_id: str) -> None:
    async with archived_session(
        store,
        user_id,
        mode=MemoryMode.GATED,
        summarizer=summary_model("We compared two flats in Berlin; the user chose the one in Mitte."),
    ) as run:
        await run.harness.user_says("Which flat should I take, Mitte or Wedding?")
    async with archived_session(store, user_id, mode=MemoryMode.GATED, summarizer=None) as run:
        assert run.archive._last_task is not None
        await run.archive._last_task  # loaded: the line is then shown whatever the reply's budget
        await run.harness.user_says("Hi again")
        first = run.harness.llm.requests[0]
    lines = [t for _, t in first.messages if '"kind":"last_conversation"' in t]
    assert len(lines) == 1
    line = next(ln for ln in lines[0].splitlines() if '"kind":"last_conversation"' in ln)
    assert "the user chose the one in Mitte" in json.loads(line)["note"]


# ---------------------------------------------------------------- retention
async def test_retention_deletes_old_messages_and_raw_turns_and_keeps_summaries_and_facts(
    store: MemoryStore, user_id: str
) -> None:
    archive = archive_for(store)
    old = (datetime.now(UTC) - timedelta(days=120)).isoformat()
    archive.add([
        ArchivedMessage(f"{user_id}:old-u", "c-old", user_id, "old question about tulips", "user", old),
        ArchivedMessage(f"{user_id}:old-a", "c-old", user_id, "old answer about tulips", "assistant", old),
        ArchivedMessage(f"{user_id}:old-s", "c-old", user_id, "summary: tulips", "summary", old),
        ArchivedMessage(f"{user_id}:new-u", "c-new", user_id, "new question about roses", "user", now_iso()),
    ])  # fmt: skip
    raw_old = store.add_raw(user_id, "I once grew tulips").id
    raw_new = store.add_raw(user_id, "I grow roses now").id
    fact = store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister").id
    with store.pool.connection() as conn:
        conn.execute("UPDATE memories SET payload = payload || jsonb_build_object('created_at', %s::text) "
                     "WHERE id = ANY(%s::uuid[])", [old, [raw_old, fact]])  # fmt: skip

    dry = run_retention(store, days=90, dry_run=True)
    assert dry.archived_messages >= 2 and dry.raw_turns >= 1
    assert len(archive.messages(user_id)) == 4  # a dry run deletes nothing

    run_retention(store, days=90, dry_run=True)  # makes the maintenance row
    with store.pool.connection() as conn:  # another process of the fleet is running it
        conn.execute("UPDATE memory_maintenance SET lease_until = now() + interval '1 hour', holder = 'another' "
                     "WHERE name = 'memory-retention'")  # fmt: skip
    assert run_retention(store, days=90).ran is False
    assert len(archive.messages(user_id)) == 4
    with store.pool.connection() as conn:  # ... and was killed: its lease runs out
        conn.execute("UPDATE memory_maintenance SET lease_until = now() - interval '1 second' "
                     "WHERE name = 'memory-retention'")  # fmt: skip

    report = run_retention(store, days=90)
    assert report.ran and report.archived_messages >= 2
    assert {r["id"] for r in archive.messages(user_id)} == {f"{user_id}:old-s", f"{user_id}:new-u"}
    assert {m.id for m in store.list_user(user_id)} == {raw_new, fact}


# ----------------------------------------------------------- export, forget


def test_a_retention_run_in_progress_keeps_every_other_process_out(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention runs once at a time across the fleet: while one run holds the lease, a
    process that finds retention due does not start a second one (both would delete
    the same rows and count them twice). The first run is stopped inside on an event."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from memory.archive import retention

    retention.ensure_maintenance_table(store)
    with store.pool.connection() as conn:  # due: never run, nobody holds it
        conn.execute("UPDATE memory_maintenance SET ran_at = '-infinity', lease_until = NULL, holder = NULL "
                     "WHERE name = 'memory-retention'")  # fmt: skip
    inside, go = threading.Event(), threading.Event()
    real_count = store.rows.count_facts_older_than

    def held_inside(cutoff: object, conn: object) -> int:
        if not inside.is_set():  # the first run, holding the lease
            inside.set()
            go.wait(60)
        return real_count(cutoff, conn)

    monkeypatch.setattr(store.rows, "count_facts_older_than", held_inside)
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(retention.run_retention, store, every_s=3600.0)
        try:
            assert inside.wait(60), "the first run never started"
            second = retention.run_retention(store, every_s=3600.0)  # another process, meanwhile
        finally:
            go.set()
        assert first.result(timeout=HANG_GUARD_S).ran
    assert second.ran is False


def test_the_retention_thread_of_a_closed_store_ends_quietly_and_frees_its_place(
    base_settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A job process whose store is closed under its retention thread (its runtime closed
    or replaced) must not warn every period from a thread that can never run again, and
    the next store it opens starts its own; a closed store starts none."""
    import threading

    from memory.archive import retention

    store = MemoryStore.open(base_settings, load_mem0=False)
    first_run = threading.Event()
    runs: list[int] = []

    def run_on_the_pool(st: MemoryStore, **_: object) -> None:  # what a run needs first
        runs.append(1)
        first_run.set()
        with st.pool.connection():
            pass

    monkeypatch.setattr(retention, "_started", False)
    monkeypatch.setattr(retention, "FIRST_CHECK_S", (0.0, 0.0))
    monkeypatch.setattr(retention, "PERIOD_JITTER_S", 0.0)
    monkeypatch.setattr(retention, "run_retention", run_on_the_pool)
    with caplog.at_level(logging.DEBUG, logger="memory.archive.retention"):
        assert retention.start_background(store, every_s=0.2) is True
        thread = retention._thread
        assert thread is not None and first_run.wait(timeout=HANG_GUARD_S)
        store.close()
        thread.join(timeout=HANG_GUARD_S)  # a bound for a stuck thread, not a wait for timing
        assert not thread.is_alive(), f"the retention thread of a closed store still runs ({len(runs)} runs)"
        assert retention._started is False
        assert retention.start_background(store, every_s=0.2) is False  # closed: none started
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [], warned
