"""The operator's command line (`python -m memory.admin`) over the real store: export,
forget across every table, users, retention dry runs, dead letters."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory.admin.cli import main as admin_main
from memory.admin.documents import Admin
from memory.archive.writer import archive_turn
from memory.journal.queue import DurableWriteQueue
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.store import MemoryStore
from memory.types import ForgottenTurn, now_iso


def _fill(store: MemoryStore, user_id: str, word: str) -> None:
    store.add_raw(user_id, f"I like {word}")
    store.upsert_fact(user_id, f"User's favourite plant is {word}", category="preferences", slot="favourite_plant")
    archive_for(store).add([
        ArchivedMessage(f"{user_id}:u", "c", user_id, f"tell me about {word}", "user", now_iso()),
        ArchivedMessage(f"{user_id}:a", "c", user_id, f"{word} are lovely", "assistant", now_iso()),
        ArchivedMessage(f"{user_id}:s", "c", user_id, f"the user likes {word}", "summary", now_iso(),
                        covers=(f"{user_id}:u",)),
    ])  # fmt: skip


def _admin(store: MemoryStore, tmp_path: Path) -> Admin:
    return Admin(store, dataclasses.replace(store.settings, data_dir=tmp_path))  # a journal of its own


async def test_export_holds_every_item_of_the_user_and_nothing_of_another(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    other = user_id + "-other"
    _fill(store, user_id, "tulips")
    _fill(store, other, "cactuses")
    admin = _admin(store, tmp_path)
    queue = DurableWriteQueue(admin.settings.journal_path, lambda t: None)  # never started: the row waits
    queue.enqueue(archive_turn(message_id=f"{user_id}:w", chat_id="c", user_id=user_id, text="waiting tulips",
                               message_type="user", created_at=now_iso()))  # fmt: skip
    doc = json.loads(json.dumps(admin.export(user_id), default=str))
    text = json.dumps(doc, ensure_ascii=False)
    assert "cactuses" not in text and other not in text
    assert {m["id"] for m in doc["memories"]} == {m.id for m in store.list_user(user_id)}
    assert {r["id"] for r in doc["archive"]} == {f"{user_id}:u", f"{user_id}:a", f"{user_id}:s"}
    assert [j["text"] for j in doc["journal"]] == ["waiting tulips"]
    facts = {m["id"] for m in doc["memories"] if m["category"]}
    assert facts and facts <= {h["memory_id"] for h in doc["mem0_history"]}  # facts with their history


def _rows_of(store: MemoryStore, user_id: str) -> dict[str, int]:
    """Rows naming the user in every table of the database (the forget record aside)."""
    found = {}
    with store.pool.connection() as conn:
        tables = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name IN ('user_id', 'payload') AND table_name NOT LIKE '%%_forgets'"
        ).fetchall()
        for table, column in tables:
            cond = "user_id = %s" if column == "user_id" else "payload->>'user_id' = %s"
            found[table] = conn.execute(f'SELECT count(*) FROM "{table}" WHERE {cond}', [user_id]).fetchone()[0]
    return found


async def test_forget_leaves_nothing_of_the_user_in_any_table(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    word = f"tulips{user_id[-10:]}"  # in no other test's history
    _fill(store, user_id, word)
    _fill(store, user_id + "-other", "cactuses")
    admin = _admin(store, tmp_path)
    assert sum(_rows_of(store, user_id).values()) >= 5
    said_before = now_iso()  # a message said now, before the forget (not "5 s ago": a busy machine forgets slower)
    gone = admin.service.forget(user_id)
    assert gone.memories == 2 and gone.archived == 3
    assert sum(_rows_of(store, user_id).values()) == 0, _rows_of(store, user_id)
    with closing(sqlite3.connect(store.settings.mem0_dir / "history.db")) as db:
        assert (
            db.execute(
                "SELECT count(*) FROM history WHERE new_memory LIKE ? OR old_memory LIKE ?", [f"%{word}%"] * 2
            ).fetchone()[0]
            == 0
        )
    assert sum(_rows_of(store, user_id + "-other").values()) >= 5  # the other user untouched
    with pytest.raises(ForgottenTurn):  # a message said before the forget, arriving late
        archive_for(store).add([ArchivedMessage(f"{user_id}:late", "c", user_id, "late tulips", "user", said_before)])


def test_cli_names_an_unknown_user_and_a_missing_store(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    assert admin_main(["show", "nobody-here"]) == 1
    assert "nothing is stored under 'nobody-here'" in capsys.readouterr().err
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "none"))
    assert admin_main(["users"]) == 2
    assert "no memory store" in capsys.readouterr().err


def test_cli_says_which_user_is_unknown_for_each_user_command_and_names_an_unreachable_database(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    for argv in (["search", "nobody-here", "kyoto"], ["export", "nobody-here"], ["--json", "show", "nobody-here"]):
        assert admin_main(argv) == 1, argv
        err = capsys.readouterr().err
        assert "nothing is stored under 'nobody-here'" in err, (argv, err)
    # A database that does not answer: exit 2, the variable named, the URL (a password) not printed.
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMORY_DATABASE_URL", "postgresql://admin:s3cret@127.0.0.1:9/memories")
    assert admin_main(["export", "alice"]) == 2
    err = capsys.readouterr().err
    assert "MEMORY_DATABASE_URL cannot be reached" in err and "s3cret" not in err, err


def test_cli_lists_users_with_their_counts_and_last_activity(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(store, user_id, "lilies")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    assert admin_main(["--json", "users"]) == 0
    mine = [u for u in json.loads(capsys.readouterr().out) if u["user_id"] == user_id]
    assert len(mine) == 1 and mine[0]["last_activity"]
    assert (mine[0]["raw_turns"], mine[0]["facts"], mine[0]["messages"], mine[0]["summaries"]) == (1, 1, 2, 1)
    assert admin_main(["users"]) == 0
    assert any(user_id in line and "2" in line for line in capsys.readouterr().out.splitlines())


def test_cli_retention_dry_run_counts_what_is_old_and_deletes_nothing(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = archive_for(store)
    old = (datetime.now(UTC) - timedelta(days=400)).isoformat()
    archive.add([
        ArchivedMessage(f"{user_id}:old-u", "c-old", user_id, "a very old question about ferns", "user", old),
        ArchivedMessage(f"{user_id}:old-s", "c-old", user_id, "summary: ferns", "summary", old),
        ArchivedMessage(f"{user_id}:new-u", "c-new", user_id, "a new question about moss", "user", now_iso()),
    ])  # fmt: skip
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    assert admin_main(["--json", "retention", "--dry-run", "--days", "365"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is True and report["archived_messages"] >= 1 and report["summaries_kept"] >= 1
    assert {r["id"] for r in archive.messages(user_id)} == {f"{user_id}:old-u", f"{user_id}:old-s", f"{user_id}:new-u"}
    assert admin_main(["retention", "--dry-run", "--days", "365"]) == 0
    assert "would delete" in capsys.readouterr().out


async def test_dead_letters_are_listed_and_replayed_into_the_queue(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    admin = _admin(store, tmp_path)
    written: list[str] = []

    async def handler(turn):
        written.append(turn.turn_id)

    queue = DurableWriteQueue(admin.settings.journal_path, handler)
    queue.enqueue(archive_turn(message_id=f"{user_id}:bad", chat_id="c", user_id=user_id, text="a damaged row",
                               message_type="user", created_at=now_iso()))  # fmt: skip
    queue._dead_letter(1, f"{user_id}:bad", 1, "damaged for the test")  # as the consumer does for bad input
    dead = [r for r in admin.journal_rows() if r["state"] == "dead"]
    assert [(r["turn_id"], r["error"], r["kind"]) for r in dead] == [
        (f"{user_id}:bad", "damaged for the test", "archive")
    ]
    assert admin.replay([f"{user_id}:bad"]) == 1
    assert [r["state"] for r in admin.journal_rows()] == ["pending"]
    fresh = DurableWriteQueue(admin.settings.journal_path, handler)  # another worker takes it over and writes it
    fresh.start()
    assert await fresh.drain(10.0)
    await fresh.aclose()
    assert written == [f"{user_id}:bad"]
