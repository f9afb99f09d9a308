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

A lease alone is no lock: a holder that stalls past it (a paused VM, a long GC, a stopped
process) finds another writer in its place and, waking up, wrote its stale value over the
newer one (said A000 ... A009, one writer stalled 70 s: A000 stayed). So each write made
under a lock carries its fence, the holder's id (`Fence.payload`), and the database checks
it inside the write's own transaction: a trigger on the memory table refuses a row whose
fence is no longer the lock's holder (`LeaseLost`), and holds the lock's row for the rest
of that transaction, so no writer can take the lock between the check and the commit. One
statement of the writer's own transaction: it works the same behind PgBouncer in
transaction mode. The fence is taken off the row before it is stored.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

from memory.errors import AgentMemoryError
from memory.storage.lease import Clock, Lease, Sql
from memory.types import StoreBusy

LEASE_S = 60.0  # far longer than a write (an embedding and two statements); a dead holder's row lasts this long
WAIT_S = 20.0  # a writer that cannot take the lock in this long fails its attempt (the journal retries it)
_FIRST_BACKOFF_S = 0.005
_MAX_BACKOFF_S = 0.1
_HOLDER = f"{socket.gethostname()}:{os.getpid()}"
# A write's fence, as keys of the row's payload (the trigger takes them off), and the
# SQLSTATE the trigger refuses a stale write with (a class of its own: no server error has it).
FENCE_KEY = "lock_key"
FENCE_HOLDER = "lock_holder"
FENCE_SQLSTATE = "ML001"


class LeaseLost(AgentMemoryError):
    """A write refused by the database: its writer's lock had run out and another writer
    holds it now, so the write could overwrite newer values. Take the lock again and look
    again (the journal retries it)."""

    retryable = True


@dataclass(frozen=True)
class Fence:
    """What a write made under a lock carries, so the database can tell whether its writer
    still holds the lock at the moment of the write."""

    key: str
    holder: str

    def payload(self) -> dict[str, str]:
        """The keys a fenced row's payload carries into the write (taken off before it is stored)."""
        return {FENCE_KEY: self.key, FENCE_HOLDER: self.holder}


@contextmanager
def fenced(fence: Fence) -> Iterator[None]:
    """Around a fenced write: the database's refusal raised as `LeaseLost`."""
    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate != FENCE_SQLSTATE:
            raise
        raise LeaseLost(f"the lock {fence.key!r} ran out during the write and another writer took it") from exc


def locks_table(table: str) -> str:
    """The table of locks kept beside a memory table."""
    return f"{table}_locks"


def create_locks_table(conn: Connection, table: str) -> None:
    """The locks of memory table `table` and the fence check on its rows, in the caller's
    transaction. Unlogged: a lock need not survive a server crash."""
    locks = sql.Identifier(locks_table(table))
    conn.execute(
        sql.SQL(
            "CREATE UNLOGGED TABLE IF NOT EXISTS {} (key TEXT PRIMARY KEY, holder TEXT NOT NULL, "
            "until TIMESTAMPTZ NOT NULL)"
        ).format(locks)
    )
    # FOR SHARE: the lock's row stays as it is until the write commits; a writer taking
    # the lock (an UPDATE of that row) waits for the commit and then sees the write.
    body = sql.SQL(
        "BEGIN "
        "IF NEW.payload ? {holder} THEN "
        "PERFORM 1 FROM {locks} WHERE key = NEW.payload->>{key} AND holder = NEW.payload->>{holder} FOR SHARE; "
        "IF NOT FOUND THEN RAISE EXCEPTION USING ERRCODE = {state}, MESSAGE = "
        "format('the lock %s is no longer held by this writer (its lease ran out and another writer took it)', "
        "NEW.payload->>{key}); END IF; "
        "NEW.payload := NEW.payload - {key} - {holder}; "
        "END IF; RETURN NEW; END"
    ).format(locks=locks, key=sql.Literal(FENCE_KEY), holder=sql.Literal(FENCE_HOLDER),
             state=sql.Literal(FENCE_SQLSTATE))  # fmt: skip
    function, trigger = sql.Identifier(f"{locks_table(table)}_fence"), f"{table}_fence"
    conn.execute(
        sql.SQL("CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS {}").format(
            function, sql.Literal(body.as_string(conn))
        )
    )
    exists = conn.execute(
        "SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s",
        [sql.Identifier(table).as_string(conn), trigger],
    ).fetchone()
    if exists is None:  # CREATE OR REPLACE TRIGGER would lock the memory table at every start
        conn.execute(
            sql.SQL("CREATE TRIGGER {} BEFORE INSERT OR UPDATE OF payload ON {} FOR EACH ROW EXECUTE FUNCTION {}()")
            .format(sql.Identifier(trigger), sql.Identifier(table), function)
        )  # fmt: skip


class RowLocks:
    """Named locks in one table, taken and given back over a pool's connections."""

    def __init__(self, pool: ConnectionPool, table: str, *, clock: Clock | None = None) -> None:
        """`clock`: the lease's clock; None is the database's (one for the fleet)."""
        self.pool = pool
        self._t = sql.Identifier(locks_table(table))
        self.lease = Lease(LEASE_S, holder="holder", until="until", clock=clock)
        self.attempts = 0  # tries that found the lock held (tests watch a writer wait)

    def _one(self, query: sql.Composable, params: tuple[object, ...]) -> bool:
        """One statement in autocommit (one round trip, no transaction left open): a row back?"""
        with self.pool.connection() as conn:
            conn.autocommit = True
            try:
                cur = conn.execute(query, params)
                return cur.description is not None and cur.fetchone() is not None
            finally:
                conn.autocommit = False

    def _try(self, key: str, holder: str) -> bool:
        """Take the lock if nobody holds it or its holder's lease ran out (one upsert)."""
        at = self.lease.at()
        query = (
            Sql("INSERT INTO {t} (key, holder, until) VALUES (%s, %s, ", (key, holder)) + at.until_value()
            + ") ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until WHERE "
            + at.free("{t}.") + " RETURNING 1"
        )  # fmt: skip
        return self._one(sql.SQL(query.text).format(t=self._t), query.params)

    def _release(self, key: str, holder: str) -> None:
        """Give the lock back: only its holder's row goes (a lock taken over stays its new holder's)."""
        query = Sql("DELETE FROM {t} WHERE key = %s AND ", (key,)) + self.lease.at().held_by(holder)
        self._one(sql.SQL(query.text).format(t=self._t), query.params)

    @contextmanager
    def hold(self, key: str, *, wait_s: float = WAIT_S) -> Iterator[Fence]:
        """Hold `key` for the block, across every process that uses this table; the block
        gets the fence its writes carry (`Fence.payload`, inside `fenced`). Raises
        `StoreBusy` when it stays taken for `wait_s`."""
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
            yield Fence(key, holder)
        finally:
            self._release(key, holder)


__all__ = ["LEASE_S", "Fence", "LeaseLost", "RowLocks", "create_locks_table", "fenced", "locks_table"]
