"""When a GATED fact held: the words that date it, and the words that ask about the past.

A fact changes ("I moved to Berlin"): the old value held until then, the new one from
then on. Three readings of plain text decide how that is stored and found, pure and
in English and Chinese like the rest of `memory/language/`:

- `held_from`: the day a fact said in a turn began to hold: the first date the turn
  names ("I moved to Berlin last March", 我去年搬到了上海), resolved on the day it was
  said as `dates` resolves every date, else that day itself.
- `is_correction`: does the turn say the stored value was a mistake ("no, I said Berlin,
  not Bern", 不对，我说的是柏林) rather than that it changed? A correction replaces the
  value without making it a past one: it never held.
- `asks_about_past` / `asks_before`: does a question ask about what held before ("where
  did I live before Berlin?", "used to", "last year", 之前, 以前, 去年)? Only then are
  superseded values searched (`memory/retrieval/validity.py`).
"""

from __future__ import annotations

import re
from datetime import date

from memory.language import dates
from memory.language.prefilter import normalise
from memory.language.prefilter.repair import says_change

__all__ = ["asks_about_past", "asks_before", "held_from", "is_correction"]


_FUTURE = re.compile(r"\b(?:will|going to|gonna|next|soon)\b|'ll\b|要|将|准备|打算|下个|明年|下周")


def held_from(text: str, said_on: date) -> date:
    """The first day of the first date `text` names (said on `said_on`), else `said_on`.

    A date without a year ("in March") is the nearest March to `dates`, which may be
    one to come; a change is reported once it happened, so unless the turn speaks of
    the future it is the last March on or before the day it was said."""
    found = dates.mentions(text, said_on)
    if not found:
        return said_on
    first = found[0]
    if first.yearless and not _FUTURE.search(text.lower()):
        past = [s for s in first.spans() if s.start <= said_on]
        if past:
            return max(past).start
    return first.span.start


# A mistake named as one: not "update" or "plans changed", which report a change.
_MISTAKE_EN = re.compile(
    r"\b(?:correction|to correct|let me correct|scratch that|strike that|i meant|what i meant|i mean(?! to\b)"
    r"|i misspoke|i said (?:it )?wrong|i got (?:it|that) wrong|you got (?:it|that) wrong|you misheard|misheard"
    r"|my mistake|my bad|no wait|wait no|i was wrong|i stand corrected|that's wrong|that is wrong|that's not right"
    r"|not what i said|typo|i said\b[^.!?]{1,40}\bnot\b|i didn't say)\b"
)
_MISTAKE_ZH = re.compile(
    r"不对|说错了?|搞错了?|记错了?|弄错了?|听错了?|写错了?|口误|更正|纠正|我是说|我的意思是|我说的是|不是我说的"
)
_REPAIR_OPENING = re.compile(r"^(?:(?:oh|um|uh|well|no|sorry|wait)[\s,]+)*(?:actually|no,|nope|其实|不，|不是，)")
_NO_LONGER = re.compile(r"\b(?:anymore|any more|any longer|no longer)\b|已经不|早就不|不再|现在不")
_NOT_EN = re.compile(r"\bnot (?:in |at |a |an |the )?([a-z][\w'-]{1,})")
_NOT_ZH = re.compile(r"不是([\u3400-\u9fff\w]{1,8})")


def is_correction(text: str, old_value: str) -> bool:
    """Does `text` correct `old_value` (a mistake, a mishearing) rather than change it?

    A mistake marker ("I meant", "you misheard", 说错了, 不对), a repair that opens the
    turn without the grammar of a change ("actually, it's 3pm"; not "actually, I moved"),
    or a contrast that names the old value as not said ("Berlin, not Bern", 不是伯尔尼)."""
    t, old = normalise(text), normalise(old_value)
    if _MISTAKE_EN.search(t) or _MISTAKE_ZH.search(t):
        return True
    if _REPAIR_OPENING.match(t) and not says_change(text):  # "actually, it's 3pm"; not "actually, I moved"
        return True
    if _NO_LONGER.search(t):  # "not a teacher anymore", 已经不是老师了: a change
        return False
    if any(len(m.group(1)) >= 3 and re.search(rf"\b{re.escape(m.group(1))}\b", old) for m in _NOT_EN.finditer(t)):
        return True
    return any(_shares_chars(m.group(1), old) for m in _NOT_ZH.finditer(t))


def _shares_chars(said: str, old: str) -> bool:
    """Two Chinese characters of `said` in a row are in `old` (伯尔 in 用户住在伯尔尼)."""
    return any(said[i : i + 2] in old for i in range(len(said) - 1))


# A question about what held before now: "used to", "previously", "formerly", "my old/
# former/ex-", "last year", "back then", "originally"; 以前, 原来, 过去, 曾经, 从前, 去年,
# 前任, 前男友. A past span the question names ("in 2024") too.
_PAST_EN = re.compile(
    r"\b(?:used to|use to|previous(?:ly)?|former(?:ly)?|originally|back then|back when|at first"
    r"|in the past|(?:my|the) old (?:job|home|place|address|flat|apartment|house|city|town|school|car|phone|boss"
    r"|team|company|employer|partner|boyfriend|girlfriend|name)|ex(?:-| )?(?:boyfriend|girlfriend|wife|husband"
    r"|partner)|my ex|last (?:year|month|summer|winter|spring|autumn|fall)"
    r"|(?:a|one|two|three|a few|a couple of) (?:years?|months?) ago)\b"
)
_PAST_ZH = re.compile(
    r"之前|以前|原来|原先|过去|曾经|从前|以往|当初|去年|前年|前任|前男友|前女友|前妻|前夫|上一份|上一个"
)
# "before" / "prior to" ask about the past only in a question in the past tense: "where
# did I live before Berlin?", not "what should I pack before the flight?".
_BEFORE_WORD = re.compile(r"\b(?:before|prior to)\b")
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had|wasn't|weren't|didn't)\b")
# ...and 之前 does not when what comes after it is to be done: 出发之前我要准备什么.
_TO_COME_ZH = re.compile(r"(?:之前|以前)[，,]?(?:我们|我|你)?(?:要|得|应该|需要|打算|记得|别忘)")
# "Have I told you before ...", 我之前跟你说过: "before" dates the telling, not the fact.
_TOLD_BEFORE_EN = re.compile(
    r"\b(?:told|tell|said|say|mentioned|mention|asked|talked|discussed)(?: (?:you|it|this|that|so|to you))?"
    r"(?: about \w+)? (?:before|previously|earlier)\b"
)
_TOLD_BEFORE_ZH = re.compile(r"(?:之前|以前|原来)(?:我)?(?:跟你|和你|对你|给你|向你)?(?:说|讲|提|告诉|聊|问)")
_BEFORE_EN = re.compile(r"\b(?:before|prior to)\s+(?!that\b|then\b|now\b|this\b|today\b)(\w+)")
_BEFORE_ZH = re.compile(r"[\u3400-\u9fffA-Za-z]{2,}(?:之前|以前)")


def _past_words(text: str) -> str:
    t = normalise(text)
    return _TOLD_BEFORE_ZH.sub(" ", _TOLD_BEFORE_EN.sub(" ", t))


def asks_about_past(text: str, today: date | None = None) -> bool:
    """Does the question ask about what held before now (or in a past span it names)?"""
    t = _past_words(text)
    if _PAST_EN.search(t) or (_BEFORE_WORD.search(t) and _PAST_TENSE.search(t)):
        return True
    if _PAST_ZH.search(t) and not _TO_COME_ZH.search(t):
        return True
    span = dates.query_span(text, today) if today is not None else None
    return span is not None and span.end < today  # type: ignore[operator]


def asks_before(text: str) -> bool:
    """Does the question ask what held before a value it names ("before Berlin",
    搬到上海之前)? Then the answer is that value's predecessor, not the latest past one."""
    t = _past_words(text)
    return bool(
        (_BEFORE_EN.search(t) and _PAST_TENSE.search(t)) or (_BEFORE_ZH.search(t) and not _TO_COME_ZH.search(t))
    )
