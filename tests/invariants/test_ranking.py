"""The last step of the ranking (memory/retrieval/ranking.py), at its documented values:
a turn that asks AND echoes keeps the smaller of the two weights (whichever is smaller);
an echo of exactly `MIN_WORDS` (3) content words is demoted and one of 2 is not; and the
shape of `bounded` above the knee (0.75 + 0.25 * (1 - e^-(x - 0.75) / 0.25)), not only its
range. Expected values are computed here from the docstring's formula, with literals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from memory.language.indexing import ASKS_KEY
from memory.retrieval.ranking import bound_scores, bounded, echo, speech_acts, words


@dataclass
class Cand:
    text: str
    score: float = 1.0
    payload: dict[str, Any] = field(default_factory=dict)


QUESTION = "where does my sister Anna live"


def weighted(text: str, payload: dict[str, Any], message: str, *, question: float, echo_w: float) -> float:
    cand = Cand(text, 1.0, payload)
    speech_acts([cand], message, question_weight=question, echo_weight=echo_w)
    return cand.score


@pytest.mark.parametrize(("question", "echo_w", "kept"), [(0.5, 0.2, 0.2), (0.2, 0.5, 0.2), (0.3, 0.3, 0.3)])
def test_a_turn_that_asks_and_echoes_keeps_the_smaller_weight(question: float, echo_w: float, kept: float) -> None:
    asked = {ASKS_KEY: True}
    assert weighted(QUESTION, asked, QUESTION, question=question, echo_w=echo_w) == pytest.approx(kept)


def test_each_weight_alone_and_a_statement_untouched() -> None:
    asked = {ASKS_KEY: True}
    # Asks, and does not repeat this message: the question's weight only.
    assert weighted(QUESTION, asked, "I bought a red bicycle yesterday", question=0.5, echo_w=0.2) == 0.5
    # Repeats the message, and does not ask (a statement said again): the echo's weight only.
    said = "my sister Anna lives in Lisbon"
    assert weighted(said, {}, said, question=0.5, echo_w=0.2) == 0.2
    # Neither: kept as it is; a GATED fact is never an echo nor a question.
    assert weighted("I bought a red bicycle yesterday", {}, QUESTION, question=0.5, echo_w=0.2) == 1.0
    assert weighted(said, {"category": "personal_facts"}, said, question=0.5, echo_w=0.2) == 1.0
    # Weights of 1 leave every score as it is.
    assert weighted(QUESTION, asked, QUESTION, question=1.0, echo_w=1.0) == 1.0


def test_an_echo_of_exactly_three_content_words_is_demoted_and_of_two_is_not() -> None:
    assert len(words("Anna loves Lisbon")) == 3 and len(words("Anna Lisbon")) == 2  # the inputs, as meant
    assert echo(words("Anna loves Lisbon"), "Anna loves Lisbon") is True
    assert echo(words("Anna Lisbon"), "Anna Lisbon") is False
    assert weighted("Anna loves Lisbon", {}, "Anna loves Lisbon", question=1.0, echo_w=0.25) == 0.25
    assert weighted("Anna Lisbon", {}, "Anna Lisbon", question=1.0, echo_w=0.25) == 1.0


def test_an_echo_is_nine_tenths_alike_or_more() -> None:
    message = words("apple banana cherry grape lemon mango melon peach pear plum")
    assert len(message) == 10
    nine = "apple banana cherry grape lemon mango melon peach pear"  # Jaccard 9/10: an echo
    eight = "apple banana cherry grape lemon mango melon peach"  # 8/10: not
    assert echo(message, nine) is True
    assert echo(message, eight) is False


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (-0.5, 0.0),
        (0.0, 0.0),
        (0.5, 0.5),
        (0.75, 0.75),  # the knee: itself
        (1.0, 0.75 + 0.25 * (1 - math.exp(-1.0))),  # 0.908030...
        (1.25, 0.75 + 0.25 * (1 - math.exp(-2.0))),  # 0.966166...
        (2.0, 0.75 + 0.25 * (1 - math.exp(-5.0))),  # 0.998315...
    ],
)
def test_bounded_is_the_score_to_the_knee_then_one_minus_an_exponential(score: float, expected: float) -> None:
    assert bounded(score) == pytest.approx(expected, abs=1e-12)


def test_bounded_keeps_the_slope_at_the_knee_never_reaches_one_and_keeps_the_order() -> None:
    assert (bounded(0.75 + 1e-6) - 0.75) / 1e-6 == pytest.approx(1.0, abs=1e-4)
    assert bounded(0.908) == pytest.approx(0.75 + 0.25 * (1 - math.exp(-0.632)), abs=1e-12)
    assert 0.99 < bounded(3.0) < 1.0 and bounded(50.0) <= 1.0
    scores = [0.1, 0.74, 0.75, 0.76, 0.9, 1.053, 1.5, 3.0]
    assert [bounded(s) for s in scores] == sorted(bounded(s) for s in scores)
    assert len({bounded(s) for s in scores}) == len(scores)
    cands = [Cand("a", 1.053), Cand("b", 0.4)]
    bound_scores(cands)
    assert [c.score for c in cands] == [pytest.approx(0.75 + 0.25 * (1 - math.exp(-0.303 / 0.25))), 0.4]


def test_a_fact_never_only_asks_whatever_its_flag_or_words() -> None:
    from memory.retrieval.ranking import asks

    assert asks({"category": "personal_facts", ASKS_KEY: True}, "where does Anna live?") is False
    assert asks({"category": "preferences"}, "do I like tea?") is False
    assert asks({ASKS_KEY: True}, "where does Anna live?") is True  # a raw turn with the flag
    assert weighted(QUESTION, {"category": "personal_facts", ASKS_KEY: True}, "I like tea", question=0.5,
                    echo_w=1.0) == 1.0  # fmt: skip


def test_two_memories_alike_but_for_a_number_are_not_near_copies() -> None:
    import numpy as np

    from memory.retrieval.ranking import NearCopies

    @dataclass
    class Memory:
        id: str
        text: str

    same = np.asarray([1.0, 0.0], dtype=np.float32)
    near = NearCopies(0.99, lambda _id: same)
    booked = Memory("a", "Room 101 of the hotel is booked for the conference")
    assert near.of(Memory("b", "Room 102 of the hotel is booked for the conference"), [booked]) is None
    assert near.of(Memory("c", "Room 101 of the hotel is booked for this conference"), [booked]) == 0


# MEMORY_RETRIEVAL_PRONOUNS (docs: "你/我/您, I/you -> one neutral form before matching"): on by
# default, a memory that says "我…" repeats a message that says "你…" (the same words once the
# pronoun is folded); off, the pronoun is a word like any other.
MINE = "我喜欢上海的咖啡馆"  # I like Shanghai's cafés
YOURS = "你喜欢上海的咖啡馆"  # you like Shanghai's cafés


def test_pronouns_on_fold_i_and_you_and_off_keep_them_apart() -> None:
    assert echo(words(YOURS, True), MINE, pronouns=True) is True
    assert echo(words(YOURS, False), MINE, pronouns=False) is False
    # Off, a memory that says the very same words as the message is still its echo.
    assert echo(words(MINE, False), MINE, pronouns=False) is True
    for pronouns in (True, False):
        cand = Cand(MINE, 1.0)
        speech_acts([cand], MINE, question_weight=1.0, echo_weight=0.25, pronouns=pronouns)
        assert cand.score == 0.25
    cand = Cand(MINE, 1.0)
    speech_acts([cand], YOURS, question_weight=1.0, echo_weight=0.25, pronouns=False)
    assert cand.score == 1.0
    cand = Cand(MINE, 1.0)
    speech_acts([cand], YOURS, question_weight=1.0, echo_weight=0.25)  # the default: on
    assert cand.score == 0.25


def test_a_row_written_before_the_asks_flag_is_read_from_its_text_and_a_newer_one_from_its_flag() -> None:
    from memory.retrieval.ranking import asks

    question = "where does Anna live?"
    # Index versions before 5 had no flag: the rule is read from the text.
    assert asks({"idx_v": 4}, question) is True
    assert asks({}, question) is True
    assert asks({"idx_v": "5"}, question) is True  # not a version number: as an old row
    # From version 5 on, a row without the flag does not ask, whatever its words.
    assert asks({"idx_v": 5}, question) is False
    assert asks({"idx_v": 6}, question) is False
    assert asks({"idx_v": 4}, "my sister Anna lives in Lisbon") is False


def test_a_demoted_score_is_the_score_times_the_weight() -> None:
    asked = {ASKS_KEY: True}
    cand = Cand(QUESTION, 0.6, asked)
    speech_acts([cand], "I bought a red bicycle yesterday", question_weight=0.5, echo_weight=1.0)
    assert cand.score == pytest.approx(0.3)
    said = "my sister Anna lives in Lisbon"
    cand = Cand(said, 0.8)
    speech_acts([cand], said, question_weight=1.0, echo_weight=0.25)
    assert cand.score == pytest.approx(0.2)
    kept = Cand("I bought a red bicycle yesterday", 0.8)
    speech_acts([kept], QUESTION, question_weight=0.5, echo_weight=0.25)
    assert kept.score == pytest.approx(0.8)


def test_near_copies_at_exactly_the_threshold_with_few_words_or_few_shared() -> None:
    import numpy as np

    from memory.retrieval.ranking import NearCopies

    @dataclass
    class Memory:
        id: str
        text: str

    same = np.asarray([0.6, 0.8], dtype=np.float32)  # a unit vector: its dot with itself is 1
    at = NearCopies(float(same @ same), lambda _id: same)  # "at least threshold": the bound itself passes
    kept = Memory("a", "my sister Anna lives in Lisbon")
    assert at.of(Memory("b", "my sister Anna lives in Lisbon now"), [kept]) == 0
    # Fewer than 3 content words: nobody's copy, even word for word.
    assert at.of(Memory("c", "Anna Lisbon"), [Memory("d", "Anna Lisbon")]) is None
    # Words less than 0.6 alike (Jaccard 1/5 here): two things, however alike the vectors.
    assert at.of(Memory("e", "apple banana cherry"), [Memory("f", "apple grape lemon")]) is None
    # 3 of 5 words shared is 0.6: a near-copy; 3 of 6 is not.
    assert at.of(Memory("g", "apple banana cherry grape"), [Memory("h", "apple banana cherry lemon")]) == 0
    assert at.of(Memory("i", "apple banana cherry grape"), [Memory("j", "apple banana cherry lemon melon")]) is None


def test_near_copies_of_exactly_three_words_and_a_memory_whose_vector_is_not_known() -> None:
    import numpy as np

    from memory.retrieval.ranking import NearCopies

    @dataclass
    class Memory:
        id: str
        text: str

    same = np.asarray([0.6, 0.8], dtype=np.float32)
    # "at least MIN_WORDS (3) content words each": three words, word for word, are near-copies.
    near = NearCopies(0.99, lambda _id: same)
    assert near.of(Memory("a", "apple banana cherry"), [Memory("b", "apple banana cherry")]) == 0
    # A memory written after the user's vectors were read (no vector) is nobody's copy, and
    # a kept memory without one is passed over for the next.
    vectors = {"new": None, "old": same, "unknown": None, "kept": same}
    near = NearCopies(0.99, vectors.get)
    assert near.of(Memory("new", "apple banana cherry"), [Memory("old", "apple banana cherry")]) is None
    kept = [Memory("unknown", "apple banana cherry"), Memory("kept", "apple banana cherry")]
    assert near.of(Memory("old", "apple banana cherry"), kept) == 1


def test_echo_folds_pronouns_by_default() -> None:
    assert echo(words(YOURS), MINE) is True


def test_questions_are_left_out_beside_a_statement_and_kept_when_nothing_states() -> None:
    from memory.retrieval.ranking import beside_statements

    asked = Cand("where does Anna live?", 0.9, {ASKS_KEY: True})
    stated = Cand("my sister Anna lives in Lisbon", 0.5, {"idx_v": 5})
    also = Cand("Anna moved to Lisbon in May", 0.4, {"idx_v": 5})
    assert beside_statements([asked, stated, also]) == [stated, also]
    assert beside_statements([asked]) == [asked]
    assert beside_statements([stated, also]) == [stated, also]
    assert beside_statements([]) == []


def said_on(text: str, day: str, **payload: Any) -> Cand:
    return Cand(text, 0.5, {"idx_v": 5, "created_at": f"{day}T10:00:00+00:00", **payload})


def test_of_two_statements_about_one_thing_the_later_is_marked_newer_than_the_others_day() -> None:
    from memory.retrieval.ranking import mark_newer

    paris = said_on("I live in Paris", "2025-01-01")
    berlin = said_on("I live in Berlin now", "2025-06-01")
    mark_newer([berlin, paris])
    assert berlin.payload["newer_than"] == "2025-01-01" and "newer_than" not in paris.payload
    # The order of the block does not matter; updated_at counts before created_at.
    paris = said_on("I live in Paris", "2025-01-01", updated_at="2025-09-01T08:00:00+00:00")
    berlin = said_on("I live in Berlin now", "2025-06-01")
    mark_newer([paris, berlin])
    assert paris.payload["newer_than"] == "2025-06-01" and "newer_than" not in berlin.payload
    # Three: the newest is marked with the latest of the older days.
    a, b, c = (said_on("I live in Paris", "2024-01-01"), said_on("I live in Berlin", "2024-06-01"),
               said_on("I live in Rome", "2025-01-01"))  # fmt: skip
    mark_newer([a, b, c])
    assert c.payload["newer_than"] == "2024-06-01" and b.payload["newer_than"] == "2024-01-01"
    assert "newer_than" not in a.payload


def test_statements_not_marked_newer() -> None:
    from memory.retrieval.ranking import mark_newer

    NONE = [False, False]  # noqa: N806

    def marked(*cands: Cand) -> list[bool]:
        mark_newer(list(cands))
        return ["newer_than" in c.payload for c in cands]

    # The same day: nothing to tell apart.
    assert marked(said_on("I live in Paris", "2025-01-01"), said_on("I live in Berlin now", "2025-01-01")) == [
        False,
        False,
    ]
    # Facts (GATED) and questions are left alone; a statement without a date too.
    assert (
        marked(
            said_on("I live in Paris", "2025-01-01", category="personal_facts"),
            said_on("I live in Berlin now", "2025-06-01", category="personal_facts"),
        )
        == NONE
    )
    assert (
        marked(
            said_on("do I live in Paris", "2025-01-01", asks=True),
            said_on("do I live in Berlin", "2025-06-01", asks=True),
        )
        == NONE
    )
    assert marked(Cand("I live in Paris", 0.5, {"idx_v": 5}), said_on("I live in Berlin now", "2025-06-01")) == [
        False,
        False,
    ]
    # About different things (less than half the shorter's words shared), one word, or the same words.
    assert marked(said_on("I live in Paris", "2025-01-01"), said_on("my cat eats fish daily", "2025-06-01")) == [
        False,
        False,
    ]
    assert marked(said_on("Paris", "2025-01-01"), said_on("Berlin", "2025-06-01")) == NONE
    assert marked(said_on("I live in Paris", "2025-01-01"), said_on("in Paris I live", "2025-06-01")) == NONE


def test_a_question_written_before_the_asks_flag_is_left_out_by_its_text() -> None:
    from memory.retrieval.ranking import beside_statements, mark_newer

    # No `idx_v`: a row from before the flag, whose text says it only asks.
    old_question = Cand("where do I live now?", 0.9, {"created_at": "2025-06-01T10:00:00+00:00"})
    stated = said_on("I live in Paris", "2025-01-01")
    assert beside_statements([old_question, stated]) == [stated]
    mark_newer([stated, old_question])
    assert "newer_than" not in old_question.payload and "newer_than" not in stated.payload


def test_a_statement_left_alone_does_not_stop_the_others_being_compared() -> None:
    from memory.retrieval.ranking import mark_newer

    # A fact first (left alone), then two statements about one thing: the later is marked.
    fact = said_on("I live in Rome", "2024-01-01", category="personal_facts")
    paris, berlin = said_on("I live in Paris", "2025-01-01"), said_on("I live in Berlin now", "2025-06-01")
    mark_newer([fact, paris, berlin])
    assert berlin.payload["newer_than"] == "2025-01-01"
    # A pair skipped (one word; about something else) before the pair that is compared.
    paris, berlin = said_on("I live in Paris", "2025-01-01"), said_on("I live in Berlin now", "2025-06-01")
    mark_newer([paris, said_on("Paris", "2025-03-01"), berlin])
    assert berlin.payload["newer_than"] == "2025-01-01"
    paris, berlin = said_on("I live in Paris", "2025-01-01"), said_on("I live in Berlin now", "2025-06-01")
    mark_newer([paris, said_on("my cat eats fish daily", "2025-03-01"), berlin])
    assert berlin.payload["newer_than"] == "2025-01-01"


def test_a_statement_that_only_adds_words_or_shares_under_half_is_not_marked() -> None:
    from memory.retrieval.ranking import mark_newer

    # Every word of the shorter in the longer: the longer adds to it, says nothing different.
    paris, anna = said_on("I live in Paris", "2025-01-01"), said_on("I live in Paris with Anna", "2025-06-01")
    mark_newer([paris, anna])
    assert "newer_than" not in anna.payload and "newer_than" not in paris.payload
    # One of the shorter's three words shared (1/3 < 1/2): about different things.
    anna, bike = (
        said_on("I live in Paris with Anna", "2025-01-01"),
        said_on("I bought a red bicycle in Paris", "2025-06-01"),
    )
    mark_newer([anna, bike])
    assert "newer_than" not in bike.payload and "newer_than" not in anna.payload


def test_the_newest_statement_keeps_the_latest_older_day_whatever_the_order() -> None:
    from memory.retrieval.ranking import mark_newer

    a, b, c = (said_on("I live in Paris", "2024-01-01"), said_on("I live in Berlin", "2024-06-01"),
               said_on("I live in Rome", "2025-01-01"))  # fmt: skip
    mark_newer([c, b, a])  # Rome compared with Berlin first, then with Paris
    assert c.payload["newer_than"] == "2024-06-01" and b.payload["newer_than"] == "2024-01-01"
