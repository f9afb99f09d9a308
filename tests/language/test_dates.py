"""Relative dates resolved against the day they were said, in English and Chinese."""

from __future__ import annotations

from datetime import date

import pytest

from memory.language.dates import Span, asks_when, describe, mentions, query_span

MONDAY = date(2023, 5, 8)  # a Monday


def days(text: str, anchor: date = MONDAY) -> list[tuple[str, str, str]]:
    return [(m.text, m.span.start.isoformat(), m.span.end.isoformat()) for m in mentions(text, anchor)]


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("I went to a support group yesterday.", "2023-05-07", "2023-05-07"),
        ("the day before yesterday we met", "2023-05-06", "2023-05-06"),
        ("Last Friday I painted a sunset", "2023-05-05", "2023-05-05"),
        ("two weeks ago we went camping", "2023-04-24", "2023-04-30"),
        ("we moved here last month", "2023-04-01", "2023-04-30"),
        ("last week was busy", "2023-05-01", "2023-05-07"),
        ("We went camping last summer", "2022-06-01", "2022-08-31"),
        ("my exam is tomorrow", "2023-05-09", "2023-05-09"),
        ("in May I ran a race", "2023-05-01", "2023-05-31"),
        ("on May 7, 2023 we signed", "2023-05-07", "2023-05-07"),
        ("in the summer of 2022", "2022-06-01", "2022-08-31"),
        ("我昨天去了医院", "2023-05-07", "2023-05-07"),
        ("前天我们见面了", "2023-05-06", "2023-05-06"),
        ("上周五我们吃了火锅", "2023-05-05", "2023-05-05"),
        ("上个月我搬家了", "2023-04-01", "2023-04-30"),
        ("去年夏天去了海边", "2022-06-01", "2022-08-31"),
        ("3天前买的", "2023-05-05", "2023-05-05"),
        ("下周要出差", "2023-05-15", "2023-05-21"),
        ("5月3日去北京", "2023-05-03", "2023-05-03"),
        ("2024年4月", "2024-04-01", "2024-04-30"),
    ],
)
def test_a_relative_or_calendar_date_names_the_days_it_means(text: str, start: str, end: str) -> None:
    found = days(text)
    assert len(found) == 1, found
    assert found[0][1:] == (start, end)


def test_may_the_verb_and_a_weekday_alone_name_no_day() -> None:
    assert days("I may 3 times a week go running") == []
    assert days("on Friday we could meet") == []  # past or coming: a guess, so no day
    assert days("I like music") == []


def test_a_query_names_the_days_of_all_its_expressions() -> None:
    assert query_span("what did I do last week?", MONDAY) == Span(date(2023, 5, 1), date(2023, 5, 7))
    assert query_span("上个月我去了哪里", MONDAY) == Span(date(2023, 4, 1), date(2023, 4, 30))
    assert query_span("what is my sister's name?", MONDAY) is None


def test_questions_that_ask_when_are_told_apart() -> None:
    assert asks_when("When did Caroline go to the support group?")
    assert asks_when("你什么时候去的北京")
    assert not asks_when("Where did Caroline go?")


def test_a_span_is_described_in_the_memory_s_language() -> None:
    day = Span(date(2023, 5, 7), date(2023, 5, 7))
    assert describe(day, "day") == "7 May 2023"
    assert describe(day, "day", chinese=True) == "2023年5月7日"
    assert describe(Span(date(2023, 4, 1), date(2023, 4, 30)), "month") == "April 2023"
