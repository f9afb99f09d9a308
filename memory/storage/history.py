"""Mem0's history file on this machine: what a forget purges, an export reads, a redaction rewrites.

Mem0 keeps every ADD / UPDATE / DELETE of a memory, old and new text, in a SQLite file of
its own (`history.db` in the data directory), per machine. Mem0 2.2 has no call to remove
or rewrite entries; `Mem0History` does it, through Mem0's own connection under its lock
once Mem0 is loaded, else with a connection of its own (an operator's command need not load
Mem0 to read or purge it). The ids a forget removed are kept in the forget record (`{table}_forgets`),
so every machine purges its own file (`MemoryStore.open`, the forget command).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from psycopg import sql

from memory.language.redact import redact_secrets
from memory.settings import MemorySettings
from memory.storage.mem0_table import Mem0Table
from memory.storage.postgres import forgets_table
from memory.types import describe_error

SQLITE_READONLY_ROLLBACK = 776  # a read-only connection meets a hot journal (a writer killed mid-transaction)


def history_problems(settings: MemorySettings) -> list[str]:
    """Mem0's history file, if there is one, must be a readable SQLite database. Mem0 opens
    it in every job process: damaged (power loss, a bad disk), every open failed with 'file
    is not a database' and every session ran without memory, though the start-up check had
    passed. Read-only, so the check never changes the file (it reads all of it, once)."""
    path = settings.mem0_dir / "history.db"
    if not path.exists():  # a fresh data directory: Mem0 makes it
        return []
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            verdict = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorcode", None) == SQLITE_READONLY_ROLLBACK:
            return []  # not damaged: Mem0's first open rolls the unfinished change back
        verdict = [describe_error(exc)]
    if verdict == ["ok"]:
        return []
    return [
        f"Mem0's history file {str(path)!r} (in MEMORY_DATA_DIR) cannot be read ({verdict[0][:200]}): "
        "move it out of the way (e.g. rename it history.db.damaged) and start again; Mem0 starts a new one. "
        "It holds only Mem0's record of changes to memories: the memories themselves are in Postgres and are kept. "
        "It may hold the text of old memories: delete it once it is of no more use."
    ]


class Mem0History:
    """This machine's Mem0 history file, for the memories of `rows`' table."""

    def __init__(
        self, settings: MemorySettings, rows: Mem0Table, loaded: Callable[[], Any | None], load: Callable[[], Any]
    ) -> None:
        self.settings = settings
        self.rows = rows
        self._loaded = loaded  # Mem0's `Memory` if it is loaded, else None
        self._load = load  # Mem0's `Memory`, loaded if it is not

    def entries(self, memory_id: str) -> list[dict[str, Any]]:
        """One memory's history, oldest first: Mem0's own when it is loaded, else read from
        its file (an operator's `show`) in Mem0's order, rather than load Mem0 for this."""
        mem0 = self._loaded()
        if mem0 is not None:
            return list(mem0.history(memory_id))
        return list(self.of([memory_id]))

    def restore_created(self, memory_id: str, created_at: str) -> None:
        """Date the memory's entries with its exported `created_at` (Mem0 dates them all
        with the memory's `created_at`, "now" for an import)."""
        db = self._load().db
        with db._lock:
            db.connection.execute("UPDATE history SET created_at = ? WHERE memory_id = ?", [created_at, memory_id])
            db.connection.execute(
                "UPDATE history SET updated_at = ? WHERE memory_id = ? AND event = 'ADD'", [created_at, memory_id]
            )
            db.connection.commit()

    def purge_user(self, user_id: str) -> int:
        """Purge this machine's Mem0 history of every memory a forget of the user removed."""
        ids = self.forgotten_ids(user_id)
        self.purge(ids)
        return len(ids)

    def forgotten_ids(self, user_id: str) -> list[str]:
        """The ids of the memories the user's forgets removed (kept in the forget record)."""
        with self.rows.pool.connection() as conn:
            forgotten = conn.execute(
                sql.SQL("SELECT memory_ids FROM {} WHERE user_id = %s").format(
                    sql.Identifier(forgets_table(self.rows.name))
                ),
                [user_id],
            ).fetchone()
        return list(forgotten[0]) if forgotten else []

    def purge_forgotten(self) -> int:
        """Purge this machine's Mem0 history of every memory a forget removed, wherever
        the forget ran (`open` does this at each worker start). Returns how many ids."""
        with self.rows.pool.connection() as conn:
            rows = conn.execute(
                sql.SQL("SELECT unnest(memory_ids) FROM {}").format(sql.Identifier(forgets_table(self.rows.name)))
            ).fetchall()
        ids = [r[0] for r in rows]
        self.purge(ids)
        return len(ids)

    @contextmanager
    def _db(self, *, write: bool) -> Iterator[sqlite3.Connection | None]:
        """This machine's Mem0 history file: Mem0's own connection under its lock once Mem0
        is loaded, else one of our own (an operator's command need not load Mem0 to read or
        purge it; SQLite locks between the two); None when there is no file yet."""
        mem0 = self._loaded()
        if mem0 is not None:
            db = mem0.db
            with db._lock:
                yield db.connection
            return
        path = self.settings.mem0_dir / "history.db"
        if not path.exists():
            yield None
            return
        uri = f"{path.resolve().as_uri()}{'' if write else '?mode=ro'}"
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            yield conn
        finally:
            conn.close()

    def purge(self, ids: Sequence[str]) -> int:
        """Remove Mem0's history of these memories; how many entries went. Mem0 2.2 has no
        call for it: its SQLite file, by its own connection when Mem0 is loaded."""
        removed = 0
        with self._db(write=True) as db:
            if db is None:
                return 0
            db.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed, not left readable
            # Every worker start purges all forgotten ids (most already gone): by index,
            # not a scan of the whole history per batch. Mem0 makes no such index.
            try:
                if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'history'").fetchone():
                    return 0
                db.execute("CREATE INDEX IF NOT EXISTS history_by_memory_id ON history (memory_id)")
                for start in range(0, len(ids), 500):
                    chunk = list(ids[start : start + 500])
                    marks = ",".join("?" * len(chunk))
                    removed += db.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk).rowcount
                db.commit()
            except Exception:
                db.rollback()  # a full disk: nothing half done, tried again later
                raise
        return removed

    _HISTORY_KEYS = ("id", "memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at")

    def of(self, ids: Sequence[str]) -> Iterator[dict[str, Any]]:
        """This machine's Mem0 history of these memories, entry by entry, each memory's
        oldest first (read in batches of 500 ids)."""
        keys = self._HISTORY_KEYS
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            with self._db(write=False) as db:
                if db is None:
                    return
                try:
                    rows = db.execute(
                        f"SELECT {', '.join(keys)} FROM history WHERE memory_id IN ({marks}) "
                        "ORDER BY memory_id, created_at ASC, DATETIME(updated_at) ASC",
                        chunk,
                    ).fetchall()
                except sqlite3.OperationalError:  # no history table yet
                    return
            yield from (dict(zip(keys, row, strict=True)) for row in rows)

    def count(self, ids: Sequence[str]) -> int:
        """Entries of this machine's Mem0 history about these memories."""
        left = 0
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            with self._db(write=False) as db:
                if db is None:
                    return 0
                try:
                    left += db.execute(f"SELECT count(*) FROM history WHERE memory_id IN ({marks})", chunk).fetchone()[
                        0
                    ]
                except sqlite3.OperationalError:  # no history table yet
                    return 0
        return left

    def ids_of_user(self, user_id: str) -> list[str]:
        """The memory ids Mem0's history may hold entries of for the user: those kept now, and
        those a forget of the user removed."""
        return sorted(set(self.rows.user_ids(user_id)) | set(self.forgotten_ids(user_id)))

    def left(self, user_id: str) -> int:
        """Entries of this machine's Mem0 history still about memories a forget of the user
        removed: 0 once the purge is done."""
        return self.count(self.forgotten_ids(user_id))

    def redact(self, ids: Sequence[str] | None) -> int:
        """Redact the old and new values of Mem0's history entries (of these memories, or all)."""
        db = self._load().db
        changed = 0
        with db._lock:
            db.connection.execute("PRAGMA secure_delete = ON")
            try:
                if ids is None:
                    entries = db.connection.execute("SELECT id, old_memory, new_memory FROM history").fetchall()
                else:
                    entries = []
                    for start in range(0, len(ids), 500):
                        chunk = list(ids[start : start + 500])
                        entries += db.connection.execute(
                            f"SELECT id, old_memory, new_memory FROM history WHERE memory_id IN "
                            f"({','.join('?' * len(chunk))})",
                            chunk,
                        ).fetchall()
                for entry_id, old, new in entries:
                    clean = [redact_secrets(v)[0] if isinstance(v, str) else v for v in (old, new)]
                    if clean != [old, new]:
                        db.connection.execute(
                            "UPDATE history SET old_memory = ?, new_memory = ? WHERE id = ?", [*clean, entry_id]
                        )
                        changed += 1
                db.connection.commit()
            except Exception:
                db.connection.rollback()
                raise
        return changed


__all__ = ["SQLITE_READONLY_ROLLBACK", "Mem0History", "history_problems"]
