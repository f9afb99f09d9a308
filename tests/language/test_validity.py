"""When a GATED fact held: the dates a turn names, corrections told from changes, and the
questions that ask about the past (memory/language/validity.py)."""

from __future__ import annotations

from datetime import date

import pytest

from memory.language.validity import asks_about_past, asks_before, held_from, is_correction

FRIDAY = date(2026, 3, 20)


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("I moved to Berlin.", date(2026, 3, 20)),  # no date named: the day it was said
        ("I moved to Berlin last week.", date(2026, 3, 9)),  # the Monday of the week before
        ("I moved to Berlin last July.", date(2025, 7, 1)),  # the July gone by, not the coming one
        ("I started at Spotify in January.", date(2026, 1, 1)),
        ("I'm moving to Berlin next month.", date(2026, 4, 1)),  # the turn speaks of what is to come
        ("我上个月搬到上海了。", date(2026, 2, 1)),
        ("我去年搬到了上海", date(2025, 1, 1)),
    ],
)
def test_a_fact_holds_from_the_date_its_turn_names_else_from_the_day_it_was_said(text: str, held: date) -> None:
    assert held_from(text, FRIDAY) == held


@pytest.mark.parametrize(
    ("text", "old", "correction"),
    [
        ("No, I said Berlin, not Bern.", "User lives in Bern", True),
        ("It's Anna, not Anne.", "User's sister is Anne", True),
        ("you misheard, it's Anna", "User's sister is Hannah", True),
        ("actually, it's 3pm", "User has a dentist appointment at 2pm", True),
        ("不对，我说的是柏林，不是伯尔尼。", "用户住在伯尔尼", True),
        ("是柏林，不是伯尔尼", "用户住在伯尔尼", True),
        ("I moved to Berlin last week.", "User lives in Bern", False),
        ("Actually, I moved to Berlin last month.", "User lives in Paris", False),
        ("Quick update: I moved to Berlin", "User lives in Paris", False),
        ("I'm not a teacher anymore, I work at a bank now", "User is a teacher", False),
        ("我搬到上海了", "用户住在北京", False),
        ("我已经不是老师了，现在在银行上班", "用户是老师", False),
    ],
)
def test_a_correction_is_told_from_a_change(text: str, old: str, correction: bool) -> None:
    assert is_correction(text, old) is correction


@pytest.mark.parametrize(
    ("question", "past", "before"),
    [
        ("Where did I live before Berlin?", True, True),
        ("Who was I dating before Tom?", True, True),
        ("Which city did I use to live in?", True, False),
        ("What was my job last year?", True, False),
        ("Where did I work in 2024?", True, False),
        ("What's my ex's name?", True, False),
        ("搬到上海之前我住哪儿？", True, True),
        ("我以前在哪里工作？", True, False),
        ("我去年住在哪里？", True, False),
        ("我前男友叫什么名字？", True, False),
        ("Where do I live now?", False, False),
        ("What's my sister's name?", False, False),
        ("Have I told you before where I work?", False, False),  # "before" dates the telling
        ("我之前跟你说过我在哪工作吗？", False, False),
        ("我妹妹叫什么？", False, False),
        ("What should I pack before the flight?", False, False),  # "before" something to come
        ("How long until my birthday?", False, False),
        ("出发之前我要准备什么？", False, False),
    ],
)
def test_a_question_about_the_past_is_told_from_one_about_now(question: str, past: bool, before: bool) -> None:
    assert asks_about_past(question, FRIDAY) is past
    assert asks_before(question) is before
