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
from datetime import date, timedelta

__all__ = ["Span", "Mention", "mentions", "query_span", "asks_when", "describe"]


@dataclass(frozen=True, order=True)
class Span:
    """A run of days, both ends included."""

    start: date
    end: date

    def overlaps(self, other: Span) -> bool:
        return self.start <= other.end and other.start <= self.end

    def iso(self) -> list[str]:
        return [self.start.isoformat(), self.end.isoformat()]

    @classmethod
    def from_iso(cls, pair: object) -> Span | None:
        try:
            start, end = pair  # type: ignore[misc]
            return cls(date.fromisoformat(str(start)), date.fromisoformat(str(end)))
        except (TypeError, ValueError):
            return None

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


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
        return tuple(Span(_shift_year(self.span.start, d), _shift_year(self.span.end, d)) for d in (-1, 0, 1))


# ----------------------------------------------------------------- calendar arithmetic
def _day(d: date) -> Span:
    return Span(d, d)


def _week(d: date) -> Span:
    start = d - timedelta(days=d.weekday())
    return Span(start, start + timedelta(days=6))


def _weekend(d: date) -> Span:
    sat = d - timedelta(days=d.weekday()) + timedelta(days=5)
    return Span(sat, sat + timedelta(days=1))


def _shift_year(d: date, years: int) -> date:
    try:
        return d.replace(year=d.year + years)
    except ValueError:  # 29 February
        return d.replace(year=d.year + years, day=28)


def _add_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    return date(d.year + y, m + 1, 1)


def _month(year: int, month: int) -> Span:
    start = date(year, month, 1)
    return Span(start, _add_months(start, 1) - timedelta(days=1))


def _year(year: int) -> Span:
    return Span(date(year, 1, 1), date(year, 12, 31))


_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_ZH_SEASON = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}


def _season(name: str, year: int) -> Span:
    start = date(year, _SEASON_START[name], 1)
    return Span(start, _add_months(start, 3) - timedelta(days=1))


def _season_of(d: date) -> tuple[str, int]:
    """The season a day is in, and the year its season starts in (winter: December's)."""
    if d.month in (12, 1, 2):
        return "winter", d.year if d.month == 12 else d.year - 1
    return {3: "spring", 4: "spring", 5: "spring", 6: "summer", 7: "summer", 8: "summer"}.get(d.month, "autumn"), d.year


def _relative_season(name: str, anchor: date, shift: int) -> Span:
    """'last summer' (shift -1), 'this summer' (0), 'next summer' (+1), seen from `anchor`."""
    current, year = _season_of(anchor)
    this = _season(name, year if name != "winter" or current == "winter" else anchor.year)
    if shift == 0:
        return this
    if shift < 0:
        # The latest such season that has ended... or begun: "last summer" in August is last year's.
        target = this if this.end < anchor else _season(name, this.start.year - 1)
        return target
    return this if this.start > anchor else _season(name, this.start.year + 1)


def _nearest_month(month: int, anchor: date) -> Span:
    """'in May' said on `anchor`: the May whose middle is nearest to it."""
    best = min(
        (_month(y, month) for y in (anchor.year - 1, anchor.year, anchor.year + 1)),
        key=lambda s: abs((s.start + timedelta(days=14) - anchor).days),
    )
    return best


def _nearest_day(month: int, day: int, anchor: date) -> Span | None:
    options = []
    for y in (anchor.year - 1, anchor.year, anchor.year + 1):
        try:
            options.append(date(y, month, day))
        except ValueError:
            continue
    return _day(min(options, key=lambda d: abs((d - anchor).days))) if options else None


def _weekday_before(anchor: date, weekday: int, weeks_back: int = 1) -> date:
    """'last Friday': the Friday of the week before the anchor's week (as most speakers mean it,
    and the most recent one before the anchor when that is closer within the same week)."""
    return anchor - timedelta(days=anchor.weekday()) - timedelta(weeks=weeks_back) + timedelta(days=weekday)


# ------------------------------------------------------------------------ vocabulary
_NUM_EN = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2, "a few": 3, "few": 3,
    "several": 3,
}  # fmt: skip
_MONTHS_EN = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
_MONTH_NAMES = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December"]  # fmt: skip
_WEEKDAYS_EN = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_ZH_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}


def _zh_number(s: str) -> int | None:
    """Digits, or a Chinese numeral up to 99 (十二, 二十, 三十一, 两)."""
    if s.isdigit():
        return int(s)
    if not s or any(c not in _ZH_DIGITS and c != "十" for c in s):
        return None
    if "十" not in s:
        return _ZH_DIGITS.get(s) if len(s) == 1 else None
    tens, _, ones = s.partition("十")
    t = _ZH_DIGITS.get(tens, 0) if tens else 1
    o = _ZH_DIGITS.get(ones, 0) if ones else 0
    return t * 10 + o


def _en_number(s: str) -> int | None:
    s = s.lower().strip()
    return int(s) if s.isdigit() else _NUM_EN.get(s)


_EN_NUM = (
    r"(\d{1,3}|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten"
    r"|eleven|twelve)"
)
_EN_MONTH = r"(" + "|".join(sorted(_MONTHS_EN, key=len, reverse=True)) + r")\.?"
_EN_WEEKDAY = r"(" + "|".join(_WEEKDAYS_EN) + r")"
_ZH_NUM = r"([0-9]{1,3}|[零〇一二两三四五六七八九十]{1,3})"
_B = r"\b"

# (pattern, handler name); matched on the lower-cased text, longest expressions first.
_EN_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"{_B}the day before yesterday{_B}"), "day-2"),
    (re.compile(rf"{_B}the day after tomorrow{_B}"), "day+2"),
    (re.compile(rf"{_B}(?:yesterday|last night){_B}"), "day-1"),
    (re.compile(rf"{_B}(?:today|tonight|this (?:morning|afternoon|evening)){_B}"), "day0"),
    (re.compile(rf"{_B}tomorrow{_B}"), "day+1"),
    (re.compile(rf"{_B}{_EN_NUM} (day|week|month|year)s? ago{_B}"), "ago"),
    (re.compile(rf"{_B}in {_EN_NUM} (day|week|month|year)s?(?! ago){_B}"), "in"),
    (re.compile(rf"{_B}(last|this|next|past) weekend{_B}"), "weekend"),
    (re.compile(rf"{_B}(last|this|next|past) week{_B}"), "week"),
    (re.compile(rf"{_B}(last|this|next|past) month{_B}"), "month"),
    (re.compile(rf"{_B}(last|this|next|past) year{_B}"), "year"),
    (re.compile(rf"{_B}(last|this|next) (spring|summer|autumn|fall|winter){_B}"), "season"),
    (re.compile(rf"{_B}(last|this|next) {_EN_WEEKDAY}{_B}"), "weekday"),
    (re.compile(rf"{_B}{_EN_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}}){_B}"), "month_day_year"),
    (re.compile(rf"{_B}(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_EN_MONTH},? (\d{{4}}){_B}"), "day_month_year"),
    (re.compile(rf"{_B}{_EN_MONTH},? (\d{{4}}){_B}"), "month_year"),
    (
        re.compile(
            rf"{_B}(?:in|of|since|during|until|by|early|late|mid|mid-) (?:the )?"
            rf"(spring|summer|autumn|fall|winter) (?:of )?(\d{{4}}){_B}"
        ),
        "season_year",
    ),
    (re.compile(rf"{_B}{_EN_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?{_B}"), "month_day"),
    (re.compile(rf"{_B}(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_EN_MONTH}{_B}"), "day_month"),
    (
        re.compile(rf"{_B}(?:in|of|since|during|until|by|early|late|mid|mid-|last|this|next) {_EN_MONTH}{_B}"),
        "in_month",
    ),  # fmt: skip
    (re.compile(rf"{_B}(?:in|of|since|during|until|by) (\d{{4}}){_B}"), "in_year"),
]

_ZH_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"大前天"), "day-3"),
    (re.compile(r"大后天"), "day+3"),
    (re.compile(r"前天"), "day-2"),
    (re.compile(r"后天"), "day+2"),
    (re.compile(r"昨[天晚日儿]|昨夜"), "day-1"),
    (re.compile(r"明[天晚早日儿]"), "day+1"),
    (re.compile(r"今[天晚早日儿]"), "day0"),
    (re.compile(rf"{_ZH_NUM}(?:个)?(天|周|星期|礼拜|月|年)(?:以)?前"), "zh_ago"),
    (re.compile(rf"{_ZH_NUM}(?:个)?(天|周|星期|礼拜|月|年)(?:以)?后"), "zh_in"),
    (re.compile(r"(上上|上|这|本|下下|下)(?:个)?(?:周|星期|礼拜)([一二三四五六日天末])"), "zh_weekday"),
    (re.compile(r"(上上|上|这|本|下下|下)(?:个)?(?:周|星期|礼拜)"), "zh_week"),
    (re.compile(r"(上上|上|这|本|下下|下)(?:个)?月"), "zh_month"),
    (re.compile(r"(去|今|明|前|后)年(?:的)?([春夏秋冬])(?:天|季)"), "zh_year_season"),
    (re.compile(r"(去|今|明|前|后)年"), "zh_year"),
    (
        re.compile(
            r"([0-9]{4})年([0-9]{1,2}|[一二三四五六七八九十]{1,3})月(?:([0-9]{1,2}|[一二三四五六七八九十]{1,3})[日号])?"
        ),
        "zh_ymd",
    ),  # noqa: E501
    (
        re.compile(
            r"(?<![0-9年])([0-9]{1,2}|[一二三四五六七八九十]{1,3})月(?:份)?(?:([0-9]{1,2}|[一二三四五六七八九十]{1,3})[日号])?"
        ),
        "zh_md",
    ),  # noqa: E501
    (re.compile(r"([0-9]{4})年"), "zh_y"),
]

_YEARLESS = frozenset({"month_day", "day_month", "in_month", "zh_md"})
_MODAL_MAY = re.compile(r"\bmay\b")
_SHIFT = {"last": -1, "past": -1, "this": 0, "next": 1, "上": -1, "上上": -2, "这": 0, "本": 0, "下": 1, "下下": 2}
_ZH_YEAR_SHIFT = {"前": -2, "去": -1, "今": 0, "明": 1, "后": 2}
_ZH_UNIT = {"天": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}


def _shifted(unit: str, anchor: date, n: int) -> tuple[Span, str]:
    """The day, week, month or year `n` units from the anchor's."""
    if unit == "day":
        return _day(anchor + timedelta(days=n)), "day"
    if unit == "week":
        return _week(anchor + timedelta(weeks=n)), "week"
    if unit == "month":
        first = _add_months(anchor.replace(day=1), n)
        return _month(first.year, first.month), "month"
    return _year(anchor.year + n), "year"


def _resolve(kind: str, m: re.Match[str], anchor: date) -> tuple[Span, str] | None:  # noqa: PLR0911, PLR0912
    g = m.groups()
    if kind.startswith("day") and kind[3:].lstrip("+-").isdigit():
        return _day(anchor + timedelta(days=int(kind[3:]))), "day"
    if kind in ("ago", "in"):
        n = _en_number(g[0])
        if n is None:
            return None
        return _shifted(g[1], anchor, -n if kind == "ago" else n)
    if kind in ("zh_ago", "zh_in"):
        n = _zh_number(g[0])
        if n is None:
            return None
        return _shifted(_ZH_UNIT[g[1]], anchor, -n if kind == "zh_ago" else n)
    if kind == "weekend":
        return _weekend(anchor + timedelta(weeks=_SHIFT[g[0]])), "weekend"
    if kind in ("week", "month", "year"):
        return _shifted(kind, anchor, _SHIFT[g[0]])
    if kind == "season":
        name = "autumn" if g[1] == "fall" else g[1]
        return _relative_season(name, anchor, _SHIFT[g[0]]), "season"
    if kind == "season_year":
        name = "autumn" if g[0] == "fall" else g[0]
        return _season(name, int(g[1])), "season"
    if kind == "weekday":
        wd = _WEEKDAYS_EN[g[1]]
        shift = _SHIFT[g[0]]
        if shift == 0:  # "this Friday": the one of this week
            return _day(anchor - timedelta(days=anchor.weekday()) + timedelta(days=wd)), "day"
        if shift < 0:
            return _day(_weekday_before(anchor, wd)), "day"
        return _day(anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=1, days=wd)), "day"
    if kind == "zh_weekday":
        shift = _SHIFT[g[0]]
        monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=shift)
        wd = _ZH_WEEKDAY[g[1]]
        if wd < 0:
            return Span(monday + timedelta(days=5), monday + timedelta(days=6)), "weekend"
        return _day(monday + timedelta(days=wd)), "day"
    if kind == "zh_week":
        return _shifted("week", anchor, _SHIFT[g[0]])
    if kind == "zh_month":
        return _shifted("month", anchor, _SHIFT[g[0]])
    if kind == "zh_year":
        return _year(anchor.year + _ZH_YEAR_SHIFT[g[0]]), "year"
    if kind == "zh_year_season":
        year = anchor.year + _ZH_YEAR_SHIFT[g[0]]
        name = _ZH_SEASON[g[1]]
        return _season(name, year), "season"
    if kind in ("month_day_year", "day_month_year"):
        month_s, day_s, year_s = (g[0], g[1], g[2]) if kind == "month_day_year" else (g[1], g[0], g[2])
        try:
            return _day(date(int(year_s), _MONTHS_EN[month_s], int(day_s))), "day"
        except ValueError:
            return None
    if kind == "month_year":
        return _month(int(g[1]), _MONTHS_EN[g[0]]), "month"
    if kind in ("month_day", "day_month"):
        month_s, day_s = (g[0], g[1]) if kind == "month_day" else (g[1], g[0])
        span = _nearest_day(_MONTHS_EN[month_s], int(day_s), anchor)
        return (span, "day") if span else None
    if kind == "in_month":
        return _nearest_month(_MONTHS_EN[g[0]], anchor), "month"
    if kind == "in_year":
        return _year(int(g[0])), "year"
    if kind == "zh_ymd":
        year, month = int(g[0]), _zh_number(g[1])
        if month is None or not 1 <= month <= 12:
            return None
        if g[2]:
            day = _zh_number(g[2])
            try:
                return (_day(date(year, month, day)), "day") if day else None
            except ValueError:
                return None
        return _month(year, month), "month"
    if kind == "zh_md":
        month = _zh_number(g[0])
        if month is None or not 1 <= month <= 12:
            return None
        if g[1]:
            day = _zh_number(g[1])
            span = _nearest_day(month, day, anchor) if day else None
            return (span, "day") if span else None
        return _nearest_month(month, anchor), "month"
    if kind == "zh_y":
        return _year(int(g[0])), "year"
    return None


def _scan(text: str, anchor: date) -> Iterator[Mention]:
    taken: list[tuple[int, int]] = []
    lowered = text.lower().replace("\u2019", "'")
    for rules, haystack in ((_EN_RULES, lowered), (_ZH_RULES, text)):
        for rx, kind in rules:
            for m in rx.finditer(haystack):
                if any(m.start() < e and s < m.end() for s, e in taken):
                    continue  # inside a longer expression already resolved
                if haystack is lowered and _MODAL_MAY.search(m.group(0)) and "May" not in text[m.start() : m.end()]:
                    continue  # "I may 2 ..." is the verb: the month is written with a capital
                try:
                    resolved = _resolve(kind, m, anchor)
                except (ValueError, OverflowError, KeyError):
                    resolved = None
                if resolved is None:
                    continue
                taken.append((m.start(), m.end()))
                yield Mention(text[m.start() : m.end()], resolved[0], resolved[1], kind in _YEARLESS)


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
        return f"{s.day} {_MONTH_NAMES[s.month]} {s.year}"
    if kind == "month":
        return f"{_MONTH_NAMES[s.month]} {s.year}"
    if kind == "year":
        return str(s.year)
    if kind == "season":
        season, _ = _season_of(s)
        return f"{season} {s.year}"
    return f"{s.day} {_MONTH_NAMES[s.month]} to {span.end.day} {_MONTH_NAMES[span.end.month]} {span.end.year}"


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
