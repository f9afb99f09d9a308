"""The import's bounds (memory/admin/importer.py) at the documented values, each at the
limit (read) and one past it (refused, naming the line): a line of 100,000 characters,
items nested 8 levels (the line's object is level 1)."""

from __future__ import annotations

import json

import pytest

from memory.admin.importer import ImportRefused, parse_source


def line_of(chars: int) -> str:
    head, tail = '{"user_id": "alice", "text": "', '"}'
    line = head + "x" * (chars - len(head) - len(tail)) + tail
    assert len(line) == chars
    return line


def nested(levels: int) -> str:
    """A line whose object nests `levels` deep: the object, then levels - 1 more."""
    inner: object = "deep"
    for _ in range(levels - 1):
        inner = {"k": inner}
    return json.dumps({"user_id": "alice", "text": "hi", "metadata": inner if levels > 1 else None})


def test_a_line_of_exactly_the_documented_length_is_read() -> None:
    text = "\n".join([line_of(100), line_of(100_000)])
    items = parse_source(text)
    assert isinstance(items, list) and [len(i["text"]) for i in items] == [100 - 32, 100_000 - 32]


def test_a_line_one_character_longer_is_refused_naming_the_line() -> None:
    with pytest.raises(ImportRefused) as err:
        parse_source("\n".join([line_of(100), line_of(100_001)]))
    assert err.value.problems == ["line 2: 100001 characters long; the limit is 100000"]


def test_items_nested_eight_levels_are_read_and_nine_refused() -> None:
    assert len(parse_source(nested(8))) == 1  # type: ignore[arg-type]
    with pytest.raises(ImportRefused) as err:
        parse_source("\n".join([nested(3), nested(9)]))
    assert err.value.problems == ["line 2: nested 9 levels deep; the limit is 8"]


def test_every_bad_line_is_named_and_none_is_read_when_one_is_bad() -> None:
    text = "\n".join([line_of(100), "not json", "[1, 2]", "", line_of(100_001)])
    with pytest.raises(ImportRefused) as err:
        parse_source(text)
    assert [p.split(" ", 2)[1].rstrip(":") for p in err.value.problems] == ["2", "3", "5"]
    problems: list[str] = []
    assert len(parse_source(text, problems)) == 1  # type: ignore[arg-type]
    assert len(problems) == 3


def test_an_empty_file_is_refused() -> None:
    for text in ("", "  \n\n "):
        with pytest.raises(ImportRefused, match="the file is empty"):
            parse_source(text)


# --- a file of lines planned into the journal's rows (plan_lines): what is refused, with its line

from datetime import UTC, datetime, timedelta  # noqa: E402

from memory.admin.importer import plan_lines  # noqa: E402
from memory.settings import load_settings  # noqa: E402

SETTINGS = load_settings({}, dotenv=False)


def planned(*items: dict, user: str | None = None) -> tuple[list[str], list[str], list]:
    refused: list[str] = []
    lines = [{"_line": n, **item} for n, item in enumerate(items, 1)]
    users, planned_items = plan_lines(lines, user, SETTINGS, refused)
    return refused, users, planned_items


def test_a_said_at_up_to_five_minutes_ahead_is_read_and_later_is_refused() -> None:
    now = datetime.now(UTC)
    ahead = (now + timedelta(minutes=4)).isoformat()
    refused, users, items = planned({"user_id": "alice", "text": "I like tea", "said_at": ahead})
    assert refused == [] and users == ["alice"] and items[0].dates["said_at"] == ahead
    later = (now + timedelta(minutes=6)).isoformat()
    refused, users, items = planned({"user_id": "alice", "text": "I like tea", "said_at": later})
    assert refused == [f"line 1: said_at {later!r} is in the future"] and users == [] and items == []


def test_a_time_without_a_zone_is_utc_and_one_that_is_no_time_is_refused() -> None:
    refused, _, items = planned({"user_id": "alice", "text": "tea", "said_at": "2024-01-02T03:04:05"})
    assert refused == []
    assert items[0].dates == {"created_at": "2024-01-02T03:04:05+00:00", "updated_at": "2024-01-02T03:04:05+00:00",
                              "said_at": "2024-01-02T03:04:05+00:00"}  # fmt: skip
    refused, _, _ = planned({"user_id": "alice", "text": "tea", "created_at": "yesterday"})
    assert refused == ["line 1: 'yesterday' is no ISO time"]
    refused, _, items = planned({"user_id": "alice", "text": "tea", "said_at": ""})
    assert refused == [] and items[0].dates == {}


def test_each_bad_line_is_refused_naming_it_and_the_good_ones_are_planned() -> None:
    refused, users, items = planned(
        {"user_id": "alice", "text": "I like tea"},
        {"text": "no user"},
        {"user_id": "  ", "text": "a blank user"},
        {"user_id": "alice", "text": "x", "session_id": 5},
        {"user_id": "alice", "text": "x", "category": True},
        {"user_id": "alice", "text": "x", "slot": 3},
        {"user_id": "bob", "text": "I like coffee"},
    )
    assert refused == [
        "line 2 names no user_id: pass --user USER",
        "line 3 names no user_id: pass --user USER",
        "line 4: 'session_id' is not a session id",
        "line 5: 'category' is not a category name",
        "line 6: 'slot' is not a slot name",
    ]
    assert users == ["alice", "bob"] and [i.turn.text for i in items] == ["I like tea", "I like coffee"]


def test_the_same_file_planned_twice_gives_the_same_ids_and_another_line_another() -> None:
    first = planned({"user_id": "alice", "text": "I like tea"}, {"user_id": "alice", "text": "I like tea"})[2]
    again = planned({"user_id": "alice", "text": "I like tea"}, {"user_id": "alice", "text": "I like tea"})[2]
    assert [i.turn.turn_id for i in first] == [i.turn.turn_id for i in again]
    assert first[0].turn.turn_id != first[1].turn.turn_id
    assert all(i.turn.turn_id.startswith("import:") and len(i.turn.turn_id) == 39 for i in first)
    assert first[0].turn.session_id == first[1].turn.session_id and first[0].turn.session_id.startswith("import-")


def test_the_user_given_with_user_is_used_as_it_is() -> None:
    refused, users, items = planned({"user_id": "mallory", "text": "I like tea"}, {"text": "hi there"}, user="alice")
    assert refused == [] and users == ["alice"] and {i.turn.user_id for i in items} == {"alice"}
