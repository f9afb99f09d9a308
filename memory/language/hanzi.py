"""Traditional and simplified Chinese characters, for matching only.

The rules (memory/language/prefilter/, memory/language/recall_intent.py) are written in simplified
characters, so a user in Taiwan or Hong Kong (or an STT that writes Mandarin in
traditional characters) got a third fewer memory look-ups: "我女兒叫什麼名字" matched no
question rule. One character table from OpenCC (TSCharacters, its first choice for each
character), applied by `str.translate`: about a microsecond per turn, one character for
one, so positions stay where they were. What the user said is never changed: only the
copy that rules read.

The other way round, `traditional_forms`, is for the one stage that reads the stored
text as it was written (the substring search): a simplified keyword finds a memory
written in traditional characters only if the pattern is in traditional characters too.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from opencc import OpenCC


@cache
def _table() -> dict[int, str]:
    text = resources.files("opencc").joinpath("dictionary/TSCharacters.txt").read_text(encoding="utf-8")
    table: dict[int, str] = {}
    for line in text.splitlines():
        traditional, _, simplified = line.partition("\t")
        choice = simplified.split(" ")[0]
        if len(traditional) == 1 and len(choice) == 1 and traditional != choice:
            table[ord(traditional)] = choice
    return table


def to_simplified(text: str) -> str:
    """The text with each traditional character replaced by its simplified form."""
    return text.translate(_table())


@cache
def _to_traditional() -> tuple[OpenCC, ...]:
    # OpenCC's standard forms, Taiwan's (麵) and Hong Kong's (裏): each phrase-aware.
    return tuple(OpenCC(config) for config in ("s2t", "s2tw", "s2hk"))


def warm_up() -> None:
    """Load the character tables (about 0.1 s) before the first turn needs them."""
    _table()
    _to_traditional()


def traditional_forms(word: str) -> list[str]:
    """The ways `word` (in simplified characters) is written in traditional ones, without
    `word` itself: [] for a word that is written the same ("名字") and for latin words."""
    if word.isascii():
        return []
    forms = dict.fromkeys(converter.convert(word) for converter in _to_traditional())
    forms.pop(word, None)
    return list(forms)
