"""The journal as the operator sees it, and "forget me" in it.

The journal's SQL lives in this package: the operator's commands, its page and the
benchmarks read and change the table through these functions, never with SQL of their own.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.journal.codec import decode_turn
from memory.journal.file import BUSY_TIMEOUT_S, DEAD, PENDING, DamagedJournal, is_damaged
from memory.journal.reserve import is_disk_full, no_room, release_reserve
from memory.types import describe_error


def purge_user(path: Path, user_id: str) -> int:
    """ "Forget me" on this machine: drop the user's rows from the journal at `path`,
    pending and dead-lettered alike (both hold the text). Returns how many.

    A row being written at this moment goes too; if its write still lands, the store
    refuses or undoes it (`MemoryStore.delete_user` records the request first). On a full
    disk (a delete needs room in the write-ahead log) the journal's reserve is released
    and the purge tried again (`reserve.py`); an error that remains is raised.
    """
    if not Path(path).exists():
        return 0
    try:
        return _purge(Path(path), user_id)
    except (sqlite3.Error, OSError) as exc:
        if not ((is_disk_full(exc) or no_room(Path(path))) and release_reserve(Path(path))):
            raise
    return _purge(Path(path), user_id)


_PURGE_BATCH = 200  # rows a transaction: the write-ahead log is emptied between batches


def _purge(path: Path, user_id: str) -> int:
    removed = 0
    with closing(sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)) as conn:
        conn.execute("PRAGMA secure_delete = ON")  # the freed pages are zeroed, not left readable
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pending_writes'").fetchone():
            return 0  # a journal being made: no turn in it yet
        while True:
            rows = conn.execute(
                "DELETE FROM pending_writes WHERE seq IN (SELECT seq FROM pending_writes"
                " WHERE json_extract(payload, '$.user_id') = ? LIMIT ?) RETURNING seq",
                (user_id, _PURGE_BATCH),
            ).fetchall()
            removed += len(rows)
            # The write-ahead log still holds the pages as they were: fold it into the
            # database and empty it (best effort: a reader mid-transaction keeps it).
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if len(rows) < _PURGE_BATCH:
                return removed


def damaged_journals(path: Path) -> list[Path]:
    """Journals set aside beside `path` (`set_aside_if_damaged`): they hold turns too."""
    path = Path(path)
    return sorted(p for p in path.parent.glob(f"{path.name}.damaged-*") if not p.name.endswith(("-wal", "-shm")))


def journal_rows(path: Path, user_id: str | None = None) -> list[dict[str, Any]]:
    """The journal's rows at `path` (pending and dead letters), text included, in order;
    only the user's with `user_id`. Read-only: a worker may be writing it."""
    path = Path(path)
    if not path.exists():
        return []
    where, params = ("WHERE json_extract(payload, '$.user_id') = ?", [user_id]) if user_id is not None else ("", [])
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)) as conn:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pending_writes'").fetchone():
                return []  # a journal being made: no turn in it yet
            rows = conn.execute(
                "SELECT seq, turn_id, payload, state, attempts, last_error, updated_at FROM pending_writes "
                f"{where} ORDER BY seq",
                params,
            ).fetchall()
    except sqlite3.DatabaseError as exc:
        if is_damaged(exc):
            raise DamagedJournal(f"the journal {path} is damaged: {exc}") from exc
        raise
    out = []
    for seq, turn_id, payload, state, attempts, error, updated in rows:
        try:
            turn = decode_turn(payload)
            doc: dict[str, Any] = {"user_id": turn.user_id, "kind": turn.kind, "text": turn.text,
                                   "session_id": turn.session_id, "said_at": turn.created_at}  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - shown as it is
            doc = {"user_id": None, "kind": "?", "text": payload[:200], "decode_error": describe_error(exc)}
        out.append({"seq": seq, "turn_id": turn_id, "state": state, "attempts": attempts, "error": error,
                    "updated_at": datetime.fromtimestamp(updated, UTC), **doc})  # fmt: skip
    return out


def count_user(path: Path, user_id: str) -> int:
    """The user's rows in the journal at `path`, pending and dead letters."""
    path = Path(path)
    if not path.exists():
        return 0
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pending_writes'").fetchone():
            return 0
        query = "SELECT count(*) FROM pending_writes WHERE json_extract(payload, '$.user_id') = ?"
        return int(conn.execute(query, [user_id]).fetchone()[0])


def checkpoint(path: Path) -> None:
    """Fold the journal's write-ahead log into its file and empty it (its size on disk is
    then the rows it holds)."""
    with closing(sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def replay_dead(path: Path, turn_ids: Sequence[str] | None = None) -> int:
    """Dead letters back to pending (all, or these turns), owned by nobody: a running
    worker takes them over within `lease_s / 3` (10 s), or the next one to start does."""
    path = Path(path)
    if not path.exists():
        return 0
    with closing(sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)) as conn:
        where_ids = "" if turn_ids is None else f" AND turn_id IN ({','.join('?' * len(turn_ids))})"
        return conn.execute(
            "UPDATE pending_writes SET state = ?, attempts = 0, owner = NULL, owner_host = NULL, owner_pid = NULL,"
            f" lease_until = 0, updated_at = ? WHERE state = ?{where_ids}",
            (PENDING, time.time(), DEAD, *(turn_ids or ())),
        ).rowcount


__all__ = ["checkpoint", "count_user", "damaged_journals", "journal_rows", "purge_user", "replay_dead"]
