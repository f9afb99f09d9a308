"""What a memory is indexed under beside its text: the turn it answers, its days."""

from __future__ import annotations

from datetime import date

from memory.language.indexing import CONTEXT_CHARS, context_part, index_form


def test_a_turn_is_indexed_with_the_question_it_answers_and_its_days() -> None:
    form = index_form(
        "I've had them for three years, since last summer.",
        context=["user: we should talk about pets", "assistant: How long have you had the turtles?"],
        said_on=date(2023, 5, 8),
        use_context=True,
        use_dates=True,
    )
    assert form.context == "How long have you had the turtles?"  # the last item, its role label off
    assert form.embed == "I've had them for three years, since last summer.\nHow long have you had the turtles?"
    assert form.dates == ("summer 2022",)
    assert "turtles" in form.extra and "summer 2022" in form.extra
    assert form.payload()["when"] == [["2022-06-01", "2022-08-31"]]


def test_each_part_has_its_own_switch_and_nothing_is_added_without_one() -> None:
    text = "我昨天去了医院"
    off = index_form(text, context=["assistant: 你昨天干嘛了？"], said_on=date(2024, 4, 2), use_context=False,
                     use_dates=False)  # fmt: skip
    assert (off.embed, off.extra, off.when) == (text, "", ())
    assert set(off.payload()) == {"idx_v"}
    dated = index_form(text, said_on=date(2024, 4, 2), use_context=False, use_dates=True)
    assert dated.dates == ("2024年4月1日",) and dated.embed == text  # dates stay out of the vector's text
    unknown_day = index_form(text, said_on=None, use_context=True, use_dates=True)
    assert unknown_day.when == ()


def test_a_long_turn_before_is_kept_to_its_end() -> None:
    long = "assistant: " + "blah " * 200 + "so where did you go?"
    part = context_part([long])
    assert len(part) <= CONTEXT_CHARS + 1 and part.endswith("so where did you go?") and part.startswith("…")
    assert context_part([]) == "" and context_part(["assistant:   "]) == ""


def test_a_date_said_without_a_year_matches_it_in_the_years_either_side() -> None:
    # A birthday said on 1 April (nearest 9 October: the last one) and asked about on
    # 12 April (nearest: the next one) is the same day of the year.
    form = index_form("我的生日是10月9日", said_on=date(2024, 4, 1), use_context=False, use_dates=True)
    assert ["2024-10-09", "2024-10-09"] in form.payload()["when"]
    assert ["2023-10-09", "2023-10-09"] in form.payload()["when"]
    dated = index_form("We married on 9 October 2015.", said_on=date(2024, 4, 1), use_context=False, use_dates=True)
    assert dated.payload()["when"] == [["2015-10-09", "2015-10-09"]]  # a year said: that year only
