"""The one normal form every rule reads, the regex helpers and the word lists.

Each pattern is written once against this form (NFKC, simplified characters, one quote
style, lower case), so no rule has to cope with the ways a transcript can be spelt. The
word lists are general linguistic classes kept one phrase a line in ``data/``, read once
at import.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from memory.language.hanzi import to_simplified

_DATA = Path(__file__).with_name("data")


def words(name: str) -> tuple[str, ...]:
    """The phrases of ``data/<name>.txt``, in file order; lines starting with "#" are comments."""
    lines = (_DATA / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return tuple(w for w in (line.strip() for line in lines) if w and not w.startswith("#"))


def alt(phrases: Sequence[str]) -> str:
    """Regex alternation of literal phrases, longest first (so "试试" wins over "试")."""
    return "|".join(re.escape(w) for w in sorted(phrases, key=len, reverse=True))


# Punctuation NFKC leaves alone (NFKC already maps ？！，：； to ASCII).
_PUNCT_MAP = str.maketrans(
    {
        "’": "'",
        "‘": "'",
        "`": "'",
        "“": '"',
        "”": '"',
        "。": ".",
        "、": ",",
        "…": "...",
        "～": " ",
        "~": " ",
        "「": '"',
        "」": '"',
        "『": '"',
        "』": '"',
        "《": '"',
        "》": '"',
        "—": " - ",
        "–": " - ",
    }
)
CJK = re.compile(r"[\u3400-\u9fff]")
LATIN = re.compile(r"[a-z]")
HAS_WORD = re.compile(r"[a-z0-9\u3400-\u9fff]")
_SPACES = re.compile(r"\s+")


# A voice turn is a few sentences; a pasted essay is judged on its start, which keeps
# the worst case bounded (some patterns are quadratic in the length of one clause).
MAX_CHARS = 2000


def normalise(text: str) -> str:
    """NFKC (full-width to ASCII), traditional characters as simplified (memory/language/hanzi.py), one
    quote style, lower case, single spaces, capped length."""
    t = to_simplified(unicodedata.normalize("NFKC", text[: MAX_CHARS * 2])).translate(_PUNCT_MAP).lower()
    return _SPACES.sub(" ", t).strip()[:MAX_CHARS]
