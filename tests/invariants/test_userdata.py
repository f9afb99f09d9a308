"""The places that hold a user's data (memory/userdata.py), as invariants: the last
activity is the newest of the places (whichever holds it); the journal's count covers the
damaged journals that forget and export cover; export pages with tied timestamps neither
skip nor repeat a row; a place that cannot be read is said to be unreadable, and the other
places' counts still come."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.store import MemoryStore
from memory.userdata import UserData
from tests.admin.test_forget_everywhere import journal_turns, turns


def _data(store: MemoryStore, tmp_path: Path, page_size: int = 1000) -> UserData:
    settings = dataclasses.replace(store.settings, data_dir=tmp_path / "data", spill_dir=tmp_path / "spill")
    return UserData(store, settings, page_size=page_size)


def _message(user_id: str, n: int, at: datetime) -> ArchivedMessage:
    return ArchivedMessage(f"{user_id}:m{n}", "chat-1", user_id, f"message {n} about glazes", "user", at)


def _last_activity(data: UserData, user_id: str) -> datetime:
    [row] = [u for u in data.users() if u["user_id"] == user_id]
    return row["last_activity"]


def test_the_last_activity_is_the_newest_of_the_places(store: MemoryStore, tmp_path: Path) -> None:
    import uuid

    data = _data(store, tmp_path)
    later, earlier = f"act-later-{uuid.uuid4().hex[:8]}", f"act-earlier-{uuid.uuid4().hex[:8]}"
    ahead = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    behind = (datetime.now(UTC) - timedelta(days=2)).replace(microsecond=0)
    for user in (later, earlier):
        store.add_raw(user, "I moved to Porto")  # a memory written now
    archive_for(store).add([_message(later, 0, ahead), _message(earlier, 0, behind)])
    assert _last_activity(data, later) == ahead  # the archive's, newer than the memory
    got = _last_activity(data, earlier)  # the memory's (now), not the archive's older message
    assert behind + timedelta(days=1) < got <= datetime.now(UTC)


def test_the_journal_count_covers_a_damaged_journal_set_aside(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    data = _data(store, tmp_path)
    journal_turns(data.settings, turns(user_id, 2, "set aside"))
    aside = data.settings.journal_path.with_name(f"{data.settings.journal_path.name}.damaged-20250101T000000")
    data.settings.journal_path.rename(aside)
    journal_turns(data.settings, turns(user_id, 1, "journaled"))
    assert data.counts(user_id)["journal"] == 3  # what export and forget reach
    assert len(data.export(user_id)["journal"]) == 3
    assert data.forget(user_id).removed["journal"] == 3


def test_export_pages_with_tied_timestamps_neither_skip_nor_repeat_a_row(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    data = _data(store, tmp_path, page_size=3)
    tied = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    archive_for(store).add([_message(user_id, n, tied) for n in range(8)])  # 8 rows, one time: pages of 3
    doc = data.export(user_id)
    assert sorted(r["id"] for r in doc["archive"]) == sorted(f"{user_id}:m{n}" for n in range(8))
    assert len(doc["archive"]) == 8 and doc["counts"]["archive"] == 8
    for n in range(7):  # raw turns said within one second: their pages too
        store.add_raw(user_id, f"turn {n}: my pottery class is on Tuesdays", metadata={"session_id": "s", "seq": n})
    texts = [m["text"] for m in data.export(user_id)["memories"]]
    assert sorted(texts) == sorted(f"turn {n}: my pottery class is on Tuesdays" for n in range(7))


def test_a_journal_that_cannot_be_read_is_said_and_the_other_places_still_counted(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    data = _data(store, tmp_path)
    store.add_raw(user_id, "My sister is called Anna")
    data.settings.journal_path.mkdir(parents=True)  # something else where the journal should be
    counts = data.counts(user_id)
    assert counts["memories"] == 1 and counts["journal"] == 0
    assert list(data.unreadable) == ["journal"]
    assert data.known(user_id)
    data.settings.journal_path.rmdir()
    assert data.counts(user_id)["journal"] == 0 and data.unreadable == {}
