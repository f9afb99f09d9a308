"""A long turn as parts the store keeps whole, cut where the language allows."""

from __future__ import annotations

import re

_SENTENCE_BREAK = re.compile(r"[。！？!?；;…]+|[.](?=\s)|\n")
_CLAUSE_BREAK = re.compile(r"[，、,：:]")
_SPACE_BREAK = re.compile(r"\s")


def split_turn(text: str, max_chars: int) -> list[str]:
    """A turn longer than the store keeps in one memory, as several parts that each fit,
    cut after a sentence where one ends in the second half of a part, else after a
    clause, else between words: a long turn loses nothing (only whitespace at the cuts).
    Chinese has no spaces, so cutting "between words" alone cut "1391234567 | 8" apart."""
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > max_chars:
        window = rest[: max_chars + 1]
        cut = max_chars
        for breaks in (_SENTENCE_BREAK, _CLAUSE_BREAK, _SPACE_BREAK):
            found = [m.end() for m in breaks.finditer(window) if max_chars // 2 <= m.end() <= max_chars]
            if found:
                cut = found[-1]
                break
        parts.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [*parts, rest] if rest else parts
