"""Reads routed to replicas (memory/storage/replicas.py), as invariants, with a scripted
primary and replica (no servers: the rule is the router's, not Postgres'):

- read-your-writes after the user's second and later writes, not only the first: a
  replica that replayed the first write but not the second is not used;
- past the kept-users bound (10,000, `KEPT_USERS`) the least recently written user is
  forgotten, not the newest: 10,000 are all kept, the 10,001st pushes out the oldest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memory.storage.replicas import ReadRouter, Replica


class Conn:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.autocommit = False
        self.closed = False
        self.broken = False

    def execute(self, query: str, params: Any = None) -> Conn:
        self._row = next(v for k, v in self.answers.items() if k in query)
        return self

    def fetchone(self) -> Any:
        return self._row() if callable(self._row) else self._row

    def rollback(self) -> None:
        pass

    def fileno(self) -> int:
        return -1


class Pool:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.conn = Conn(answers)

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        yield self.conn

    def getconn(self, timeout: float | None = None) -> Conn:
        return self.conn

    def putconn(self, conn: Conn) -> None:
        pass

    def close(self) -> None:
        pass


class Primary(Pool):
    """A primary whose WAL position is whatever the test set last."""

    def __init__(self) -> None:
        self.position = "0/64"
        super().__init__({"pg_current_wal_insert_lsn": lambda: (self.position,)})


def router(replayed: str) -> tuple[ReadRouter, Primary]:
    """A router over one streaming replica that has replayed up to `replayed`."""
    primary = Primary()
    replica_pool = Pool({"pg_is_in_recovery": (True, replayed, 0.0, "streaming"), "SELECT 'read'": ("replica",)})
    primary.conn.answers["SELECT 'read'"] = ("primary",)
    r = ReadRouter(primary, [Replica("replica:5432/db", replica_pool)], max_lag_s=5.0, wait_s=0.1,  # type: ignore[arg-type]
                   status_ttl_s=3600.0)  # fmt: skip
    return r, primary


def read(r: ReadRouter, user: str) -> str:
    return r.read(user, lambda conn: conn.execute("SELECT 'read'").fetchone()[0])


def test_a_replica_that_replayed_the_first_write_but_not_the_second_is_not_used() -> None:
    r, primary = router(replayed="0/96")  # 150
    primary.position = "0/64"  # the user's first write: 100
    r.wrote("alice")
    assert read(r, "alice") == "replica"  # replayed past it
    primary.position = "0/C8"  # the second write: 200, past the replica
    r.wrote("alice")
    assert read(r, "alice") == "primary"
    assert read(r, "bob") == "replica"  # another user's reads are not held back


def test_past_the_kept_users_bound_the_oldest_user_is_forgotten_not_the_newest() -> None:
    r, primary = router(replayed="0/0")
    primary.position = "0/64"
    users = [f"user-{i}" for i in range(10_000)]
    for user in users:
        r.wrote(user)
    assert r.written("user-0") == 100 and r.written("user-9999") == 100  # the bound: all 10,000 kept
    r.wrote("user-0")  # written again: now the most recent
    r.wrote("user-10000")  # the 10,001st user
    assert r.written("user-10000") == 100 and r.written("user-0") == 100
    assert r.written("user-1") is None  # the least recently written went
    assert r.written("user-2") == 100
    assert read(r, "user-1") == "replica"  # forgotten: its write long on every replica
    assert read(r, "user-10000") == "primary"


# --- the documented rules of docs/scaling.md and the module's docstring, with a clock the test moves

import logging  # noqa: E402

import psycopg  # noqa: E402
import pytest  # noqa: E402
from psycopg_pool import PoolTimeout  # noqa: E402

from memory.storage import replicas  # noqa: E402
from memory.storage.replicas import describe, lsn  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(replicas, "time", c)
    return c


class CountingPool(Pool):
    """A replica whose status the test sets, counting status reads and connections; down
    (no connection within the wait) while `down` is set."""

    def __init__(self, *, replayed: str = "0/0", lag: float | None = 0.0, recovering: bool = True,
                 receiver: str | None = "streaming") -> None:  # fmt: skip
        self.status = (recovering, replayed, lag, receiver)
        self.status_reads = 0
        self.connections = 0
        self.down = False
        self.fail: BaseException | None = None

        def status() -> tuple:
            self.status_reads += 1
            return self.status

        super().__init__({"pg_is_in_recovery": status, "SELECT 'read'": ("replica",)})

    def getconn(self, timeout: float | None = None) -> Conn:
        self.connections += 1
        if self.down:
            raise PoolTimeout("no connection")
        return self.conn


def routed(*pools: CountingPool, max_lag_s: float = 5.0, status_ttl_s: float = 3600.0) -> tuple[ReadRouter, Primary]:
    primary = Primary()
    primary.conn.answers["SELECT 'read'"] = ("primary",)
    r = ReadRouter(primary, [Replica(f"r{i}:5432/db", p) for i, p in enumerate(pools)],  # type: ignore[arg-type]
                   max_lag_s=max_lag_s, wait_s=0.1, status_ttl_s=status_ttl_s, retry_s=10.0)  # fmt: skip
    return r, primary


def reads(r: ReadRouter, user: str, run=None) -> str:  # noqa: ANN001
    return r.read(user, run or (lambda conn: conn.execute("SELECT 'read'").fetchone()[0]))


def test_wal_positions_compare_as_numbers_across_a_segment_boundary() -> None:
    assert lsn("16/B374D848") == 0x16B374D848 == 97_500_059_720
    assert lsn("0/0") == 0 and lsn("1/0") == 4_294_967_296 and lsn("0/FFFFFFFF") == 4_294_967_295
    assert lsn("10/0") > lsn("9/FFFFFFFF")  # as strings "10/0" < "9/..."


@pytest.mark.parametrize(("replayed", "written", "where"), [
    ("0/FFFFFFFF", "1/0", "primary"),  # one byte short, across the boundary
    ("1/0", "1/0", "replica"),  # replayed exactly the write
    ("10/0", "9/FFFFFFF0", "replica"),  # past it, with more digits
    ("9/FFFFFFF0", "10/0", "primary"),
])  # fmt: skip
def test_a_replica_serves_the_user_once_it_replayed_exactly_to_their_write(replayed: str, written: str,
                                                                            where: str) -> None:  # fmt: skip
    r, primary = router(replayed=replayed)
    primary.position = written
    r.wrote("alice")
    assert r.written("alice") == lsn(written)
    assert read(r, "alice") == where


def test_a_replica_found_down_is_tried_again_after_retry_s_and_not_before(clock: Clock) -> None:
    pool = CountingPool()
    r, _ = routed(pool)
    pool.down = True
    assert reads(r, "alice") == "primary"
    assert pool.connections == 1
    pool.down = False
    clock.now += 9.99
    assert reads(r, "alice") == "primary" and pool.connections == 1  # skipped: not even asked
    clock.now += 0.01  # retry_s (10 s) after it was found down
    assert reads(r, "alice") == "replica" and pool.connections == 2
    assert r.stats.as_dict() == {"replica": 1, "primary": 2, "replica_share": pytest.approx(1 / 3),
                                 "primary_because": {"every replica skipped": 2}}  # fmt: skip


def test_a_replica_at_the_lag_bound_is_used_and_past_it_skipped(clock: Clock) -> None:
    pool = CountingPool(lag=5.0)
    r, _ = routed(pool, max_lag_s=5.0, status_ttl_s=0.0)
    assert reads(r, "alice") == "replica"
    pool.status = (True, "0/0", 5.001, "streaming")
    clock.now += 1
    assert reads(r, "alice") == "primary"
    pool.status = (True, "0/0", None, "streaming")  # replayed nothing since it started: unknown
    clock.now += 1
    assert reads(r, "alice") == "primary"
    pool.status = (True, "0/0", 0.0, "streaming")
    clock.now += 1
    assert reads(r, "alice") == "replica"


def test_the_status_is_read_again_only_once_it_is_older_than_its_ttl(clock: Clock) -> None:
    pool = CountingPool()
    r, _ = routed(pool, status_ttl_s=1.0)
    assert reads(r, "alice") == "replica" and pool.status_reads == 1
    clock.now += 1.0  # exactly the ttl: still fresh
    assert reads(r, "alice") == "replica" and pool.status_reads == 1
    clock.now += 0.01
    assert reads(r, "alice") == "replica" and pool.status_reads == 2


@pytest.mark.parametrize(("status", "said"), [
    ((False, "0/0", 0.0, None), "not a replica"),
    ((True, "0/0", 0.0, "hidden"), "GRANT pg_read_all_stats"),
    ((True, "0/0", 0.0, "stopping"), "not streaming from the primary (WAL receiver stopping)"),
    ((True, "0/0", 0.0, None), "not streaming from the primary (WAL receiver not running)"),
    ((True, "0/0", 7.5, "streaming"), "it lags 7500 ms, past MEMORY_REPLICA_MAX_LAG_MS=5000"),
])  # fmt: skip
def test_a_replica_that_cannot_serve_is_skipped_with_one_warning_and_one_when_used_again(
    clock: Clock, caplog: pytest.LogCaptureFixture, status: tuple, said: str
) -> None:
    pool = CountingPool()
    pool.status = status
    r, _ = routed(pool, status_ttl_s=0.0)
    with caplog.at_level(logging.WARNING, logger="memory.storage.replicas"):
        for _ in range(3):
            clock.now += 1
            assert reads(r, "alice") == "primary"
        pool.status = (True, "0/0", 0.0, "streaming")
        clock.now += 1
        assert reads(r, "alice") == "replica"
        assert reads(r, "alice") == "replica"
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "memory.storage.replicas"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("memory: read replica r0:5432/db skipped, look-ups go to the primary: ")
    assert said in lines[0]
    assert lines[1] == "memory: read replica r0:5432/db is used again"


def test_reads_take_the_replicas_in_turn() -> None:
    a, b = CountingPool(), CountingPool()
    r, _ = routed(a, b)
    for _ in range(6):
        assert reads(r, "alice") == "replica"
    assert (a.connections, b.connections) == (3, 3)


def test_a_write_whose_position_is_not_read_keeps_the_users_reads_on_the_primary() -> None:
    r, primary = router(replayed="FFFFFFFF/FFFFFFFF")  # as far as a position goes

    def fails() -> tuple:
        raise psycopg.OperationalError("the server closed the connection")

    primary.conn.answers["pg_current_wal_insert_lsn"] = fails
    r.wrote("alice")
    assert r.written("alice") == 2**64
    assert read(r, "alice") == "primary"
    assert read(r, "bob") == "replica"


def test_without_replicas_a_write_runs_no_statement_and_every_read_is_the_primarys() -> None:
    primary = Primary()
    primary.conn.answers = {"SELECT 'read'": ("primary",)}  # any other statement would fail the test
    r = ReadRouter(primary, [], max_lag_s=5.0, wait_s=0.1)  # type: ignore[arg-type]
    r.wrote("alice")
    assert r.written("alice") is None
    assert read(r, "alice") == "primary"
    assert r.stats.as_dict() == {"replica": 0, "primary": 1, "replica_share": 0.0,
                                 "primary_because": {"no replica": 1}}  # fmt: skip


def test_a_read_cancelled_by_recovery_runs_on_the_primary_and_keeps_the_replica_and_a_dead_one_is_skipped(
    clock: Clock,
) -> None:
    pool = CountingPool()
    r, _ = routed(pool)
    calls = {"n": 0}

    def run(conn: Conn) -> str:
        calls["n"] += 1
        if conn is pool.conn and calls["n"] == 1:
            raise psycopg.errors.SerializationFailure("canceling statement due to conflict with recovery")
        if conn is pool.conn and calls["n"] == 4:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return conn.execute("SELECT 'read'").fetchone()[0]

    assert reads(r, "alice", run) == "primary"  # 1 (replica, conflict), 2 (primary)
    assert reads(r, "alice", run) == "replica"  # 3: the replica was not counted down
    assert reads(r, "alice", run) == "primary"  # 4 (replica, dead), 5 (primary)
    connections = pool.connections
    assert reads(r, "alice", run) == "primary" and pool.connections == connections  # skipped for retry_s


def test_a_replicas_name_in_logs_is_host_port_and_database_never_the_password() -> None:
    assert describe("postgresql://memory:s3cret@db.example:6543/memory") == "db.example:6543/memory"
    assert describe("postgresql:///memory") == "localhost:5432/memory"
    assert describe("postgresql://db.example") == "db.example:5432/"


def test_the_documented_defaults_once_a_second_1_s_and_10_s() -> None:
    # docs/scaling.md: the status read at most once a second, a read without an answer within
    # 1 s runs on the primary, and the replica is skipped for 10 s.
    primary, made = Primary(), []
    url = "postgresql://memory:pw@replica.example:5433/memory"
    r = ReadRouter.open(primary, [url], max_lag_s=5.0, wait_s=0.1,  # type: ignore[arg-type]
                        pool_factory=lambda u: made.append(u) or CountingPool())  # fmt: skip
    assert (r.status_ttl_s, r.read_timeout_s, r.retry_s) == (1.0, 1.0, 10.0)
    assert r.primary is primary and (r.max_lag_s, r.wait_s) == (5.0, 0.1) and made == [url]
    assert [x.name for x in r.replicas] == ["replica.example:5433/memory"]
    assert [x.pool for x in r.replicas] == [r.replicas[0].pool] and isinstance(r.replicas[0].pool, CountingPool)


def test_the_counts_before_any_read_have_no_share() -> None:
    assert replicas.ReadStats().as_dict() == {"replica": 0, "primary": 0, "replica_share": None, "primary_because": {}}


def test_the_status_statement_runs_on_postgres_and_a_primary_is_no_replica(
    store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The status is one statement Postgres runs (here on a primary: not in recovery, nothing
    replayed, no WAL receiver): the replica is skipped, saying why once."""
    r = ReadRouter(Primary(), [], max_lag_s=5.0, wait_s=0.1)  # type: ignore[arg-type]
    replica = Replica("primary-by-mistake:5432/memory", None)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger="memory.storage.replicas")
    with store.pool.connection() as conn:
        assert conn.autocommit is False
        r._check(replica, conn)
        r._check(replica, conn)
        # One statement in autocommit: no transaction left open on the replica, and the
        # connection's own setting given back.
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.autocommit is False
    assert (replica.replay, replica.lag_s) == (-1, None)
    assert replica.skipped == "it is not a replica (not in recovery): promoted, or a primary's URL"
    assert [rec.getMessage() for rec in caplog.records] == [
        "memory: read replica primary-by-mistake:5432/memory skipped, look-ups go to the primary: "
        "it is not a replica (not in recovery): promoted, or a primary's URL"
    ]


# --- a replica that cannot serve one read leaves the next replica to serve it, and each
# fallback to the primary is counted by its reason and said in the documented words


def test_when_one_replica_cannot_serve_the_next_one_does(clock: Clock) -> None:
    down, behind, failing, good = CountingPool(), CountingPool(replayed="0/10"), CountingPool(), CountingPool()
    down.down = True
    r, primary = routed(down, good)
    assert reads(r, "alice") == "replica" and good.connections == 1  # past one with no connection
    primary.position = "0/64"
    r2, primary2 = routed(behind, CountingPool(replayed="0/FF"))
    primary2.position = "0/64"
    r2.wrote("alice")
    assert reads(r2, "alice") == "replica"  # past one behind the user's write
    r3, _ = routed(failing, CountingPool())

    def run(conn: Conn) -> str:
        if conn is failing.conn:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return conn.execute("SELECT 'read'").fetchone()[0]

    assert reads(r3, "alice", run) == "replica"  # past one that failed mid-read
    r.read("bob", lambda conn: None)
    assert r.stats.replica == 2  # every read a replica served is counted


@pytest.mark.parametrize(("pool", "written", "why"), [
    (CountingPool(replayed="0/10"), "0/64", "the replica is behind the user's last write"),
    (CountingPool(lag=9.0), None, "a replica lagging or not streaming"),
])  # fmt: skip
def test_a_read_sent_to_the_primary_is_counted_under_its_reason(
    clock: Clock, pool: CountingPool, written: str | None, why: str
) -> None:
    r, primary = routed(pool)
    if written:
        primary.position = written
        r.wrote("alice")
    assert reads(r, "alice") == "primary"
    assert r.stats.as_dict()["primary_because"] == {why: 1}


def test_a_replica_that_replayed_exactly_the_users_write_is_not_asked_again(clock: Clock) -> None:
    pool = CountingPool(replayed="0/64")
    r, primary = routed(pool)
    primary.position = "0/64"
    r.wrote("alice")
    for _ in range(3):
        assert reads(r, "alice") == "replica"
    assert pool.status_reads == 1  # not behind: its status is not read again within the ttl


def test_a_read_failing_on_a_replica_is_said_and_counted(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    pool = CountingPool()
    r, _ = routed(pool)
    caplog.set_level(logging.INFO, logger="memory.storage.replicas")

    def conflict(conn: Conn) -> str:
        if conn is pool.conn:
            raise psycopg.errors.SerializationFailure("canceling statement due to conflict with recovery")
        return conn.execute("SELECT 'read'").fetchone()[0]

    def dead(conn: Conn) -> str:
        if conn is pool.conn:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return conn.execute("SELECT 'read'").fetchone()[0]

    assert reads(r, "alice", conflict) == "primary"
    assert reads(r, "alice", dead) == "primary"
    assert [rec.getMessage() for rec in caplog.records] == [
        "memory: a look-up on read replica r0:5432/db ran again on the primary: "
        "a read failed (SerializationFailure: canceling statement due to conflict with recovery)",
        "memory: read replica r0:5432/db skipped, look-ups go to the primary: "
        "a read failed (OperationalError: server closed the connection unexpectedly)",
    ]
    assert r.replicas[0].skipped == "a read failed (OperationalError: server closed the connection unexpectedly)"
    assert r.stats.as_dict()["primary_because"] == {"a replica failed mid-read": 2}


def test_a_broken_connection_counts_the_replica_down_whatever_the_error(clock: Clock) -> None:
    pool = CountingPool()
    r, _ = routed(pool)

    def broken(conn: Conn) -> str:
        if conn is pool.conn:
            conn.broken = True
            raise psycopg.DatabaseError("the connection is lost")
        return conn.execute("SELECT 'read'").fetchone()[0]

    assert reads(r, "alice", broken) == "primary"
    pool.conn.broken = False
    connections = pool.connections
    assert reads(r, "alice") == "primary" and pool.connections == connections  # skipped for retry_s


def test_a_write_whose_position_is_not_read_is_said(caplog: pytest.LogCaptureFixture) -> None:
    r, primary = router(replayed="0/0")

    def fails() -> tuple:
        raise psycopg.OperationalError("the server closed the connection")

    primary.conn.answers["pg_current_wal_insert_lsn"] = fails
    caplog.set_level(logging.INFO, logger="memory.storage.replicas")
    r.wrote("alice")
    assert [rec.getMessage() for rec in caplog.records] == [
        "memory: the primary's WAL position after a write was not read "
        "(OperationalError: the server closed the connection)"
    ]


def test_the_position_statement_runs_on_postgres(store: Any) -> None:
    r = ReadRouter(store.pool, [Replica("r0:5432/db", CountingPool())], max_lag_s=5.0, wait_s=0.1)  # type: ignore[arg-type]
    r.wrote("alice")
    position = r.written("alice")
    assert position is not None and 0 < position < 2**64  # the primary's WAL position, read


def test_a_read_with_no_answer_within_the_timeout_runs_on_the_primary(store: Any) -> None:
    """A read still running after `read_timeout_s` has its socket shut (the deadline), fails
    at once, and runs on the primary; the replica is skipped, saying it did not answer."""
    import time as real_time

    primary = Primary()
    primary.conn.answers["SELECT 'read'"] = ("primary",)
    replica = Replica("slow:5432/db", store.pool)
    r = ReadRouter(primary, [replica], max_lag_s=5.0, wait_s=5.0, status_ttl_s=3600.0, read_timeout_s=1.0)  # type: ignore[arg-type]
    replica.checked, replica.lag_s, replica.replay = real_time.monotonic(), 0.0, 0  # streaming, fresh

    def run(conn: Any) -> str:
        if conn is primary.conn:
            return "primary"
        conn.execute("SELECT pg_sleep(4)")
        return "replica"

    t0 = real_time.monotonic()
    assert r.read("alice", run) == "primary"
    assert real_time.monotonic() - t0 < 3.0
    assert replica.skipped == "no answer within 1000 ms"


@pytest.mark.parametrize(("status", "said"), [
    ((True, "0/0", 0.0, "hidden"), "this role cannot see its WAL receiver: GRANT pg_read_all_stats TO it"),
    ((True, "0/0", None, "streaming"), "it lags unknown, past MEMORY_REPLICA_MAX_LAG_MS=5000"),
])  # fmt: skip
def test_why_a_replica_is_skipped_in_the_documented_words(clock: Clock, status: tuple, said: str) -> None:
    pool = CountingPool()
    pool.status = status
    r, _ = routed(pool)
    assert reads(r, "alice") == "primary"
    assert r.replicas[0].skipped == said


def test_a_replica_exactly_at_the_lag_bound_is_not_said_to_lag(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    r, _ = routed(CountingPool(lag=5.0), max_lag_s=5.0)
    with caplog.at_level(logging.WARNING, logger="memory.storage.replicas"):
        assert reads(r, "alice") == "replica"
    assert caplog.records == [] and r.replicas[0].skipped is None


def test_an_error_without_words_is_named_by_its_type() -> None:
    assert replicas._reason(psycopg.OperationalError()) == "OperationalError"
    assert replicas._reason(psycopg.OperationalError("\n  first line\nsecond")) == "OperationalError: first line"
    assert len(replicas._reason(psycopg.OperationalError("x" * 500))) == 200
