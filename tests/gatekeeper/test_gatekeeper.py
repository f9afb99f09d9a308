"""The extraction output as models really write it: every fact that is there is kept."""

from __future__ import annotations

import pytest

from memory.gatekeeper.gatekeeper import normalise_slot, parse_extraction

FACT = '{"text": "User\'s sister is Anna", "category": "relationships", "slot": "sister_name"}'


@pytest.mark.parametrize(
    "raw",
    [
        '{"facts": [' + FACT + "]}",
        '```json\n{"facts": [' + FACT + "]}\n```",
        "[" + FACT + "]",  # a bare list
        FACT,  # one bare fact
        '{"memories": [' + FACT + "]}",  # another key for the list
        '{"facts": [' + FACT + "]}\nI kept the sister {as asked}.",  # text with braces after it
    ],
    ids=["object", "fenced", "list", "bare-fact", "memories-key", "trailing-text"],
)
def test_each_shape_a_model_returns_keeps_the_fact(raw: str) -> None:
    facts = parse_extraction(raw)
    assert [(f.text, f.category, f.slot) for f in facts] == [("User's sister is Anna", "relationships", "sister_name")]


def test_one_bad_item_does_not_cost_the_others() -> None:
    raw = (
        '{"facts": [{"text": "User likes blue", "category": "preferences", "slot": "favorite_color"},'
        ' {"text": null, "category": "preferences"}, {"text": "x", "category": null},'
        ' {"text": "' + "y" * 400 + '", "category": "goals"}, {"text": "User runs", "category": "gossip"},'
        ' {"text": "用户住在柏林", "category": "Personal Facts", "slot": 7}]}'
    )
    facts = parse_extraction(raw)
    assert [(f.text, f.category, f.slot) for f in facts] == [
        ("User likes blue", "preferences", "favorite_color"),
        ("用户住在柏林", "personal_facts", "7"),
    ]


@pytest.mark.parametrize(
    ("slot", "expected"),
    [
        ("homeCity", "home_city"),
        ("Home City", "home_city"),
        ("home-city", "home_city"),
        ("妹妹的名字", "妹妹的名字"),
        ("любимый цвет", "любимый_цвет"),
        ("café", "café"),
        ("", None),
        (None, None),
    ],
)
def test_slot_spellings_of_one_key_are_one_slot(slot: str | None, expected: str | None) -> None:
    assert normalise_slot(slot) == expected


@pytest.mark.parametrize("raw", ["no json here", '"just a string"', "{not json"])
def test_junk_is_refused_by_name(raw: str) -> None:
    with pytest.raises(ValueError, match="extraction output"):
        parse_extraction(raw)


def test_a_slow_model_is_cut_by_the_gatekeeper_before_the_write_attempt_times_out() -> None:
    import inspect

    from memory.gatekeeper.gatekeeper import Gatekeeper
    from memory.journal.queue import DurableWriteQueue

    attempt = inspect.signature(DurableWriteQueue).parameters["attempt_timeout_s"].default
    assert Gatekeeper(None)._timeout_s < attempt - 1.0  # a second left for the store writes


@pytest.mark.parametrize(
    "raw",
    [
        '{"facts": [{"text": "User\'s sister is Anna", "category": "relationship", "slot": "sister_name"}]}',
        '{"facts": [{"fact": "User\'s sister is Anna", "category": "relationships", "slot": "sister_name"}]}',
        '{"facts": {"text": "User\'s sister is Anna", "category": "Relationship", "slot": "sister_name"}}',
        'Here are the facts [JSON]: {"facts": [' + FACT + "]}",
        "Found [1] fact: [" + FACT + "]",
    ],
    ids=["singular-category", "fact-key", "one-fact-not-in-a-list", "brackets-in-prose", "bracketed-number"],
)
def test_near_miss_shapes_keep_the_fact(raw: str) -> None:
    # Each of these lost "My sister's name is Anna", silently.
    facts = parse_extraction(raw)
    assert [(f.text, f.category, f.slot) for f in facts] == [("User's sister is Anna", "relationships", "sister_name")]


def test_an_empty_answer_is_no_facts_and_dropped_items_are_counted_not_quoted(caplog) -> None:
    assert parse_extraction("Nothing durable here: []") == []
    with caplog.at_level("WARNING", logger="memory.gatekeeper.gatekeeper"):
        facts = parse_extraction('{"facts": ["User likes Xylophena tea", {"text": "User runs", "category": null}]}')
    assert facts == []
    assert "dropped 2 extracted item(s)" in caplog.text and "Xylophena" not in caplog.text


def test_one_slot_named_twice_in_a_turn_keeps_both_values() -> None:
    # "I have two sisters, Anna and Maria": the second fact replaced the first in the store.
    raw = (
        '{"facts": [{"text": "User\'s sister is Anna", "category": "relationships", "slot": "sister_name"},'
        ' {"text": "User\'s sister is Maria", "category": "relationships", "slot": "sister_name"},'
        ' {"text": "User lives in Berlin", "category": "personal_facts", "slot": "home_city"}]}'
    )
    assert [f.slot for f in parse_extraction(raw)] == ["sister_name", "sister_name_2", "home_city"]


def test_a_renamed_slot_never_takes_a_slot_the_model_named_itself() -> None:
    # sister_name, sister_name, sister_name_2 became sister_name, sister_name_2,
    # sister_name_2: the third fact replaced the second in the store.
    raw = (
        '{"facts": ['
        + ", ".join(
            f'{{"text": "User\'s sister is {name}", "category": "relationships", "slot": "{slot}"}}'
            for name, slot in (("Anna", "sister_name"), ("Maria", "sister_name"), ("Eva", "sister_name_2"))
        )
        + "]}"
    )
    slots = [f.slot for f in parse_extraction(raw)]
    assert len(set(slots)) == 3 and slots[0] == "sister_name" and slots[2] == "sister_name_2"
