"""STT fakes that behave like the shipped `openai.STT` in each mode; only the words
are scripted (`expect`), the timing comes from the audio.

RealtimeSTT, as `openai.STT(use_realtime=True, vad=<the session's Silero>)` with a
live model: the Silero VAD on the audio it receives gives START/END_OF_SPEECH, each
word's delta comes `word_lag` after the word is spoken (words evenly spread over the
utterance), interims are throttled exactly as the plugin throttles them (its module
constant `_delta_transcript_interval`, which agent.py sets), and the final transcript
comes `final_delay` after the VAD's end of speech commits the audio.

BatchSTT, as `openai.STT(use_realtime=False)`: not streaming, so LiveKit's session
wraps it in its `StreamAdapter` with the session's VAD (START, END_OF_SPEECH, then one
FINAL); each recognition takes `transcription_delay` (the upload and transcription
round trip of a few seconds of speech).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from livekit import rtc
from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr, stt, vad
from livekit.agents.utils import AudioBuffer
from livekit.plugins.openai import stt as openai_stt

from .audio import Utterance

WORD_LAG_S = 0.3
FINAL_DELAY_S = 0.2
TRANSCRIPTION_DELAY_S = 0.4

_TRANSCRIPTS = (stt.SpeechEventType.INTERIM_TRANSCRIPT, stt.SpeechEventType.FINAL_TRANSCRIPT)


def _event(kind: stt.SpeechEventType, text: str = "", language: str = "en") -> stt.SpeechEvent:
    if kind not in _TRANSCRIPTS:
        return stt.SpeechEvent(type=kind)
    return stt.SpeechEvent(type=kind, alternatives=[stt.SpeechData(language=language, text=text, confidence=1.0)])


def _tokens(text: str) -> tuple[list[str], str]:
    """Words (or, without spaces, characters) and how they join back. Punctuation comes
    with the token before it, as a model's deltas carry it ("来着？", not "来着" then "？")."""
    if " " in text:
        return text.split(" "), " "
    tokens: list[str] = []
    for ch in text:
        if tokens and not ch.isalnum():
            tokens[-1] += ch
        else:
            tokens.append(ch)
    return tokens, ""


class RealtimeSTT(stt.STT):
    def __init__(
        self,
        vad_model: vad.VAD,
        *,
        word_lag: float = WORD_LAG_S,
        final_delay: float = FINAL_DELAY_S,
        language: str = "en",
    ) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=True))
        self.vad = vad_model
        self.word_lag = word_lag
        self.final_delay = final_delay
        self.language = language
        self.scripts: deque[Utterance] = deque()
        self.events: list[tuple[stt.SpeechEventType, float, str]] = []

    @property
    def provider(self) -> str:
        return "harness-realtime"

    def expect(self, utterance: Utterance) -> None:
        """The next utterance the audio will carry."""
        self.scripts.append(utterance)

    async def _recognize_impl(
        self, buffer: AudioBuffer, *, language: NotGivenOr[str] = NOT_GIVEN, conn_options: APIConnectOptions
    ) -> stt.SpeechEvent:
        raise NotImplementedError("streaming only, as the realtime plugin")

    def stream(
        self, *, language: NotGivenOr[str] = NOT_GIVEN, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> _RealtimeStream:
        return _RealtimeStream(stt=self, conn_options=conn_options)


class _RealtimeStream(stt.RecognizeStream):
    def __init__(self, *, stt: RealtimeSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self._owner = stt
        self._current: Utterance | None = None
        self._onset: float | None = None  # when its first voiced frame arrived
        self._tokens: list[str] = []
        self._joiner = ""
        self._committed = 0  # tokens already in a final transcript
        self._delta_text = ""
        self._last_interim_at = 0.0
        self._speaking = False
        self._timers: list[asyncio.TimerHandle] = []

    def _send(self, kind: stt.SpeechEventType, text: str = "") -> None:
        if not self._event_ch.closed:
            self._event_ch.send_nowait(_event(kind, text, self._owner.language))
            self._owner.events.append((kind, time.perf_counter(), text))

    def _spoken_at(self, i: int) -> float:
        """When token i has been said (words spread evenly over the utterance)."""
        assert self._onset is not None and self._current is not None
        return self._onset + (i + 1) / len(self._tokens) * self._current.seconds

    def _on_voice(self) -> None:
        """The first voiced frame of the next scripted utterance: schedule its deltas."""
        if not self._owner.scripts:
            return
        self._current = self._owner.scripts.popleft()
        self._onset = time.perf_counter()
        self._tokens, self._joiner = _tokens(self._current.text)
        self._committed = 0
        self._delta_text = ""
        loop = asyncio.get_running_loop()
        for i in range(len(self._tokens)):
            delay = self._spoken_at(i) + self._owner.word_lag - time.perf_counter()
            self._timers.append(loop.call_later(max(0.0, delay), self._delta, i))

    def _delta(self, i: int) -> None:
        # As the plugin: text accumulates from every delta; an interim goes out only when
        # `_delta_transcript_interval` has passed since the last one.
        self._delta_text = self._joiner.join(self._tokens[self._committed : i + 1])
        if time.time() - self._last_interim_at > openai_stt._delta_transcript_interval:
            self._send(stt.SpeechEventType.INTERIM_TRANSCRIPT, self._delta_text)
            self._last_interim_at = time.time()

    def _commit(self, at: float) -> None:
        """The VAD's end of speech commits the audio: the final has the words said by then."""
        if self._current is None:
            return
        heard = sum(1 for i in range(len(self._tokens)) if self._spoken_at(i) <= at)
        heard = max(heard, self._committed)
        words = self._tokens[self._committed : heard]
        self._committed = heard
        if heard >= len(self._tokens):
            self._current = None
        if words:
            self._send(stt.SpeechEventType.FINAL_TRANSCRIPT, self._joiner.join(words))

    async def _run(self) -> None:
        vad_stream = self._owner.vad.stream()
        voiced_prev = False

        async def read_vad() -> None:
            async for ev in vad_stream:
                if ev.type == vad.VADEventType.START_OF_SPEECH and not self._speaking:
                    self._speaking = True
                    self._send(stt.SpeechEventType.START_OF_SPEECH)
                elif ev.type == vad.VADEventType.END_OF_SPEECH and self._speaking:
                    self._speaking = False
                    self._send(stt.SpeechEventType.END_OF_SPEECH)
                    at = time.perf_counter()
                    # after every delta of the committed words, and the model's finishing time
                    asyncio.get_running_loop().call_later(self._owner.final_delay, self._commit, at)

        reader = asyncio.create_task(read_vad())
        try:
            async for data in self._input_ch:
                if isinstance(data, rtc.AudioFrame):
                    voiced = bool(data.data.tobytes().strip(b"\x00"))
                    if voiced and not voiced_prev and self._current is None:
                        self._on_voice()
                    voiced_prev = voiced
                    vad_stream.push_frame(data)
        finally:
            vad_stream.end_input()
            for timer in self._timers:
                timer.cancel()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await vad_stream.aclose()


class BatchSTT(stt.STT):
    def __init__(self, *, transcription_delay: float = TRANSCRIPTION_DELAY_S, language: str = "en") -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))
        self.transcription_delay = transcription_delay
        self.language = language
        self.scripts: deque[Utterance] = deque()
        self.recognitions: list[tuple[float, float, str]] = []  # (asked, answered, text)

    @property
    def provider(self) -> str:
        return "harness-batch"

    def expect(self, utterance: Utterance) -> None:
        self.scripts.append(utterance)

    async def _recognize_impl(
        self, buffer: AudioBuffer, *, language: NotGivenOr[str] = NOT_GIVEN, conn_options: APIConnectOptions
    ) -> stt.SpeechEvent:
        asked = time.perf_counter()
        await asyncio.sleep(self.transcription_delay)
        text = self.scripts.popleft().text if self.scripts else ""
        self.recognitions.append((asked, time.perf_counter(), text))
        return _event(stt.SpeechEventType.FINAL_TRANSCRIPT, text, self.language)
