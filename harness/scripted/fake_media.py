"""The session's sound and text ends: a TTS of a few milliseconds of silence, an audio
input that is silent, an audio output that plays instantly, a text output that records.

They let a real `AgentSession` run its whole turn at test speed.
"""

from __future__ import annotations

import asyncio
import time

from livekit import rtc
from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    APIConnectOptions,
    tts,
    utils,
)
from livekit.agents.voice.io import (
    AudioInput,
    AudioOutput,
    AudioOutputCapabilities,
    TextOutput,
)

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
