"""The expressions of time, English and Chinese, as patterns with the rule that resolves
each against an anchor day ("last Friday", "3 days ago", 上周五, 去年夏天).

Longest expressions first: a shorter one inside a longer one already resolved is skipped
by the scan (`memory.language.dates`).
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from memory.language.day_spans import (
    ZH_SEASON,
    Span,
    add_months,
    day_span,
    month_span,
    nearest_day,
    nearest_month,
    relative_season,
    season_span,
    week_span,
    weekday_before,
    weekend_span,
    year_span,
)

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
MONTH_NAMES = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
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
EN_RULES: list[tuple[re.Pattern[str], str]] = [
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

ZH_RULES: list[tuple[re.Pattern[str], str]] = [
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

YEARLESS = frozenset({"month_day", "day_month", "in_month", "zh_md"})
MODAL_MAY = re.compile(r"\bmay\b")
_SHIFT = {"last": -1, "past": -1, "this": 0, "next": 1, "上": -1, "上上": -2, "这": 0, "本": 0, "下": 1, "下下": 2}
_ZH_YEAR_SHIFT = {"前": -2, "去": -1, "今": 0, "明": 1, "后": 2}
_ZH_UNIT = {"天": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}


def _shifted(unit: str, anchor: date, n: int) -> tuple[Span, str]:
    """The day, week, month or year `n` units from the anchor's."""
    if unit == "day":
        return day_span(anchor + timedelta(days=n)), "day"
    if unit == "week":
        return week_span(anchor + timedelta(weeks=n)), "week"
    if unit == "month":
        first = add_months(anchor.replace(day=1), n)
        return month_span(first.year, first.month), "month"
    return year_span(anchor.year + n), "year"


def resolve(kind: str, m: re.Match[str], anchor: date) -> tuple[Span, str] | None:  # noqa: PLR0911, PLR0912
    g = m.groups()
    if kind.startswith("day") and kind[3:].lstrip("+-").isdigit():
        return day_span(anchor + timedelta(days=int(kind[3:]))), "day"
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
        return weekend_span(anchor + timedelta(weeks=_SHIFT[g[0]])), "weekend"
    if kind in ("week", "month", "year"):
        return _shifted(kind, anchor, _SHIFT[g[0]])
    if kind == "season":
        name = "autumn" if g[1] == "fall" else g[1]
        return relative_season(name, anchor, _SHIFT[g[0]]), "season"
    if kind == "season_year":
        name = "autumn" if g[0] == "fall" else g[0]
        return season_span(name, int(g[1])), "season"
    if kind == "weekday":
        wd = _WEEKDAYS_EN[g[1]]
        shift = _SHIFT[g[0]]
        if shift == 0:  # "this Friday": the one of this week
            return day_span(anchor - timedelta(days=anchor.weekday()) + timedelta(days=wd)), "day"
        if shift < 0:
            return day_span(weekday_before(anchor, wd)), "day"
        return day_span(anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=1, days=wd)), "day"
    if kind == "zh_weekday":
        shift = _SHIFT[g[0]]
        monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=shift)
        wd = _ZH_WEEKDAY[g[1]]
        if wd < 0:
            return Span(monday + timedelta(days=5), monday + timedelta(days=6)), "weekend"
        return day_span(monday + timedelta(days=wd)), "day"
    if kind == "zh_week":
        return _shifted("week", anchor, _SHIFT[g[0]])
    if kind == "zh_month":
        return _shifted("month", anchor, _SHIFT[g[0]])
    if kind == "zh_year":
        return year_span(anchor.year + _ZH_YEAR_SHIFT[g[0]]), "year"
    if kind == "zh_year_season":
        year = anchor.year + _ZH_YEAR_SHIFT[g[0]]
        name = ZH_SEASON[g[1]]
        return season_span(name, year), "season"
    if kind in ("month_day_year", "day_month_year"):
        month_s, day_s, year_s = (g[0], g[1], g[2]) if kind == "month_day_year" else (g[1], g[0], g[2])
        try:
            return day_span(date(int(year_s), _MONTHS_EN[month_s], int(day_s))), "day"
        except ValueError:
            return None
    if kind == "month_year":
        return month_span(int(g[1]), _MONTHS_EN[g[0]]), "month"
    if kind in ("month_day", "day_month"):
        month_s, day_s = (g[0], g[1]) if kind == "month_day" else (g[1], g[0])
        span = nearest_day(_MONTHS_EN[month_s], int(day_s), anchor)
        return (span, "day") if span else None
    if kind == "in_month":
        return nearest_month(_MONTHS_EN[g[0]], anchor), "month"
    if kind == "in_year":
        return year_span(int(g[0])), "year"
    if kind == "zh_ymd":
        year, month = int(g[0]), _zh_number(g[1])
        if month is None or not 1 <= month <= 12:
            return None
        if g[2]:
            day = _zh_number(g[2])
            try:
                return (day_span(date(year, month, day)), "day") if day else None
            except ValueError:
                return None
        return month_span(year, month), "month"
    if kind == "zh_md":
        month = _zh_number(g[0])
        if month is None or not 1 <= month <= 12:
            return None
        if g[1]:
            day = _zh_number(g[1])
            span = nearest_day(month, day, anchor) if day else None
            return (span, "day") if span else None
        return nearest_month(month, anchor), "month"
    if kind == "zh_y":
        return year_span(int(g[0])), "year"
    return None
