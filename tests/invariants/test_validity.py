"""Which value of a changed fact a question about the past gets (memory/retrieval/validity.py):
"before X" gets the value that held just before X; with X the oldest value there is none
before it, and the value that holds now is never the answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from memory.retrieval.validity import for_its_time

TODAY = date(2026, 6, 1)


@dataclass
class Cand:
    id: str
    score: float
    lexical: float
    payload: dict[str, Any] = field(default_factory=dict)
    text: str = ""


def lineage(lexical: dict[str, float]) -> list[Cand]:
    """Porto (2019-2021), then Lisbon (2021-2024), then Paris (now); the current row first by score."""
    fact = {"category": "personal_facts", "slot": "home_city"}
    return [
        Cand("paris", 0.9, lexical.get("paris", 0.1), {**fact, "valid_from": "2024-03-01"}, "User lives in Paris"),
        Cand("lisbon", 0.8, lexical.get("lisbon", 0.1),
             {**fact, "valid_from": "2021-05-01", "valid_until": "2024-03-01", "superseded_by": "paris"},
             "User lives in Lisbon"),
        Cand("porto", 0.7, lexical.get("porto", 0.1),
             {**fact, "valid_from": "2019-01-01", "valid_until": "2021-05-01", "superseded_by": "paris"},
             "User lives in Porto"),
    ]  # fmt: skip


def first(query: str, lexical: dict[str, float]) -> str:
    return for_its_time(lineage(lexical), query, TODAY)[0].id


def test_before_a_value_gets_the_one_that_held_just_before_it() -> None:
    assert first("where did I live before Paris", {"paris": 0.8}) == "lisbon"
    assert first("where did I live before Lisbon", {"lisbon": 0.8}) == "porto"


def test_before_the_oldest_value_never_gets_the_value_that_holds_now() -> None:
    got = for_its_time(lineage({"porto": 0.8}), "where did I live before Porto", TODAY)
    assert got[0].id != "paris"
    assert [c.id for c in got].count("paris") == 1  # still there, not first


def test_before_with_two_values_and_the_older_named() -> None:
    two = lineage({"lisbon": 0.8})[:2]
    got = for_its_time(two, "where did I live before Lisbon", TODAY)
    assert got[0].id != "paris"


def test_a_question_not_about_the_past_by_time_gets_the_latest_past_value() -> None:
    # "used to": the latest value that no longer holds (Lisbon), lifted just above the best.
    got = for_its_time(lineage({}), "where did I use to live", TODAY)
    assert got[0].id == "lisbon" and got[0].score > 0.9 and got[1].id == "paris"


def test_a_question_naming_past_days_gets_the_value_of_those_days() -> None:
    assert first("where did I live in 2020", {}) == "porto"
    assert first("where did I live in 2022", {}) == "lisbon"


def ids(query: str, lexical: dict[str, float] | None = None) -> list[str]:
    return [c.id for c in for_its_time(lineage(lexical or {}), query, TODAY)]


def test_a_question_about_now_gets_the_current_value_and_no_past_one() -> None:
    from memory.retrieval.validity import current_first

    assert ids("where do I live now") == ["paris"]
    assert [c.id for c in current_first(lineage({}), "where do I live", TODAY)] == ["paris"]
    # About the past: every value stays for the later stages.
    assert [c.id for c in current_first(lineage({}), "where did I use to live", TODAY)] == ["paris", "lisbon", "porto"]


def test_after_a_value_gets_the_one_that_followed_it_and_first_the_oldest() -> None:
    assert ids("where did I live after Porto")[0] == "lisbon"
    assert ids("where did I live after Lisbon")[0] == "paris"
    assert ids("where did I first live")[0] == "porto"


def test_days_named_get_the_value_that_held_most_of_them_the_current_one_included() -> None:
    # TODAY is 2026-06-01: Porto 2019-01-01..2021-05-01, Lisbon ..2024-03-01, Paris since.
    assert ids("where did I live in March 2020")[0] == "porto"
    assert ids("where did I live in 2025")[0] == "paris"
    assert ids("where did I live last year")[0] == "paris"


def test_the_value_for_the_time_is_first_by_the_lines_best_score_and_the_others_below_it() -> None:
    got = for_its_time(lineage({}), "where did I live in 2020", TODAY)
    assert got[0].id == "porto" and 0.9 < got[0].score < 0.9 + 1e-3
    assert all(c.score < got[0].score for c in got[1:])


def test_the_days_a_value_held_overlap_a_question_both_ends_in() -> None:
    from memory.language.dates import Span
    from memory.retrieval.validity import Held, held

    year = Held(date(2020, 1, 1), date(2020, 12, 31))
    assert year.overlap(Span(date(2020, 6, 1), date(2020, 6, 1)), TODAY) == 1  # one day
    assert year.overlap(Span(date(2020, 12, 31), date(2021, 1, 5)), TODAY) == 1  # its last day
    assert year.overlap(Span(date(2021, 1, 1), date(2021, 1, 31)), TODAY) == 0
    assert year.overlap(Span(date(2019, 12, 1), date(2020, 1, 10)), TODAY) == 10
    # Holding now: to today. Not known since when: from the question's first day.
    assert Held(date(2026, 1, 1), None).overlap(Span(date(2026, 5, 1), date(2026, 6, 30)), TODAY) == 32
    assert Held(None, date(2020, 1, 10)).overlap(Span(date(2020, 1, 1), date(2020, 1, 31)), TODAY) == 10
    span = held({"valid_from": "2020-01-01T10:00:00+00:00", "valid_until": "not a day"})
    assert (span.start, span.end) == (date(2020, 1, 1), None)
    assert (held({}).start, held({}).end) == (None, None)
