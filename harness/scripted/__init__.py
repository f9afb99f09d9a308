"""Offline test harness: a real LiveKit ``AgentSession`` driven by scripted fakes."""

from .fakes import (
    FakeTTS,
    InstantAudioOutput,
    LLMRequest,
    RecordingLLM,
    RecordingTextOutput,
    ScriptedSTT,
    SilentAudioInput,
    ToolCall,
)
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
