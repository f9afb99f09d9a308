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


# --- over places the test makes (no store): what forget, counts and the users list promise

import sqlite3  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from memory.errors import Unfinished  # noqa: E402
from memory.userdata import Forgotten, Place, count_names, counts_line, place_names  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Fake(UserData):
    """UserData over the given places; no store is touched."""

    def __init__(self, places: list[Place], tmp_path: Path) -> None:
        settings = SimpleNamespace(journal_path=tmp_path / "journal.db")
        super().__init__(SimpleNamespace(), settings)  # type: ignore[arg-type]
        self._places = places

    @property
    def places(self) -> list[Place]:
        return self._places


def _raises(exc: BaseException):  # noqa: ANN202
    def run(*_: Any) -> Any:
        raise exc

    return run


def test_a_forget_tries_every_place_and_counts_what_a_stopped_place_removed(tmp_path: Path) -> None:
    deleted: list[str] = []

    def gone(name: str, n: int):  # noqa: ANN202
        def run(_data: Any, user_id: str) -> int:
            deleted.append(name)
            return n

        return run

    places = [
        Place("memories", "", lambda *_: iter(()), gone("memories", 4)),
        Place("archive", "", lambda *_: iter(()), _raises(Unfinished("the archive is locked", removed=3))),
        Place("journal", "", lambda *_: iter(()), _raises(RuntimeError("boom"))),
        Place("spilled", "", lambda *_: iter(()), gone("spilled", 1)),
    ]
    result = Fake(places, tmp_path).forget("alice")
    assert deleted == ["memories", "spilled"]  # the places after the failures still tried
    assert result.removed == {"memories": 4, "archive": 3, "journal": 0, "spilled": 1}
    assert set(result.failed) == {"archive", "journal"}
    assert result.failed["archive"] == "the archive is locked"
    assert result.complete is False and result.nothing_stored is False and result.total == 8


def test_a_forget_that_searched_nowhere_never_says_nothing_was_stored(tmp_path: Path) -> None:
    places = [Place("memories", "", lambda *_: iter(()), _raises(RuntimeError("the database is down")))]
    result = Fake(places, tmp_path).forget("alice")
    assert result.total == 0 and result.complete is False and result.nothing_stored is False
    assert Forgotten({"memories": 0, "journal": 0}).nothing_stored is True
    assert Forgotten({"memories": 1}).nothing_stored is False


def test_what_a_forget_says() -> None:
    gone = Forgotten({"memories": 2, "archive": 0}, {"journal": "disk full"})
    assert gone.counts() == "memories 2, archive 0"
    assert gone.as_dict() == {"memories": 2, "archive": 0, "failed": {"journal": "disk full"}, "complete": False}
    assert gone.problem("alice") == (
        "could not finish forgetting 'alice': journal: disk full. Removed so far: "
        "memories 2, archive 0. Fix that and run it again: a forget can be repeated"
    )
    older = Forgotten({"memories": 5, "archive": 4, "shared_contexts": 3, "spilled": 2, "journal": 1})
    assert (older.memories, older.archived, older.contexts, older.spilled, older.waiting_turns) == (5, 4, 3, 2, 1)
    assert Forgotten({}).memories == 0 and Forgotten({}).waiting_turns == 0


def test_the_users_list_is_newest_first_with_counts_from_every_place(tmp_path: Path) -> None:
    def detail(by_user: dict[str, tuple[dict[str, int], datetime | None]]):  # noqa: ANN202
        return lambda _data, user_id: by_user if user_id is None else {user_id: by_user[user_id]}

    memories = Place("memories", "", lambda *_: iter(()), lambda *_: 0, parts=("facts",), detail=detail({
        "ann": ({"memories": 2, "facts": 1}, T0 + timedelta(days=1)),
        "bob": ({"memories": 1, "facts": 0}, T0 + timedelta(days=5)),
        "cyd": ({"memories": 1, "facts": 1}, None),
    }))  # fmt: skip
    archive = Place("archive", "", lambda *_: iter(()), lambda *_: 0, detail=detail({
        "ann": ({"archive": 7}, T0 + timedelta(days=9)),  # ann's newest is in the archive
        "dee": ({"archive": 1}, T0 + timedelta(days=3)),
    }))  # fmt: skip
    users = Fake([memories, archive], tmp_path).users()
    assert [u["user_id"] for u in users] == ["ann", "bob", "dee", "cyd"]  # never-dated last
    assert users[0] == {"user_id": "ann", "memories": 2, "facts": 1, "archive": 7,
                        "last_activity": T0 + timedelta(days=9)}  # fmt: skip
    assert users[2] == {"user_id": "dee", "memories": 0, "facts": 0, "archive": 1,
                        "last_activity": T0 + timedelta(days=3)}  # fmt: skip
    assert users[3]["last_activity"] is None


def test_an_unreadable_local_place_counts_zero_and_says_so_and_the_store_raises(tmp_path: Path) -> None:
    journal = Place("journal", "", _raises(sqlite3.DatabaseError("file is not a database")), lambda *_: 0,
                    local=True)  # fmt: skip
    spilled = Place("spilled", "", lambda *_: iter([{"a": 1}, {"a": 2}]), lambda *_: 0, local=True)
    data = Fake([journal, spilled], tmp_path)
    assert data.counts("alice") == {"journal": 0, "spilled": 2}
    assert list(data.unreadable) == ["journal"] and "file is not a database" in data.unreadable["journal"]
    assert data.known("alice") is True
    store = Place("memories", "", _raises(OSError("connection refused")), lambda *_: 0)  # not local
    with pytest.raises(OSError):
        Fake([store], tmp_path).counts("alice")


def test_a_place_is_counted_by_its_count_else_its_rows_and_an_empty_user_is_unknown(tmp_path: Path) -> None:
    from memory.userdata import UnknownUser

    counted = Place("shared_contexts", "", _raises(AssertionError("rows not read when counted")), lambda *_: 0,
                    count=lambda _d, _u: 3)  # fmt: skip
    assert Fake([counted], tmp_path).counts("alice") == {"shared_contexts": 3}
    empty = Fake([Place("spilled", "", lambda *_: iter(()), lambda *_: 0)], tmp_path)
    assert empty.known("alice") is False
    with pytest.raises(UnknownUser):
        empty.require_known("alice")


def test_the_places_and_their_counts_in_one_line() -> None:
    assert place_names() == ["memories", "mem0_history", "archive", "shared_contexts", "densities", "spilled",
                             "journal"]  # fmt: skip
    assert count_names() == ["memories", "raw_turns", "facts", "mem0_history", "archive", "calls", "messages",
                             "summaries", "shared_contexts", "densities", "spilled", "journal"]  # fmt: skip
    counts = {"memories": 22, "raw_turns": 20, "facts": 2, "mem0_history": 3, "archive": 4, "calls": 1,
              "messages": 2, "summaries": 1}  # fmt: skip
    assert counts_line(counts) == ("memories 22 (raw_turns 20, facts 2), mem0_history 3, "
                                   "archive 4 (calls 1, messages 2, summaries 1)")  # fmt: skip
    assert counts_line({"journal": 0}) == "journal 0"
