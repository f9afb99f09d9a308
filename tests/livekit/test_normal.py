"""NORMAL end to end: every spoken or typed turn stored, and looked up for each reply
(a real AgentSession, the real store and embedder; tests/livekit/sessions.py)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC

from memory.journal.queue import DurableWriteQueue
from memory.livekit.session import MemorySession
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso
from tests.conftest import make_service
from tests.livekit.sessions import memory_blocks, one_request_per_turn, recalled_text, voice_session


async def test_normal_stores_spoken_turn_and_recalls_it_next_session_for_that_user_only(
    store: MemoryStore, user_id: str
) -> None:
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("My sister's name is Anna", interims=["My sister's", "My sister's name"])
    stored = store.list_user(user_id)
    assert [m.text for m in stored] == ["My sister's name is Anna"]
    assert stored[0].metadata["session_id"] == run.memory.session_id

    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("What's my sister's name?")
        one_request_per_turn(run, 1)
        assert "My sister's name is Anna" in recalled_text(run.requests[-1])

    async with voice_session(store, MemoryMode.NORMAL, user_id + "-stranger") as run:
        await run.harness.user_says("What's my sister's name?")
        assert "Anna" not in json.dumps(run.requests[-1].messages)


async def test_a_turn_spoken_with_a_pause_uses_the_look_up_started_while_speaking(
    store: MemoryStore, user_id: str
) -> None:
    # STT sends a turn with a pause in it as two final segments; LiveKit commits them
    # joined. The look-up started from the segments must be the one the reply uses.
    store.add_raw(user_id, "My dog is called Rex")
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says_segments(["My dog is getting old.", "What is my dog called?"])
        log = run.memory.turns[-1]
        assert log.text == "My dog is getting old. What is my dog called?"
        assert log.recall is not None and log.recall.prefetched
        assert "My dog is called Rex" in recalled_text(run.requests[-1])
        one_request_per_turn(run, 1)


async def test_an_identity_with_a_trailing_space_is_another_user(store: MemoryStore, user_id: str) -> None:
    # Mem0 trims ids: "alice " used to write under "alice", whose sessions then saw it.
    async with voice_session(store, MemoryMode.NORMAL, user_id + " ") as run:
        await run.harness.user_says("My secret diagnosis is diabetes")
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("What is my diagnosis?")
        assert "diabetes" not in json.dumps(run.requests[-1].messages)
    async with voice_session(store, MemoryMode.NORMAL, user_id + " ") as run:
        await run.harness.user_says("What is my diagnosis?")
        assert "My secret diagnosis is diabetes" in recalled_text(run.requests[-1])


async def test_injected_memory_is_not_kept_in_the_conversation_history(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "My dog is called Rex")
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("What is my dog called?")
        await run.harness.user_says("And how old is he?")
        one_request_per_turn(run, 2)
        assert "Rex" in recalled_text(run.requests[0])
        history = json.dumps(run.harness.session.history.to_dict(), ensure_ascii=False)
        assert "My dog is called Rex" not in history
        # the second request carries only its own turn's block, never the first one's
        assert all(len(memory_blocks(r, "recalled_memories")) <= 1 for r in run.requests)


async def test_earlier_turns_of_the_session_shape_recall_and_raw_turns_keep_their_order(
    store: MemoryStore, user_id: str
) -> None:
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("I'm going to a wedding on Saturday")
        assert await run.memory.drain(10.0)  # stored before the next turn
        await run.harness.user_says("What should I wear to the wedding?")
        assert run.service.contexts[-1] == ("I'm going to a wedding on Saturday",)
        await run.harness.user_says("And shoes?")
        assert run.service.contexts[-1] == ("I'm going to a wedding on Saturday", "What should I wear to the wedding?")
        # a look-up made after the turn is committed sees the same earlier turns
        assert run.memory.earlier_turns() == list(run.service.contexts[-1])
        await run.harness.user_says("And shoes?")  # the same words again: still the turns before it
        assert run.service.contexts[-1][-2:] == ("What should I wear to the wedding?", "And shoes?")
        # already in this conversation: not recalled back into it as a memory
        assert "wedding on Saturday" not in (recalled_text(run.requests[-1]) or "")
        assert await run.memory.drain(10.0)
    stored = {m.text: m.metadata for m in store.list_user(user_id)}
    assert stored["I'm going to a wedding on Saturday"]["seq"] == 0
    assert stored["What should I wear to the wedding?"]["seq"] == 1


async def test_typed_turns_are_looked_up_with_the_turn_before_them(store: MemoryStore, user_id: str) -> None:
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_types("I'm going to a wedding on Saturday")
        await run.harness.user_types("What should I wear?")
        assert run.service.contexts[-1] == ("I'm going to a wedding on Saturday",)
        await run.harness.user_says("And shoes?")  # spoken after typed
        assert run.service.contexts[-1] == ("I'm going to a wedding on Saturday", "What should I wear?")
        await run.harness.user_types("What about a tie?")  # typed after spoken
        assert run.service.contexts[-1][-2:] == ("What should I wear?", "And shoes?")


async def test_typed_input_is_stored_and_gets_memory(store: MemoryStore, user_id: str) -> None:
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_types("My favourite food is ramen")
    assert [m.text for m in store.list_user(user_id)] == ["My favourite food is ramen"]
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_types("What's my favourite food?")
        one_request_per_turn(run, 1)
        assert "ramen" in recalled_text(run.requests[-1])


async def test_the_session_end_callback_livekit_calls_drains_the_last_turns(
    store: MemoryStore, user_id: str, tmp_path
) -> None:
    # agent.py registers `memory.aclose` with `ctx.add_shutdown_callback`; LiveKit calls a
    # callback that takes an argument with the shutdown reason, which became the drain's
    # timeout ("room disconnected"): the drain failed at once and the last turns stayed
    # in this machine's journal instead of the store.
    from types import SimpleNamespace

    from livekit.agents.job import JobContext

    service = make_service(store, MemoryMode.NORMAL)
    release, written = asyncio.Event(), []

    async def slow_store(turn: Turn) -> None:
        await release.wait()
        written.append(turn.turn_id)

    queue = DurableWriteQueue(tmp_path / "journal.sqlite3", slow_store)
    memory = MemorySession(service, user_id=user_id, queue=queue)
    queue.start()
    for i in range(3):
        queue.enqueue(Turn(user_id, f"turn {i}", "s", f"t{i}", now_iso()))
    ctx = SimpleNamespace(_shutdown_callbacks=[])
    JobContext.add_shutdown_callback(ctx, memory.aclose)  # LiveKit's own registration
    asyncio.get_running_loop().call_soon(release.set)  # the store answers once the drain waits
    await ctx._shutdown_callbacks[0]("room disconnected")  # as LiveKit calls it at job end
    assert written == ["t0", "t1", "t2"]
    assert queue.pending_count() == 0


async def test_the_recalled_block_is_bounded_and_dated(store: MemoryStore, user_id: str) -> None:
    # Five long garden turns made a 9,000-character block on every reply (the profile was
    # bounded, recall was not).
    from datetime import datetime

    for i in range(5):
        store.add_raw(user_id, f"In my garden number {i} I grow tomatoes and roses. " + "It needs a lot of care. " * 70)
    limit = make_service(store, MemoryMode.NORMAL).settings.recall_max_chars
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("How is my garden doing?")
        block = recalled_text(run.requests[-1])
    lines = [ln for ln in block.splitlines() if ln.startswith("{")]
    assert len(lines) >= 3 and all("…" in ln for ln in lines)  # each cut, so several fit
    assert sum(len(ln) + 1 for ln in lines) - 1 <= limit
    assert f"today is {datetime.now(UTC).date().isoformat()}" in block  # "last week" can be read


async def test_a_long_memory_is_shown_whole_when_the_block_has_room(store: MemoryStore, user_id: str) -> None:
    # Cut to a third of the block even when it was the only one: its end was lost.
    long_turn = (
        "I spent the whole weekend in my garden, " + "weeding and planting, " * 30 + "and I'm allergic to peanuts."
    )
    store.add_raw(user_id, long_turn)
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("What did I do in my garden?")
        assert "allergic to peanuts" in recalled_text(run.requests[-1])


async def test_a_turn_that_says_nothing_gets_no_look_up_and_its_reply_does_not_wait(
    store: MemoryStore, user_id: str
) -> None:
    # "ok", "thanks", 嗯, 对: nothing to look up, in either language; the next turn with
    # words is looked up as before. (No look-up means no wait: with a batch STT the
    # look-up after the final transcript is on the reply's path.)
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        for said in ["ok thanks", "嗯", "好的，谢谢"]:
            await run.harness.user_says(said, interims=[said[:1]])
            assert run.memory.turns[-1].recall is None, said
        assert not run.memory.recaller._lookups  # none started from the transcripts either
        await run.harness.user_says("What is my sister called?")
        assert run.memory.turns[-1].recall is not None
    assert sorted(m.text for m in store.list_user(user_id) if m.metadata.get("session_id")) == sorted(
        ["ok thanks", "嗯", "好的，谢谢", "What is my sister called?"]
    )  # said, so still stored (NORMAL keeps every turn)
