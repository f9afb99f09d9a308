"""A session of `bench.privacy.hostile`: the real AgentSession on the scripted pipeline with the
product's memory, the event loop watched for stalls, and what the store holds afterwards."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Awaitable, Callable

from harness.scripted import RecordingLLM, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.journal.queue import DurableWriteQueue
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def service_for(store: MemoryStore, mode: MemoryMode, extraction: RecordingLLM | None = None) -> MemoryService:
    settings = dataclasses.replace(store.settings, mode=mode)
    return MemoryService(store, settings, gatekeeper=Gatekeeper(extraction))


def write_ids(store: MemoryStore, user_id: str) -> Counter[str]:
    return Counter(r.metadata.get("write_id") for r in store.list_user(user_id))


class LoopWatch:
    """The event loop's longest stall: a ticker that should wake every `tick_s`."""

    def __init__(self, tick_s: float = 0.001) -> None:
        self.tick_s = tick_s
        self.max_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(self.tick_s)
            now = loop.time()
            self.max_ms = max(self.max_ms, (now - last - self.tick_s) * 1000)
            last = now

    def __enter__(self) -> LoopWatch:
        self._task = asyncio.ensure_future(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def run_session(
    service: MemoryService,
    user_id: str,
    say: Callable[[VoiceHarness, MemorySession], Awaitable[None]],
    *,
    queue: DurableWriteQueue | None = None,
    llm: RecordingLLM | None = None,
) -> tuple[MemorySession, VoiceHarness]:
    memory_session = MemorySession(service, user_id=user_id, queue=queue)
    harness = VoiceHarness(MemoryAgent(memory_session), llm=llm, preflight=True, timeout=60.0)
    memory_session.attach(harness.session)
    await memory_session.wait_profile()
    async with harness:
        await say(harness, memory_session)
    await memory_session.drain(30.0)
    await memory_session.aclose(drain_timeout_s=5.0)
    return memory_session, harness
