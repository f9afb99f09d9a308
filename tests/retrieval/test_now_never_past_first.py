"""A question about now never gets a value that no longer holds, let alone first, even
when the raw scores put the superseded value above the current one. A question about the
past still gets its past value first (the rule's other side).

The questions are present-tense forms written from the rule (a state now said with a
participle, "how old", a habit with an event clause, days that reach today, a question
that names an old value); the candidates are two values of one fact's line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pytest

from memory.retrieval.validity import current_first, for_its_time

TODAY = date(2026, 11, 20)


@dataclass
class Cand:
    id: str
    text: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)
    lexical: float = 0.0


def line(past_text: str, current_text: str, slot: str) -> list[Cand]:
    """A past value scored above the current value of the same slot."""
    current = Cand("cur", current_text, 0.50, {"category": "personal_facts", "slot": slot, "valid_from": "2026-10-01"})
    past = Cand("old", past_text, 0.90, {"category": "personal_facts", "was_slot": slot, "superseded_by": "cur",
                                        "valid_from": "2025-01-01", "valid_until": "2026-10-01"})  # fmt: skip
    return [past, current]


NOW_QUESTIONS = [
    ("Who am I married to?", "User is married to Tom", "User is married to Sam", "spouse"),
    ("Where is my daughter based?", "User's daughter lives in Leeds", "User's daughter lives in York", "daughter"),
    ("What's my dog called?", "User's dog is called Rex", "User's dog is called Nova", "dog"),
    ("How old is my son?", "User's son is 6 years old", "User's son is 7 years old", "son_age"),
    ("What did I tell you my dog is called?", "User's dog is called Rex", "User's dog is called Nova", "dog"),
    ("Where am I employed?", "User is employed at Grind", "User is employed at Tesco", "job"),
    ("What do I do in my spare time?", "User plays chess in spare time", "User swims in spare time", "hobby"),
    ("Do I live in Leeds?", "User lives in Leeds", "User lives in York", "home_city"),
    ("Where do I live this year?", "User lives in Leeds", "User lives in York", "home_city"),
    ("Where do I live now?", "User lives in Leeds", "User lives in York", "home_city"),
    ("我现在住哪？", "用户住在成都", "用户住在重庆", "home_city"),
]


@pytest.mark.parametrize(("question", "past_text", "current_text", "slot"), NOW_QUESTIONS)
def test_a_question_about_now_gets_the_current_value_first(question: str, past_text: str, current_text: str,
                                                           slot: str) -> None:  # fmt: skip
    ranked = for_its_time(line(past_text, current_text, slot), question, TODAY)
    assert ranked[0].text == current_text
    assert past_text not in [c.text for c in ranked]


@pytest.mark.parametrize(("question", "past_text", "current_text", "slot"), NOW_QUESTIONS)
def test_later_stages_cannot_bring_a_past_value_back_first(question: str, past_text: str, current_text: str,
                                                           slot: str) -> None:  # fmt: skip
    ranked = current_first(line(past_text, current_text, slot), question, TODAY)
    assert [c.text for c in ranked] == [current_text]


PAST_QUESTIONS = ["Where did I live before?", "Where was I living last year?", "Where did I use to live?", "我以前住哪"]


@pytest.mark.parametrize("question", PAST_QUESTIONS)
def test_a_question_about_the_past_still_gets_the_past_value_first(question: str) -> None:
    past_text = "用户住在成都" if "住" in question else "User lives in Leeds"
    current_text = "用户住在重庆" if "住" in question else "User lives in York"
    cands = line(past_text, current_text, "home_city")
    cands[0].score, cands[1].score = 0.40, 0.90  # the current value first by the raw scores
    assert for_its_time(cands, question, TODAY)[0].text == past_text
    assert past_text in [c.text for c in current_first(cands, question, TODAY)]
