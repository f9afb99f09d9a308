"""Memory's writes wait while a reply is being made, and are never lost for it.

On 2 cores the turn's write (embedding and insert, GATED's extraction, the archive's
insert) ran beside the reply it followed and delayed that reply's first audio. The
session now holds the store writes from the end of the user's speech to the reply's
first audio frame (`MemorySession`, `DurableWriteQueue.hold`); the turn is in the
journal on disk from its commit on, so a kill during the hold loses nothing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import PipelineHarness, load_utterances, scripted_llm
from memory.journal.queue import DurableWriteQueue
from memory.retrieval.retriever import Retriever
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn
from tests.conftest import make_service, wait_until
from tests.journal.test_write_queue import CHILD, ROOT, journal_rows, kill_when_ready, make_turn, stored_write_ids

UTTERANCES = load_utterances()


@pytest.mark.parametrize("stt_kind", ["realtime", "batch"])
async def test_a_turn_is_written_after_its_reply_starts_to_play_and_is_then_stored(
    stt_kind: str, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the caller notices: the reply is not slowed by the write of the turn it
    answers. The write (memory and archive alike) starts only once the reply's first
    audio frame has played, and the turn is in the store after. Removing the hold from
    `MemorySession` fails this: the write starts as the turn is committed, ~0.3 s before."""
    from livekit.plugins import silero

    import agent
    from memory.rows import RowHandler

    agent.make_plugins(None, silero.VAD.load(), env={"OPENAI_API_KEY": "sk-test"})
    started: list[tuple[float, Turn]] = []
    real_remember = RowHandler.__call__

    async def remember(self: RowHandler, turn: Turn) -> Any:
        started.append((time.perf_counter(), turn))
        return await real_remember(self, turn)

    monkeypatch.setattr(RowHandler, "__call__", remember)
    user = f"hold-{uuid.uuid4().hex[:8]}"
    # A reply of several sentences: it plays for about a second after its first frame.
    long_reply = " ".join(f"Sentence number {i} of a longer answer." for i in range(8))
    harness = PipelineHarness(stt_kind, llm=scripted_llm(lambda _req: long_reply))
    userdata = {"settings": store.settings, "store": store, "retriever": Retriever(store, store.settings)}
    listening: list[float] = []
    async with harness.entrypoint(userdata, user_id=user, job_id=f"job-{uuid.uuid4().hex[:8]}"):
        assert harness.session is not None
        harness.session.on(
            "agent_state_changed",
            lambda ev: listening.append(time.perf_counter()) if ev.new_state == "listening" else None,
        )
        await harness.greeted()
        turn = await harness.say(UTTERANCES["t00"])
    assert turn.committed.startswith("My sister is called Anna") and turn.first_audio is not None
    assert turn.committed_at is not None and turn.committed_at < turn.first_audio  # there was a window to hold
    said = [
        (at, t)
        for at, t in started
        if "Anna" in t.text and (t.kind == "memory" or t.extra.get("message_type") == "user")
    ]
    assert {t.kind for _, t in said} == {"memory", "archive"}, said
    early = [(round((turn.first_audio - at) * 1000), t.kind) for at, t in said if at < turn.first_audio]
    assert not early, f"written before the reply's first audio (ms before, kind): {early}"
    # ... and released by that first frame (LiveKit's "speaking" state), as in a room, not
    # only once the reply has played: the turn reaches the store while the agent talks.
    reply_done = min(at for at in listening if at > turn.first_audio)
    late = [(round((at - reply_done) * 1000), t.kind) for at, t in said if at > reply_done]
    assert not late, f"written only after the reply had played (ms after, kind): {late}"
    stored = [r.text for r in store.search(user, "sister Anna")]
    assert any("Anna" in text for text in stored), f"the held turn was never stored: {stored}"


async def test_held_writes_wait_for_the_release_and_a_hold_runs_out_by_itself(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    """A held turn is on disk at once and in the store only after `release`; a hold that
    is never released ends by itself (bounded), and `drain` ends one too."""
    written: list[str] = []
    service = make_service(store, MemoryMode.NORMAL)

    async def handler(turn: Turn) -> Any:
        written.append(turn.turn_id)
        return await service.remember(turn)

    journal = tmp_path / "journal.sqlite3"
    queue = DurableWriteQueue(journal, handler)
    queue.start()
    try:
        queue.hold(30.0)
        first = make_turn(user_id, "My locker number is 418")
        assert queue.enqueue(first) is True
        assert [r[0] for r in journal_rows(journal)] == [first.turn_id]  # durable at once
        # The consumer woke for the row and stopped at the hold: it waits there, unwritten.
        await wait_until(lambda: queue.hold_waits >= 1, what="the consumer to reach the hold")
        assert written == [] and queue.held
        queue.release()
        assert await queue.drain(10.0)
        assert written == [first.turn_id] and stored_write_ids(store, user_id) == Counter({first.turn_id: 1})

        queue.hold(0.4)  # never released: it runs out
        second = make_turn(user_id, "My bike is a green Brompton")
        queue.enqueue(second)
        await wait_until(lambda: second.turn_id in written, what="the write after the hold ran out")
        assert queue.hold_timeouts == 1  # it went because the hold ran out, not because of a release

        queue.hold(3600)
        third = make_turn(user_id, "My cat is called Miso")
        queue.enqueue(third)
        assert await queue.drain(10.0)  # whoever drains wants the writes now
        assert third.turn_id in written
    finally:
        await queue.aclose(1.0)


async def test_a_worker_killed_while_its_writes_are_held_loses_none(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    """A process killed during a hold (the reply was being made) has its turns in the
    journal; the next queue writes each once. Keeping held turns in memory instead of
    the journal fails this."""
    n = 3
    ids = [f"{user_id}-t{i}" for i in range(n)]
    journal = tmp_path / "journal.sqlite3"
    env = {**os.environ, "WRITE_QUEUE_CHILD_HOLD": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}  # fmt: skip
    err_path = tmp_path / "child.stderr"
    with open(err_path, "wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(CHILD), str(journal), user_id, str(n), store.url, str(tmp_path / "child-data"),
            stdout=asyncio.subprocess.PIPE, stderr=err, env=env, cwd=str(ROOT),
        )  # fmt: skip
    await kill_when_ready(proc, err_path)
    assert [r[0] for r in journal_rows(journal)] == ids
    assert stored_write_ids(store, user_id) == Counter()  # held: nothing reached the store

    queue = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember)
    queue.start()
    try:
        assert queue.replayed == n
        assert await queue.drain(30.0) is True
    finally:
        await queue.aclose(1.0)
    assert stored_write_ids(store, user_id) == Counter({i: 1 for i in ids})
    assert journal_rows(journal) == []


async def test_a_session_that_ends_while_its_writes_are_held_stores_the_turn(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller hangs up right after speaking, before the reply plays: the turn's
    write was held, and the session's close writes it (the next session recalls it).
    Three things end that hold (the reply cancelled by the close, the close's drain, the
    hold's bound); with all three taken out this fails (any one of them keeps it green)."""
    from livekit.plugins import silero

    import agent
    from memory.livekit.session import MemorySession

    agent.make_plugins(None, silero.VAD.load(), env={"OPENAI_API_KEY": "sk-test"})
    seen: list[MemorySession] = []
    real_attach = MemorySession.attach

    def spy(self: MemorySession, session: Any) -> None:
        seen.append(self)
        real_attach(self, session)

    monkeypatch.setattr(MemorySession, "attach", spy)
    user = f"hangup-{uuid.uuid4().hex[:8]}"
    harness = PipelineHarness("realtime")
    userdata = {"settings": store.settings, "store": store, "retriever": Retriever(store, store.settings)}
    utterance = UTTERANCES["t00"]  # "My sister is called Anna and she lives in Lisbon"
    async with harness.entrypoint(userdata, user_id=user, job_id=f"job-{uuid.uuid4().hex[:8]}"):
        await harness.greeted()
        harness.stt.expect(utterance)
        await harness.mic.say(utterance)
        await harness._until(lambda: any("Anna" in t for t in harness.user_items), "the turn to be committed")
        held_at_close = seen[0].queue.held and not harness.speaker.first_frames[1:]
    assert held_at_close, "the session did not end during the hold (the reply had started)"
    stored = [r.text for r in store.search(user, "sister Anna")]
    assert any("Anna" in text for text in stored), f"the turn held at close was never stored: {stored}"
