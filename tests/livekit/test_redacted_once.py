"""A spoken turn's text is cleaned and redacted once, where it comes in, and the result is
carried to its journal row, its context for later turns, the archive and the store: one
call of `redact_secrets` for it, however many places keep it. What is stored has no secret."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from livekit.agents import Agent

import memory
from memory import api
from memory.language import redact

CARD = "4111 1111 1111 1111"
SAID = f"My sister Anna has the card {CARD} now"


@pytest.fixture
def runtime(store: Any) -> Iterator[Any]:
    """This process's memory over the suite's store, as `memory.warm_up` makes it in a worker."""
    before = api.runtime()
    yield api.use(dataclasses.replace(store.settings, recall_budget_ms=10_000), store)
    if before is not None:
        api.use(before.settings, before.store, before.retriever)
    else:
        api.forget_runtime()


async def test_one_spoken_turn_is_redacted_once_and_stored_without_its_secret(
    runtime: Any, store: Any, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.scripted import RecordingLLM, VoiceHarness
    from tests.conftest import HANG_GUARD_S

    real = redact.redact_secrets
    calls: list[str] = []

    def counting(text: str, *args: Any, **kwargs: Any) -> tuple[str, list[str]]:
        calls.append(text)
        return real(text, *args, **kwargs)

    for module in list(sys.modules.values()):  # every module that took the name, as each does
        if (getattr(module, "__name__", "") or "").startswith("memory") and getattr(
            module, "redact_secrets", None
        ) is real:
            monkeypatch.setattr(module, "redact_secrets", counting)

    harness = VoiceHarness(Agent(instructions="You are the receptionist."), llm=RecordingLLM(lambda _req: "Noted."))
    mem = memory.attach(harness.session, user_id=user_id, archive=True)
    async with harness:
        await harness.user_says(SAID)
        assert await mem.drain(HANG_GUARD_S)
    await mem.aclose()

    of_the_turn = [text for text in calls if "Anna" in text]
    assert len(of_the_turn) == 1, of_the_turn
    stored = [m.text for m in store.list_user(user_id)]
    assert stored and "Anna" in stored[0] and CARD not in stored[0], stored
