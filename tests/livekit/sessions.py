"""A real AgentSession with MemoryAgent over the real store and embedder, for the tests
of tests/livekit/: only the cloud STT/LLM/TTS are scripted fakes (harness/scripted).
Spoken turns use preflight transcripts, so every turn goes through LiveKit's
preemptive generation, as in production with VAD turn detection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.livekit.agent import MemoryAgent
from memory.livekit.blocks import MEMORY_ROLE
from memory.livekit.session import MemorySession
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S, make_service

# Long budget in these tests: they check what is injected, not how fast
# (tests/retrieval/test_prefetch.py and bench/latency/run.py cover the budget).
BUDGET_S = HANG_GUARD_S


def memory_blocks(request: LLMRequest, tag: str) -> list[int]:
    """Indexes of messages in a request that hold a memory block with this tag."""
    return [i for i, (role, text) in enumerate(request.messages) if role == MEMORY_ROLE and text.startswith(f"<{tag}>")]


def recalled_text(request: LLMRequest) -> str:
    """The recalled-memories block of a request ("" if none), checked to sit right before the user message."""
    idx = memory_blocks(request, "recalled_memories")
    if not idx:
        return ""
    assert idx == [len(request.messages) - 2], request.messages
    assert request.messages[-1][0] == "user"
    return request.messages[idx[0]][1]


@dataclass
class Run:
    harness: VoiceHarness
    memory: MemorySession
    service: MemoryService

    @property
    def requests(self) -> list[LLMRequest]:
        return self.harness.llm.requests


class CountingService(MemoryService):
    """The real service, counting look-ups so tests can see when retrieval ran."""

    recalls: int = 0
    profiles: int = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.contexts: list[tuple[str, ...]] = []

    async def recall(self, user_id: str, text: str, context=(), session_id=None):
        self.recalls += 1
        self.contexts.append(tuple(context))
        return await super().recall(user_id, text, context, session_id)

    async def profile(self, user_id: str):
        self.profiles += 1
        return await super().profile(user_id)


@asynccontextmanager
async def voice_session(
    store: MemoryStore,
    mode: MemoryMode,
    user_id: str,
    *,
    extraction: RecordingLLM | None = None,
    wait_for_profile: bool = True,
) -> AsyncIterator[Run]:
    base = make_service(store, mode)
    service = CountingService(store, base.settings, gatekeeper=Gatekeeper(extraction))
    memory = MemorySession(service, user_id=user_id, budget_s=BUDGET_S)
    # What these sessions store is asserted, not how fast: no write is abandoned for its time
    # (at load 8 the journal's 10 s per attempt ran out, and each write was tried again beside
    # the thread still writing it until the drain gave up).
    memory.queue.attempt_timeout_s = 3600.0
    harness = VoiceHarness(MemoryAgent(memory), preflight=True)
    memory.attach(harness.session)
    if wait_for_profile:
        await memory.wait_profile()
    async with harness:
        yield Run(harness, memory, service)
        assert await memory.drain(HANG_GUARD_S), "background writes did not finish"
    await memory.aclose()


def one_request_per_turn(run: Run, turns: int) -> None:
    assert run.harness.llm.count == turns, [r.messages[-1] for r in run.requests]


SISTER = {"text": "User's sister is Anna", "category": "relationships", "slot": "sister_name"}


def turn_logs(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "memory turn"]
