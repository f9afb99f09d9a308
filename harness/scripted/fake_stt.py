"""A speech-to-text that hears exactly what a test tells it, on LiveKit's public STT base.

Tests say what the user said; the session's own endpointing and turn handling then run
as in production, without audio or a network.
"""

from __future__ import annotations

import asyncio
import time

from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
    stt,
)
from livekit.agents.utils import AudioBuffer

from harness.guards import HANG_GUARD_S

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

    async def wait_for_stream(self, timeout: float = HANG_GUARD_S) -> ScriptedRecognizeStream:
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
