"""Traditional Chinese characters folded to simplified, for matching only.

The rules (memory/prefilter.py, memory/recall_intent.py) are written in simplified
characters, so a user in Taiwan or Hong Kong (or an STT that writes Mandarin in
traditional characters) got a third fewer memory look-ups: "我女兒叫什麼名字" matched no
question rule. One character table from OpenCC (TSCharacters, its first choice for each
character), applied by `str.translate`: about a microsecond per turn, one character for
one, so positions stay where they were. What the user said is never changed: only the
copy that rules read.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


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
