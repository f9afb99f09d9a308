"""A forget rewrites a live worker's spill file in place: the worker's next append lands
after the kept lines, nothing of the forgotten user is left, and every line still reads."""

from __future__ import annotations

from pathlib import Path

from memory.journal.spill import Spill, purge_user, read_user
from memory.types import Turn, now_iso


def turn(user: str, n: int) -> Turn:
    return Turn(user, f"note {n}: my locker is {n}", "s", f"{user}-{n}", now_iso())


def test_a_live_spill_file_is_purged_in_place_and_stays_appendable(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    live = Spill(tmp_path / "spill", journal)
    for t in (turn("alice", 1), turn("bob", 2), turn("alice", 3)):
        assert live.add(t)
    assert purge_user(tmp_path / "spill", journal, "alice") == 2
    assert live.add(turn("bob", 4))  # the worker goes on appending to its open file
    assert [t.turn_id for t in read_user(tmp_path / "spill", journal, "bob")] == ["bob-2", "bob-4"]
    assert read_user(tmp_path / "spill", journal, "alice") == []
    assert "alice" not in live.path.read_text()
    assert purge_user(tmp_path / "spill", journal, "alice") == 0  # again: nothing left to remove


def test_a_line_cut_short_by_a_kill_is_removed_when_it_names_the_user(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    spill = Spill(tmp_path / "spill", journal)
    assert spill.add(turn("bob", 1))
    with open(spill.path, "ab") as f:
        f.write(b'{"user_id": "alice", "text": "my password is hun')  # the kill came mid-write
    assert purge_user(tmp_path / "spill", journal, "alice") == 1
    assert "alice" not in spill.path.read_text() and [
        t.user_id for t in read_user(tmp_path / "spill", journal, "bob")
    ] == ["bob"]
