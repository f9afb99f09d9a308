"""Relative and calendar dates in English and Chinese, resolved against a day.

A spoken turn says "yesterday", "last week", "上周五", "前天"; the day it was said is
known (the turn's time). Stored as said, the memory cannot be found by the date it is
about ("what did I do on May 7th?", "上个月我去了哪") and the model shown it cannot tell
which day "yesterday" was. `mentions` finds such expressions and turns each into a
span of days (`Span`): the store indexes a turn with them (the shown text unchanged),
and the retriever reads the same expressions in a query (`query_span`), against
today, to match the days a memory is about or was said on.

Only expressions whose day or span is determined by the anchor day are resolved:
"last Friday", "3 days ago", "in May" (the May nearest to the day said), "去年夏天",
"5月3日". A weekday alone ("on Friday") is left alone: past or coming is a guess.
Seasons are the northern hemisphere's meteorological ones. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from memory.language.date_rules import EN_RULES, MODAL_MAY, MONTH_NAMES, YEARLESS, ZH_RULES, resolve
from memory.language.day_spans import Span, season_of, shift_year

__all__ = ["Span", "Mention", "mentions", "query_span", "asks_when", "describe"]


@dataclass(frozen=True)
class Mention:
    """An expression of time in a text and the days it names."""

    text: str
    span: Span
    kind: str  # day | week | weekend | month | season | year
    yearless: bool = False  # "May 7", 10月23日: the year is the nearest one, a guess (a birthday recurs)

    def spans(self) -> tuple[Span, ...]:
        """The span, and for a date said without a year the same days a year before and after."""
        if not self.yearless:
            return (self.span,)
        return tuple(Span(shift_year(self.span.start, d), shift_year(self.span.end, d)) for d in (-1, 0, 1))


def _scan(text: str, anchor: date) -> Iterator[Mention]:
    taken: list[tuple[int, int]] = []
    lowered = text.lower().replace("\u2019", "'")
    for rules, haystack in ((EN_RULES, lowered), (ZH_RULES, text)):
        for rx, kind in rules:
            for m in rx.finditer(haystack):
                if any(m.start() < e and s < m.end() for s, e in taken):
                    continue  # inside a longer expression already resolved
                if haystack is lowered and MODAL_MAY.search(m.group(0)) and "May" not in text[m.start() : m.end()]:
                    continue  # "I may 2 ..." is the verb: the month is written with a capital
                try:
                    resolved = resolve(kind, m, anchor)
                except (ValueError, OverflowError, KeyError):
                    resolved = None
                if resolved is None:
                    continue
                taken.append((m.start(), m.end()))
                yield Mention(text[m.start() : m.end()], resolved[0], resolved[1], kind in YEARLESS)


def mentions(text: str, anchor: date) -> list[Mention]:
    """Every resolvable expression of time in `text`, in order, as said on `anchor`."""
    if not text:
        return []
    return sorted(_scan(text, anchor), key=lambda m: text.find(m.text))


def describe(span: Span, kind: str, *, chinese: bool = False) -> str:
    """A span in words, as the index (and a reader) wants it: '7 May 2023', 'May 2023',
    'the week of 1 May 2023'; Chinese: '2023年5月7日', '2023年5月'."""
    s = span.start
    if chinese:
        if kind == "day":
            return f"{s.year}年{s.month}月{s.day}日"
        if kind == "month":
            return f"{s.year}年{s.month}月"
        if kind == "year":
            return f"{s.year}年"
        return f"{s.year}年{s.month}月{s.day}日至{span.end.month}月{span.end.day}日"
    if kind == "day":
        return f"{s.day} {MONTH_NAMES[s.month]} {s.year}"
    if kind == "month":
        return f"{MONTH_NAMES[s.month]} {s.year}"
    if kind == "year":
        return str(s.year)
    if kind == "season":
        season, _ = season_of(s)
        return f"{season} {s.year}"
    return f"{s.day} {MONTH_NAMES[s.month]} to {span.end.day} {MONTH_NAMES[span.end.month]} {span.end.year}"


def query_span(text: str, today: date) -> Span | None:
    """The days a query is about ("what did I do last week?", "上个月", "in May 2023"),
    seen from `today`; the union of its expressions, None when it names none."""
    found = mentions(text, today)
    if not found:
        return None
    return Span(min(m.span.start for m in found), max(m.span.end for m in found))


# A question that asks for a time: its answer is a turn that says one.
_ASKS_WHEN = re.compile(
    r"\b(?:when|what (?:date|day|month|year|time)|how long ago|which (?:day|month|year))\b"
    r"|什么时候|哪天|哪一天|几号|几月|哪年|哪一年|多久以前|何时",
    re.IGNORECASE,
)


def asks_when(text: str) -> bool:
    """Does the message ask when something happened ("when did...", 什么时候, 哪天)?"""
    return bool(_ASKS_WHEN.search(text))
