"""Small scripted fakes built on LiveKit's public plugin base classes.

They let a real ``AgentSession`` run offline and fast: the STT says exactly what a
test tells it to, the LLM records every request it gets, the TTS returns a few
milliseconds of silence, and the audio sink "plays" instantly.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from livekit import rtc
from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
    llm,
    stt,
    tts,
    utils,
)
from livekit.agents.utils import AudioBuffer
from livekit.agents.voice.io import (
    AudioInput,
    AudioOutput,
    AudioOutputCapabilities,
    TextOutput,
)

SpeechEventType = stt.SpeechEventType

# --------------------------------------------------------------------------- STT


class ScriptedSTT(stt.STT):
    """Streaming STT whose transcripts come from the test, not from the audio.

    The session opens one long-lived stream at activity start; ``speak`` writes a
    whole user utterance (start, interims, optional preflight, final, end) into the
    stream that is currently open.
    """

    def __init__(self, *, language: str = "en") -> None:
        # manual_flush: like providers with a "finalize" message, a flush is answered with a
        # final transcript; the session flushes on close and waits for that answer
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=True, manual_flush=True))
        self._language = language
        self._streams: list[ScriptedRecognizeStream] = []
        self._stream_opened = asyncio.Event()
        self.emitted: list[tuple[stt.SpeechEventType, float, str]] = []
        """Every event written by ``speak``: (type, perf_counter time, text)."""

    @property
    def provider(self) -> str:
        return "harness"

    async def _recognize_impl(
        self,
        buffer: AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        raise NotImplementedError("ScriptedSTT is streaming-only; batch recognition is unused")

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> ScriptedRecognizeStream:
        s = ScriptedRecognizeStream(stt=self, conn_options=conn_options, language=self._language)
        self._streams.append(s)
        self._stream_opened.set()
        return s

    @property
    def open_stream(self) -> ScriptedRecognizeStream | None:
        """The most recent stream that can still deliver events."""
        for s in reversed(self._streams):
            if not s.closed:
                return s
        return None

    async def wait_for_stream(self, timeout: float = 5.0) -> ScriptedRecognizeStream:
        """Wait until the session has opened a stream (it does so at agent start)."""

        async def _wait() -> ScriptedRecognizeStream:
            while (s := self.open_stream) is None:
                self._stream_opened.clear()
                await self._stream_opened.wait()
            return s

        try:
            return await asyncio.wait_for(_wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"the session did not open an STT stream within {timeout}s") from None

    async def speak(
        self,
        final: str,
        interims: list[str] | None = None,
        interim_gap: float = 0.03,
        *,
        preflight: bool = False,
    ) -> None:
        """Emit one user utterance on the open stream.

        Order: START_OF_SPEECH, each INTERIM (``interim_gap`` apart), optionally a
        PREFLIGHT_TRANSCRIPT of the final text (what Deepgram Flux-like STTs send and
        what triggers preemptive generation in ``turn_detection="stt"`` mode),
        FINAL_TRANSCRIPT, END_OF_SPEECH.
        """
        stream = await self.wait_for_stream()
        self._emit(stream, SpeechEventType.START_OF_SPEECH)
        for text in interims or []:
            await asyncio.sleep(interim_gap)
            self._emit(stream, SpeechEventType.INTERIM_TRANSCRIPT, text)
        if preflight:
            await asyncio.sleep(interim_gap)
            self._emit(stream, SpeechEventType.PREFLIGHT_TRANSCRIPT, final)
        await asyncio.sleep(interim_gap)
        self._emit(stream, SpeechEventType.FINAL_TRANSCRIPT, final)
        self._emit(stream, SpeechEventType.END_OF_SPEECH)

    async def speak_segments(self, segments: list[str], gap: float = 0.03) -> None:
        """One utterance with pauses in it: each segment as an INTERIM then its own
        FINAL (as streaming STTs send a turn the user pauses in), then END_OF_SPEECH."""
        stream = await self.wait_for_stream()
        self._emit(stream, SpeechEventType.START_OF_SPEECH)
        for text in segments:
            await asyncio.sleep(gap)
            self._emit(stream, SpeechEventType.INTERIM_TRANSCRIPT, text)
            await asyncio.sleep(gap)
            self._emit(stream, SpeechEventType.FINAL_TRANSCRIPT, text)
        self._emit(stream, SpeechEventType.END_OF_SPEECH)

    def _emit(self, stream: ScriptedRecognizeStream, kind: stt.SpeechEventType, text: str = "") -> None:
        stream.send(_event(kind, text, self._language))
        self.emitted.append((kind, time.perf_counter(), text))


_TRANSCRIPTS = (
    SpeechEventType.INTERIM_TRANSCRIPT,
    SpeechEventType.PREFLIGHT_TRANSCRIPT,
    SpeechEventType.FINAL_TRANSCRIPT,
)


def _event(kind: stt.SpeechEventType, text: str, language: str) -> stt.SpeechEvent:
    if kind not in _TRANSCRIPTS:
        return stt.SpeechEvent(type=kind)
    alt = stt.SpeechData(language=language, text=text, confidence=1.0)
    return stt.SpeechEvent(type=kind, alternatives=[alt])


class ScriptedRecognizeStream(stt.RecognizeStream):
    """Ignores the audio; events are injected by ``ScriptedSTT.speak``.

    A flush (end of a segment) is answered with an empty final transcript, since
    nothing unscripted was heard.
    """

    def __init__(self, *, stt: ScriptedSTT, conn_options: APIConnectOptions, language: str) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self._language = language

    async def _run(self) -> None:
        async for data in self._input_ch:
            if isinstance(data, self._FlushSentinel) and not self.closed:
                final = _event(SpeechEventType.FINAL_TRANSCRIPT, "", self._language)
                self._event_ch.send_nowait(final)

    @property
    def closed(self) -> bool:
        return self._event_ch.closed

    def send(self, ev: stt.SpeechEvent) -> None:
        if self.closed:
            raise RuntimeError("the STT stream is closed (session closed?)")
        self._event_ch.send_nowait(ev)


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
        from memory.livekit.session import MEMORY_ROLE

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


# --------------------------------------------------------------------------- TTS


class FakeTTS(tts.TTS):
    """Non-streaming TTS returning ``duration`` seconds of silence for any text.

    The session wraps it in a sentence-tokenizing ``tts.StreamAdapter`` (see
    ``Agent.default.tts_node``), which is the path most non-streaming plugins take.
    """

    def __init__(self, *, sample_rate: int = 24000, duration: float = 0.03) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self.duration = duration
        self.texts: list[str] = []

    @property
    def provider(self) -> str:
        return "harness"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        self.texts.append(text)
        return _SilentChunkedStream(tts=self, input_text=text, conn_options=conn_options)


class _SilentChunkedStream(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake = self._tts
        assert isinstance(fake, FakeTTS)
        output_emitter.initialize(
            request_id=utils.shortuuid("tts_"),
            sample_rate=fake.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        output_emitter.push(b"\x00\x00" * int(fake.sample_rate * fake.duration))
        output_emitter.flush()


# --------------------------------------------------------------------------- audio/text IO


class SilentAudioInput(AudioInput):
    """Microphone stand-in: yields silent frames only when asked to, ends on close.

    The STT ignores audio, so this exists to keep the session's audio path (forwarding
    task, STT input) in the same shape as production without a busy loop.
    """

    def __init__(self, *, sample_rate: int = 16000) -> None:
        super().__init__(label="harness-mic")
        self._sample_rate = sample_rate
        self._ch = utils.aio.Chan[rtc.AudioFrame]()

    async def __anext__(self) -> rtc.AudioFrame:
        try:
            return await self._ch.recv()
        except utils.aio.ChanClosed:
            raise StopAsyncIteration from None

    def push_silence(self, seconds: float = 0.02) -> None:
        if self._ch.closed:
            return
        n = int(self._sample_rate * seconds)
        self._ch.send_nowait(
            rtc.AudioFrame(
                data=b"\x00\x00" * n,
                sample_rate=self._sample_rate,
                num_channels=1,
                samples_per_channel=n,
            )
        )

    def close(self) -> None:
        self._ch.close()


class InstantAudioOutput(AudioOutput):
    """Speaker stand-in that finishes playout as soon as a segment is flushed.

    The session only needs playback_started (first frame) and playback_finished
    (after flush or clear_buffer) to move the agent from speaking back to listening.
    """

    def __init__(self) -> None:
        # pause=True like real room/console sinks, so the session keeps its default
        # false-interruption handling instead of warning and disabling it
        super().__init__(label="harness-speaker", capabilities=AudioOutputCapabilities(pause=True))
        self.paused = False
        self._segment_open = False
        self._pushed = 0.0
        self.played: list[tuple[float, bool]] = []
        """(seconds of audio, interrupted) per finished segment."""

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self._segment_open:
            self._segment_open = True
            self._pushed = 0.0
            self.on_playback_started(created_at=time.time())
        self._pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        if self._segment_open:
            self._finish(interrupted=False, defer=True)

    def clear_buffer(self) -> None:
        if self._segment_open:
            self._finish(interrupted=True, defer=False)

    def pause(self) -> None:
        self.paused = True  # nothing is ever buffered, so there is nothing to hold back

    def resume(self) -> None:
        self.paused = False

    def _finish(self, *, interrupted: bool, defer: bool) -> None:
        position = self._pushed
        self._segment_open = False
        self._pushed = 0.0
        self.played.append((position, interrupted))

        def _done() -> None:
            self.on_playback_finished(playback_position=position, interrupted=interrupted)

        if defer:  # like a real sink: playout completes after flush() returns
            asyncio.get_running_loop().call_soon(_done)
        else:
            _done()


class RecordingTextOutput(TextOutput):
    """Collects the agent transcript that would be sent to the room, one entry per segment."""

    def __init__(self) -> None:
        super().__init__(label="harness-transcript", next_in_chain=None)
        self._buf: list[str] = []
        self.segments: list[str] = []

    async def capture_text(self, text: str) -> None:
        self._buf.append(text)

    def flush(self) -> None:
        if self._buf:
            self.segments.append("".join(self._buf))
            self._buf = []
