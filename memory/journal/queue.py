"""Durable background writes: completed turns reach the store even through outages and kills.

The reply path never waits for the memory store. A completed turn is put in a
journal on local disk (`enqueue`: one INSERT and commit, well under a
millisecond) and a background task writes it to the store, retrying with
capped exponential backoff for as long as the process lives. The row leaves the
journal only when the store has acknowledged the write, so

- a store outage during a session (30 s or 30 min) loses nothing: turns queue
  up on disk and are written, oldest first, when the store is back;
- a worker process killed with writes pending loses nothing: the next queue
  that opens the journal (in a new process, or another live worker on the same
  machine) takes the rows over and writes them;
- replays do not duplicate: the store makes a replayed turn a NOOP (NORMAL:
  `add_raw(write_id=turn_id)`; GATED: a restated fact is a NOOP), and the queue
  never hands one row to two consumers at once (see "Leases").

Persistence is the standard library's `sqlite3`, not a hand-written file
format: one small table in a WAL-mode database gives atomic commits, crash
recovery and locking between processes for free.

Durability level: `journal_mode=WAL` with `synchronous=NORMAL`. A commit is
complete when its WAL frame has been written to the OS, so a row survives the
process being killed (SIGKILL, OOM killer, a crash) the moment `enqueue`
returns. It is not fsynced on every commit, so an OS crash or power cut may
lose the last commits (the database itself stays consistent). That is the
right trade for a voice agent: `synchronous=FULL` would put an fsync (up to
tens of milliseconds on slow disks) on the event loop for every user turn.

Leases. Several worker processes on one machine share the data directory and
so the journal. Each row carries an owner (host, pid and a per-queue token)
and a lease end time. A queue processes only rows it owns. It owns what it
enqueues, renews the lease of its rows every `lease_s / 3`, and takes over
("replays") a row only when the owner is gone: lease expired, or the owner's
pid no longer exists on this host. The take-over is a single UPDATE, so two
live processes cannot both claim a row. On `aclose` a queue releases its rows
at once, except the one whose attempt was interrupted (its handler might
still be running in a thread); that one keeps its lease until it expires.

Ordering and outages. Rows are written one at a time, oldest first. When a
write fails, the same row is retried after the backoff and later turns wait
behind it (order matters: a later "my sister is Maria" must supersede an
earlier "my sister is Anna", never the reverse; across queues, as when a row
is taken over after a newer session wrote, the store compares the turns' times,
`MemoryStore.upsert_fact`), so a dead store costs one
attempt per backoff period, not one per queued turn. The backoff is
exponential with jitter and capped at `max_backoff_s`, so recovery after a
long outage takes at most about that long.

Errors. The handler's error says whether to try again (`retryable`, the product's
error tree, `memory/errors.py`; a third-party error is put into it at the store's
boundary first, `memory/storage/faults.py`). One that says no (bad input such as
`InvalidMemoryText`, a turn said before a forget) moves the row to a dead-letter
state with the reason; it is logged and kept for inspection (`dead_letters()`),
never retried, never silently dropped. A row that cannot
be decoded, or whose fields have the wrong types, is dead-lettered the same way.
A journal file that is damaged (its integrity check fails when it is opened) is
set aside under a new name and a new one started (`set_aside_if_damaged`). A turn
the journal refuses (it cannot be opened, a read-only or full disk) goes to a spill
file on a RAM disk (`spill.py`, survives a kill) and straight to the store; if that
refuses too, `enqueue` says so (returns False, logs at ERROR) rather than claim it.
Each row records the mode it was written under; a queue takes over only its own.
An error that does not say (`is_turn_failure`: a bug its words may trigger) is
dead-lettered once the turn has failed that way `MAX_TURN_FAILURES` times, or one
bad turn would hold up every turn behind it. One that says yes (a lost connection,
a read-only or full database, a busy lock, a model or embedding API that errs or
does not answer) and an attempt that exceeds `attempt_timeout_s` is taken for an
outage and retried forever: a turn dead-lettered during an outage would never be
remembered. Nothing here
raises into the session: `drain` and `aclose` are bounded and never raise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import logging
import os
import random
import socket
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.errors import AgentMemoryError, retryable
from memory.journal.codec import decode_turn, encode_turn
from memory.journal.reserve import ensure_reserve, is_disk_full, no_room, release_reserve
from memory.journal.spill import Spill
from memory.ops import metrics
from memory.storage.faults import in_tree
from memory.storage.lease import WALL_CLOCK, Clock, Lease, Sql
from memory.types import Turn, describe_error

logger = logging.getLogger(__name__)

Handler = Callable[[Turn], Awaitable[object]]

PENDING = "pending"
DEAD = "dead"

# A lock wait on the journal blocks the event loop, so keep it short. Every
# transaction here is one small statement, so real waits are sub-millisecond.
BUSY_TIMEOUT_S = 2.0
# Failures of one turn that say it cannot be written (`is_turn_failure`), before it is
# dead-lettered; the attempts that met an outage do not count.
MAX_TURN_FAILURES = 5
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


@dataclass(frozen=True)
class DeadLetter:
    """A turn that will never be written (bad input), with the reason."""

    turn_id: str
    error: str
    attempts: int
    failed_at: float
    turn: Turn | None
    payload: str


class DamagedJournal(AgentMemoryError, sqlite3.DatabaseError):
    """The journal's own integrity check failed (a file cut short reads until it does not)."""


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: the file itself is broken, not the disk or access."""
    return isinstance(exc, DamagedJournal) or (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (11, 26)


def _opens(path: Path) -> bool:
    try:
        with closing(sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)) as conn:
            return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError as exc:
        if _is_damaged(exc):
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


def is_turn_failure(exc: BaseException) -> bool:
    """Might this failure be this one turn's (an error that does not say whether to retry:
    a bug its words trigger)? Counted, and dead-lettered after `MAX_TURN_FAILURES`. An
    error that says it is retryable is an outage, retried for as long as it lasts (a
    read-only database during a failover, an API's 503 or 429, a lost connection): a dead
    letter is never written. Third-party errors are read once put into the tree."""
    return retryable(in_tree(exc)) is None


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


# ------------------------------------------------------------------ the operator's view
# The journal's SQL lives here: the operator's commands, its page and the benchmarks read
# and change the table through these, never with SQL of their own.


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
        if _is_damaged(exc):
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


def _pid_alive(pid: int | None) -> bool:
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


class DurableWriteQueue:
    """Background writer of turns with a crash-safe journal on local disk.

    `handler` does the store write (normally `MemoryService.remember`); it must
    be idempotent per `turn.turn_id`, because a write that reached the store
    just before a kill is replayed. Use from one event loop; `enqueue` is
    synchronous and safe to call from event callbacks.
    """

    def __init__(
        self,
        path: Path,
        handler: Handler,
        *,
        base_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        attempt_timeout_s: float = 10.0,
        lease_s: float = 30.0,
        may_adopt: Callable[[], bool] = lambda: True,
        mode: str | None = None,
        spill_dir: Path | None = None,
        clock: Clock = WALL_CLOCK,
    ) -> None:
        """`may_adopt`: whether this queue may take over turns that stopped workers left
        (False while its store is unavailable: a queue that cannot write them would only
        hold them away from one that can). `mode`: the MEM0_SETTING of this worker; each
        row records the mode it was written under, and a queue takes over only rows of
        its own mode (a GATED turn replayed by a NORMAL worker stored the raw turn).
        `spill_dir`: where turns go that the journal refuses (`spill.py`). `clock`: the
        rows' leases' clock (`memory/storage/lease.py`)."""
        if base_backoff_s <= 0 or max_backoff_s <= 0 or attempt_timeout_s <= 0 or lease_s <= 0:
            raise ValueError("backoffs, attempt timeout and lease must be positive")
        self.path = Path(path)
        self.handler = handler
        self.base_backoff_s = base_backoff_s
        self.max_backoff_s = max(max_backoff_s, base_backoff_s)
        self.attempt_timeout_s = attempt_timeout_s
        self.lease_s = lease_s
        self._lease = Lease(lease_s, holder="owner", until="lease_until", dialect="sqlite", clock=clock, vacant="0")
        self.may_adopt = may_adopt
        self.mode = mode
        self._spill = Spill(spill_dir, self.path) if spill_dir is not None else None
        self._journal_ok = True  # the last journal statement worked

        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:12]}"

        # Counters (observability): writes acknowledged by the store, failed
        # attempts that will be retried, rows dead-lettered, rows taken over
        # from a dead or expired owner.
        self.written = 0
        self.retried = 0
        self.dead_lettered = 0
        self.replayed = 0

        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            try:
                self._open_journal()
            except sqlite3.DatabaseError as exc:
                if not _is_damaged(exc):
                    raise
                set_aside_if_damaged(self.path)  # or another process did
                self._open_journal()
        except (sqlite3.DatabaseError, OSError) as exc:
            # A full disk, a read-only file system, no directory: turns go to the spill
            # file and straight to the store until it opens (tried again at every use).
            self._journal_ok = False
            logger.error("write journal %s cannot be opened (turns go straight to the store): %s",
                         self.path, describe_error(exc))  # fmt: skip

        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None  # new rows to look at
        self._progress: asyncio.Event | None = None  # a row left the pending state
        self._consumer: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        # The row whose last attempt was cut short (timeout, stop): its handler
        # may still be running in a thread, so its lease is not released early.
        self._unsettled_seq: int | None = None
        # Store writes held while a reply is being made (`hold`): until this loop time at
        # the latest, or until `release`. The journal is not held: a turn is on disk at once.
        self._hold_until = 0.0
        self._released: asyncio.Event | None = None
        self.hold_timeouts = 0  # holds that ran out before their release (observability)
        self.hold_waits = 0  # times the consumer stopped at a hold with work to do (observability)
        self._failures = 0  # consecutive failed attempts (drives the backoff)
        self._closed = False
        # Turns whose journal insert failed (disk full, lock timeout): kept in
        # memory and flushed to the journal by the consumer, never dropped.
        self._unsaved: OrderedDict[str, Turn] = OrderedDict()
        # Rows the store has but the journal could not delete (disk full): skipped,
        # and deleted when the journal lets us (a replay of one would be a NOOP).
        self._written_seqs: set[int] = set()
        self._turn_failures: dict[int, int] = {}  # journal row -> failures that were the turn's own
        # The take-over could not claim a dead worker's rows (the journal refuses writes: a
        # full disk): they are written without being claimed ("borrowed") until it can.
        self._borrowing = False
        self._borrowed_count = 0
        self._borrowed_at = float("-inf")
        # Recently written turn ids: a late duplicate enqueue is ignored.
        self._done: OrderedDict[str, None] = OrderedDict()
        self._done_max = 4096

    # ------------------------------------------------------------- journal
    def _open_journal(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
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
            conn.create_function("pid_alive", 1, lambda pid: int(_pid_alive(pid)))
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
        self._conn = conn
        ensure_reserve(self.path)  # room for a forget on a full disk (best effort)
        return conn

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                conn = self._open_journal()
                rows = conn.execute(sql, params).fetchall()
            except Exception:
                self._journal_ok = False
                raise
            self._journal_ok = True
            return rows

    def _turn_mode(self, turn: Turn) -> str | None:
        return turn.mode or self.mode

    def _insert(self, turn: Turn) -> bool:
        """The turn's row, held by this queue (its lease from now)."""
        at = self._lease.at()
        query = (
            Sql("INSERT INTO pending_writes (turn_id, payload, owner, owner_host, owner_pid,"
                " lease_until, enqueued_at, updated_at, mode) VALUES (?, ?, ?, ?, ?, ",
                (turn.turn_id, encode_turn(turn), self.owner, self.host, self.pid))
            + at.until_value()
            + Sql(", ?, ?, ?) ON CONFLICT (turn_id) DO NOTHING RETURNING seq", (at.now, at.now, self._turn_mode(turn)))
        )  # fmt: skip
        return bool(self._execute(query.text, query.params))

    # ---------------------------------------------------------------- API
    def enqueue(self, turn: Turn) -> bool:
        """Persist a turn for writing (one insert + commit); a known turn_id is ignored.

        Returns whether the turn is on disk (the journal, or the spill file when the
        journal refuses it). False means it is held in memory only, on its way straight
        to the store, and said so at ERROR: a kill before the store has it loses it."""
        if turn.turn_id in self._done or turn.turn_id in self._unsaved:
            return True
        if self.mode is not None and turn.mode is None:
            turn = dataclasses.replace(turn, mode=self.mode)
        if self._closed:
            logger.warning("enqueue after aclose: turn %s kept in the journal for the next start", turn.turn_id)
        durable = True
        try:
            inserted = self._insert(turn)
        except Exception as exc:  # the journal must never break the session
            durable = self._spill is not None and self._spill.add(turn)
            if durable:
                logger.error("journal insert failed for turn %s (kept in the spill file, written straight to"
                             " the store): %s", turn.turn_id, describe_error(exc))  # fmt: skip
            else:
                logger.error("journal insert failed for turn %s and no spill file takes it: held in memory only"
                             " until the store has it (lost if the process dies first): %s",
                             turn.turn_id, describe_error(exc))  # fmt: skip
            self._unsaved[turn.turn_id] = turn
            inserted = True
        if inserted:
            self._notify(self._wake)
            self._count_pending()
        return durable

    def start(self) -> None:
        """Start the consumer on the running loop, first taking over rows left by dead owners."""
        if self._closed:
            raise RuntimeError("DurableWriteQueue was closed; open a new one")
        if self._consumer is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._released = asyncio.Event()
        try:
            self.import_spills()
        except Exception as exc:  # retried by the lease keeper
            logger.warning("spill take-over scan failed: %r", exc)
        self._take_over()
        self._wake.set()
        self._consumer = asyncio.create_task(self._consume(), name="memory-write-queue")
        self._keeper = asyncio.create_task(self._keep_leases(), name="memory-write-queue-leases")

    def hold(self, seconds: float) -> None:
        """Hold the store writes for at most `seconds` from now, or until `release`.

        Why: on 2 cores a turn's write (its embedding and insert, GATED's extraction, the
        archive's insert) running beside the reply that is being made delayed that reply's
        first audio, though the reply never waited for it (docs/latency.md). The session
        holds the writes from the end of the user's speech to the reply's first audio
        frame. Only the store work waits: `enqueue` still puts each turn in the journal at
        once (a kill during a hold loses nothing), a write already running goes on, and a
        hold is bounded, so a reply that never comes holds nothing for long."""
        if self._loop is None or self._closed or seconds <= 0:
            return
        self._hold_until = max(self._hold_until, self._loop.time() + seconds)

    def release(self) -> None:
        """End a hold: the held writes go now."""
        self._hold_until = 0.0
        self._notify(self._released)

    @property
    def held(self) -> bool:
        return self._loop is not None and self._loop.time() < self._hold_until

    async def _wait_hold(self) -> None:
        assert self._loop is not None and self._released is not None
        if self._hold_until > self._loop.time():
            self.hold_waits += 1
        while (left := self._hold_until - self._loop.time()) > 0:
            self._released.clear()
            try:
                await asyncio.wait_for(self._released.wait(), left)
            except TimeoutError:
                if self._hold_until and self._loop.time() >= self._hold_until:
                    self.hold_timeouts += 1
                    self._hold_until = 0.0

    def pending_count(self) -> int:
        """Rows waiting to be written, in the whole journal (all processes), plus unsaved ones."""
        try:
            (count,) = self._execute("SELECT COUNT(*) FROM pending_writes WHERE state = ?", (PENDING,))[0]
        except Exception as exc:
            logger.warning("journal count failed: %r", exc)
            count = 0
        return int(count) + len(self._unsaved)

    def owned_pending_count(self, *, fresh: bool = False) -> int:
        """Rows this queue is responsible for (its own and those it took over), less
        those already written whose delete the journal refused. Counted by the index, not
        read out: it runs at every enqueue, on the reply's path, and reading 40,000 waiting
        rows into Python took 10 ms there (an outage's backlog)."""
        where = "FROM pending_writes WHERE state = ? AND owner = ?"
        ((count,),) = self._execute(f"SELECT COUNT(*) {where}", (PENDING, self.owner))
        if self._written_seqs:  # written rows whose delete failed: few, unless the disk is full
            rows = self._execute(f"SELECT seq {where} AND seq >= ?", (PENDING, self.owner, min(self._written_seqs)))
            count -= sum(1 for (seq,) in rows if seq in self._written_seqs)
        if self._borrowing:  # a stopped worker's rows this queue writes unclaimed count as its own
            count += self._borrowed_left(fresh)
        return int(count) + len(self._unsaved)

    def _borrowed_left(self, fresh: bool) -> int:
        """How many of a stopped worker's rows are left to write unclaimed. Counted at most
        once a second for the gauge (every enqueue, on the reply's path, asks), at once
        for `drain`."""
        now = time.monotonic()
        if fresh or now - self._borrowed_at > 1.0:
            self._borrowed_count, self._borrowed_at = len(self._borrowable()), now
        return self._borrowed_count

    def _count_pending(self) -> None:
        """The backlog gauge: set whenever it may have changed, not only on success, so
        an outage shows as a growing number rather than the last good value."""
        try:
            metrics.QUEUE_PENDING.set(self.owned_pending_count())
        except Exception:  # noqa: BLE001 - a metric must never break the queue
            pass

    def dead_letters(self) -> list[DeadLetter]:
        """Turns that will never be written, oldest first, with the reason (all processes)."""
        rows = self._execute(
            "SELECT turn_id, last_error, attempts, updated_at, payload FROM pending_writes"
            " WHERE state = ? ORDER BY seq",
            (DEAD,),
        )
        out = []
        for turn_id, error, attempts, failed_at, payload in rows:
            try:
                turn: Turn | None = decode_turn(payload)
            except Exception:
                turn = None
            out.append(DeadLetter(turn_id, error or "", int(attempts), float(failed_at), turn, payload))
        return out

    def backoff_delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures: exponential, capped, jittered.

        "Equal jitter": half the capped exponential plus a random part of the
        other half, so retries from many workers spread out but never collapse
        to a busy loop.
        """
        exp = self.base_backoff_s * (2 ** min(max(failures, 1) - 1, 32))
        cap = min(self.max_backoff_s, exp)
        return cap / 2 + random.uniform(0, cap / 2)

    async def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait until this queue's rows are written, at most `timeout_s`; True if none is left.

        Never raises. Returns at once (False) when the consumer is not running,
        since nothing would make progress.
        """
        self.release()  # whoever waits for the writes wants them written now
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + max(timeout_s, 0.0)
            while True:
                try:
                    left = self.owned_pending_count(fresh=True)
                except Exception:
                    if self._journal_ok:
                        raise
                    left = len(self._unsaved)  # the journal cannot be read: it took none of ours
                if left == 0:
                    return True
                if self._consumer is None or self._consumer.done():
                    return False
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                assert self._progress is not None
                self._progress.clear()
                try:
                    await asyncio.wait_for(self._progress.wait(), min(remaining, 0.25))
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("write queue drain failed: %r", exc)
            return False

    async def aclose(self, drain_timeout_s: float = 5.0) -> bool:
        """Drain (bounded), stop the consumer, release leases; unwritten rows stay on disk.

        Rows not written are released for the next queue at once, except one
        whose attempt was cut short (it may still be running in a thread): it
        keeps its lease until `lease_s` runs out. A new process replays all of
        them at once, since this pid is then gone. Returns whether everything
        was written. Never raises.
        """
        drained = False
        try:
            drained = await self.drain(drain_timeout_s)
            self._closed = True
            tasks = [t for t in (self._consumer, self._keeper) if t is not None and not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                # A handler that swallows cancellation must not hold up the session.
                _, stuck = await asyncio.wait(tasks, timeout=1.0)
                if stuck:
                    logger.warning("write queue consumer did not stop in 1 s; leaving it")
            self._flush_unsaved()
            if self._spill is not None and self._unsaved:
                self._spill.release()  # still refused: the next queue takes them from there
            self._delete_written()
            self._release_leases()
            left = self.owned_pending_count()
            metrics.QUEUE_PENDING.set(0)  # what is left is no longer this process's
            logger.info(
                "write queue closed",
                extra={
                    "written": self.written,
                    "retried": self.retried,
                    "dead_lettered": self.dead_lettered,
                    "replayed": self.replayed,
                    "left_pending": left,
                },
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("write queue close failed: %r", exc)
        finally:
            self._closed = True
            with self._lock:
                if self._conn is not None and not self._unsaved:
                    self._conn.close()
                    self._conn = None
        return drained

    # ------------------------------------------------------------ internals
    def _notify(self, event: asyncio.Event | None) -> None:
        if event is None or self._loop is None or self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            event.set()
        else:
            self._loop.call_soon_threadsafe(event.set)

    def _take_over(self) -> None:
        """Claim the rows of stopped workers; when the journal refuses the claim (a full
        disk: the UPDATE needs room that reads do not), write them unclaimed instead
        (`_borrowing`) rather than leave them waiting while the store is up. Retried by
        the lease keeper every `lease_s / 3` until the claim works."""
        try:
            self.adopt_orphans()
        except Exception as exc:
            try:
                borrowable = bool(self._borrowable())
            except Exception:  # noqa: BLE001 - the journal cannot even be read: nothing to take
                borrowable = False
            if borrowable and not self._borrowing:
                logger.warning("journal take-over cannot claim a stopped worker's rows (%s): writing them "
                               "unclaimed until it can", describe_error(exc))  # fmt: skip
                self._notify(self._wake)
            elif not borrowable:
                logger.warning("journal take-over scan failed: %s", describe_error(exc))
            self._borrowing = borrowable
        else:
            self._borrowing = False

    # Rows a stopped worker of this host left (its pid is gone) or a closed queue released,
    # of this queue's mode: those it may write without claiming them. Not rows whose lease
    # merely ran out: on a full disk live workers cannot renew theirs either.
    _BORROWABLE = (
        " state = ? AND (owner IS NULL OR (owner <> ? AND owner_host = ? AND NOT pid_alive(owner_pid)))"
        " AND (mode IS NULL OR ? IS NULL OR mode = ?)"
    )

    def _borrowable_params(self) -> tuple[Any, ...]:
        return (PENDING, self.owner, self.host, self.mode, self.mode)

    def _borrowable(self) -> list[int]:
        """The seqs of the rows this queue may write unclaimed and has not written yet."""
        if not self.may_adopt():
            return []
        rows = self._execute(f"SELECT seq FROM pending_writes WHERE{self._BORROWABLE}", self._borrowable_params())
        return [seq for (seq,) in rows if seq not in self._written_seqs]

    def adopt_orphans(self) -> int:
        """Take over rows whose owner is gone (lease expired, or its pid is dead on this host).

        Called by `start()` and then every `lease_s / 3`; one UPDATE, so two
        queues can never both claim a row. Returns how many rows were taken.
        """
        if not self.may_adopt():
            return 0
        at = self._lease.at()
        # Free (nobody's, or its lease ran out), or its owner's pid is gone from this host;
        # never a row this queue holds already.
        query = (
            "UPDATE pending_writes SET " + at.take(self.owner)
            + Sql(", owner_host = ?, owner_pid = ?, updated_at = ?", (self.host, self.pid, at.now))
            + Sql(" WHERE state = ? AND owner IS NOT ? AND (", (PENDING, self.owner)) + at.free()
            + Sql(" OR (owner_host = ? AND NOT pid_alive(owner_pid)))", (self.host,))
            + Sql(" AND (mode IS NULL OR ? IS NULL OR mode = ?) RETURNING seq", (self.mode, self.mode))
        )  # fmt: skip
        rows = self._execute(query.text, query.params)
        if rows:
            self.replayed += len(rows)
            logger.info("taking over %d pending memory write(s) left by a stopped worker", len(rows))
            self._notify(self._wake)
            self._count_pending()
        return len(rows)

    def _renew_leases(self) -> None:
        """Every row this queue holds: `lease_s` more from now."""
        at = self._lease.at()
        mine = Sql(" WHERE state = ? AND ", (PENDING,)) + at.held_by(self.owner)
        query = "UPDATE pending_writes SET " + at.renew() + mine
        self._execute(query.text, query.params)

    def _release_leases(self) -> None:
        """Let other queues take our rows now; the interrupted one waits out its lease."""
        at = self._lease.at()
        query = (
            "UPDATE pending_writes SET " + at.vacate() + Sql(" WHERE state = ? AND ", (PENDING,))
            + at.held_by(self.owner) + Sql(" AND seq IS NOT ?", (self._unsettled_seq,))
        )  # fmt: skip
        self._execute(query.text, query.params)

    def keep(self, turn: Turn) -> None:
        """Update a waiting turn's journal row (GATED: the gatekeeper's verdict, made
        once), so that a replay after a crash writes what this attempt decided. Best
        effort: without it a replay asks the model again."""
        if turn.turn_id in self._unsaved:
            self._unsaved[turn.turn_id] = turn
            return
        try:
            self._execute(
                "UPDATE pending_writes SET payload = ?, updated_at = ? WHERE turn_id = ? AND state = ?",
                (encode_turn(turn), time.time(), turn.turn_id, PENDING),
            )
        except Exception as exc:
            logger.warning("journal update failed for turn %s: %s", turn.turn_id, describe_error(exc))

    def _flush_unsaved(self) -> None:
        had = bool(self._unsaved)
        while self._unsaved:
            turn_id, turn = next(iter(self._unsaved.items()))
            try:
                self._insert(turn)
            except Exception as exc:
                logger.warning("journal still refuses turn %s: %s", turn_id, describe_error(exc))
                return
            del self._unsaved[turn_id]
        if had:
            self._spilled_settled()

    def _spilled_settled(self) -> None:
        """Every turn the journal refused is in it now, or in the store: the spill file goes."""
        if not self._unsaved and self._spill is not None:
            self._spill.clear()

    def import_spills(self) -> int:
        """Turns that a stopped queue kept in its spill file (its journal refused them,
        then it died): into the journal, or, while it still refuses, into this queue's own
        spill file and straight to the store. Replays are NOOPs (write ids). Returns how many."""
        if self._spill is None:
            return 0
        taken = 0
        for turns in self._spill.orphans():
            for turn in turns:
                if turn.turn_id in self._done or turn.turn_id in self._unsaved:
                    continue
                try:
                    self._insert(turn)
                except Exception:
                    self._spill.add(turn)
                    self._unsaved[turn.turn_id] = turn
                taken += 1
        if taken:
            self.replayed += taken
            logger.info("took over %d turn(s) from a stopped worker's spill file", taken)
            self._notify(self._wake)
        return taken

    def upcoming(self, kind: str, limit: int) -> list[Turn]:
        """Pending rows of `kind` this queue owns, oldest first, among its next `4 * limit`
        rows (a bounded read: it runs on the loop, and 40,000 turns may be waiting): a
        handler may write them with the row it was given (the archive's batches). Each
        still leaves the journal only after its own turn: nothing changes about loss or
        replays."""
        rows = self._execute(
            "SELECT payload FROM (SELECT seq, payload FROM pending_writes WHERE state = ? AND owner = ?"
            " ORDER BY seq LIMIT ?) WHERE json_extract(payload, '$.kind') = ? ORDER BY seq LIMIT ?",
            (PENDING, self.owner, 4 * limit, kind, limit),
        )
        out = []
        for (payload,) in rows:
            try:
                out.append(decode_turn(payload))
            except Exception:  # noqa: BLE001 - dead-lettered when its own turn comes
                continue
        return out

    def _next_row(self) -> tuple[int, str, str, int, str | None] | None:
        self._delete_written()
        skip = sorted(self._written_seqs)
        mine = "state = ? AND owner = ?"
        params: tuple[Any, ...] = (PENDING, self.owner)
        if self._borrowing and self.may_adopt():
            mine = f"(({mine}) OR ({self._BORROWABLE}))"
            params += self._borrowable_params()
        rows = self._execute(
            "SELECT seq, turn_id, payload, attempts, mode FROM pending_writes"
            f" WHERE {mine} AND seq NOT IN ({','.join('?' * len(skip))}) ORDER BY seq LIMIT 1",
            (*params, *skip),
        )
        return rows[0] if rows else None

    def _delete_written(self) -> None:
        """Best effort: the rows already written whose delete the journal refused."""
        for seq in sorted(self._written_seqs):
            try:
                self._execute("DELETE FROM pending_writes WHERE seq = ?", (seq,))
            except Exception:  # still full: they stay skipped
                return
            self._written_seqs.discard(seq)

    async def _keep_leases(self) -> None:
        interval = self.lease_s / 3
        while True:
            await asyncio.sleep(interval)
            try:
                self.import_spills()
                self._renew_leases()
            except Exception as exc:
                logger.warning("journal lease renewal failed: %r", exc)
            self._take_over()

    async def _consume(self) -> None:
        assert self._wake is not None
        while True:
            try:
                self._wake.clear()
                await self._wait_hold()  # before a row is read: a forget during the hold takes it
                self._flush_unsaved()
                try:
                    row = self._next_row()
                except Exception as exc:
                    if not self._unsaved:
                        raise
                    # The journal cannot be read (not opened, a read-only or full disk):
                    # the turns it refused must not wait for it. Straight to the store.
                    logger.warning("write journal unusable (%s): writing refused turns straight to the store",
                                   describe_error(exc))  # fmt: skip
                    row = None
                if row is None:
                    if self._unsaved:  # the journal refuses them: straight to the store
                        await self._write_unsaved()
                    else:
                        await self._wake.wait()
                    continue
                await self._process(*row)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # journal trouble: never let the consumer die
                logger.warning("write queue consumer error: %r", exc)
                await asyncio.sleep(self.backoff_delay(1))

    async def _process(self, seq: int, turn_id: str, payload: str, attempts: int, mode: str | None = None) -> None:
        try:
            turn = decode_turn(payload)
            if mode is not None:  # the row's column is the truth: written under that mode
                turn = dataclasses.replace(turn, mode=mode)
        except Exception as exc:
            self._dead_letter(seq, turn_id, attempts, f"undecodable journal row: {exc!r}")
            return
        attempt = attempts + 1
        self._unsettled_seq = seq
        try:
            await asyncio.wait_for(self.handler(turn), self.attempt_timeout_s)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # we are being stopped; the row stays on disk
            await self._retry(seq, turn_id, attempt, "handler was cancelled")
            return
        except TimeoutError:
            # Left unsettled: a thread behind the handler may still be writing.
            await self._retry(seq, turn_id, attempt, f"timed out after {self.attempt_timeout_s:g} s")
            return
        except Exception as exc:
            self._unsettled_seq = None
            exc = in_tree(exc)
            if retryable(exc) is False:  # bad input, a forgotten user's turn: never written
                self._dead_letter(seq, turn_id, attempt, str(exc))
                return
            if is_turn_failure(exc):
                # Counted apart from the outages the turn waited out: five of these, not
                # five attempts, before the turns behind it stop waiting for it.
                failed = self._turn_failures[seq] = self._turn_failures.get(seq, 0) + 1
                if failed >= MAX_TURN_FAILURES:
                    self._dead_letter(seq, turn_id, attempt, f"failed {failed} times: {describe_error(exc)}")
                    return
            await self._retry(seq, turn_id, attempt, describe_error(exc))
            return
        self._unsettled_seq = None
        self._turn_failures.pop(seq, None)
        await self._delete(seq)
        self._written(turn_id)

    def _written(self, turn_id: str) -> None:
        """The store has the turn (from the journal or straight from memory)."""
        self.written += 1
        if self._failures:
            logger.info("memory store is back after %d failed attempt(s)", self._failures)
        self._failures = 0
        self._done[turn_id] = None
        while len(self._done) > self._done_max:
            self._done.popitem(last=False)
        self._count_pending()
        self._notify(self._progress)

    async def _delete(self, seq: int) -> None:
        """The store has the write: the row goes, whoever holds its lease now. A journal
        that refuses (disk full) must not stop the writes behind it: the row is skipped
        and deleted later (a replay of it would be a NOOP)."""
        try:
            self._execute("DELETE FROM pending_writes WHERE seq = ?", (seq,))
        except Exception as exc:
            logger.warning("journal delete failed (the store write is done; skipped): %s", describe_error(exc))
            self._written_seqs.add(seq)

    async def _write_unsaved(self) -> None:
        """The oldest turn the journal refused (disk full), written straight to the store:
        held only in memory, it would be lost with the process."""
        turn_id, turn = next(iter(self._unsaved.items()))
        try:
            await asyncio.wait_for(self.handler(turn), self.attempt_timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            exc = in_tree(exc)
            if retryable(exc) is False:  # bad input: never written
                del self._unsaved[turn_id]
                self._dead_letter(None, turn_id, 1, str(exc))
                return
            # The store too: wait, then the journal is tried first again.
            await self._retry(None, turn_id, 1, describe_error(exc))
            return
        del self._unsaved[turn_id]
        self._spilled_settled()
        self._written(turn_id)

    async def _retry(self, seq: int | None, turn_id: str, attempt: int, error: str) -> None:
        """A failed attempt: counted, recorded on the turn's journal row (`seq`, None for
        a turn the journal refused), then the backoff, growing with consecutive failures."""
        self.retried += 1
        metrics.WRITE_RETRIES.inc()
        self._failures += 1
        delay = self.backoff_delay(self._failures)
        logger.warning(
            "memory write failed for turn %s (attempt %d): %s; retrying in %.2f s",
            turn_id,
            attempt,
            error,
            delay,
            extra={"turn_id": turn_id, "attempt": attempt, "error": error, "retry_in_s": round(delay, 3)},
        )
        if seq is not None:
            try:
                self._execute(
                    "UPDATE pending_writes SET attempts = ?, last_error = ?, updated_at = ? WHERE seq = ?",
                    (attempt, error[:2000], time.time(), seq),
                )
            except Exception as exc:
                logger.warning("journal update failed: %s", describe_error(exc))
        await asyncio.sleep(delay)

    def _dead_letter(self, seq: int | None, turn_id: str, attempts: int, error: str) -> None:
        if seq is not None:
            self._turn_failures.pop(seq, None)
        self.dead_lettered += 1
        metrics.DEAD_LETTERS.inc()
        logger.error(
            "memory write for turn %s dead-lettered (never retried): %s",
            turn_id,
            error,
            extra={"turn_id": turn_id, "attempt": attempts, "error": error},
        )
        if seq is not None:  # a turn the journal refused has no row to keep it in
            try:
                self._execute(
                    "UPDATE pending_writes SET state = ?, attempts = ?, last_error = ?, owner = NULL,"
                    " lease_until = 0, updated_at = ? WHERE seq = ?",
                    (DEAD, attempts, error[:2000], time.time(), seq),
                )
            except Exception as exc:
                logger.warning("journal update failed: %s", describe_error(exc))
        self._count_pending()
        self._notify(self._progress)
