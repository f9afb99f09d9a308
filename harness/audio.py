"""Speech in, audio out, on the wall clock: a microphone that plays the fixtures at
real time with silence between, and a speaker that notes when each reply's first
frame arrives."""

from __future__ import annotations

import asyncio
import json
import time
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from livekit import rtc
from livekit.agents.voice.io import AudioInput, AudioOutput, AudioOutputCapabilities

SPEECH_DIR = Path(__file__).parent / "speech"
SAMPLE_RATE = 16_000
FRAME_S = 0.01  # 10 ms frames, as LiveKit's room input delivers them
_FRAME_SAMPLES = int(SAMPLE_RATE * FRAME_S)
# Silero reads 512-sample windows (32 ms). An utterance that starts at another phase of
# that grid is cut into other windows, and its end of speech is seen up to a window
# earlier or later: noise of a few tens of milliseconds between two runs of the same
# turn, larger than the effects bench.latency.run looks for. Utterances start on a multiple
# of 2,560 samples (160 ms: 16 frames of 10 ms, 5 windows) from the first frame.
ALIGN_SAMPLES = 2560


@dataclass(frozen=True)
class Utterance:
    """One fixture: the words, and their audio (16 kHz mono 16-bit PCM, speech only)."""

    key: str
    text: str
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / SAMPLE_RATE


def load_utterances() -> dict[str, Utterance]:
    """Every fixture in `harness/speech/manifest.json`, by file stem."""
    manifest = json.loads((SPEECH_DIR / "manifest.json").read_text(encoding="utf-8"))
    out = {}
    for entry in manifest:
        with wave.open(str(SPEECH_DIR / entry["file"])) as w:
            assert w.getframerate() == SAMPLE_RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
            key = Path(entry["file"]).stem
            out[key] = Utterance(key, entry["text"], w.readframes(w.getnframes()))
    return out


@dataclass
class _Playing:
    utterance: Utterance
    offset: int = 0  # bytes sent
    ended: asyncio.Future[float] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class SpeechInput(AudioInput):
    """A microphone: 10 ms frames at the wall clock's pace, silence unless an utterance
    is playing. `say` returns once its last frame has been taken by the session, with
    that moment (perf_counter): the end of the user's speech."""

    def __init__(self) -> None:
        super().__init__(label="harness-speech")
        self._queue: list[_Playing] = []
        self._next_due: float | None = None
        self._closed = False
        self._silence = b"\x00\x00" * _FRAME_SAMPLES
        self._emitted = 0  # samples handed to the session

    async def say(self, utterance: Utterance) -> float:
        playing = _Playing(utterance)
        self._queue.append(playing)
        return await playing.ended

    def close(self) -> None:
        self._closed = True

    async def __anext__(self) -> rtc.AudioFrame:
        if self._closed:
            raise StopAsyncIteration
        now = time.perf_counter()
        if self._next_due is None or now - self._next_due > 0.2:  # first frame, or the loop was away: no burst
            self._next_due = now
        delay = self._next_due - now
        if delay > 0:
            await asyncio.sleep(delay)
        if self._closed:
            raise StopAsyncIteration
        self._next_due += FRAME_S
        data = self._silence
        starting = bool(self._queue) and self._queue[0].offset == 0
        if self._queue and not (starting and self._emitted % ALIGN_SAMPLES):
            playing = self._queue[0]
            chunk = playing.utterance.pcm[playing.offset : playing.offset + 2 * _FRAME_SAMPLES]
            playing.offset += len(chunk)
            data = chunk + self._silence[len(chunk) :]
            if playing.offset >= len(playing.utterance.pcm):
                self._queue.pop(0)
                # The frame is returned now: its end is the end of speech, FRAME_S from now.
                end = time.perf_counter() + FRAME_S * len(chunk) / len(self._silence)
                if not playing.ended.done():
                    playing.ended.set_result(end)
        self._emitted += _FRAME_SAMPLES
        return rtc.AudioFrame(data=data, sample_rate=SAMPLE_RATE, num_channels=1, samples_per_channel=_FRAME_SAMPLES)


class TimedAudioOutput(AudioOutput):
    """A speaker that notes when each reply's first frame arrives (perf_counter) and
    plays it out at once, so the next turn need not wait for the reply's length.

    A test that asserts what happens while a reply plays sets `before_first_frame` (awaited
    before a reply's first frame is taken) and `before_played` (awaited before the end of a
    reply is reported): the reply then starts and ends on the test's events, not on how fast
    a busy machine gets to them."""

    def __init__(self) -> None:
        super().__init__(label="harness-speaker", capabilities=AudioOutputCapabilities(pause=True))
        self.first_frames: list[float] = []
        self.before_first_frame: Callable[[], Awaitable[None]] | None = None
        self.before_played: Callable[[], Awaitable[None]] | None = None
        self._open = False
        self._pushed = 0.0
        self._first_frame_event = asyncio.Event()
        self._gated: set[asyncio.Future[None]] = set()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        if not self._open and self.before_first_frame is not None:
            await self.before_first_frame()
        await super().capture_frame(frame)
        if not self._open:
            self._open = True
            self._pushed = 0.0
            self.first_frames.append(time.perf_counter())
            self._first_frame_event.set()
            self.on_playback_started(created_at=time.time())
        self._pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        if self._open:
            self._finish(interrupted=False)

    def clear_buffer(self) -> None:
        if self._open:
            self._finish(interrupted=True)

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def _finish(self, *, interrupted: bool) -> None:
        position, self._open, self._pushed = self._pushed, False, 0.0
        gate = self.before_played
        if gate is None:
            asyncio.get_running_loop().call_soon(
                lambda: self.on_playback_finished(playback_position=position, interrupted=interrupted)
            )
            return

        async def finished() -> None:
            await gate()
            self.on_playback_finished(playback_position=position, interrupted=interrupted)

        self._gated.add(task := asyncio.ensure_future(finished()))
        task.add_done_callback(self._gated.discard)
