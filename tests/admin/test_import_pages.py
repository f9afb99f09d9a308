"""A large user's import, a page at a time (issue 50, `memory/storage/bulk.py`): every turn
stored as the spoken turn's write stores it, with its dates, a progress line, nothing added
by a second run, and still nothing at all written from a file with one bad line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.admin import importer
from memory.admin.cli import main as admin_main
from memory.storage.store import MemoryStore

# A page of 8 here, not the product's 256: the same two pages, the second a part one, with
# 13 turns to embed instead of 300 (seconds of a loaded machine, twice).
PAGE = 8
TURNS = PAGE + 5


@pytest.fixture(autouse=True)
def _small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer, "PAGE", PAGE)


@pytest.fixture
def admin_env(store: MemoryStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    return tmp_path


def _lines(n: int) -> str:
    return "".join(
        json.dumps(
            {
                "text": f"I planted tree number {i} in the garden",
                "said_at": f"2024-05-{1 + i % 28:02d}T09:00:00Z",
                "session_id": f"s{i // 50}",
            }
        )
        + "\n"  # fmt: skip
        for i in range(n)
    )


def _payloads(store: MemoryStore, user_id: str) -> list[dict]:
    with store.pool.connection() as conn:
        rows = conn.execute(f'SELECT payload FROM "{store.table}" WHERE user_id = %s', [user_id]).fetchall()
    return [r[0] for r in rows]


def test_a_large_import_is_written_in_pages_as_the_spoken_turn_writes_each_and_again_adds_nothing(
    store: MemoryStore, user_id: str, admin_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = admin_env / "many.jsonl"
    path.write_text(_lines(TURNS))
    assert admin_main(["--json", "import", str(path), "--user", user_id]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["turns"] == TURNS
    assert f"imported {TURNS:,} of {TURNS:,} turns" in captured.err  # the progress line
    payloads = _payloads(store, user_id)
    assert len(payloads) == TURNS
    by_text = {p["data"]: p for p in payloads}
    assert by_text["I planted tree number 3 in the garden"]["created_at"].startswith("2024-05-04T09:00:00")
    assert by_text["I planted tree number 3 in the garden"]["timestamp"].startswith("2024-05-04T09:00:00")
    # The same fields as a turn the worker stores (`add_raw`, through Mem0).
    meta = {"session_id": "s", "turn_id": "t", "timestamp": "2024-05-01T09:00:00+00:00", "seq": 0}
    spoken = store.add_raw(f"{user_id}-spoken", "I planted a tree", metadata=meta, write_id="w", context=["a bush"])
    assert spoken.event == "ADD"
    assert set(by_text["I planted tree number 3 in the garden"]) == set(_payloads(store, f"{user_id}-spoken")[0])
    # Found again by a look-up, in its words.
    assert "I planted tree number 3 in the garden" in [r.text for r in store.search(user_id, "tree number 3", top_k=5)]

    assert admin_main(["--json", "import", str(path), "--user", user_id]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["turns"] == 0 and again["unchanged"] == TURNS
    assert len(_payloads(store, user_id)) == TURNS


def test_a_large_file_with_one_bad_line_writes_nothing(
    store: MemoryStore, user_id: str, admin_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = admin_env / "bad.jsonl"
    path.write_text(_lines(TURNS - 1) + json.dumps({"text": "late", "said_at": "9999-01-01T00:00:00Z"}) + "\n")
    assert admin_main(["import", str(path), "--user", user_id]) == 2
    assert f"line {TURNS}" in capsys.readouterr().err
    assert _payloads(store, user_id) == []
