"""One session's memory, made and attached the one way the product has: the worker's
entrypoint (agent.py) and the text chat (`python -m memory.chat`) both call `attach_memory`,
so what a typed chat stores and recalls is what a call does."""

from __future__ import annotations

from typing import Any

from livekit.agents import AgentSession
from livekit.agents import llm as lk_llm

from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.livekit.archive import ArchiveSession
from memory.livekit.session import MemorySession
from memory.retrieval.retriever import Retriever
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings


def attach_memory(
    session: AgentSession,
    *,
    store: Any,
    settings: MemorySettings,
    retriever: Retriever | None,
    user_id: str,
    session_id: str | None,
    memory_llm: lk_llm.LLM | None,
    summarizer: lk_llm.LLM | None,
    budget_s: float | None = None,
) -> MemorySession:
    """The mode's service (GATED: the gatekeeper with its extraction model), the session's
    memory (look-ups, the write journal, the profile) and, if on, the conversation archive
    with its summaries, all listening to `session`. `store` may be an `UnavailableStore`;
    `budget_s`: how long a reply waits for memory (default `MEMORY_BUDGET_MS`)."""
    gated = settings.mode is MemoryMode.GATED and memory_llm is not None
    gatekeeper = Gatekeeper(memory_llm, learned=settings.gate_model) if gated else None
    service = MemoryService(store, settings, gatekeeper=gatekeeper, retriever=retriever)
    memory = MemorySession(service, user_id=user_id, session_id=session_id, budget_s=budget_s)
    memory.attach(session)
    if settings.archive:  # both sides archived, long talks summarised (docs/archive.md)
        ArchiveSession(memory, summarizer=summarizer).attach(session)
    return memory
