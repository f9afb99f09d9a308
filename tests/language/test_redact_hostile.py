"""Issue 20: redaction covers each claimed category's phrasings (English and Chinese),
and LiveKit's raw-transcript log never writes a transcript by default."""

from __future__ import annotations

import pytest

from bench.privacy.hostile_probes import PLAIN, SECRETS
from memory.language.redact import MARK, redact_secrets


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_every_probe_secret_is_redacted(text: str, secret: str) -> None:
    out, kinds = redact_secrets(text)
    assert secret not in out and MARK in out and kinds, out


@pytest.mark.parametrize("text", PLAIN)
def test_plain_speech_with_numbers_and_keywords_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


def test_a_password_stops_where_the_sentence_goes_on() -> None:
    out, _ = redact_secrets("my password is hunter2 and my sister is called Anna")
    assert out == f"my password is {MARK} and my sister is called Anna"
