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
_FILLER = r"(?:uh|um|er|erm|like)"
# Between two number words: a space, a comma or a dash (a pause said or typed), "dash",
# or a filler ("four four, uh, seven one").
_GAP = rf"(?:\s*[,-]\s*|\s+)(?:(?:dash|{_FILLER})\s*,?\s*)?"
# A run of two number words or more ("four four seven one", "double four seven"), or one
# repeated digit ("triple three").
_EN_RUN = re.compile(
    rf"(?<![\w'’])(?:{_TOKEN}(?:{_GAP}{_TOKEN})+|(?:double|triple|treble)[ -]+{_WORD})(?![\w'’])", re.IGNORECASE
)
_EN_NEEDS = re.compile(
    r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|double|triple|treble|oh|nought|naught)\b", re.IGNORECASE
)
_SPLIT = re.compile(rf"(\s*,\s*|\s*-\s*|\s+dash\s+|\s*,?\s+{_FILLER}\s*,?\s*|\s+)", re.IGNORECASE)

_ZH_DIGIT = {"零": "0", "〇": "0", "一": "1", "幺": "1", "二": "2", "两": "2", "兩": "2", "三": "3", "四": "4",
             "五": "5", "六": "6", "七": "7", "八": "8", "九": "9"}  # fmt: skip
_ZH_UNIT = "十百千万萬"
_ZH_CHARS = "".join(_ZH_DIGIT)
# "三个六" is 666 (a digit said that many times).
_ZH_REPEAT = rf"[两兩二三四五]个[{_ZH_CHARS}]"
_ZH_GROUP = rf"(?:{_ZH_REPEAT}|[{_ZH_CHARS}])(?:{_ZH_REPEAT}|[{_ZH_CHARS}{_ZH_UNIT}])*"
# Groups of numerals with spaces, commas or dashes between them (三二零一零二 一九八七,
# 九 八 七 六, 幺二，三四，五六), three numerals or more in all; one or two alone (一一,
# 三四) are words as often as numbers.
_ZH_RUN = re.compile(rf"{_ZH_GROUP}(?:\s*[ ，,、-]\s*(?:[呃嗯]\s*[，,]?\s*)?{_ZH_GROUP})*")
_ZH_NEEDS = re.compile(rf"[{_ZH_CHARS}]")
# Groups of spaced single digits with a dash between groups ("9 1 2 - 7 8 - 3 4 5 6"):
# each group joined, the dashes kept (912-78-3456), seven digits or more in all.
_SPACED_GROUPS = re.compile(r"(?<![\d.,])\d(?: \d)+(?:\s+-\s+\d(?: \d)+)+(?![\d.,]\d|\d)")
# Single digits spaced or dashed ("4 4 7 1", "4-4-7-1"): three or more, joined.
_SPACED = re.compile(r"(?<![\d.,])\d(?:[ -]\d(?!\d|[.,]\d))?(?:[ -]\d(?!\d|[.,]\d)){2,}")
# A word spelled out, letters and digits one by one ("X A 1 2 3", "G R E E N 7",
# "d, r, a, g, o, n"): four or more, joined.
_SPELLED = re.compile(r"(?<![\w'’])[A-Za-z0-9](?:(?:\s*,\s*|\s+)[A-Za-z0-9](?![\w'’])){3,}")


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
    if groups[0] in (["oh"], ["o"]) and sum(len(g) for g in groups[1:]) < 3:
        return None  # "oh, one more thing": an interjection
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
    if any(not g for g in out) or (len(out) == 1 and len(out[0]) < 2 and not _REPEAT.keys() & set(groups[0])):
        return None
    return _join(out)


def _join(groups: list[str]) -> str:
    """Groups said one digit at a time ("six, oh, six") are one number; longer groups
    keep a dash between them (555-123-4567)."""
    return "".join(groups) if all(len(g) == 1 for g in groups) else "-".join(groups)


def _chinese_group(group: str) -> str | None:
    group = re.sub(rf"([两兩二三四五])个([{_ZH_CHARS}])", lambda m: m.group(2) * int(_ZH_DIGIT[m.group(1)]), group)
    if not any(ch in _ZH_UNIT for ch in group):
        return "".join(_ZH_DIGIT[ch] for ch in group)
    import cn2an

    try:
        return str(cn2an.cn2an(group.replace("幺", "一"), "smart"))
    except (ValueError, KeyError):
        return None


def _chinese(run: str) -> str | None:
    """Digits for a run of Chinese numerals, groups kept apart as said."""
    groups = re.findall(_ZH_GROUP, run)
    if sum(len(g) for g in groups) < 3:
        return None
    out = [_chinese_group(g) for g in groups]
    if any(g is None for g in out):
        return None
    return _join([g for g in out if g is not None])


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
    for m in _SPACED_GROUPS.finditer(text):
        if sum(ch.isdigit() for ch in m.group()) >= 7:
            found.append((m.start(), m.end(), "-".join(re.sub(r"\D", "", g) for g in m.group().split("-"))))
    for m in _SPACED.finditer(text):
        found.append((m.start(), m.end(), re.sub(r"\D", "", m.group())))
    for m in _SPELLED.finditer(text):
        if not _SPACED.fullmatch(m.group()):
            found.append((m.start(), m.end(), re.sub(r"[\s,]", "", m.group())))
    if not found:
        return Spoken(text, text)
    found.sort(key=lambda f: (f[0], -f[1]))  # at one place, the longest reading
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
