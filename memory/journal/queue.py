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
The lease is `memory/storage/lease.py`'s (the fact lock's and retention's too), on the
queue's `clock`; the take-over and the keeper are in `leases.py`, the writes in `consumer.py`.

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
import logging
import os
import socket
import sqlite3
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memory.journal.codec import encode_turn
from memory.journal.consumer import Consumer
from memory.journal.file import connect, is_damaged, set_aside_if_damaged
from memory.journal.leases import LeaseKeeping
from memory.journal.reserve import ensure_reserve
from memory.journal.spill import Spill
from memory.ops import metrics
from memory.storage.lease import WALL_CLOCK, Clock, Lease, Sql
from memory.types import Turn, describe_error

logger = logging.getLogger(__name__)

Handler = Callable[[Turn], Awaitable[object]]


class DurableWriteQueue(LeaseKeeping, Consumer):
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
                if not is_damaged(exc):
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

    def _open_journal(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        self._conn = connect(self.path)
        ensure_reserve(self.path)  # room for a forget on a full disk (best effort)
        return self._conn

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
