"""NORMAL stores every user turn, questions included: a user who keeps asking about a fact
must still get the fact first, not their own earlier questions (issue 38). A real
AgentSession, the real store and embedder (tests/livekit/sessions.py)."""

from __future__ import annotations

import json

from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.livekit.sessions import one_request_per_turn, recalled_text, voice_session

FACT = "My sister is called Anna, and I'm allergic to peanuts."
# Asked in two later calls, in the words people use when they ask again.
ASKED = ("What's my sister's name?", "Do you remember what my sister is called?")
ASKED_AGAIN = ("What's my sister's name again?",)


def injected_notes(block: str) -> list[str]:
    """The notes of a recalled-memories block, in the order the reply gets them."""
    return [json.loads(line)["note"] for line in block.splitlines() if line.startswith("{")]


async def test_after_asking_about_a_fact_several_times_the_fact_is_still_injected_first(
    store: MemoryStore, user_id: str
) -> None:
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says(FACT)
    for question in ASKED:
        async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
            await run.harness.user_says(question)
    stored = {m.text for m in store.list_user(user_id)}
    assert stored == {FACT, *ASKED}  # NORMAL kept the questions: they are there to outrank the fact

    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says(ASKED[0])
        await run.harness.user_says(ASKED_AGAIN[0])
        one_request_per_turn(run, 2)
        for request in run.requests:
            notes = injected_notes(recalled_text(request))
            assert notes[0] == FACT, notes
