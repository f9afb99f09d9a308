"""``VoiceHarness``: a real ``AgentSession`` driven by the scripted fakes, no room.

Everything waits on session events (never on sleeps), with one generous timeout
per step that fails the test with the events seen so far.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, NamedTuple

from livekit.agents import Agent, AgentSession, RunResult, TurnHandlingOptions
from livekit.agents.voice import SpeechHandle
from livekit.agents.voice.events import (
    AgentStateChangedEvent,
    ConversationItemAddedEvent,
    SpeechCreatedEvent,
    UserInputTranscribedEvent,
    UserStateChangedEvent,
)

from harness.guards import HANG_GUARD_S

from .fake_llm import LLMRequest, RecordingLLM
from .fake_media import FakeTTS, InstantAudioOutput, RecordingTextOutput, SilentAudioInput
from .fake_stt import ScriptedSTT, SpeechEventType


class HarnessEvent(NamedTuple):
    """(name, perf_counter time, payload) of one session event."""

    name: str
    at: float
    payload: dict[str, Any]


_Pred = Callable[[HarnessEvent], bool]


@dataclass
class TurnResult:
    """What happened between the start of a user turn and the end of the agent's reply."""

    requests: list[LLMRequest]
    """LLM requests that arrived during the turn (including discarded preemptive ones)."""
    reply: str | None
    """Text of the assistant message added to the conversation, if any."""
    speech_handles: list[SpeechHandle] = field(default_factory=list)
    """Every speech created during the turn (a discarded preemptive one included)."""
    events: list[HarnessEvent] = field(default_factory=list)


class VoiceHarness:
    """Async context manager running ``agent`` in an offline ``AgentSession``.

    ``turn_detection="stt"`` makes END_OF_SPEECH from ``ScriptedSTT`` end the user's
    turn (after ``min_endpointing_delay``), so no VAD or turn-detector model is needed.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        llm: RecordingLLM | None = None,
        stt: ScriptedSTT | None = None,
        tts: FakeTTS | None = None,
        preemptive_generation: bool = True,
        preflight: bool = False,
        min_endpointing_delay: float = 0.15,
        timeout: float = HANG_GUARD_S,
    ) -> None:
        """``preflight`` is the default for ``user_says``: set it to make every spoken
        turn go through preemptive generation (see ``ScriptedSTT.speak``)."""
        self.agent = agent
        self.preflight = preflight
        self.llm = llm or RecordingLLM()
        self.stt = stt or ScriptedSTT()
        self.tts = tts or FakeTTS()
        self.audio_input = SilentAudioInput()
        self.audio_output = InstantAudioOutput()
        self.text_output = RecordingTextOutput()
        self.timeout = timeout
        self.events: list[HarnessEvent] = []
        self._waiters: list[tuple[_Pred, asyncio.Future[HarnessEvent]]] = []
        self.session: AgentSession = AgentSession(
            stt=self.stt,
            llm=self.llm,
            tts=self.tts,
            vad=None,
            turn_handling=TurnHandlingOptions(
                turn_detection="stt",
                endpointing={"min_delay": min_endpointing_delay, "max_delay": 3.0},
                preemptive_generation={"enabled": preemptive_generation},
            ),
        )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> VoiceHarness:
        s = self.session
        s.input.audio = self.audio_input
        s.output.audio = self.audio_output
        s.output.transcription = self.text_output
        s.on("user_input_transcribed", self._on_transcribed)
        s.on("conversation_item_added", self._on_item)
        s.on("agent_state_changed", self._on_agent_state)
        s.on("user_state_changed", self._on_user_state)
        s.on("speech_created", self._on_speech_created)
        await s.start(self.agent)
        await self.stt.wait_for_stream(self.timeout)
        await self._wait_for_agent_state("listening", "agent to be listening after start")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await asyncio.wait_for(self.session.aclose(), self.timeout)
        finally:
            self.audio_input.close()
            for _, fut in self._waiters:
                fut.cancel()
            self._waiters.clear()

    # ------------------------------------------------------------------ driving

    async def user_says(
        self,
        text: str,
        interims: list[str] | None = None,
        *,
        interim_gap: float = 0.03,
        preflight: bool | None = None,
    ) -> TurnResult:
        """Speak one user turn and return once the agent's reply has played out.

        ``preflight=True`` also sends a PREFLIGHT_TRANSCRIPT, which is what starts
        preemptive generation in STT turn-detection mode (a FINAL that precedes
        END_OF_SPEECH does not). ``None`` uses the harness default.
        """
        if preflight is None:
            preflight = self.preflight
        start = len(self.events)
        n_requests = self.llm.count
        user_item = self._future(lambda e: e.name == "conversation_item_added" and e.payload["role"] == "user")
        self.audio_input.push_silence()
        await self.stt.speak(text, interims, interim_gap, preflight=preflight)
        await self._await(user_item, f"the user message {text!r} to be committed")
        return await self._finish_turn(start, n_requests)

    async def user_says_segments(self, segments: list[str], *, gap: float = 0.03) -> TurnResult:
        """Speak one user turn that STT delivers as several final segments."""
        start = len(self.events)
        n_requests = self.llm.count
        user_item = self._future(lambda e: e.name == "conversation_item_added" and e.payload["role"] == "user")
        self.audio_input.push_silence()
        await self.stt.speak_segments(segments, gap)
        await self._await(user_item, f"the user message {segments!r} to be committed")
        return await self._finish_turn(start, n_requests)

    async def user_says_after_preflight(self, preflight: str, final: str) -> TurnResult:
        """One spoken turn whose early (preflight) transcript differs from the final one:
        the preemptive reply for `preflight` is asked for first (this waits until its LLM
        request arrives), then the final words end the turn."""
        stream = await self.stt.wait_for_stream()
        start, asked = len(self.events), self.llm.count
        user_item = self._future(lambda e: e.name == "conversation_item_added" and e.payload["role"] == "user")
        self.audio_input.push_silence()
        self.stt._emit(stream, SpeechEventType.START_OF_SPEECH)
        self.stt._emit(stream, SpeechEventType.PREFLIGHT_TRANSCRIPT, preflight)
        request = asyncio.ensure_future(self._wait_for_requests(asked + 1))
        await self._await(request, f"the preemptive request for {preflight!r}")
        self.stt._emit(stream, SpeechEventType.FINAL_TRANSCRIPT, final)
        self.stt._emit(stream, SpeechEventType.END_OF_SPEECH)
        await self._await(user_item, f"the user message {final!r} to be committed")
        return await self._finish_turn(start, asked)

    async def _wait_for_requests(self, count: int) -> None:
        while self.llm.count < count:
            await asyncio.sleep(0.005)

    async def user_types(self, text: str) -> RunResult[None]:
        """Typed (text) input through ``session.run``; returns the finished run."""
        run = self.session.run(user_input=text)
        return await self._await(asyncio.ensure_future(_await_run(run)), f"run({text!r})")

    # ------------------------------------------------------------------ waiting

    async def _finish_turn(self, start: int, n_requests: int) -> TurnResult:
        handles = [e.payload["handle"] for e in self.events[start:] if e.name == "speech_created"]
        scheduled = [h for h in handles if h.scheduled]
        if not scheduled:
            raise AssertionError(f"no speech scheduled for the turn; events: {self._tail(start)}")
        for h in scheduled:
            await self._await(asyncio.ensure_future(h.wait_for_playout()), f"playout of {h.id}")
        await self._wait_for_agent_state("listening", "agent back to listening")
        turn_events = self.events[start:]
        replies = [
            e.payload["text"]
            for e in turn_events
            if e.name == "conversation_item_added" and e.payload["role"] == "assistant"
        ]
        return TurnResult(
            requests=self.llm.requests[n_requests:],
            reply=replies[-1] if replies else None,
            speech_handles=handles,
            events=turn_events,
        )

    async def _wait_for_agent_state(self, state: str, what: str) -> None:
        if self.session.agent_state == state:
            return
        fut = self._future(lambda e: e.name == "agent_state_changed" and e.payload["new"] == state)
        await self._await(fut, what)

    def _future(self, pred: _Pred) -> asyncio.Future[HarnessEvent]:
        fut: asyncio.Future[HarnessEvent] = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        return fut

    async def _await(self, fut: asyncio.Future[Any], what: str) -> Any:
        try:
            return await asyncio.wait_for(fut, self.timeout)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {self.timeout}s waiting for {what}; "
                f"agent_state={self.session.agent_state!r}, llm requests={self.llm.count}, "
                f"recent events: {self._tail(max(0, len(self.events) - 15))}"
            ) from None

    def _tail(self, start: int) -> list[tuple[str, dict[str, Any]]]:
        return [(e.name, {k: v for k, v in e.payload.items() if k != "handle"}) for e in self.events[start:]]

    # ------------------------------------------------------------------ event recording

    def _record(self, name: str, **payload: Any) -> None:
        ev = HarnessEvent(name, time.perf_counter(), payload)
        self.events.append(ev)
        for pred, fut in list(self._waiters):
            if fut.done():
                self._waiters.remove((pred, fut))
            elif pred(ev):
                fut.set_result(ev)
                self._waiters.remove((pred, fut))

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        self._record("user_input_transcribed", transcript=ev.transcript, is_final=ev.is_final)

    def _on_item(self, ev: ConversationItemAddedEvent) -> None:
        role = getattr(ev.item, "role", ev.item.type)
        text = getattr(ev.item, "text_content", None) or ""
        self._record("conversation_item_added", role=role, text=text)

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        self._record("agent_state_changed", old=ev.old_state, new=ev.new_state)

    def _on_user_state(self, ev: UserStateChangedEvent) -> None:
        self._record("user_state_changed", old=ev.old_state, new=ev.new_state)

    def _on_speech_created(self, ev: SpeechCreatedEvent) -> None:
        self._record("speech_created", source=ev.source, handle=ev.speech_handle)

    # ------------------------------------------------------------------ queries

    def events_named(self, name: str) -> list[HarnessEvent]:
        return [e for e in self.events if e.name == name]


async def _await_run(run: RunResult[None]) -> RunResult[None]:
    return await run
