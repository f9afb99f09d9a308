"""Locks across the fleet that hold no database connection while they are held or awaited.

A GATED write looks up the user's slot and then writes through Mem0, which takes
connections of its own. Under a transaction-level advisory lock the writer kept one
connection (behind PgBouncer: one server connection) for the lock while it needed a
second for its work; the writers waiting for the same lock kept one each too. With as
many such writers as the pooler has server connections, every server connection was
held by a lock or a waiter and no holder could get the second one it needed: the
fleet's writes stopped until PgBouncer's `query_wait_timeout` (two minutes). Measured
with a server pool of 2 and two writers of one user (tests/storage/test_pgbouncer.py).

Here a lock is a row: taking it is one statement (autocommit, no transaction left open),
giving it back another, and a waiter retries with a short backoff instead of blocking in
the database. A holder that dies leaves its row behind: the row's lease runs out and the
next writer takes it.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

from memory.types import StoreBusy

LEASE_S = 60.0  # far longer than a write (an embedding and two statements); a dead holder's row lasts this long
WAIT_S = 20.0  # a writer that cannot take the lock in this long fails its attempt (the journal retries it)
_FIRST_BACKOFF_S = 0.005
_MAX_BACKOFF_S = 0.1
_HOLDER = f"{socket.gethostname()}:{os.getpid()}"


def locks_table(table: str) -> str:
    """The table of locks kept beside a memory table."""
    return f"{table}_locks"


def create_locks_table(conn: Connection, table: str) -> None:
    """In the caller's transaction. Unlogged: a lock need not survive a server crash."""
    conn.execute(
        sql.SQL(
            "CREATE UNLOGGED TABLE IF NOT EXISTS {} (key TEXT PRIMARY KEY, holder TEXT NOT NULL, "
            "until TIMESTAMPTZ NOT NULL)"
        ).format(sql.Identifier(locks_table(table)))
    )


class RowLocks:
    """Named locks in one table, taken and given back over a pool's connections."""

    def __init__(self, pool: ConnectionPool, table: str) -> None:
        self.pool = pool
        self._t = sql.Identifier(locks_table(table))
        self.attempts = 0  # tries that found the lock held (tests watch a writer wait)

    def _one(self, query: sql.Composable, params: list[object]) -> bool:
        """One statement in autocommit (one round trip, no transaction left open): a row back?"""
        with self.pool.connection() as conn:
            conn.autocommit = True
            try:
                cur = conn.execute(query, params)
                return cur.description is not None and cur.fetchone() is not None
            finally:
                conn.autocommit = False

    def _try(self, key: str, holder: str) -> bool:
        query = sql.SQL(
            "INSERT INTO {t} (key, holder, until) VALUES (%s, %s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until "
            "WHERE {t}.until < now() RETURNING 1"
        ).format(t=self._t)
        return self._one(query, [key, holder, LEASE_S])

    def _release(self, key: str, holder: str) -> None:
        self._one(sql.SQL("DELETE FROM {} WHERE key = %s AND holder = %s").format(self._t), [key, holder])

    @contextmanager
    def hold(self, key: str, *, wait_s: float = WAIT_S) -> Iterator[None]:
        """Hold `key` for the block, across every process that uses this table.
        Raises `StoreBusy` when it stays taken for `wait_s`."""
        holder = f"{_HOLDER}:{uuid.uuid4().hex[:12]}"
        deadline = time.monotonic() + wait_s
        backoff = _FIRST_BACKOFF_S
        while not self._try(key, holder):
            self.attempts += 1
            if time.monotonic() >= deadline:
                raise StoreBusy(f"the lock {key!r} stayed taken for {wait_s:.0f} s")
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
        try:
            yield
        finally:
            self._release(key, holder)


__all__ = ["LEASE_S", "RowLocks", "create_locks_table", "locks_table"]
