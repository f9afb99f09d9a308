"""Retention: what is older than `MEMORY_RETENTION_DAYS` is deleted.

- Archived user and assistant messages: deleted. Summaries: kept (they are what the
  next session picks the thread up from, and hold no message word for word).
- NORMAL's raw-turn memories (rows without a category): deleted, with Mem0's history
  of them. They are the user's words verbatim, the same as the archive's messages.
- GATED's durable facts (rows with a category): kept until superseded or forgotten.
  A fact is the user's own standing statement ("my sister is Anna"); its age says
  nothing about whether it still holds, and deleting it would make the agent forget
  the user's name after 90 days. Superseding keeps it current, "forget me" removes it.

It runs in every job process's thread (`start_background`) and as
`python -m memory.admin retention [--dry-run]`; a Postgres advisory lock makes one run
at a time across the fleet, and a row in `memory_maintenance` makes one run per
`RETENTION_EVERY_S`, whichever process gets there first.
"""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from psycopg import sql

from memory.storage.archive import archive_for
from memory.storage.store import MemoryStore

logger = logging.getLogger(__name__)

RETENTION_EVERY_S = 6 * 3600.0
BATCH = 5000  # rows a statement: short locks, the worker's writes go on between them
_LOCK_KEY = "memory-retention"


@dataclass(frozen=True)
class RetentionReport:
    cutoff: str
    dry_run: bool
    archived_messages: int
    raw_turns: int
    summaries_kept: int
    facts_kept: int
    ran: bool = True  # False: another process held the lock

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def run_retention(store: MemoryStore, *, days: float | None = None, dry_run: bool = False,
                  now: datetime | None = None) -> RetentionReport:  # fmt: skip
    """Delete (or, dry, count) what is older than the period; under the fleet's lock."""
    days = store.settings.retention_days if days is None else days
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=days)
    archive = archive_for(store)
    a = sql.Identifier(archive.table)
    rows = store.rows  # Mem0's table; run on this connection, under its session lock
    with store.pool.connection() as conn:
        conn.autocommit = True
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [_LOCK_KEY]).fetchone()[0]
            if not got:
                return RetentionReport(cutoff.isoformat(), dry_run, 0, 0, 0, 0, ran=False)
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
                        sql.SQL("DELETE FROM {a} WHERE id IN (SELECT id FROM {a} WHERE message_type <> 'summary' "
                                "AND created_at < %s LIMIT %s)").format(a=a),
                        [cutoff, BATCH],
                    ).rowcount  # fmt: skip
                    n_arch += n
                    if n < BATCH:
                        break
                n_raw = 0
                while True:
                    ids = rows.delete_raw_turns_older_than(cutoff, BATCH, conn)
                    store._purge_history(ids)  # Mem0's history keeps each text too
                    n_raw += len(ids)
                    if len(ids) < BATCH:
                        break
                conn.execute(
                    "INSERT INTO memory_maintenance (name, ran_at) VALUES (%s, now()) "
                    "ON CONFLICT (name) DO UPDATE SET ran_at = now()",
                    [_LOCK_KEY],
                )
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [_LOCK_KEY])
        finally:
            conn.autocommit = False
    logger.info("retention: deleted %d archived messages and %d raw turns older than %s", n_arch, n_raw, cutoff.date())
    return RetentionReport(cutoff.isoformat(), False, n_arch, n_raw, kept_summaries, kept_facts)


def _ensure_maintenance_table(store: MemoryStore) -> None:
    with store.pool.connection() as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memory_maintenance (name TEXT PRIMARY KEY, ran_at TIMESTAMPTZ NOT NULL)"
        )
        conn.commit()


def due(store: MemoryStore, every_s: float = RETENTION_EVERY_S) -> bool:
    """Has no process of the fleet run retention in the last `every_s`?"""
    _ensure_maintenance_table(store)
    with store.pool.connection() as conn:
        row = conn.execute(
            "SELECT now() - ran_at < make_interval(secs => %s) FROM memory_maintenance WHERE name = %s",
            [every_s, _LOCK_KEY],
        ).fetchone()
    return not (row and row[0])


_started = False
_started_lock = threading.Lock()


def start_background(store: MemoryStore, *, every_s: float = RETENTION_EVERY_S) -> bool:
    """Once per process: a daemon thread that runs retention when it is due. Returns
    False when it was started already or retention is off (MEMORY_RETENTION_DAYS=0)."""
    global _started
    with _started_lock:
        if _started or not getattr(store, "available", True) or store.settings.retention_days <= 0:
            return False
        _started = True
    try:
        archive_for(store)  # the archive's table and function, before the first session needs them
    except Exception as exc:  # noqa: BLE001 - the first archive write makes them
        logger.warning("archive schema not ready: %r", exc)

    def loop() -> None:
        # Spread out: the job processes of a fleet start together.
        wait = random.uniform(30.0, 300.0)
        while not threading.Event().wait(wait):
            try:
                if due(store, every_s):
                    run_retention(store)
            except Exception as exc:  # noqa: BLE001 - tried again next period
                logger.warning("retention run failed: %r", exc)
            wait = every_s / 4 + random.uniform(0, 60.0)

    threading.Thread(target=loop, name="memory-retention", daemon=True).start()
    return True
