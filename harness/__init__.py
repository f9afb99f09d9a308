"""The production-shaped voice pipeline, offline: what tests and benchmarks drive.

Real speech audio (espeak-ng fixtures in `harness/speech/`) goes into the real Silero
VAD of the session that `agent.build_session` builds, with fakes in place of the cloud
models only: an STT that behaves like OpenAI's in each mode (`stt.py`), an LLM and a
TTS with realistic delays (`models.py`; the LLM is the one scripted double,
`harness.scripted.RecordingLLM`). A top-level package, not part of `tests/`:
`bench/` runs it too, and benchmarks do not import the test suite; not inside
`memory/`, which is the product's and ships without test doubles.
"""

from .audio import SpeechInput, TimedAudioOutput, Utterance, load_utterances
from .models import LLM_TTFT_S, TimedTTS, scripted_llm
from .pipeline import PipelineHarness, SpokenTurn, StubParticipant, memory_parts
from .scripted.fake_llm import LLMRequest, RecordingLLM
from .stt import BatchSTT, RealtimeSTT

__all__ = [
    "BatchSTT",
    "LLMRequest",
    "LLM_TTFT_S",
    "PipelineHarness",
    "RealtimeSTT",
    "RecordingLLM",
    "SpeechInput",
    "SpokenTurn",
    "StubParticipant",
    "TimedAudioOutput",
    "TimedTTS",
    "Utterance",
    "load_utterances",
    "memory_parts",
    "scripted_llm",
]
