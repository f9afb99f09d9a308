"""`PipelineHarness`: the session `agent.build_session` builds, or the whole
`agent.entrypoint` in a fake job, with the cloud plugins swapped for the fakes and a
microphone and speaker in place of the room's tracks.

Waits are on session events with one generous timeout per step (never a sleep); a
timeout fails with what was seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from livekit.agents import Agent, AgentSession
from livekit.agents.voice.io import TextOutput

from harness.guards import HANG_GUARD_S

from .audio import SpeechInput, TimedAudioOutput, Utterance
from .models import TimedTTS, scripted_llm
from .scripted.fake_llm import LLMRequest, RecordingLLM
from .stt import BatchSTT, RealtimeSTT

SttKind = Literal["realtime", "batch"]


@dataclass
class SpokenTurn:
    """One spoken user turn and the reply it got."""

    text: str
    end_of_speech: float  # perf_counter of the last frame of speech
    first_audio: float | None  # perf_counter of the reply's first audio frame
    requests: list[LLMRequest]
    committed: str = ""  # the user message LiveKit added to the conversation
    committed_at: float | None = None  # perf_counter when LiveKit added it (the turn's end)

    @property
    def first_audio_s(self) -> float | None:
        """End of the user's speech to the reply's first audio frame: what a caller hears."""
        return None if self.first_audio is None else self.first_audio - self.end_of_speech


@dataclass
class StubParticipant:
    """The remote participant `ctx.wait_for_participant()` returns (no LiveKit server)."""

    identity: str
    attributes: dict[str, str] = field(default_factory=dict)


class _Transcript(TextOutput):
    def __init__(self) -> None:
        super().__init__(label="harness-transcript", next_in_chain=None)

    async def capture_text(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


def memory_parts() -> dict[str, Any]:
    """What `memory.warm_up` made in this process (agent.prewarm's memory: the settings, the
    store, the retriever), in the form `PipelineHarness.entrypoint` takes."""
    from memory.api import runtime

    made = runtime()
    assert made is not None, "memory.warm_up() (agent.prewarm) has not run in this process"
    return {"settings": made.settings, "store": made.store, "retriever": made.retriever}


class PipelineHarness:
    def __init__(
        self,
        stt_kind: SttKind = "realtime",
        *,
        vad: Any = None,
        llm: RecordingLLM | None = None,
        tts: TimedTTS | None = None,
        stt: RealtimeSTT | BatchSTT | None = None,
        timeout: float = HANG_GUARD_S,
    ) -> None:
        from livekit.plugins import silero

        import agent  # the shipped wiring (imported here: it reads the environment)

        self.vad = vad or silero.VAD.load()
        self.stt = stt or (RealtimeSTT(self.vad) if stt_kind == "realtime" else BatchSTT())
        self.llm = llm or scripted_llm()
        self.tts = tts or TimedTTS()
        self.plugins = agent.Plugins(stt=self.stt, llm=self.llm, tts=self.tts)
        self.mic = SpeechInput()
        self.speaker = TimedAudioOutput()
        self.timeout = timeout
        self.session: AgentSession | None = None
        self.agent_state = "initializing"
        self.user_items: list[str] = []
        self.user_item_times: list[float] = []
        self._changed = asyncio.Event()

    # ------------------------------------------------------------ building
    def build(self) -> AgentSession:
        """The shipped session (agent.build_session) with the harness's IO."""
        import agent

        return self.attach(agent.build_session(self.vad, self.plugins))

    def attach(self, session: AgentSession) -> AgentSession:
        """Put the microphone and speaker where the room's tracks would be; RoomIO then
        leaves audio to them (as it does for any IO set before `start`)."""
        session.input.audio = self.mic
        session.output.audio = self.speaker
        session.output.transcription = _Transcript()
        session.on("agent_state_changed", self._on_state)
        session.on("conversation_item_added", self._on_item)
        self.session = session
        return session

    def _on_state(self, ev: Any) -> None:
        self.agent_state = ev.new_state
        self._changed.set()

    def _on_item(self, ev: Any) -> None:
        if getattr(ev.item, "role", None) == "user":
            self.user_items.append(ev.item.text_content or "")
            self.user_item_times.append(time.perf_counter())
            self._changed.set()

    async def start(self, agent_: Agent) -> None:
        """Start the session built by `build` (the bench's way in; tests run the entrypoint)."""
        assert self.session is not None
        await self.session.start(agent_)

    @contextlib.asynccontextmanager
    async def entrypoint(
        self, userdata: dict[str, Any], *, user_id: str, job_id: str = "harness-job"
    ) -> AsyncIterator[Any]:
        """Run `agent.entrypoint` in LiveKit's fake job context; yields the JobContext.
        `userdata` is the memory the job uses (settings, store, retriever: made this
        process's memory runtime, as `memory.warm_up` makes it in a worker); the harness adds
        its VAD and plugins. On exit the job's shutdown callbacks run, as LiveKit runs them."""
        from livekit.agents.testing import fake_job_context

        import agent
        from harness.room import UnconnectedRoom
        from memory import api

        before = api.runtime()
        api.use(userdata["settings"], userdata["store"], userdata.get("retriever"))

        real_build = agent.build_session
        # The worker registers its form RPC on the job room's local participant, the
        # stand-in, where a test can invoke it (`self.rpc_room.local_participant`).
        room = UnconnectedRoom()
        self.rpc_room = room

        def build_with_io(vad: Any, plugins: Any) -> AgentSession:
            return self.attach(real_build(vad, plugins))

        agent.build_session = build_with_io
        try:
            with fake_job_context(room=room, job_id=job_id) as ctx:
                ctx.proc.userdata.update(userdata, vad=self.vad, plugins=self.plugins)

                async def wait_for_participant(**_kw: Any) -> StubParticipant:
                    return StubParticipant(user_id)

                ctx.wait_for_participant = wait_for_participant
                await asyncio.wait_for(agent.entrypoint(ctx), self.timeout)
                try:
                    yield ctx
                finally:
                    await asyncio.gather(*(cb("harness done") for cb in ctx._shutdown_callbacks))
                    if self.session is not None:
                        await asyncio.wait_for(self.session.aclose(), self.timeout)
                    self.mic.close()
        finally:
            agent.build_session = real_build
            if before is not None:
                api.use(before.settings, before.store, before.retriever)
            else:
                api.forget_runtime()

    # ------------------------------------------------------------ driving
    async def _until(self, cond: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not cond():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {self.timeout} s waiting for {what} (agent {self.agent_state})")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.05))

    async def idle(self) -> None:
        """Until the agent is listening with nothing to say (a greeting has played)."""

        def quiet() -> bool:
            speech = self.session.current_speech if self.session is not None else None
            return self.agent_state == "listening" and (speech is None or speech.done())

        await self._until(quiet, "the agent to listen")

    async def greeted(self) -> None:
        """Until the session's greeting has played (its first audio frame, then quiet)."""
        await self._until(lambda: bool(self.speaker.first_frames), "the greeting")
        await self.idle()

    async def say(self, utterance: Utterance) -> SpokenTurn:
        """Speak one utterance into the microphone; return once its reply has played."""
        await self.idle()
        n_req, n_audio, n_items = len(self.llm.requests), len(self.speaker.first_frames), len(self.user_items)
        self.stt.expect(utterance)
        eos = await asyncio.wait_for(self.mic.say(utterance), self.timeout + utterance.seconds)
        await self._until(lambda: len(self.user_items) > n_items, f"{utterance.text!r} to be committed")
        await self._until(lambda: len(self.speaker.first_frames) > n_audio, f"a reply to {utterance.text!r}")
        await self.idle()
        # the reply's: the first frame after the end of speech
        first = next((t for t in self.speaker.first_frames[n_audio:] if t > eos), None)
        return SpokenTurn(
            utterance.text,
            eos,
            first,
            self.llm.requests[n_req:],
            " ".join(self.user_items[n_items:]),
            self.user_item_times[n_items] if len(self.user_item_times) > n_items else None,
        )
