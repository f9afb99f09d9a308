"""The journal's file: its table, opening it, and setting a damaged one aside.

Persistence is the standard library's `sqlite3`: one small table in a WAL-mode database
gives atomic commits, crash recovery and locking between processes (`queue.py` says why
and how durable).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from memory.errors import AgentMemoryError

logger = logging.getLogger("memory.journal.queue")  # the journal's one logger, whichever module logs

PENDING = "pending"  # a row waiting for its write
DEAD = "dead"  # a dead letter: never written, kept with its reason

# A lock wait on the journal blocks the event loop, so keep it short. Every
# transaction here is one small statement, so real waits are sub-millisecond.
BUSY_TIMEOUT_S = 2.0

JOURNAL_PAGE_SIZE = 8192
_SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending_writes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- enqueue order
    turn_id      TEXT NOT NULL UNIQUE,               -- idempotency key
    payload      TEXT NOT NULL,                      -- the Turn as JSON
    state        TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    owner        TEXT,                               -- host:pid:token of the queue holding it
    owner_host   TEXT,
    owner_pid    INTEGER,
    lease_until  REAL NOT NULL DEFAULT 0,            -- unix time; after it anyone may take it
    enqueued_at  REAL NOT NULL,
    updated_at   REAL NOT NULL,
    mode         TEXT                                -- MEM0_SETTING it was written under (NULL: unknown)
);
CREATE INDEX IF NOT EXISTS pending_writes_by_owner ON pending_writes (state, owner, seq);
"""


class DamagedJournal(AgentMemoryError, sqlite3.DatabaseError):
    """The journal's own integrity check failed (a file cut short reads until it does not)."""


def is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: the file itself is broken, not the disk or access."""
    return isinstance(exc, DamagedJournal) or (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (11, 26)


def _opens(path: Path) -> bool:
    try:
        with closing(sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)) as conn:
            return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError as exc:
        if is_damaged(exc):
            return False
        raise


def set_aside_if_damaged(path: Path) -> bool:
    """Move a damaged journal (power loss, a bad disk) aside as `<name>.damaged-<time>`,
    with its WAL, so that a new one can be made; True if it was moved.

    Without this every session of the machine failed to start ("file is not a database")
    and no caller got an agent. Checked again under a lock file: another worker process
    may have set it aside already, and its new journal must not be moved in turn. The
    old file is kept for inspection: the turns it held may still be read from it.
    """
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists() or _opens(path):
            return False
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            old = Path(str(path) + suffix)
            if old.exists():
                old.rename(Path(str(aside) + suffix))
    logger.error("write journal %s was damaged: set aside as %s, a new one is started", path, aside.name)
    return True


def pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists but belongs to someone else
        return True
    return True


def connect(path: Path) -> sqlite3.Connection:
    """The journal at `path`, opened (made, or brought to this schema's version) and
    checked whole; `DamagedJournal` when its integrity check fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        # A new journal's pages: 8 KB holds three parts of a long English turn (about
        # 2.3 KB each as rows); with 4 KB pages each took a page of its own, 2 bytes
        # on disk per byte of text. No effect on an existing file.
        conn.execute(f"PRAGMA page_size={JOURNAL_PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode=WAL")
        # Pending turns only, so small: checked whole once per open.
        if (check := conn.execute("PRAGMA quick_check").fetchone()[0]) != "ok":
            raise DamagedJournal(f"integrity check: {check[:200]}")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.create_function("pid_alive", 1, lambda pid: int(pid_alive(pid)))
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < _SCHEMA_VERSION:
            conn.executescript(_SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(pending_writes)")}
            if "mode" not in columns:  # a journal of the version before
                conn.execute("ALTER TABLE pending_writes ADD COLUMN mode TEXT")
            conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
    except Exception:
        conn.close()
        raise
    return conn


__all__ = [
    "BUSY_TIMEOUT_S",
    "DEAD",
    "PENDING",
    "DamagedJournal",
    "connect",
    "is_damaged",
    "pid_alive",
    "set_aside_if_damaged",
]
