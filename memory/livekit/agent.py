"""The agent whose every LLM request carries the user's relevant memories."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import Agent, ModelSettings, llm

from memory.livekit.blocks import Blocks
from memory.livekit.session import MemorySession
from memory.prompts import load_prompt


class MemoryAgent(Agent):
    """An `Agent` whose every LLM request carries the user's relevant memories."""

    def __init__(self, memory: MemorySession, *, instructions: str | None = None, **kwargs: Any) -> None:
        super().__init__(instructions=instructions or load_prompt("system"), **kwargs)
        self.memory = memory

    async def prepare_request(self, chat_ctx: llm.ChatContext) -> llm.ChatContext:
        """This request's copy of the context, with the memory blocks added (by the door,
        `memory/livekit/blocks.py`)."""
        return await self.memory.prepare_chat_ctx(chat_ctx, agent_blocks=self.add_blocks)

    def add_blocks(self, blocks: Blocks) -> None:
        """Agents that carry more (memory/working: forms, the shared context's id) hand
        their data to the door here; they never add a message themselves."""

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        ctx = await self.prepare_request(chat_ctx)
        async for chunk in Agent.default.llm_node(self, ctx, tools, model_settings):
            yield chunk
