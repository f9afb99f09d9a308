"""An LLM that records every request and answers from a script, on LiveKit's public LLM base.

What memory injected into a request is what the tests assert on, so each request is kept
as the model would have seen it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
    llm,
    utils,
)

# --------------------------------------------------------------------------- LLM


@dataclass
class LLMRequest:
    """One ``chat()`` call as the provider would have received it."""

    arrived_at: float
    """time.perf_counter() when chat() was called."""
    messages: list[tuple[str, str]]
    """(role, text) of every ChatMessage in the context, in order."""
    chat_ctx: llm.ChatContext
    """Deep copy of the context, so later mutation by the framework can't rewrite history."""
    tools: list[llm.Tool] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Any extra keyword arguments (tool_choice, response_format, ...)."""

    @property
    def last_message(self) -> tuple[str, str] | None:
        return self.messages[-1] if self.messages else None

    def memory_block(self, tag: str) -> str:
        """The memory block (a message in memory's role) that starts with `<tag>`, or ""."""
        from memory.livekit.blocks import MEMORY_ROLE

        return next((text for role, text in self.messages if role == MEMORY_ROLE and text.startswith(f"<{tag}>")), "")


@dataclass(frozen=True)
class ToolCall:
    """A scripted reply that calls a function tool instead of answering in words."""

    name: str
    arguments: str = "{}"


Responder = Callable[[LLMRequest], str | ToolCall | Awaitable[str | ToolCall]]


def _snapshot(chat_ctx: llm.ChatContext) -> llm.ChatContext:
    try:
        return llm.ChatContext([item.model_copy(deep=True) for item in chat_ctx.items])
    except Exception:  # exotic content (e.g. live video frames) that won't deep-copy
        return chat_ctx.copy()


class RecordingLLM(llm.LLM):
    """LLM that records each request and streams a scripted text reply.

    Works both inside a session (via ``Agent.default.llm_node``) and standalone, e.g.
    ``async with rec.chat(chat_ctx=ctx) as s: text = "".join(...)`` or
    ``(await rec.chat(chat_ctx=ctx).collect()).text``.
    """

    def __init__(self, respond: Responder | None = None, *, ttft: float = 0.0, keep_context: bool = True) -> None:
        """`keep_context=False` records each request's messages as text but not a copy of
        its context: a long session (a benchmark) would otherwise hold turns² messages."""
        super().__init__()
        self._respond: Responder = respond or (lambda _req: "ok")
        self.ttft = ttft
        self.keep_context = keep_context
        self.requests: list[LLMRequest] = []

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def model(self) -> str:
        return "recording-llm"

    @property
    def provider(self) -> str:
        return "harness"

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
        **kwargs: Any,
    ) -> RecordingLLMStream:
        extra = {
            k: v
            for k, v in {
                "parallel_tool_calls": parallel_tool_calls,
                "tool_choice": tool_choice,
                "extra_kwargs": extra_kwargs,
            }.items()
            if utils.is_given(v)
        }
        request = LLMRequest(
            arrived_at=time.perf_counter(),
            messages=[(m.role, m.text_content or "") for m in chat_ctx.messages()],
            chat_ctx=_snapshot(chat_ctx) if self.keep_context else llm.ChatContext.empty(),
            tools=list(tools or []),
            kwargs={**extra, **kwargs},
        )
        self.requests.append(request)
        return RecordingLLMStream(
            self, request=request, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options
        )

    async def _reply_for(self, request: LLMRequest) -> str | ToolCall:
        reply = self._respond(request)
        return await reply if inspect.isawaitable(reply) else reply


class RecordingLLMStream(llm.LLMStream):
    def __init__(
        self,
        rec: RecordingLLM,
        *,
        request: LLMRequest,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        conn_options: APIConnectOptions,
    ) -> None:
        super().__init__(rec, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        self._rec = rec
        self._request = request

    async def _run(self) -> None:
        if self._rec.ttft > 0:
            await asyncio.sleep(self._rec.ttft)
        text = await self._rec._reply_for(self._request)
        request_id = utils.shortuuid("req_")
        if isinstance(text, ToolCall):
            call = llm.FunctionToolCall(name=text.name, arguments=text.arguments, call_id=utils.shortuuid("call_"))
            self._event_ch.send_nowait(
                llm.ChatChunk(id=request_id, delta=llm.ChoiceDelta(role="assistant", tool_calls=[call]))
            )
            return
        # a few chunks, like a real provider, so streaming consumers are exercised
        words = text.split(" ")
        for i, word in enumerate(words):
            content = word if i == len(words) - 1 else word + " "
            if content:
                delta = llm.ChoiceDelta(role="assistant", content=content)
                self._event_ch.send_nowait(llm.ChatChunk(id=request_id, delta=delta))
