"""The production-shaped voice pipeline, offline: what tests and benchmarks drive.

Real speech audio (espeak-ng fixtures in `harness/speech/`) goes into the real Silero
VAD of the session that `agent.build_session` builds, with fakes in place of the cloud
models only: an STT that behaves like OpenAI's in each mode (`stt.py`), an LLM and a
TTS with realistic delays (`models.py`; the LLM is the one scripted double,
`harness.scripted.RecordingLLM`). A top-level package, not part of `tests/`:
`bench/` runs it too, and benchmarks do not import the test suite; not inside
`memory/`, which is the product's and ships without test doubles.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .audio import SpeechInput, TimedAudioOutput, Utterance, load_utterances
    from .models import LLM_TTFT_S, TimedTTS, scripted_llm
    from .pipeline import PipelineHarness, SpokenTurn, StubParticipant, memory_parts
    from .scripted.fake_llm import LLMRequest, RecordingLLM
    from .stt import BatchSTT, RealtimeSTT

# Each name from the module that defines it, on first use: `harness.guards` (a constant
# every test imports through `tests.conftest`) then loads no LiveKit. A process that
# imports a test module to find its target (a forkserver child of tests/storage) spent
# about 10 s of a loaded machine loading LiveKit for nothing.
_FROM = {
    **dict.fromkeys(("SpeechInput", "TimedAudioOutput", "Utterance", "load_utterances"), ".audio"),
    **dict.fromkeys(("LLM_TTFT_S", "TimedTTS", "scripted_llm"), ".models"),
    **dict.fromkeys(("PipelineHarness", "SpokenTurn", "StubParticipant", "memory_parts"), ".pipeline"),
    **dict.fromkeys(("LLMRequest", "RecordingLLM"), ".scripted.fake_llm"),
    **dict.fromkeys(("BatchSTT", "RealtimeSTT"), ".stt"),
}


def __getattr__(name: str) -> object:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_FROM[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM})


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
