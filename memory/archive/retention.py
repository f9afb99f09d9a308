"""Retention: what is older than `MEMORY_RETENTION_DAYS` is deleted.

- Archived user and assistant messages: deleted. Summaries: kept (they are what the
  next session picks the thread up from, and hold no message word for word).
- NORMAL's raw-turn memories (rows without a category): deleted, with Mem0's history
  of them. They are the user's words verbatim, the same as the archive's messages.
- GATED's durable facts (rows with a category): kept until superseded or forgotten.
  A fact is the user's own standing statement ("my sister is Anna"); its age says
  nothing about whether it still holds, and deleting it would make the agent forget
  the user's name after 90 days. Superseding keeps it current, "forget me" removes it.
- Shared contexts between agents not updated for `MEMORY_CONTEXT_RETENTION_DAYS` (30):
  deleted with their notes. They are one case's working notes, not the user's memory.

It runs in every job process's thread (`start_background`) and as
`python -m memory.admin retention [--dry-run]`. One row in `memory_maintenance` makes it
run once per `RETENTION_EVERY_S` across the fleet, by whichever process claims it first,
and one run at a time: a run holds a lease on the row (`lease_until`, renewed after each
batch, so a killed run's lease runs out and another process takes over). A lease row, not
an advisory lock: behind PgBouncer in transaction mode a session's advisory lock and its
unlock may land on different server connections, and a transaction-level one would hold a
server connection and one transaction open for the whole run. `runs` counts the runs.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

from psycopg import Connection, sql

from memory.storage.archive import archive_for
from memory.storage.contexts import ContextStore
from memory.storage.lease import Lease, Sql
from memory.storage.store import MemoryStore

logger = logging.getLogger(__name__)

RETENTION_EVERY_S = 6 * 3600.0
BATCH = 5000  # rows a statement: short locks, the worker's writes go on between them
LEASE_S = 600.0  # a run's claim lasts this long past its last batch (renewed after each)
# A job process's first look whether retention is due, seconds after it starts (random
# in this range: the job processes of a fleet start together).
FIRST_CHECK_S = (30.0, 300.0)
PERIOD_JITTER_S = 60.0
_LOCK_KEY = "memory-retention"
# The run's lease, on the database's clock (one for the fleet): `memory/storage/lease.py`.
_LEASE = Lease(LEASE_S, holder="holder", until="lease_until")
_THIS = Sql(" WHERE name = %s AND ", (_LOCK_KEY,))


@dataclass(frozen=True)
class RetentionReport:
    cutoff: str
    dry_run: bool
    archived_messages: int
    raw_turns: int
    summaries_kept: int
    facts_kept: int
    ran: bool = True  # False: another process held the lock
    contexts: int = 0  # shared contexts deleted (or, dry, that would be)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def run_retention(store: MemoryStore, *, days: float | None = None, dry_run: bool = False,
                  now: datetime | None = None, every_s: float | None = None) -> RetentionReport:  # fmt: skip
    """Delete (or, dry, count) what is older than its period, holding the fleet's lease.

    `every_s`: only if no process of the fleet ran it in the last `every_s` seconds (the
    background thread); None: now, unless another run is going (the admin command).
    `ran` is False when another process holds the lease or it was not due.
    """
    report = _run_archive_retention(store, days=days, dry_run=dry_run, now=now, every_s=every_s)
    context_days = store.settings.context_retention_days
    if not report.ran or context_days <= 0:
        return report
    cutoff = (now or datetime.now(UTC)) - timedelta(days=context_days)
    contexts = ContextStore(store.pool, store.table, store.settings.context_max_chars)
    n = contexts.delete_older_than(cutoff, dry_run=dry_run)
    if n and not dry_run:
        logger.info("retention: deleted %d shared contexts not updated since %s", n, cutoff.date())
    return replace(report, contexts=n)


def _run_archive_retention(store: MemoryStore, *, days: float | None, dry_run: bool,
                           now: datetime | None, every_s: float | None) -> RetentionReport:  # fmt: skip
    days = store.settings.retention_days if days is None else days
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=days)
    archive = archive_for(store)
    a = sql.Identifier(archive.table)
    rows = store.rows  # Mem0's table
    ensure_maintenance_table(store)
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    with store.pool.connection() as conn:
        conn.autocommit = True  # every statement its own transaction: short locks, no pinned server connection
        try:
            if not dry_run and not _claim(conn, holder, every_s):
                return RetentionReport(cutoff.isoformat(), dry_run, 0, 0, 0, 0, ran=False)
            finished = False
            try:
                kept_summaries = conn.execute(
                    sql.SQL("SELECT count(*) FROM {} WHERE message_type = 'summary' AND created_at < %s").format(a),
                    [cutoff],
                ).fetchone()[0]
                kept_facts = rows.count_facts_older_than(cutoff, conn)
                if days <= 0:
                    return RetentionReport(cutoff.isoformat(), dry_run, 0, 0, kept_summaries, kept_facts)
                if dry_run:
                    n_arch = conn.execute(
                        sql.SQL("SELECT count(*) FROM {} WHERE message_type <> 'summary' AND created_at < %s").format(
                            a
                        ),
                        [cutoff],
                    ).fetchone()[0]
                    n_raw = rows.count_raw_turns_older_than(cutoff, conn)
                    return RetentionReport(cutoff.isoformat(), True, n_arch, n_raw, kept_summaries, kept_facts)
                n_arch = 0
                while True:
                    n = conn.execute(
                        sql.SQL("DELETE FROM {a} WHERE (user_id, id) IN (SELECT user_id, id FROM {a} "
                                "WHERE message_type <> 'summary' AND created_at < %s LIMIT %s)").format(a=a),
                        [cutoff, BATCH],
                    ).rowcount  # fmt: skip
                    n_arch += n
                    if n < BATCH or not _renew(conn, holder):
                        break
                n_raw = 0
                while True:
                    ids = rows.delete_raw_turns_older_than(cutoff, BATCH, conn)
                    store.mem0_history.purge(ids)  # Mem0's history keeps each text too
                    n_raw += len(ids)
                    if len(ids) < BATCH or not _renew(conn, holder):
                        break
                finished = True
            finally:
                if not dry_run:
                    _release(conn, holder, finished)
        finally:
            conn.autocommit = False
    logger.info("retention: deleted %d archived messages and %d raw turns older than %s", n_arch, n_raw, cutoff.date())
    return RetentionReport(cutoff.isoformat(), False, n_arch, n_raw, kept_summaries, kept_facts)


def _claim(conn: Connection, holder: str, every_s: float | None) -> bool:
    """Take the lease if nobody holds it (or theirs ran out) and, with `every_s`, the last
    run is older than that. One statement: of processes claiming at once, one gets it."""
    at = _LEASE.at()
    query = (
        "UPDATE memory_maintenance SET " + at.take(holder) + Sql(" WHERE name = %s AND ", (_LOCK_KEY,)) + at.free()
        + Sql(" AND (%s::float8 IS NULL OR ran_at < now() - make_interval(secs => %s::float8)) RETURNING 1",
              (every_s, every_s))
    )  # fmt: skip
    return conn.execute(query.text, query.params).fetchone() is not None


def _renew(conn: Connection, holder: str) -> bool:
    """Extend the lease after a batch; False when it is no longer ours (it ran out and
    another process took over): this run stops, the other carries on."""
    at = _LEASE.at()
    query = "UPDATE memory_maintenance SET " + at.renew() + _THIS + at.held_by(holder) + " RETURNING 1"
    row = conn.execute(query.text, query.params).fetchone()
    if row is None:
        logger.warning("retention: the lease passed to another process; this run stops")
    return row is not None


def _release(conn: Connection, holder: str, finished: bool) -> None:
    """Give the lease back; a finished run is recorded (when, and one more run)."""
    done = "ran_at = now(), runs = runs + 1, " if finished else ""
    at = _LEASE.at()
    query = "UPDATE memory_maintenance SET " + done + at.vacate() + _THIS + at.held_by(holder)
    conn.execute(query.text, query.params)


_table_ready: set[int] = set()


def ensure_maintenance_table(store: MemoryStore) -> None:
    """The table and retention's row (once per process and pool), under a lock: the job
    processes of a fleet start together, and "IF NOT EXISTS" is no guard when two create
    a table at once."""
    if id(store.pool) in _table_ready:
        return
    with store.pool.connection() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-maintenance-schema', 0))")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memory_maintenance (name TEXT PRIMARY KEY, ran_at TIMESTAMPTZ NOT NULL)"
        )
        conn.execute(
            "ALTER TABLE memory_maintenance ADD COLUMN IF NOT EXISTS lease_until TIMESTAMPTZ, "
            "ADD COLUMN IF NOT EXISTS holder TEXT, ADD COLUMN IF NOT EXISTS runs BIGINT NOT NULL DEFAULT 0"
        )
        conn.execute(
            "INSERT INTO memory_maintenance (name, ran_at) VALUES (%s, '-infinity') ON CONFLICT (name) DO NOTHING",
            [_LOCK_KEY],
        )
        conn.commit()
    _table_ready.add(id(store.pool))


def runs(store: MemoryStore) -> int:
    """How many retention runs the fleet has finished on this database."""
    ensure_maintenance_table(store)
    with store.pool.connection() as conn:
        row = conn.execute("SELECT runs FROM memory_maintenance WHERE name = %s", [_LOCK_KEY]).fetchone()
    return int(row[0]) if row else 0


_started = False
_started_lock = threading.Lock()
_thread: threading.Thread | None = None


def _closed(store: MemoryStore) -> bool:
    """A store closed under the thread (the process's runtime closed or replaced) ends it."""
    return bool(getattr(getattr(store, "pool", None), "closed", False))


def start_background(store: MemoryStore, *, every_s: float = RETENTION_EVERY_S) -> bool:
    """Once per process: a daemon thread that runs retention when it is due. Returns
    False when it was started already or retention is off (MEMORY_RETENTION_DAYS=0 and
    MEMORY_CONTEXT_RETENTION_DAYS=0)."""
    global _started, _thread
    with _started_lock:
        off = store.settings.retention_days <= 0 and store.settings.context_retention_days <= 0
        if _started or not getattr(store, "available", True) or off or _closed(store):
            return False
        _started = True
    try:
        archive_for(store)  # the archive's table and function, before the first session needs them
    except Exception as exc:  # noqa: BLE001 - the first archive write makes them
        logger.warning("archive schema not ready: %r", exc)

    def loop() -> None:
        global _started
        # Spread out: the job processes of a fleet start together.
        wait = random.uniform(*FIRST_CHECK_S)
        while not threading.Event().wait(wait) and not _closed(store):
            try:
                run_retention(store, every_s=every_s)  # ran=False: not due, or another process runs it
            except Exception as exc:  # noqa: BLE001 - tried again next period
                if _closed(store):
                    break
                logger.warning("retention run failed: %r", exc)
            wait = every_s / 4 + random.uniform(0, PERIOD_JITTER_S)
        logger.debug("retention thread ends: its store was closed")
        with _started_lock:
            _started = False  # the next store this process opens starts its own

    _thread = threading.Thread(target=loop, name="memory-retention", daemon=True)
    _thread.start()
    return True
