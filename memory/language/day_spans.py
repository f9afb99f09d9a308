"""A run of days (`Span`) and the calendar arithmetic that names one: a day, a week, a
weekend, a month, a season, the nearest May or 7 May to a given day.

Apart from the expressions that use it, so the store and the retriever can hold a span
without the rules that read one out of a text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta


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


# ----------------------------------------------------------------- calendar arithmetic
def day_span(d: date) -> Span:
    return Span(d, d)


def week_span(d: date) -> Span:
    start = d - timedelta(days=d.weekday())
    return Span(start, start + timedelta(days=6))


def weekend_span(d: date) -> Span:
    sat = d - timedelta(days=d.weekday()) + timedelta(days=5)
    return Span(sat, sat + timedelta(days=1))


def shift_year(d: date, years: int) -> date:
    try:
        return d.replace(year=d.year + years)
    except ValueError:  # 29 February
        return d.replace(year=d.year + years, day=28)


def add_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    return date(d.year + y, m + 1, 1)


def month_span(year: int, month: int) -> Span:
    start = date(year, month, 1)
    return Span(start, add_months(start, 1) - timedelta(days=1))


def year_span(year: int) -> Span:
    return Span(date(year, 1, 1), date(year, 12, 31))


_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
ZH_SEASON = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}


def season_span(name: str, year: int) -> Span:
    start = date(year, _SEASON_START[name], 1)
    return Span(start, add_months(start, 3) - timedelta(days=1))


def season_of(d: date) -> tuple[str, int]:
    """The season a day is in, and the year its season starts in (winter: December's)."""
    if d.month in (12, 1, 2):
        return "winter", d.year if d.month == 12 else d.year - 1
    return {3: "spring", 4: "spring", 5: "spring", 6: "summer", 7: "summer", 8: "summer"}.get(d.month, "autumn"), d.year


def relative_season(name: str, anchor: date, shift: int) -> Span:
    """'last summer' (shift -1), 'this summer' (0), 'next summer' (+1), seen from `anchor`."""
    current, year = season_of(anchor)
    this = season_span(name, year if name != "winter" or current == "winter" else anchor.year)
    if shift == 0:
        return this
    if shift < 0:
        # The latest such season that has ended... or begun: "last summer" in August is last year's.
        target = this if this.end < anchor else season_span(name, this.start.year - 1)
        return target
    return this if this.start > anchor else season_span(name, this.start.year + 1)


def nearest_month(month: int, anchor: date) -> Span:
    """'in May' said on `anchor`: the May whose middle is nearest to it."""
    best = min(
        (month_span(y, month) for y in (anchor.year - 1, anchor.year, anchor.year + 1)),
        key=lambda s: abs((s.start + timedelta(days=14) - anchor).days),
    )
    return best


def nearest_day(month: int, day: int, anchor: date) -> Span | None:
    options = []
    for y in (anchor.year - 1, anchor.year, anchor.year + 1):
        try:
            options.append(date(y, month, day))
        except ValueError:
            continue
    return day_span(min(options, key=lambda d: abs((d - anchor).days))) if options else None


def weekday_before(anchor: date, weekday: int, weeks_back: int = 1) -> date:
    """'last Friday': the Friday of the week before the anchor's week (as most speakers mean it,
    and the most recent one before the anchor when that is closer within the same week)."""
    return anchor - timedelta(days=anchor.weekday()) - timedelta(weeks=weeks_back) + timedelta(days=weekday)
