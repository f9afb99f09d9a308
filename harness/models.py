"""A TTS on LiveKit's base classes with the delays of the real one, and the real LLM's
time to first token for the one scripted LLM (`harness.scripted.RecordingLLM`).

Defaults are of the shipped models as commonly measured from a server near OpenAI:
gpt-4.1-mini's time to first token about 0.4 s, gpt-4o-mini-tts's first audio about
0.2 s after its request. They matter to what memory adds to a reply only through
whether the reply is ready before the turn ends (docs/latency.md): a benchmark's LLM is
`RecordingLLM(respond, ttft=LLM_TTFT_S, keep_context=False)` (`scripted_llm`).
"""

from __future__ import annotations

import asyncio

from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions, tts, utils

from .scripted.fake_llm import RecordingLLM, Responder

LLM_TTFT_S = 0.4
TTS_FIRST_AUDIO_S = 0.2


def scripted_llm(respond: Responder | None = None, *, ttft: float = LLM_TTFT_S) -> RecordingLLM:
    """The scripted LLM with the shipped model's time to first token, recording each
    request's messages but not a copy of its context (a long benchmark holds many)."""
    return RecordingLLM(respond or (lambda _req: "Sure, happy to help."), ttft=ttft, keep_context=False)


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
