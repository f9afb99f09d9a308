"""One list of the places that hold a user's data (`memory/userdata.py`): a place added to
it is counted, exported and forgotten by every command and page, and no module keeps a
second list; a user with more rows than a page leaves (export, forget) and comes back
(import) whole."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory import userdata
from memory.admin.cli import main as admin_main
from memory.admin.documents import Admin
from memory.admin.importer import import_text
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.store import MemoryStore
from memory.userdata import Place, UserData
from memory.web.views import Operator

ROOT = Path(__file__).resolve().parents[2]


def stand_in(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dict[str, Any]]]:
    """A place added to the list, its rows kept in a dict by user."""
    rows: dict[str, list[dict[str, Any]]] = {}
    place = Place(
        "stand_in",
        "a place a later version might add",
        rows=lambda data, user_id: iter(list(rows.get(user_id, []))),
        delete=lambda data, user_id: len(rows.pop(user_id, [])),
    )
    monkeypatch.setattr(userdata, "PLACES", [*userdata.PLACES, place])
    return rows


def test_a_place_added_to_the_list_is_counted_exported_and_forgotten_by_every_command_and_page(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = stand_in(monkeypatch)
    rows[user_id] = [{"note": "kept only here"}, {"note": "and this"}]
    settings = dataclasses.replace(store.settings, data_dir=tmp_path)  # a journal of its own
    admin, operator = Admin(store, settings), Operator(store, settings)

    # A user held by the stand-in alone is known, counted and exported.
    assert admin.counts(user_id)["stand_in"] == 2
    assert operator.holdings(user_id)["counts"]["stand_in"] == 2  # the forget confirmation's table
    assert admin.show(user_id)["counts"]["stand_in"] == 2
    doc = json.loads(operator.export(user_id))  # the page's download, as `admin export` writes it
    assert doc["stand_in"] == [{"note": "kept only here"}, {"note": "and this"}]
    assert doc["counts"]["stand_in"] == 2

    # Forgotten by the command, and said in its words.
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMORY_DATABASE_URL", store.url)
    assert admin_main(["forget", user_id, "--yes"]) == 0
    assert "stand_in 2" in capsys.readouterr().out
    assert rows == {} and admin.counts(user_id)["stand_in"] == 0

    # And by the page's forget, which counts every place again afterwards.
    rows[user_id] = [{"note": "said again"}]
    result = operator.forget(user_id)
    assert (result["removed"]["stand_in"], result["left"]["stand_in"], result["nothing_left"]) == (1, 0, True)


def test_no_module_but_the_places_own_lists_the_places() -> None:
    """The places' names appear together (three or more in one line) only in memory/userdata.py:
    a second list of them, in code or a page's template, would be one to forget a place in."""
    names = userdata.place_names()
    pattern = re.compile("|".join(rf"\b{re.escape(n)}\b" for n in names))
    found = []
    for path in sorted((ROOT / "memory").rglob("*")):
        if path.suffix not in (".py", ".html") or path.name == "userdata.py" or "__pycache__" in path.parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(set(pattern.findall(line))) >= 3:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def _said(minutes_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat()


def _kept(doc: dict[str, Any]) -> dict[str, Any]:
    """An export less the store's own ids and the export's time. The values a change replaced
    (GATED over time) come back from their fact's history, set aside again when the import
    supersedes them: their text, not the day that happened."""
    history: dict[str, list[tuple[Any, ...]]] = {}
    for h in doc["mem0_history"]:
        history.setdefault(h["memory_id"], []).append((h["event"], h["old"], h["new"], h["at"]))
    memories = sorted(
        (m["text"], m["category"], m["slot"], m["mode"], m["created_at"], m["updated_at"], m["session_id"], m["seq"],
         tuple(history.get(m["id"], [])) if m["category"] else ())
        for m in doc["memories"] if not m.get("valid_until")
    )  # fmt: skip
    past = sorted((m["text"], m["category"]) for m in doc["memories"] if m.get("valid_until"))
    return {"memories": memories, "past": past, "archive": _archived(doc)}


def _archived(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (r["id"], r["chat_id"], r["message_type"], r["content"], r["created_at"], r["covered_by"],
         json.dumps(r["metadata"], sort_keys=True))
        for r in doc["archive"]
    )  # fmt: skip


async def test_a_user_with_more_rows_than_a_page_is_exported_forgotten_and_imported_whole(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    page = 3
    for i in range(8):
        store.add_raw(user_id, f"turn {i}: my pottery class is on Tuesdays", metadata={"session_id": "s1", "seq": i})
    for city in ("Paris", "Lyon", "Berlin"):
        store.upsert_fact(user_id, f"User lives in {city}", category="personal_facts", slot="home_city",
                          metadata={"session_id": "s2"})  # fmt: skip
    archive_for(store).add([
        ArchivedMessage(f"{user_id}:m{i}", f"c{i % 2}", user_id, f"message {i} about glazes", "user", _said(30 - i))
        for i in range(7)
    ] + [ArchivedMessage(f"{user_id}:s", "c0", user_id, "They talked about glazes.", "summary", _said(1),
                         covers=(f"{user_id}:m0", f"{user_id}:m2"))])  # fmt: skip
    settings = dataclasses.replace(store.settings, data_dir=tmp_path)
    data = UserData(store, settings, page_size=page)

    chunks: list[str] = []
    counts = data.write_export(user_id, chunks.append)
    before = json.loads("".join(chunks))
    # More than a page of each: 8 turns, Berlin and the two values it replaced (kept as past
    # values, GATED over time), 7 messages and a summary.
    assert (len(before["memories"]), len(before["archive"])) == (11, 8)
    assert counts == before["counts"] == data.counts(user_id)  # counted as written, and as the pages count
    assert (counts["raw_turns"], counts["facts"], counts["calls"], counts["messages"], counts["summaries"]) == (
        8, 3, 2, 7, 1)  # fmt: skip

    gone = data.forget(user_id)
    assert gone.complete and not data.known(user_id)

    report = await import_text(store, settings, "".join(chunks))
    assert (report.turns, report.facts, report.earlier_values, report.archived, report.summaries) == (8, 1, 2, 7, 1)
    again: list[str] = []
    data.write_export(user_id, again.append)
    after = json.loads("".join(again))
    assert _kept(after) == _kept(before)
    assert after["counts"] == before["counts"]
