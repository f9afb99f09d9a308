"""The block a NORMAL reply is given holds what answers the turn and nothing else: not the
user's own earlier questions about it, not an unrelated statement (issue 51). A real
AgentSession, the real store and embedder (tests/livekit/sessions.py)."""

from __future__ import annotations

from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.livekit.sessions import one_request_per_turn, recalled_text, voice_session
from tests.livekit.test_asked_again import injected_notes

FACT = "My sister is called Anna."
ASKED = ("What's my sister's name?", "Do you remember what my sister is called?")
UNRELATED = "I play the cello."


async def test_the_next_question_is_given_the_fact_and_nothing_else(store: MemoryStore, user_id: str) -> None:
    said = (FACT, *ASKED, UNRELATED)  # each in a call of its own
    for text in said:
        async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
            await run.harness.user_says(text)
    assert {m.text for m in store.list_user(user_id)} == set(said)  # the questions are kept, in the archive too

    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("What's my sister's name?")
        one_request_per_turn(run, 1)
        assert injected_notes(recalled_text(run.requests[0])) == [FACT]


async def test_small_talk_is_given_no_block(store: MemoryStore, user_id: str) -> None:
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says(FACT)
        await run.harness.user_says(UNRELATED)
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        lines = ("How's the weather today?", "ok thanks", "今天天气怎么样？", "好的")
        for line in lines:
            await run.harness.user_says(line)
        one_request_per_turn(run, len(lines))
        assert [recalled_text(r) for r in run.requests] == [""] * len(lines)
