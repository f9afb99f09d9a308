"""Offline test harness: a real LiveKit ``AgentSession`` driven by scripted fakes."""

from .fake_llm import LLMRequest, RecordingLLM, ToolCall
from .fake_media import FakeTTS, InstantAudioOutput, RecordingTextOutput, SilentAudioInput
from .fake_stt import ScriptedSTT
from .session import HarnessEvent, TurnResult, VoiceHarness

__all__ = [
    "FakeTTS",
    "HarnessEvent",
    "InstantAudioOutput",
    "LLMRequest",
    "RecordingLLM",
    "RecordingTextOutput",
    "ScriptedSTT",
    "SilentAudioInput",
    "ToolCall",
    "TurnResult",
    "VoiceHarness",
]
