"""The peer: Mem0's documented LiveKit pattern, in the same pipeline as this project.

Mem0's LiveKit page puts memory in `Agent.on_user_turn_completed`: an awaited
`search` for the user's message, its results added to the turn's context as a message
(and `update_chat_ctx`), and an awaited `add` of the message. Here it runs as that page
shows it, with two choices the issue fixes: the open-source `AsyncMemory` on the same
store as the product (the same Postgres table, connection pool and local embedder, so
the difference is the pattern, not the infrastructure), and `add(infer=False)`, so no
LLM extraction call is counted against it. The search comes first, then the add (the
page adds first; that order would find the message itself). Everything else is
`agent.entrypoint` as with memory off: no transcript hooks, no write path, no profile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import Agent, ChatContext, ChatMessage

from memory.prompts import load_prompt


@dataclass
class HookTimes:
    """What each awaited call in the hook took, turn by turn (ms)."""

    search_ms: list[float] = field(default_factory=list)
    add_ms: list[float] = field(default_factory=list)
    found: list[int] = field(default_factory=list)


class Mem0PatternAgent(Agent):
    """An agent with memory as Mem0's LiveKit page wires it."""

    def __init__(self, memory: Any, user_id: str, session_id: str, times: HookTimes, top_k: int) -> None:
        super().__init__(instructions=load_prompt("system"))
        self._memory = memory
        self._user_id = user_id
        self._session_id = session_id
        self._times = times
        self._top_k = top_k

    async def on_user_turn_completed(self, turn_ctx: ChatContext, new_message: ChatMessage) -> None:
        text = new_message.text_content or ""
        t0 = time.perf_counter()
        found = await self._memory.search(text, filters={"user_id": self._user_id}, top_k=self._top_k)
        t1 = time.perf_counter()
        lines = [r.get("memory") for r in (found or {}).get("results", []) if r.get("memory")]
        if lines:
            turn_ctx.add_message(role="assistant", content="\n\n".join(f"Content: {line}" for line in lines))
            await self.update_chat_ctx(turn_ctx)
        # The session id in the metadata only lets the bench remove these rows after the run.
        await self._memory.add(
            [{"role": "user", "content": text}],
            user_id=self._user_id,
            infer=False,
            metadata={"session_id": self._session_id},
        )
        self._times.search_ms.append((t1 - t0) * 1000)
        self._times.add_ms.append((time.perf_counter() - t1) * 1000)
        self._times.found.append(len(lines))
        await super().on_user_turn_completed(turn_ctx, new_message)


def async_memory(store: Any) -> Any:
    """Mem0's `AsyncMemory` on the store's own Mem0 configuration (same table and pool)."""
    from mem0 import AsyncMemory

    memory = AsyncMemory(store.mem0.config)
    # The table is partitioned by user: Mem0's own pgvector store inserts no `user_id` (the
    # partition key) and fails; the store's Mem0 uses the user-scoped one (`store._build_mem0`).
    memory.vector_store.connection_pool = None  # its `__del__` would close the shared pool
    memory.vector_store = store.mem0.vector_store
    return memory


@contextmanager
def mem0_pattern(memory: Any, user_id: str, session_id: str, times: HookTimes, top_k: int) -> Iterator[None]:
    """`agent.entrypoint` with Mem0's pattern as its memory: the product's memory taken
    out as for memory off (`bench.common.pipeline.memory_off`), and the first agent Mem0's."""
    import memory as product  # `agent.entrypoint` asks the package for its first agent (`memory.first_agent`)
    from bench.common.pipeline import memory_off

    # `agent.entrypoint` calls `memory.first_agent` (the package's), which `memory_off` replaces too.
    with memory_off():
        real_first = product.first_agent
        product.first_agent = lambda *_a, **_kw: Mem0PatternAgent(memory, user_id, session_id, times, top_k)
        try:
            yield
        finally:
            product.first_agent = real_first
