"""Issue 30, findings 4, 5 and 6: "forget me" finishes or says exactly what it could not
do (a full journal disk, a journal that cannot be opened: a distinct exit code, one line,
no traceback), reaches the spill files of the machine's workers, counts shared contexts,
and says "nothing was stored" only when that is true; run again, it finishes the job.

Each test has a data directory of its own (on a real tmpfs where the disk must fill up),
pointed at the session's Postgres by URL, as a worker of a fleet is."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from bench.privacy.faults import can_mount, fill, tiny_tmpfs
from memory.admin.cli import main as admin_main
from memory.forget import main as forget_main
from memory.journal.queue import DurableWriteQueue
from memory.journal.spill import Spill
from memory.settings import MemorySettings, load_settings
from memory.storage.archive import archive_for
from memory.storage.contexts import ContextStore
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso

MOUNTABLE = can_mount()


def use_place(monkeypatch: pytest.MonkeyPatch, store: MemoryStore, data_dir: Path) -> MemorySettings:
    """The worker's configuration for the commands: this data directory, the shared database."""
    monkeypatch.setenv("MEMORY_DATA_DIR", str(data_dir))
    monkeypatch.setenv("MEMORY_DATABASE_URL", store.url)
    monkeypatch.setenv("MEMORY_SPILL_DIR", str(data_dir.parent / f"{data_dir.name}-spill"))
    settings = load_settings(dotenv=False)
    MemoryStore.open(settings).close()  # its Mem0 history file, as the worker's first start makes it
    return settings


def turns(user_id: str, n: int, said: str) -> list[Turn]:
    return [Turn(user_id, f"{said} {i}: my locker number is {700 + i}", "s-forget", f"{user_id}-{said}-{i}",
                 now_iso()) for i in range(n)]  # fmt: skip


def journal_turns(settings: MemorySettings, items: list[Turn]) -> None:
    """Turns waiting in the machine's journal (their worker stopped before writing them)."""

    async def never(turn: Turn) -> None:
        raise AssertionError("not written here")

    queue = DurableWriteQueue(settings.journal_path, never)
    for t in items:
        assert queue.enqueue(t)
    assert queue._conn is not None
    queue._conn.close()
    queue._conn = None


def spill_turns(settings: MemorySettings, items: list[Turn], pid: int | None = None) -> Path:
    """Turns in a worker's spill file; `pid`: a worker that was killed (its pid is gone)."""
    assert settings.spill_dir is not None
    spill = Spill(settings.spill_dir, settings.journal_path)
    for t in items:
        assert spill.add(t)
    if pid is None:
        return spill.path
    dead = spill.path.with_name(f"{spill.host}-{pid}-deadbeef0000.jsonl")
    spill.path.rename(dead)
    return dead


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def left_behind(store: MemoryStore, settings: MemorySettings, user_id: str) -> dict[str, int]:
    """What is still kept about the user: rows in every table, journal rows, spill lines."""
    rows = len(store.list_user(user_id)) + len(archive_for(store).messages(user_id))
    rows += len(ContextStore(store.pool, store.settings.collection, 4000).export_user(user_id))
    journal = 0
    if settings.journal_path.is_file():
        with closing(sqlite3.connect(settings.journal_path)) as conn:
            journal = conn.execute(
                "SELECT count(*) FROM pending_writes WHERE json_extract(payload, '$.user_id') = ?", [user_id]
            ).fetchone()[0]
    lines = 0
    if settings.spill_dir is not None and settings.spill_dir.exists():
        files = [f for f in settings.spill_dir.rglob("*") if f.is_file()]
        lines = sum(f.read_text().count(f'"user_id": "{user_id}"') for f in files)
    return {"rows": rows, "journal": journal, "spill": lines}


def keep_everywhere(store: MemoryStore, settings: MemorySettings, user_id: str) -> None:
    store.add_raw(user_id, "My sister is called Anna")
    ContextStore(store.pool, store.settings.collection, 4000).create(user_id, "receptionist", "Lost card, blocked")
    journal_turns(settings, turns(user_id, 3, "journaled"))
    spill_turns(settings, turns(user_id, 2, "spilled"), pid=dead_pid())


@pytest.mark.skipif(not MOUNTABLE, reason="no tmpfs can be mounted here (root and mount permission)")
def test_forget_on_a_full_journal_disk_removes_everything(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Before: purge_user raised "database or disk is full" after the memories and the archive
    # went and before the contexts and the journal did; a traceback, and exit 1.
    with tiny_tmpfs(tmp_path / "disk", 4096) as mnt:
        settings = use_place(monkeypatch, store, mnt / "data")
        keep_everywhere(store, settings, user_id)
        filler = fill(mnt)
        assert forget_main(["--yes", user_id]) == 0
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err and "memories 1," in out and "shared_contexts 1," in out
        assert "journal 3" in out and "spilled 2," in out
        filler.unlink()
        assert left_behind(store, settings, user_id) == {"rows": 0, "journal": 0, "spill": 0}


@pytest.mark.skipif(not MOUNTABLE, reason="no tmpfs can be mounted here (root and mount permission)")
def test_forget_that_cannot_finish_says_so_in_one_line_and_finishes_when_run_again(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    with tiny_tmpfs(tmp_path / "disk", 4096) as mnt:
        settings = use_place(monkeypatch, store, mnt / "data")
        keep_everywhere(store, settings, user_id)
        from memory.journal.reserve import reserve_path

        reserve_path(settings.journal_path).unlink()  # no room kept for a forget: it cannot delete
        filler = fill(mnt)
        assert forget_main(["--yes", user_id]) == 3
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        assert len(err.strip().splitlines()) == 1, err
        assert "could not finish" in err and "journal" in err and "disk is full" in err and "run it again" in err
        filler.unlink()
        assert left_behind(store, settings, user_id) == {"rows": 0, "journal": 3, "spill": 0}  # the rest went
        assert forget_main(["--yes", user_id]) == 0  # idempotent: the journal's turns go now
        assert "journal 3" in capsys.readouterr().out
        assert left_behind(store, settings, user_id) == {"rows": 0, "journal": 0, "spill": 0}
        assert forget_main(["--yes", user_id]) == 1  # and now, truly, nothing is stored
        assert "nothing was stored" in capsys.readouterr().err


def test_forget_with_a_journal_that_cannot_be_opened_does_the_rest_and_says_what_it_could_not(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    settings = use_place(monkeypatch, store, tmp_path / "data")
    store.add_raw(user_id, "My sister is called Anna")
    spill_turns(settings, turns(user_id, 2, "spilled"))
    settings.journal_path.mkdir()  # something in the journal's place that SQLite cannot open
    assert forget_main(["--yes", user_id]) == 3
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and len(err.strip().splitlines()) == 1
    assert "could not finish" in err and str(settings.journal_path) in err
    assert left_behind(store, settings, user_id)["rows"] == 0 and left_behind(store, settings, user_id)["spill"] == 0


def test_forget_reaches_a_dead_workers_spill_file(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Before: after three forgets a dead worker's 6 spilled turns were still readable, and
    # the command said "nothing was stored".
    settings = use_place(monkeypatch, store, tmp_path / "data")
    other = f"{user_id}-other"
    dead = spill_turns(settings, turns(user_id, 6, "spilled") + turns(other, 1, "spilled"), pid=dead_pid())
    live = spill_turns(settings, turns(user_id, 1, "live"))  # a running worker's file: it keeps appending
    assert forget_main(["--yes", user_id]) == 0
    assert "spilled 7," in capsys.readouterr().out
    assert left_behind(store, settings, user_id)["spill"] == 0
    assert left_behind(store, settings, other)["spill"] == 1  # another user's turn stays
    assert f'"{other}"' in dead.read_text() and live.exists()
    assert forget_main(["--yes", user_id]) == 1


def test_the_admin_tool_shows_exports_and_forgets_shared_contexts(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Before: show and export said "nothing is stored" for a user with only contexts, and
    # forget deleted them but exited 1 without counting them.
    use_place(monkeypatch, store, tmp_path / "data")
    ctx_id = ContextStore(store.pool, store.settings.collection, 4000).create(user_id, "receptionist", "押金被扣了")
    assert admin_main(["show", user_id]) == 0
    assert "押金被扣了" in capsys.readouterr().out
    assert admin_main(["export", user_id]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in exported["shared_contexts"]] == [ctx_id]
    assert exported["counts"]["shared_contexts"] == 1
    assert admin_main(["--json", "forget", user_id, "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["shared_contexts"] == 1
    assert admin_main(["show", user_id]) == 1


def test_a_forget_is_idempotent_and_reports_counts_per_place(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    """The callable the operator's tools (and a web page) use: a structured result."""
    import dataclasses

    from memory.service import MemoryService

    settings = dataclasses.replace(store.settings, data_dir=tmp_path / "data", spill_dir=tmp_path / "spill")
    store.add_raw(user_id, "My sister is called Anna")
    journal_turns(settings, turns(user_id, 2, "journaled"))
    service = MemoryService(store, settings)
    first = service.forget(user_id)
    assert (first.memories, first.waiting_turns, first.complete) == (1, 2, True)
    assert first.as_dict()["failed"] == {} and first.as_dict()["memories"] == 1
    again = service.forget(user_id)
    assert again.complete and again.nothing_stored


def test_forget_reaches_a_journal_set_aside_as_damaged(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    """A journal the queue set aside as damaged (`<name>.damaged-<time>`, kept for
    inspection) still holds the user's turns: they go with the rest."""
    import dataclasses

    from memory.service import MemoryService

    settings = dataclasses.replace(store.settings, data_dir=tmp_path / "data", spill_dir=tmp_path / "spill")
    journal_turns(settings, turns(user_id, 2, "set aside"))
    aside = settings.journal_path.with_name(f"{settings.journal_path.name}.damaged-20250101T000000")
    settings.journal_path.rename(aside)
    journal_turns(settings, turns(user_id, 1, "journaled"))  # the new journal, beside it
    gone = MemoryService(store, settings).forget(user_id)
    assert gone.complete and gone.waiting_turns == 3
    with closing(sqlite3.connect(aside)) as conn:
        assert conn.execute("SELECT count(*) FROM pending_writes").fetchone() == (0,)
    assert b"my locker number is 70" not in aside.read_bytes()  # not left readable in freed pages
