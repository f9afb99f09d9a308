"""`memory.attach`'s LiveKit side: memory given to every agent a session runs, closed with
the session and with the job. Public LiveKit surface only, except the one door that
activates an agent (`memory/livekit/private.py`)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

from livekit.agents import AgentSession, get_job_context
from livekit.agents import llm as lk_llm

from memory.livekit import private
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession


def job_id() -> str | None:
    """The LiveKit job's id, when running inside one: a session's memories carry it."""
    try:
        return get_job_context().job.id
    except Exception:  # noqa: BLE001 - not in a job (a test, a script, the text chat)
        return None


def shutdown_with_job(memory: MemorySession) -> None:
    try:
        ctx = get_job_context()
    except Exception:  # noqa: BLE001 - not in a job: the session's close drains memory
        return

    async def close(_reason: str = "") -> None:
        await memory.aclose()

    ctx.add_shutdown_callback(close)


def inject_into_agents(session: AgentSession, memory: MemorySession) -> None:
    """Each agent the session runs gets memory in its `llm_node` (the one place that sees
    every request, spoken or typed, inside LiveKit's preemptive generation): the agent's own
    node runs on a copy of the context with memory's blocks added, for that request only.
    Agents are reached as the session activates them (`start`, `update_agent`, a tool's
    hand-off all go through the door `private.on_activation` wraps), so an agent made
    anywhere, at any time, is covered. The product's own `MemoryAgent`s already inject: left alone."""
    if not private.on_activation(session, lambda agent: give_memory(agent, memory)):
        if isinstance(session, AgentSession):  # a LiveKit that moved it: say so, never recall nothing silently
            raise RuntimeError(
                "memory.attach cannot reach this LiveKit version's agents: make your agent a memory.MemoryAgent"
            )
        return  # a stand-in for a session (tests)
    try:
        current = session.current_agent
    except (RuntimeError, AttributeError):  # not started yet: reached when it starts
        current = None
    if current is not None:
        give_memory(current, memory)


def give_memory(agent: Any, memory: MemorySession) -> None:
    if isinstance(agent, MemoryAgent) or getattr(agent, "_memory_session", None) is not None:
        return
    node = agent.llm_node  # the agent's own (its class's override, or LiveKit's default)

    async def llm_node(chat_ctx: Any, tools: Any, model_settings: Any) -> AsyncIterator[Any]:
        ctx = await memory.prepare_chat_ctx(chat_ctx)
        result = node(ctx, tools, model_settings)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return
        if isinstance(result, str | lk_llm.ChatChunk):
            yield result
            return
        async for chunk in result:
            yield chunk

    agent._memory_session = memory
    agent.llm_node = llm_node


def close_with_session(session: AgentSession, memory: MemorySession) -> None:
    tasks: set[asyncio.Task[None]] = set()

    def on_close(_ev: Any) -> None:
        task = asyncio.ensure_future(memory.aclose())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    session.on("close", on_close)


def plain_llm(model: Any) -> lk_llm.LLM | None:
    """`model` if it is a LiveKit LLM (not a realtime model, not a stand-in), else None."""
    return model if isinstance(model, lk_llm.LLM) else None
