"""Agents with working memory and shared contexts: the worker's agents derive from
`WorkingAgent`, so every one of them has the context tools and sees the forms.

The forms and the context's id are handed to the door (`memory/livekit/blocks.py`) for
each request in `llm_node`, never added to `turn_ctx` in `on_user_turn_completed`: that
would throw away a preemptive reply and ask the LLM twice (see memory/livekit/session.py).
"""

from __future__ import annotations

from typing import Any

from livekit.agents import function_tool
from livekit.agents.llm import ToolError

from memory.livekit.agent import MemoryAgent
from memory.livekit.blocks import Blocks, shared_context_text
from memory.prompts import load_prompt
from memory.storage.contexts import ContextError, SharedContext
from memory.working.workspace import Workspace


def context_block(ctx: SharedContext) -> str:
    """A context as the tools return it: its notes quoted by the door's one rule."""
    return shared_context_text(ctx.id, [(n.agent, n.at, n.text) for n in ctx.notes])


class WorkingAgent(MemoryAgent):
    """A `MemoryAgent` that also carries the session's forms and the shared context's id
    into every request, with the tools to create, read and extend shared contexts."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        role: str,
        context_id: str | None = None,
        handed_over: bool = False,
        **kwargs: Any,
    ) -> None:
        instructions = "\n\n".join((load_prompt("system"), load_prompt("working_agents"), load_prompt(role)))
        super().__init__(workspace.memory, instructions=instructions, **kwargs)
        self.workspace = workspace
        self.context_id = context_id  # handed over to the next agent at a hand-off
        self.handed_over = handed_over

    async def on_enter(self) -> None:
        if self.handed_over:  # the caller was passed on mid-call: the new agent speaks first
            self.session.generate_reply()

    def add_blocks(self, blocks: Blocks) -> None:
        self.workspace.add_blocks(blocks, self.context_id)

    # ------------------------------------------------------------------- tools
    @function_tool()
    async def create_context(self, note: str) -> str:
        """Start a shared context for the caller's case, with its first note (the key points
        the caller gave). Returns the new context's id. Use it once per case.

        Args:
            note: the key points so far, in a sentence or two.
        """
        try:
            self.context_id = await self.workspace.create_context(self.id, note)
        except ContextError as exc:
            raise ToolError(str(exc)) from None
        return f"created shared context {self.context_id}"

    @function_tool()
    async def fetch_context(self, context_id: str) -> str:
        """Read a shared context: every note the agents of this service took about the case.

        Args:
            context_id: the id of the shared context (ctx_...).
        """
        try:
            return context_block(await self.workspace.fetch_context(context_id))
        except ContextError as exc:
            raise ToolError(str(exc)) from None

    @function_tool()
    async def update_context(self, context_id: str, note: str) -> str:
        """Add a note to a shared context (stamped with your name and the time).

        Args:
            context_id: the id of the shared context (ctx_...).
            note: what was learned or decided, in a sentence or two.
        """
        try:
            ctx = await self.workspace.update_context(context_id, self.id, note)
        except ContextError as exc:
            raise ToolError(str(exc)) from None
        return f"added to {ctx.id} ({ctx.chars} of {self.workspace.settings.context_max_chars} characters used)"
