"""Issue 20: what one hostile turn can cost is bounded (stored size, event loop, journal,
extraction input), through the real session and store."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

import memory.livekit.session as glue
from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.journal.queue import DurableWriteQueue
from memory.livekit import turns
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession
from memory.rows import RowHandler
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn
from tests.conftest import HANG_GUARD_S, make_service


def journal_payloads(path: Path) -> list[dict]:
    with closing(sqlite3.connect(path)) as conn:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM pending_writes ORDER BY seq")]


async def typed_session(service: MemoryService, user_id: str, texts: list[str], *, queue=None) -> MemorySession:
    memory = MemorySession(service, user_id=user_id, queue=queue, budget_s=5.0)
    harness = VoiceHarness(MemoryAgent(memory), timeout=30.0)
    memory.attach(harness.session)
    async with harness:
        for text in texts:
            await harness.user_types(text)
        await memory._prepared(30.0)
    return memory


async def test_a_huge_typed_turn_stores_at_most_the_limit_and_says_so(
    store: MemoryStore, user_id: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What is stored is asserted, not how fast: the session's journal never abandons a write
    # for its time (at load 15 the default 10 s ran out, each part was tried again beside the
    # thread still writing it, and the journal never drained in the minute given).
    real_open = RowHandler.open_queue
    monkeypatch.setattr(RowHandler, "open_queue", lambda self, **kw: real_open(self, attempt_timeout_s=3600.0, **kw))
    service = make_service(store, MemoryMode.NORMAL)
    service.settings = dataclasses.replace(service.settings, max_stored_turn_chars=3000)
    huge = "I keep a diary of the birds I see. " * 3000  # 105,000 characters
    memory = await typed_session(service, user_id, [huge])
    assert await memory.drain(HANG_GUARD_S)
    await memory.aclose()
    stored = store.list_user(user_id)
    assert 0 < sum(len(m.text) for m in stored) <= 3000
    assert "MEMORY_MAX_TURN_CHARS" in caplog.text  # the operator is told which setting cut it


async def test_long_turns_are_split_off_the_event_loop_and_keep_their_order(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []
    real = glue.turn_parts

    def recording(turn: Turn, max_chars: int) -> list[Turn]:
        threads.append(threading.get_ident())
        return real(turn, max_chars)

    monkeypatch.setattr(glue, "turn_parts", recording)
    service = make_service(store, MemoryMode.NORMAL)
    held = asyncio.Event()

    async def never(turn: Turn) -> None:
        await held.wait()

    queue = DurableWriteQueue(tmp_path / "j.sqlite3", never, attempt_timeout_s=3600)
    long = "My garden has roses and tulips and a small pond with fish. " * 200  # 11,800 characters
    memory = await typed_session(service, user_id, [long, "My cat is called Miso"], queue=queue)
    await memory.aclose(drain_timeout_s=0.1)
    assert threads[0] != loop_thread  # the long one: on a thread
    rows = journal_payloads(tmp_path / "j.sqlite3")
    assert rows[-1]["text"] == "My cat is called Miso"  # said last, journaled last
    assert " ".join(r["text"] for r in rows[:-1]).split() == long.split()


async def test_each_part_is_journaled_once_as_utf8_without_the_turns_before_it(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    # Each part of a long turn carried the two items before it in full, and Chinese was
    # stored as \\u escapes: the journal grew to 587 MB from 6.1 MB of text.
    service = make_service(store, MemoryMode.NORMAL)
    held = asyncio.Event()

    async def never(turn: Turn) -> None:
        await held.wait()

    path = tmp_path / "j.sqlite3"
    queue = DurableWriteQueue(path, never, attempt_timeout_s=3600)
    chinese = "我奶奶在房子后面的花园里种了西红柿，每年夏天都会做番茄酱。" * 300  # 8,700 characters
    before = "我的邻居养了一只很大的狗，" * 200
    memory = await typed_session(service, user_id, [before, chinese], queue=queue)
    await memory.aclose(drain_timeout_s=0.1)
    rows = journal_payloads(path)
    parts = [r for r in rows if r["turn_id"].split("/")[0] == rows[-1]["turn_id"].split("/")[0]]
    assert len(parts) >= 4
    assert parts[0]["context"] and all(not p["context"] for p in parts[1:])  # context once
    assert all(len(c) <= len("assistant: …") + turns.CONTEXT_ITEM_CHARS for r in rows for c in r["context"])
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw = conn.execute("SELECT group_concat(payload) FROM pending_writes").fetchone()[0]
    assert "西红柿" in raw and "\\u" not in raw  # UTF-8 text, not escapes
    text_bytes = sum(len(r["text"].encode()) for r in rows)
    assert path.stat().st_size <= 2 * text_bytes + 64 * 1024  # beyond the empty file's pages


async def test_gated_extraction_input_is_bounded_per_turn(store: MemoryStore, user_id: str) -> None:
    # Two 50 KB turns sent 1.35 M characters to extraction (13.5 times the input).
    sizes: list[int] = []

    def extract(req: LLMRequest) -> str:
        sizes.append(len(req.messages[-1][1]))
        return json.dumps({"facts": []})

    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(RecordingLLM(extract)))
    typed = [("My job is interesting. I am a nurse and I work nights. " * 300)[:15_000] for _ in range(2)]
    memory = await typed_session(service, user_id, typed)
    assert await memory.drain(HANG_GUARD_S)
    await memory.aclose()
    limit = service.settings.max_turn_chars + 2 * turns.CONTEXT_ITEM_CHARS + 500  # the JSON's own keys
    assert sizes and max(sizes) <= limit
    assert sum(sizes) <= 1.5 * sum(len(t) for t in typed)


def test_a_replayed_row_with_long_context_is_cut_before_extraction() -> None:
    seen: list[str] = []

    def extract(req: LLMRequest) -> str:
        seen.append(req.messages[-1][1])
        return json.dumps({"facts": []})

    gate = Gatekeeper(RecordingLLM(extract))
    asyncio.run(gate.review("My sister is called Anna", ["assistant: " + "x" * 50_000] * 5))
    assert len(json.loads(seen[0])["previous_turns"]) == 2
    assert all(len(t) <= 400 for t in json.loads(seen[0])["previous_turns"])


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MEMORY_MAX_TURN_CHARS": "5"}, "MEMORY_MAX_TURN_CHARS"),
        ({"MEMORY_LOG_TRANSCRIPTS": "all"}, "MEMORY_LOG_TRANSCRIPTS"),
        ({"MEMORY_MAX_READS_IN_FLIGHT": "0"}, "MEMORY_MAX_READS_IN_FLIGHT"),
    ],  # fmt: skip
)
def test_a_bad_hostile_input_setting_fails_at_start_naming_it(env: dict[str, str], named: str) -> None:
    from memory.settings import ConfigError, load_settings

    with pytest.raises(ConfigError, match=named):
        load_settings(env, dotenv=False)


def test_the_spill_directory_can_be_set_or_switched_off(tmp_path: Path) -> None:
    from memory.settings import load_settings

    assert load_settings({"MEMORY_SPILL_DIR": "off"}, dotenv=False).spill_dir is None
    assert load_settings({"MEMORY_SPILL_DIR": str(tmp_path)}, dotenv=False).spill_dir == tmp_path.resolve()
