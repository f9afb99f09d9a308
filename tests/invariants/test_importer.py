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
