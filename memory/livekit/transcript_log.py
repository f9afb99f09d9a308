"""LiveKit's logs carry what users say: scrubbed before any handler sees them.

LiveKit Agents logs every final user transcript at DEBUG ("received user transcript",
with the words in the record's `lk.pii.user_transcript` attribute) and the user's input
in `lk.pii.user_input`; `python agent.py dev` runs at DEBUG and its handler prints those
attributes. A log line outlives a "forget me" and holds the secrets that redaction keeps
out of the store. LiveKit's own PII filter acts on telemetry exports only, and only when
the project enables redaction. This filter, on LiveKit's logger, replaces every
`lk.pii.*` attribute of a record: with a marker (`MEMORY_LOG_TRANSCRIPTS=off`, the
default, in every mode) or with the text less its secrets (`redacted`, for debugging).
"""

from __future__ import annotations

import logging

NOT_LOGGED = "[not logged: MEMORY_LOG_TRANSCRIPTS=off]"
# LiveKit's loggers that log conversation content (livekit/agents/log.py, the plugins').
LOGGERS = ("livekit.agents", "livekit.plugins.openai", "livekit.plugins.silero")


class TranscriptScrubber(logging.Filter):
    """Replaces the `lk.pii.*` attributes of each record; never drops a record."""

    def __init__(self, mode: str = "off") -> None:
        super().__init__()
        if mode not in ("off", "redacted"):
            raise ValueError(f"MEMORY_LOG_TRANSCRIPTS={mode!r} is not valid; allowed values: off, redacted")
        self.mode = mode

    def filter(self, record: logging.LogRecord) -> bool:
        for key in [k for k in vars(record) if k.startswith("lk.pii.")]:
            value = record.__dict__[key]
            if self.mode == "redacted" and isinstance(value, str):
                from memory.language.redact import redact_secrets  # the rules load here, not at start-up

                record.__dict__[key] = redact_secrets(value)[0]
            else:
                record.__dict__[key] = NOT_LOGGED
        return True


def install(mode: str = "off") -> TranscriptScrubber:
    """Put the scrubber on LiveKit's loggers (once: a second call replaces the first)."""
    scrubber = TranscriptScrubber(mode)
    if mode == "redacted":  # the rules loaded now, not inside the first log call
        import memory.language.redact  # noqa: F401
    for name in LOGGERS:
        log = logging.getLogger(name)
        for old in [f for f in log.filters if isinstance(f, TranscriptScrubber)]:
            log.removeFilter(old)
        log.addFilter(scrubber)
    return scrubber
