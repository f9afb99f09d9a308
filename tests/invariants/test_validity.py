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
    assert year.overlap(Span(date(2021, 2, 1), date(2021, 2, 28)), TODAY) == 0  # a month after it: none, not less
    assert year.overlap(Span(date(2019, 12, 1), date(2020, 1, 10)), TODAY) == 10
    # Holding now: to today. Not known since when: from the question's first day.
    assert Held(date(2026, 1, 1), None).overlap(Span(date(2026, 5, 1), date(2026, 6, 30)), TODAY) == 32
    assert Held(None, date(2020, 1, 10)).overlap(Span(date(2020, 1, 1), date(2020, 1, 31)), TODAY) == 10
    span = held({"valid_from": "2020-01-01T10:00:00+00:00", "valid_until": "not a day"})
    assert (span.start, span.end) == (date(2020, 1, 1), None)
    assert (held({}).start, held({}).end) == (None, None)


# Two lines of values and a fact with no past (issue 48's mutants, this session): where the
# user lived (Porto, Lisbon, Paris), where they worked (Acme, Bolt, Grind), and a dog got on
# the day they moved to Paris. Past rows carry `was_slot` (the store's), the current `slot`.
def fact(id_: str, text: str, slot: str, start: str | None, end: str | None = None, score: float = 0.5,
         by: str | None = None) -> Cand:  # fmt: skip
    payload: dict[str, Any] = {"category": "personal_facts"}
    payload["was_slot" if end else "slot"] = slot
    if start:
        payload["valid_from"] = start
    if end:
        payload["valid_until"], payload["superseded_by"] = end, by
    return Cand(id_, score, 0.1, payload, text)


def world(**scores: float) -> list[Cand]:
    s = {"porto": 0.7, "lisbon": 0.8, "paris": 0.9, "acme": 0.6, "bolt": 0.65, "grind": 0.5, "nova": 0.4, **scores}
    return [
        fact("porto", "User lives in Porto", "home_city", "2019-01-01", "2021-05-01", s["porto"], "paris"),
        fact("lisbon", "User lives in Lisbon", "home_city", "2021-05-01", "2024-03-01", s["lisbon"], "paris"),
        fact("paris", "User lives in Paris", "home_city", "2024-03-01", None, s["paris"]),
        fact("acme", "User works at Acme", "job", "2018-02-01", "2020-09-01", s["acme"], "grind"),
        fact("bolt", "User works at Bolt", "job", "2020-09-01", "2024-06-01", s["bolt"], "grind"),
        fact("grind", "User works at Grind", "job", "2024-06-01", None, s["grind"]),
        fact("nova", "User got a dog named Nova", "dog", "2024-03-01", None, s["nova"]),
    ]


def order(ranked: list[Cand], query: str, **kw: Any) -> list[str]:
    return [c.id for c in for_its_time(ranked, query, TODAY, **kw)]


def before(got: list[str], a: str, *others: str) -> bool:
    return all(got.index(a) < got.index(o) for o in others)


def test_an_event_on_another_line_gets_the_value_that_held_on_its_day() -> None:
    # Nova came on 2024-03-01, the day Lisbon ended and Paris began (an end is not a day held).
    assert order(world(), "where did I live when I got Nova")[0] == "paris"
    assert order(world(), "where did I live after I got Nova")[0] == "paris"
    assert order(world(), "where did I live before I got Nova")[0] == "lisbon"
    # The line asked about ("job", by its slot's name) first, above the better-scored other line.
    got = order(world(), "what job did I have when I got Nova")
    assert got[0] == "bolt" and before(got, "paris", "lisbon", "porto")
    # Lisbon began 2021-05-01 (Bolt held it), Porto 2019-01-01 (Acme held it).
    assert order(world(), "what job did I have when I moved to Lisbon")[0] == "bolt"
    assert order(world(), "what job did I have when I moved to Porto")[0] == "acme"


def test_an_event_before_every_value_gets_the_first_and_a_gap_gets_none_of_them() -> None:
    # Started at Acme (2018-02-01) before the first home was known (2019): the first value.
    assert order(world(), "where did I live when I started at Acme")[0] == "porto"
    # Nova came in a gap between two values (2020-06-01: Porto ended 2020-01-01, Lisbon began
    # 2021-01-01): no value held then, so the latest past value (Lisbon) is the answer.
    gap = [
        fact("porto", "User lives in Porto", "home_city", "2019-01-01", "2020-01-01", 0.7, "paris"),
        fact("lisbon", "User lives in Lisbon", "home_city", "2021-01-01", "2024-03-01", 0.8, "paris"),
        fact("paris", "User lives in Paris", "home_city", "2024-03-01", None, 0.9),
        fact("nova", "User got a dog named Nova", "dog", "2020-06-01", None, 0.4),
    ]
    assert order(gap, "where did I live when I got Nova")[0] == "lisbon"


def test_a_lasting_event_gets_the_value_that_held_most_of_it() -> None:
    # Bolt: 2020-09-01..2024-06-01; Porto held 8 months of it, Lisbon almost 3 years, Paris 3 months.
    assert order(world(), "where did I live while I worked at Bolt")[0] == "lisbon"
    assert order(world(), "where did I live when I worked at Acme")[0] == "porto"
    # A one-day stay overlaps Porto by one day (both ends in); a stay before every value
    # overlaps none of them: the latest past value.
    one_day = fact("coimbra", "User studied at Coimbra", "school", "2020-06-01", "2020-06-02", 0.3, "uni")
    assert order([*world()[:3], one_day], "where did I live while I studied at Coimbra")[0] == "porto"
    long_ago = fact("coimbra", "User studied at Coimbra", "school", "2010-09-01", "2014-07-01", 0.3, "uni")
    assert order([*world()[:3], long_ago], "where did I live while I studied at Coimbra")[0] == "lisbon"


def test_an_event_on_the_same_line_gets_the_value_before_after_or_itself() -> None:
    assert order(world(), "where did I live before I moved to Lisbon")[0] == "porto"
    assert order(world(), "where did I live after I moved to Lisbon")[0] == "paris"
    assert order(world(), "where did I live when I moved to Lisbon")[0] == "lisbon"


def test_the_event_named_is_the_questions_time_not_its_answer() -> None:
    # Nova scored first, and the question's main part names no line: the value for Nova's day.
    got = order(world(nova=0.99), "where was I when I got Nova")
    assert got[0] == "paris" and got[1] == "nova"


def test_raw_turns_are_passed_over_and_each_line_keeps_its_own_values() -> None:
    raw = Cand("turn", 0.3, 0.1, {"created_at": "2020-05-01T10:00:00+00:00"}, "I love Porto in spring")
    got = order([raw, *world()], "where did I live in 2020")
    assert got[0] == "porto" and got[-1] == "turn"
    # 2020: Porto on the home line, Bolt (Sept.-Dec.) under Acme (Jan.-Aug.) on the job line;
    # the job line's values stay in their own order, not one line of six values.
    assert before(got, "porto", "paris", "lisbon") and before(got, "acme", "bolt", "grind")
    assert order(world(), "what job did I have in 2020")[0] == "acme"


def test_days_the_look_up_did_not_find_are_not_read_again_from_the_text() -> None:
    # span=None: the look-up parsed no days; "used to"'s rule (the latest past value) answers.
    assert order(world()[:3], "where did I live in 2020", span=None)[0] == "lisbon"
    from memory.language.dates import Span

    assert order(world()[:3], "where did I live", span=Span(date(2020, 1, 1), date(2020, 12, 31)))[0] == "porto"


def test_a_value_whose_start_is_not_known_sorts_by_its_end() -> None:
    # "first": the value that ended first, even without a known start.
    line = [
        fact("lisbon", "User lives in Lisbon", "home_city", None, "2024-03-01", 0.8, "paris"),
        fact("porto", "User lives in Porto", "home_city", "2019-01-01", "2021-05-01", 0.7, "paris"),
        fact("paris", "User lives in Paris", "home_city", "2024-03-01", None, 0.9),
    ]
    assert order(line, "where did I first live")[0] == "porto"
    # Two values that ended the same day: the one that began first is first.
    same_end = [
        fact("b", "User lives in Braga", "home_city", "2020-01-01", "2021-05-01", 0.8, "paris"),
        fact("a", "User lives in Aveiro", "home_city", "2019-01-01", "2021-05-01", 0.7, "paris"),
        fact("paris", "User lives in Paris", "home_city", "2024-03-01", None, 0.9),
    ]
    assert order(same_end, "where did I first live")[0] == "a"


def test_the_chosen_value_keeps_its_score_when_it_is_already_the_best() -> None:
    got = for_its_time(world(lisbon=0.95), "where did I use to live", TODAY)
    assert got[0].id == "lisbon" and got[0].score == 0.95
    # A tie at the line's best: the chosen value is lifted above it (Porto, not Paris, though
    # "paris" sorts first).
    got = for_its_time(world(porto=0.9), "where did I live in 2020", TODAY)
    assert got[0].id == "porto" and got[0].score > 0.9


def test_now_days_and_tense_and_a_past_value_named() -> None:
    from memory.language.dates import Span
    from memory.retrieval.validity import current_first

    # Days that reach today: now in the present tense, past in the past tense.
    assert order(world()[:3], "where do I live this year") == ["paris"]
    assert order(world()[:3], "where did I live this year")[0] == "paris"
    assert order(world()[:3], "where did I live this year") == ["paris", "lisbon", "porto"]
    # Days to come are not the past.
    assert order(world()[:3], "where will I live in 2030") == ["paris"]
    # Asked as the past by the caller.
    assert order(world()[:3], "where do I live", past=True)[0] == "lisbon"
    # No tense either way: past when it names a past value by two of its words or more.
    flat = [
        fact("lisbon", "User shared a flat with mates in Lisbon", "home_city", "2021-05-01", "2024-03-01", 0.5,
             "paris"),
        fact("paris", "User lives alone in Paris", "home_city", "2024-03-01", None, 0.9),
    ]  # fmt: skip
    assert order(flat, "flat with mates in Lisbon")[0] == "lisbon"
    assert [c.id for c in current_first(flat, "flat with mates in Lisbon", TODAY)] == ["lisbon", "paris"]
    assert [c.id for c in current_first(flat, "flat in Paris", TODAY)] == ["paris"]
    # current_first with the look-up's days: past days keep every value, none reads the text.
    past_days = Span(date(2020, 1, 1), date(2020, 12, 31))
    assert len(current_first(world()[:3], "where do I live", TODAY, span=past_days)) == 3
    assert [c.id for c in current_first(world()[:3], "where do I live in 2020", TODAY, span=None)] == ["paris"]


def test_a_question_about_now_puts_the_current_value_at_the_lines_best_only_when_it_names_an_old_one() -> None:
    raw = Cand("turn", 0.7, 0.1, {}, "I like the food here")
    # Named: "Lisbon", the best-scored value of the line: Paris gets its score.
    got = for_its_time([raw, *world(lisbon=0.95, paris=0.5)[:3]], "do I still live in Lisbon", TODAY)
    assert [c.id for c in got] == ["paris", "turn"] and got[0].score >= 0.95
    # Not named: Paris keeps its own score, below the turn.
    got = for_its_time([raw, *world(lisbon=0.95, paris=0.5)[:3]], "where am I based now", TODAY)
    assert [c.id for c in got] == ["turn", "paris"] and got[1].score == 0.5
    # The current value not among the candidates: the past ones still go.
    assert order(world()[:2], "do I still live in Lisbon") == []


def test_an_event_on_its_own_line_when_the_main_part_names_no_line() -> None:
    # "what did I have": no line named; the event (moving to Lisbon) is on the home line, so
    # "before"/"after" it is that line's value before/after Lisbon.
    assert order(world(), "what did I have before I moved to Lisbon")[0] == "porto"
    assert order(world(), "what did I have after I moved to Lisbon")[0] == "paris"
    # Before the first value of its line there is none there: the job held the day before.
    assert order(world(), "what did I have before I moved to Porto")[0] == "acme"
    # After the last there is none either: the job held that day.
    assert order(world(), "what did I have after I moved to Paris")[0] == "bolt"
    # "when": the event is the question's time, the other line's value for that day answers.
    assert order(world(), "what did I have when I moved to Lisbon")[0] == "bolt"
    # The main part names another line (the job): its value the day before Lisbon.
    assert order(world(), "what job did I have before I moved to Lisbon")[0] == "bolt"


def test_an_event_first_scored_with_no_other_line_gives_way_to_a_raw_turn() -> None:
    # Only the home line and a turn: "what happened when I moved to Lisbon" is not answered
    # by Lisbon itself (the question's time), so the turn comes first.
    raw = Cand("turn", 0.3, 0.1, {"created_at": "2021-05-02T10:00:00+00:00"}, "The movers broke a lamp")
    assert order([raw, *world(lisbon=0.99)[:3]], "what happened when I moved to Lisbon")[0] == "turn"


def test_the_line_asked_about_is_found_by_its_slot_name_on_past_rows_too() -> None:
    # Grind (the current job) not among the candidates: "job" is only in the past rows'
    # `was_slot`; the job line is still the one asked about (Bolt the day before Lisbon).
    no_grind = [c for c in world() if c.id != "grind"]
    assert order(no_grind, "what job did I have before I moved to Lisbon")[0] == "bolt"
    # "home city" names the home line by its slot (home_city): Porto the day before Bolt.
    assert order(world(), "what was my home city before I started at Bolt")[0] == "porto"


def test_two_lines_named_as_much_is_no_line_named() -> None:
    # "job" and "home" name one line each: none is the target, the event's own line answers
    # (Porto before Lisbon), whichever line comes first among the candidates.
    jobs_first = world()[3:6] + world()[:3]
    assert order(jobs_first, "what job and home did I have before I moved to Lisbon")[0] == "porto"


def test_a_value_named_by_its_words_only_when_it_is_the_only_one_named_most() -> None:
    flats = [
        fact("porto", "User shared a flat with mates in Porto", "home_city", "2019-01-01", "2021-05-01", 0.5, "paris"),
        fact("lisbon", "User shared a flat with mates in Lisbon", "home_city", "2021-05-01", "2024-03-01", 0.5,
             "paris"),
        fact("paris", "User lives alone in Paris", "home_city", "2024-03-01", None, 0.9),
    ]  # fmt: skip
    # Two past values named as much ("flat", "mates"): none is named, the question is about now.
    assert order(flats, "flat with mates") == ["paris"]
    # One past value named by exactly two words: the past.
    assert order(flats[1:], "flat with mates")[0] == "lisbon"
    # A past value alone among the candidates is not "named more than any other".
    assert order(flats[1:2], "flat with mates in Lisbon") == []


def test_an_event_named_by_two_facts_as_much_is_the_better_scored() -> None:
    # "Nova and Luna": one word each; Luna (got 2020-01-01) scores better than Nova
    # (2024-03-01): Porto held then.
    pets = [
        fact("nova", "User got a dog named Nova", "dog", "2024-03-01", None, 0.4),
        fact("luna", "User got a cat named Luna", "cat", "2020-01-01", None, 0.45),
        *world()[:3],
    ]
    assert order(pets, "where did I live when I adopted Nova and Luna")[0] == "porto"


def test_an_event_in_chinese_is_matched_by_its_characters() -> None:
    # Moved to Beijing 2022-01-01; the day before, the job was in Shenzhen (since 2021-06-01),
    # not the latest past job (Guangzhou).
    zh = [
        fact("sh", "用户住在上海", "home_city", "2019-01-01", "2022-01-01", 0.7, "bj"),
        fact("bj", "用户住在北京", "home_city", "2022-01-01", None, 0.9),
        fact("gz", "用户在广州工作", "job", "2018-01-01", "2021-06-01", 0.6, "sz"),
        fact("sz", "用户在深圳工作", "job", "2021-06-01", None, 0.5),
    ]
    assert order(zh, "搬到北京之前我在哪里工作")[0] == "sz"
    assert order(zh, "搬到北京之前我住在哪里")[0] == "sh"


def test_days_an_event_and_its_edges() -> None:
    # Days before every value: none held them, the latest past value answers.
    assert order(world(), "where did I live in 2010")[0] == "lisbon"
    # One day named, held by Porto: one day of overlap is enough.
    assert order(world(), "where did I live on March 1, 2020")[0] == "porto"
    # "when I moved to Porto": the value the event itself is, on its own line.
    assert order(world(), "where did I live when I moved to Porto")[0] == "porto"
    # Starting at Bolt (2020-09-01, not a lasting "while"): the home on its first day, Porto,
    # not Lisbon, which held most of Bolt's span.
    assert order(world(), "where did I live when I started at Bolt")[0] == "porto"
    # Nova got 2024-03-02, the day after Paris began: "before" is 2024-03-01, already Paris.
    w = world()
    w[6] = fact("nova", "User got a dog named Nova", "dog", "2024-03-02", None, 0.4)
    assert order(w, "where did I live before I got Nova")[0] == "paris"
    # A stay 2021-04-28 until 2021-05-03 (its last day 05-02): Porto 4 days, Lisbon 2.
    stay = fact("coimbra", "User studied at Coimbra", "school", "2021-04-28", "2021-05-03", 0.3, "uni")
    assert order([*world()[:3], stay], "where did I live while I studied at Coimbra")[0] == "porto"
