"""Look-ups on streaming read replicas, writes on the primary, a caller's own words never missed.

`MEMORY_DATABASE_READ_URLS` names read replicas of `MEMORY_DATABASE_URL` (Postgres's own
streaming replication: `pg_basebackup -R`, `primary_conninfo`; docs/scaling.md). A look-up
takes its connection from `ReadRouter.read`, the one place that chooses where a read runs:

- A user's writes (a turn stored, a fact changed, a forget) run on the primary; after
  each the store remembers the primary's WAL position (`wrote`:
  `pg_current_wal_insert_lsn()`, at or past the write's commit record, whatever
  `synchronous_commit` says). A look-up for that user goes to a replica only once the
  replica has replayed that far (`pg_last_wal_replay_lsn()`), else to the primary: the
  fact said in the previous turn is there in the next, however far the replica lags.
- A replica lagging more than `max_lag_s` (received WAL not yet replayed for that long),
  not streaming from the primary, not a replica at all, down, or refusing connections is
  skipped, with one warning line when that starts (and one when it is used again); a
  down one is tried again after `retry_s`. Waiting for a replica's connection is bounded
  by `wait_s` (the reply's budget), a read there by `READ_TIMEOUT_S`, and a read that
  fails on a replica (killed mid-call, a recovery conflict, no answer) runs again on the
  primary: a reply never waits on a replica past its budget, and a look-up gets its
  memories from the primary instead.
- A replica's status (replay position, lag) is read on the look-up's own connection when
  it is older than `status_ttl_s`, or when it is behind the user's last write: one short
  statement, at most once a second per process; the look-up's lexical statement runs
  beside the query's embedding, so it is off the reply's path there.

Positions are per process (a job process serves one call at a time, and writes that
call's turns itself); a write on another worker reaches a replica within the lag bound,
long before the caller's next call. Without read URLs every read is the primary's.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A replica's status is read again when older than this (seconds).
STATUS_TTL_S = 1.0
# A replica that failed is tried again after this long (seconds).
RETRY_S = 10.0
# The position of a write whose position could not be read: no replica is ever past it.
UNKNOWN = 2**64
# Users whose last write position a process keeps (the least recent are forgotten: a write
# that old is on every replica within the lag bound).
KEPT_USERS = 10_000

_STATUS = (
    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
    # Behind what it has received for this long: the time since the last transaction it
    # replayed (0 when it has replayed all it received; NULL when it has replayed none yet).
    "CASE WHEN pg_last_wal_receive_lsn() IS NULL OR pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0 "
    "ELSE EXTRACT(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8 END, "
    # 'hidden': the receiver runs, but this role may not see its state (pg_read_all_stats).
    "(SELECT CASE WHEN status IS NULL AND pid IS NOT NULL THEN 'hidden' ELSE status END FROM pg_stat_wal_receiver)"
)
# A read on a replica that has not answered in this long is abandoned (its connection
# shut) and run on the primary, and the replica skipped for `RETRY_S` (seconds). Behind
# PgBouncer a dead replica does not fail a query: PgBouncer holds it until its
# `query_wait_timeout` (2 minutes by default) and ignores a cancel request for it.
READ_TIMEOUT_S = 1.0
# Failures after which the read runs on the primary without counting the replica down:
# the replica cancelled it (a conflict with recovery: WAL it must replay removes rows the
# read needs). A failed connection or no answer counts it down.
_CONFLICTS = (psycopg.errors.SerializationFailure, psycopg.errors.QueryCanceled)


def lsn(text: str) -> int:
    """A WAL position ('16/B374D848') as a number, for comparing."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def describe(url: str) -> str:
    """host:port/dbname of a URL, for logs (never its password)."""
    info = conninfo_to_dict(url)
    host = info.get("host") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


@dataclass
class Replica:
    """One read replica: its pool and what was last seen of it."""

    name: str
    pool: ConnectionPool
    replay: int = -1  # the position it had replayed when last looked at
    lag_s: float | None = None
    checked: float = float("-inf")  # when its status was read (monotonic)
    down_until: float = float("-inf")  # skipped until then (monotonic)
    skipped: str | None = None  # why it is skipped now, said once

    def usable(self, now: float) -> bool:
        return now >= self.down_until


@dataclass
class ReadStats:
    """Where this process's look-ups ran, for benchmarks and the operator."""

    replica: int = 0
    primary: int = 0
    reasons: Counter[str] = field(default_factory=Counter)  # why a read went to the primary

    def as_dict(self) -> dict[str, Any]:
        total = self.replica + self.primary
        share = self.replica / total if total else None
        return {"replica": self.replica, "primary": self.primary, "replica_share": share,
                "primary_because": dict(self.reasons)}  # fmt: skip


class ReadRouter:
    """Chooses, for each look-up, a replica that has replayed the user's last write, or the primary."""

    def __init__(
        self,
        primary: ConnectionPool,
        replicas: Sequence[Replica],
        *,
        max_lag_s: float,
        wait_s: float,
        status_ttl_s: float = STATUS_TTL_S,
        retry_s: float = RETRY_S,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self.primary = primary
        self.replicas = list(replicas)
        self.max_lag_s = max_lag_s
        self.wait_s = wait_s
        self.status_ttl_s = status_ttl_s
        self.retry_s = retry_s
        self.read_timeout_s = read_timeout_s
        self.stats = ReadStats()
        self._written: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._turn = itertools.count()

    @classmethod
    def open(
        cls,
        primary: ConnectionPool,
        urls: Sequence[str],
        *,
        max_lag_s: float,
        wait_s: float,
        pool_factory: Callable[[str], ConnectionPool],
    ) -> ReadRouter:
        """A router over `urls`; each replica's pool opens in the background, so a replica
        down at start-up delays nothing (it is skipped until it answers)."""
        return cls(primary, [Replica(describe(url), pool_factory(url)) for url in urls], max_lag_s=max_lag_s,
                   wait_s=wait_s)  # fmt: skip

    def close(self) -> None:
        for replica in self.replicas:
            replica.pool.close()

    # ------------------------------------------------------------------ writes
    def wrote(self, user_id: str) -> None:
        """The user's write has committed on the primary: reads of the user's data go to a
        replica only once it has replayed this far. One statement on the primary, only
        when there are replicas."""
        if not self.replicas:
            return
        try:
            with self.primary.connection() as conn:
                (position,) = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
                conn.rollback()  # nothing to commit; the connection goes back idle
            at = lsn(position)
        except psycopg.Error as exc:  # the write is done: its position unknown, the user's reads stay on the primary
            logger.info("memory: the primary's WAL position after a write was not read (%s)", _reason(exc))
            at = UNKNOWN
        with self._lock:
            self._written[user_id] = at
            self._written.move_to_end(user_id)
            while len(self._written) > KEPT_USERS:
                self._written.popitem(last=False)

    def written(self, user_id: str) -> int | None:
        """The primary's position after the user's last write in this process, if any."""
        with self._lock:
            return self._written.get(user_id)

    # ------------------------------------------------------------------ reads
    def read(self, user_id: str, run: Callable[[Connection], T]) -> T:
        """`run(conn)` on a replica that has replayed the user's last write, else on the primary."""
        needed = self.written(user_id)
        why = "no replica" if not self.replicas else "every replica skipped"
        for replica in self._in_turn():
            with self._connection(replica) as conn:
                if conn is None:
                    continue
                deadline = _Deadline(conn, self.read_timeout_s)
                try:
                    stale = self._stale(replica, conn, needed)
                    if stale is not None:
                        why = stale
                        continue
                    result = run(conn)
                except psycopg.Error as exc:
                    if deadline.fired:
                        reason = f"no answer within {self.read_timeout_s * 1000:.0f} ms"
                    else:
                        reason = f"a read failed ({_reason(exc)})"
                    # Down: no answer, or the connection failed. A conflict with recovery, or
                    # an error the primary will give as well, says nothing about the replica.
                    failed = deadline.fired or conn.broken or isinstance(exc, psycopg.OperationalError)
                    if failed and not isinstance(exc, _CONFLICTS):
                        self._skip(replica, reason, down=True)
                    else:
                        logger.info("memory: a look-up on read replica %s ran again on the primary: %s", replica.name,
                                    reason)  # fmt: skip
                    why = "a replica failed mid-read"
                    continue
                finally:
                    deadline.done()
            self._used(replica)
            with self._lock:
                self.stats.replica += 1
            return result
        with self._lock:
            self.stats.primary += 1
            self.stats.reasons[why] += 1
        with self.primary.connection() as conn:
            return run(conn)

    def _in_turn(self) -> list[Replica]:
        """The replicas not skipped now, starting with the next in turn (reads spread evenly)."""
        now = time.monotonic()
        usable = [r for r in self.replicas if r.usable(now)]
        if not usable:
            return []
        start = next(self._turn) % len(usable)
        return usable[start:] + usable[:start]

    @contextmanager
    def _connection(self, replica: Replica) -> Iterator[Connection | None]:
        """A connection of the replica's pool within `wait_s`, or None (and the replica skipped)."""
        try:
            conn = replica.pool.getconn(timeout=self.wait_s)
        except PoolTimeout:
            self._skip(replica, f"no connection within {self.wait_s * 1000:.0f} ms", down=True)
            yield None
            return
        try:
            yield conn
        finally:
            replica.pool.putconn(conn)

    def _stale(self, replica: Replica, conn: Connection, needed: int | None) -> str | None:
        """Why the replica may not serve this read (None: it may): not streaming, past the
        lag bound, or behind `needed`. Its status is read again when it is old or behind."""
        if time.monotonic() - replica.checked > self.status_ttl_s or (needed is not None and replica.replay < needed):
            self._check(replica, conn)
        if replica.lag_s is None or replica.lag_s > self.max_lag_s:
            return "a replica lagging or not streaming"
        if needed is not None and replica.replay < needed:
            return "the replica is behind the user's last write"
        return None

    def _check(self, replica: Replica, conn: Connection) -> None:
        """Read the replica's status on `conn` (one statement, autocommit)."""
        autocommit = conn.autocommit
        conn.autocommit = True
        try:
            recovering, replayed, lag, receiver = conn.execute(_STATUS).fetchone()
        finally:
            if not conn.closed:
                conn.autocommit = autocommit
        replica.checked = time.monotonic()
        replica.replay = lsn(replayed) if replayed else -1
        if not recovering:
            replica.lag_s = None
            self._skip(replica, "it is not a replica (not in recovery): promoted, or a primary's URL")
        elif receiver == "hidden":
            replica.lag_s = None
            self._skip(replica, "this role cannot see its WAL receiver: GRANT pg_read_all_stats TO it")
        elif receiver != "streaming":
            replica.lag_s = None
            self._skip(replica, f"it is not streaming from the primary (WAL receiver {receiver or 'not running'})")
        elif lag is None or lag > self.max_lag_s:
            replica.lag_s = lag
            shown = "unknown" if lag is None else f"{lag * 1000:.0f} ms"
            self._skip(replica, f"it lags {shown}, past MEMORY_REPLICA_MAX_LAG_MS={self.max_lag_s * 1000:.0f}")
        else:
            replica.lag_s = lag
            self._used(replica)

    def _skip(self, replica: Replica, reason: str, *, down: bool = False) -> None:
        """Skip the replica (for `retry_s` when it is down, else until its next status read),
        saying so once."""
        with self._lock:
            if down:
                replica.down_until = time.monotonic() + self.retry_s
                replica.checked = float("-inf")  # its status is read again when it is back
            said, replica.skipped = replica.skipped, reason
        if said is None:
            logger.warning("memory: read replica %s skipped, look-ups go to the primary: %s", replica.name, reason)

    def _used(self, replica: Replica) -> None:
        with self._lock:
            said, replica.skipped = replica.skipped, None
        if said is not None:
            logger.warning("memory: read replica %s is used again", replica.name)


class _Deadline:
    """Shuts a connection's socket if its read is still running after `seconds`: the
    blocked read then fails at once (a cancel request cannot reach a query PgBouncer
    holds). Never after `done`: the connection goes back to its pool whole."""

    def __init__(self, conn: Connection, seconds: float) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._live = True
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._live:
                return
            self.fired = True
            try:
                with socket.socket(fileno=os.dup(self._conn.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except (OSError, psycopg.Error):  # closed meanwhile: nothing left to stop
                pass

    def done(self) -> None:
        with self._lock:
            self._live = False
        self._timer.cancel()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}"[:200] if text else type(exc).__name__


__all__ = ["ReadRouter", "ReadStats", "Replica", "describe", "lsn"]
