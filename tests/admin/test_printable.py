"""Issue 30, finding 7: the operator's tools print stored text with its control characters
made visible: a typed turn's terminal escapes (window title, screen clear, the one-byte
CSI) and bidi overrides never reach the operator's terminal, in tables or in JSON, and
the JSON still gives back exactly what was stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.admin.cli import main as admin_main
from memory.storage.store import MemoryStore
from memory.working.__main__ import main as working_main

HOSTILE = "I like red \x1b]0;owned\x07\x1b[2J\x9b31m and \u202egnp.exe\u200b the end"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u200b")


@pytest.fixture
def stored(store: MemoryStore, user_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMORY_DATABASE_URL", store.url)
    monkeypatch.setenv("MEMORY_SPILL_DIR", "off")
    store.add_raw(user_id, HOSTILE)
    return user_id


@pytest.mark.parametrize(
    "argv",
    [["show", "{u}"], ["search", "{u}", "red"], ["--json", "show", "{u}"], ["export", "{u}"], ["users"]],
)
def test_no_control_character_of_stored_text_reaches_the_terminal(
    stored: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `show` printed the text raw (the terminal's title changed and its screen cleared).
    assert admin_main([a.format(u=stored) for a in argv]) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in RAW), [ch for ch in RAW if ch in out]
    if argv[0] == "show":
        assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m" in out and "\\u202egnp.exe" in out  # visible, in its place
    if argv[0] in ("--json", "export"):
        doc = json.loads(out)
        assert HOSTILE in [m["text"] for m in doc["memories"]]  # the data itself, unchanged


def test_the_contexts_export_escapes_too(stored: str, store: MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    from memory.storage.contexts import ContextStore, contexts_table

    ctx_id = ContextStore(store.pool, store.settings.collection, 4000).create(stored, "receptionist", "a note")
    with store.pool.connection() as conn:  # an agent name from an older version, stored raw
        conn.execute(
            f'UPDATE "{contexts_table(store.settings.collection)}" SET created_by = %s WHERE id = %s', [HOSTILE, ctx_id]
        )
    assert working_main(["export", stored]) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in RAW)
    assert json.loads(out)["shared_contexts"][0]["created_by"] == HOSTILE


def test_search_states_the_range_of_each_score_and_stays_in_it(stored: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert admin_main(["search", stored, "red"]) == 0
    out = capsys.readouterr().out
    assert "score (0-1)" in out and "similarity (-1-1)" in out
    assert admin_main(["--json", "search", stored, "red"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranges"] == {"score": [0, 1], "lexical": [0, 1], "vector": [0, 1], "cosine": [-1, 1],
                             "similarity": [-1, 1]}  # fmt: skip
    for c in doc["considered"]:
        assert 0 <= c["score"] <= 1 and 0 <= c["lexical"] <= 1 and 0 <= c["vector"] <= 1


def test_tables_keep_their_columns_in_line_with_chinese_text(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Chinese character takes two columns of a terminal: counted as one, Chinese text
    pushed every column after it out of line."""
    from wcwidth import wcswidth

    for text in ("我喜欢绿茶，也喜欢龙井", "I like green tea"):
        store.add_raw(user_id, text)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    assert admin_main(["show", user_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("mode "))
    rows = [line for line in lines if line.startswith("NORMAL ")]
    assert len(rows) == 2
    year = str(datetime.now(UTC).year)  # the "updated" column, after the text
    starts = {wcswidth(row[: row.index(year)]) for row in rows}
    assert starts == {wcswidth(header[: header.index("updated")])}, (header, rows)
