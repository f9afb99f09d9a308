"""Issue 20: no raw user transcript in any log at `dev`'s DEBUG level, by default."""

from __future__ import annotations

import logging

import pytest
from livekit.agents import Agent

from harness.scripted import VoiceHarness
from memory.livekit import transcript_log

SAID = "my password is hunter2 and I live in Lyon"


def logged_text(records: list[logging.LogRecord]) -> str:
    return "\n".join(f"{r.getMessage()} {vars(r)}" for r in records)


async def speak(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    caplog.set_level(logging.DEBUG)  # as `python agent.py dev` runs
    async with VoiceHarness(Agent(instructions="Be brief.")) as harness:
        await harness.user_says(SAID)
    seen = [r for r in caplog.records if r.getMessage() == "received user transcript"]
    assert seen, "LiveKit no longer logs the transcript this way: the test would prove nothing"
    return caplog.records


@pytest.fixture
def restore_filters():
    yield
    transcript_log.install("off")  # the default, as agent.py installs it


async def test_raw_transcripts_are_not_logged_by_default(caplog: pytest.LogCaptureFixture, restore_filters) -> None:
    transcript_log.install("off")
    text = logged_text(await speak(caplog))
    assert "hunter2" not in text and "Lyon" not in text
    assert transcript_log.NOT_LOGGED in text


async def test_redacted_transcripts_keep_the_words_but_not_the_secrets(
    caplog: pytest.LogCaptureFixture, restore_filters
) -> None:
    transcript_log.install("redacted")
    text = logged_text(await speak(caplog))
    assert "hunter2" not in text and "Lyon" in text


def test_the_worker_installs_the_scrubber_when_it_is_imported() -> None:
    import agent  # noqa: F401 - importing agent.py is what is tested

    assert any(isinstance(f, transcript_log.TranscriptScrubber) for f in logging.getLogger("livekit.agents").filters)
