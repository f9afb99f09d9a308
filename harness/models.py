"""A scripted LLM and TTS on LiveKit's base classes, with the delays of the real ones.

Defaults are of the shipped models as commonly measured from a server near OpenAI:
gpt-4.1-mini's time to first token about 0.4 s, gpt-4o-mini-tts's first audio about
0.2 s after its request. They matter to what memory adds to a reply only through
whether the reply is ready before the turn ends (docs/latency.md).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr, llm, tts, utils

LLM_TTFT_S = 0.4
TTS_FIRST_AUDIO_S = 0.2


@dataclass
class LLMRequest:
    """One `chat()` call: when it came, and the (role, text) of each message it carried."""

    arrived_at: float
    messages: list[tuple[str, str]]

    def memory_block(self, tag: str) -> str:
        """The memory block (a message in memory's role) that starts with `<tag>`, or ""."""
        from memory.livekit.session import MEMORY_ROLE

        return next((text for role, text in self.messages if role == MEMORY_ROLE and text.startswith(f"<{tag}>")), "")


Responder = Callable[[LLMRequest], str | Awaitable[str]]


class ScriptedLLM(llm.LLM):
    """Records every request; answers after `ttft` with the responder's words."""

    def __init__(self, respond: Responder | None = None, *, ttft: float = LLM_TTFT_S) -> None:
        super().__init__()
        self._respond: Responder = respond or (lambda _req: "Sure, happy to help.")
        self.ttft = ttft
        self.requests: list[LLMRequest] = []

    @property
    def model(self) -> str:
        return "scripted-llm"

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
    ) -> _Stream:
        request = LLMRequest(time.perf_counter(), [(m.role, m.text_content or "") for m in chat_ctx.messages()])
        self.requests.append(request)
        return _Stream(self, request, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _Stream(llm.LLMStream):
    def __init__(self, owner: ScriptedLLM, request: LLMRequest, **kwargs: Any) -> None:
        super().__init__(owner, **kwargs)
        self._owner = owner
        self._request = request

    async def _run(self) -> None:
        await asyncio.sleep(self._owner.ttft)
        reply = self._owner._respond(self._request)
        text = await reply if inspect.isawaitable(reply) else reply
        rid = utils.shortuuid("req_")
        words = text.split(" ")
        for i, word in enumerate(words):
            content = word if i == len(words) - 1 else word + " "
            self._event_ch.send_nowait(llm.ChatChunk(id=rid, delta=llm.ChoiceDelta(role="assistant", content=content)))


class TimedTTS(tts.TTS):
    """Non-streaming, as openai.TTS is to LiveKit's session (it is wrapped in a sentence
    StreamAdapter): `first_audio` after each request, then `seconds` of quiet audio."""

    def __init__(
        self, *, first_audio: float = TTS_FIRST_AUDIO_S, seconds: float = 0.1, sample_rate: int = 24_000
    ) -> None:
        super().__init__(capabilities=tts.TTSCapabilities(streaming=False), sample_rate=sample_rate, num_channels=1)
        self.first_audio = first_audio
        self.seconds = seconds

    @property
    def provider(self) -> str:
        return "harness"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _Chunked(tts=self, input_text=text, conn_options=conn_options)


class _Chunked(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner = self._tts
        assert isinstance(owner, TimedTTS)
        await asyncio.sleep(owner.first_audio)
        output_emitter.initialize(
            request_id=utils.shortuuid("tts_"), sample_rate=owner.sample_rate, num_channels=1, mime_type="audio/pcm"
        )
        output_emitter.push(b"\x01\x00" * int(owner.sample_rate * owner.seconds))
        output_emitter.flush()
