"""Numbers as speech-to-text writes them, turned into digits once, before any rule reads
digits: "four four seven one" -> 4471, "double four" -> 44, "triple seven" -> 777, "oh"
among digits -> 0, "4 4 7 1" / "4-4-7-1" -> 4471, 幺三八两九 -> 13829, 四千七百一十一 -> 4711.

`spoken_digits(text)` gives the digit form beside the original with a map back to the
original's spans, so a rule that finds a secret in the digit form replaces what the user
said (the stored text keeps the words, with the secret replaced). English number words
are read by `text2num` (alpha2digit), Chinese numerals by `cn2an`; what is hand-written
here is only finding the runs to give them and the spoken digit idioms they do not know
("double", "triple", "oh", 幺, digit-by-digit Chinese). It runs on every turn off the
reply path: a text with no number word and no numeral costs two regex searches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = (
    "zero oh o one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand"
).split()
_DIGIT_WORD = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine".split())}
_DIGIT_WORD.update({"oh": "0", "o": "0", "nought": "0", "naught": "0"})
_REPEAT = {"double": 2, "triple": 3, "treble": 3}
_ALTERNATIVES = "|".join(sorted(set(_UNITS) | set(_DIGIT_WORD), key=len, reverse=True))
_WORD = rf"(?:{_ALTERNATIVES})"
_TOKEN = rf"(?:(?:double|triple|treble)[ -]+{_WORD}|{_WORD}(?:-{_WORD})?)"
# A run of two number words or more ("four four seven one", "double four seven"),
# with spaces, commas or dashes between them (a pause said or typed).
_EN_RUN = re.compile(rf"(?<![\w'’]){_TOKEN}(?:(?:\s*[,-]\s*|\s+)(?:dash\s+)?{_TOKEN})+(?![\w'’])", re.IGNORECASE)
_EN_NEEDS = re.compile(
    r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|double|triple|treble|oh|nought|naught)\b", re.IGNORECASE
)
_SPLIT = re.compile(r"(\s*,\s*|\s*-\s*|\s+dash\s+|\s+)", re.IGNORECASE)

_ZH_DIGIT = {"零": "0", "〇": "0", "一": "1", "幺": "1", "二": "2", "两": "2", "兩": "2", "三": "3", "四": "4",
             "五": "5", "六": "6", "七": "7", "八": "8", "九": "9"}  # fmt: skip
_ZH_UNIT = "十百千万萬"
# Three numerals or more read one by one (八三九二, 幺三八), or a number with units
# (四千七百一十一); single numerals and two (一一, 三四) are words as often as numbers.
_ZH_RUN = re.compile(rf"[{''.join(_ZH_DIGIT)}][{''.join(_ZH_DIGIT)}{_ZH_UNIT}]{{2,}}")
_ZH_NEEDS = re.compile(rf"[{''.join(_ZH_DIGIT)}]")
# Single digits spaced or dashed ("4 4 7 1", "4-4-7-1"): three or more, joined.
_SPACED = re.compile(r"(?<![\d.,])\d(?:[ -]\d(?![\d.,]))?(?:[ -]\d(?![\d.,])){2,}")


@dataclass(frozen=True)
class Piece:
    """A replaced stretch: `original[start:end]` is written `digits` in the digit form,
    which starts at `at` there."""

    start: int
    end: int
    at: int
    digits: str


@dataclass(frozen=True)
class Spoken:
    """The digit form of a text and the map back to the text's own spans."""

    original: str
    text: str
    pieces: tuple[Piece, ...] = ()

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original that `text[start:end]` came from (a replaced stretch
        that the span touches is taken whole)."""
        return self._position(start, left=True), self._position(end, left=False)

    def _position(self, pos: int, *, left: bool) -> int:
        shift = 0  # original minus digit form, before the next piece
        for p in self.pieces:
            end = p.at + len(p.digits)
            if pos < p.at or (not left and pos == p.at):
                break
            if pos < end or (not left and pos == end):
                return p.start if left else p.end
            shift = p.end - end
        return pos + shift


def _english(run: str) -> str | None:
    """Digits for a run of English number words, or None when it is not a number said
    (text2num reads positional forms: "forty seven eleven" -> 47 11)."""
    from text_to_num import alpha2digit

    parts = _SPLIT.split(run)
    groups: list[list[str]] = [[]]
    for i, part in enumerate(parts):
        if i % 2:  # a separator: a comma or dash is a pause between groups
            if part.strip():
                groups.append([])
            continue
        low = part.lower()
        for word in re.split(r"[ -]+", low):
            if word in _REPEAT:
                groups[-1].append(word)
            elif word:
                groups[-1].append(word)
    if groups[0] in (["oh"], ["o"]):  # "oh, one more thing": an interjection
        return None
    out: list[str] = []
    for group in groups:
        words: list[str] = []
        i = 0
        while i < len(group):
            word = group[i]
            if word in _REPEAT and i + 1 < len(group) and group[i + 1] in _DIGIT_WORD:
                words += [_DIGIT_WORD[group[i + 1]]] * _REPEAT[word]
                i += 2
                continue
            words.append(_DIGIT_WORD[word] if word in ("oh", "o", "nought", "naught") else word)
            i += 1
        digits = alpha2digit(" ".join(words), "en", threshold=0)
        if not re.fullmatch(r"[\d ]+", digits):
            return None
        out.append(digits.replace(" ", ""))
    if sum(len(g) for g in out) < 2 or any(not g for g in out):
        return None
    return "-".join(out)


def _chinese(run: str) -> str | None:
    if not any(ch in _ZH_UNIT for ch in run):
        return "".join(_ZH_DIGIT[ch] for ch in run)
    import cn2an

    try:
        return str(cn2an.cn2an(run.replace("幺", "一"), "smart"))
    except (ValueError, KeyError):
        return None


def spoken_digits(text: str) -> Spoken:
    """`text` with every number said in words or numerals, and every run of spaced
    single digits, written as digits; unchanged (and no pieces) when there is none."""
    found: list[tuple[int, int, str]] = []
    if _EN_NEEDS.search(text):
        for m in _EN_RUN.finditer(text):
            digits = _english(m.group())
            if digits is not None:
                found.append((m.start(), m.end(), digits))
    if _ZH_NEEDS.search(text):
        for m in _ZH_RUN.finditer(text):
            digits = _chinese(m.group())
            if digits is not None:
                found.append((m.start(), m.end(), digits))
    for m in _SPACED.finditer(text):
        found.append((m.start(), m.end(), re.sub(r"\D", "", m.group())))
    if not found:
        return Spoken(text, text)
    found.sort()
    pieces: list[Piece] = []
    out: list[str] = []
    pos = 0
    length = 0
    for start, end, digits in found:
        if start < pos:
            continue
        out.append(text[pos:start])
        length += start - pos
        pieces.append(Piece(start, end, length, digits))
        out.append(digits)
        length += len(digits)
        pos = end
    out.append(text[pos:])
    return Spoken(text, "".join(out), tuple(pieces))
