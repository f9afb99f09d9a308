"""The one lease (memory/storage/lease.py) that the fact lock, retention and the journal
build their statements from, on a clock the test moves.

The rules, as the module states them: a lease taken at t with duration d is held through
t + d and free strictly after it; only its holder renews it or gives it back. Each rule is
checked at its bound with literal times (the limit itself, and the limit plus a
millisecond), on both databases the product keeps leases in: SQLite (the journal) and
Postgres (the fact lock, retention), the latter with the clock passed as a value instead
of the server's `now()`."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
from psycopg import sql

from memory.storage.lease import Lease, Sql
from memory.storage.store import MemoryStore

T0 = 1_700_000_000.0  # the instant the first holder takes the lease
D = 60.0  # its duration
EPS = 0.001


class FakeClock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t


Run = Callable[[Sql], int]  # runs a statement, returns the rows it changed


class Table:
    """One lease row under key 'k', through the lease's statements only."""

    def __init__(self, lease: Lease, run: Run, p: str) -> None:
        self.lease, self.run, self.p = lease, run, p

    def take(self, holder: str) -> bool:
        at = self.lease.at()
        q = "UPDATE leases SET " + at.take(holder) + Sql(f" WHERE key = {self.p} AND ", ("k",)) + at.free()
        return self.run(q) == 1

    def renew(self, holder: str) -> bool:
        at = self.lease.at()
        return (
            self.run(
                "UPDATE leases SET " + at.renew() + Sql(f" WHERE key = {self.p} AND ", ("k",)) + at.held_by(holder)
            )
            == 1
        )

    def release(self, holder: str) -> bool:
        at = self.lease.at()
        return (
            self.run(
                "UPDATE leases SET " + at.vacate() + Sql(f" WHERE key = {self.p} AND ", ("k",)) + at.held_by(holder)
            )
            == 1
        )

    def holder(self) -> str | None:
        raise NotImplementedError


@pytest.fixture(params=["sqlite", "postgres"])
def table(request: pytest.FixtureRequest) -> Iterator[tuple[Table, FakeClock, Callable[[], str | None]]]:
    clock = FakeClock(T0)
    if request.param == "sqlite":
        with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
            conn.execute("CREATE TABLE leases (key TEXT PRIMARY KEY, holder TEXT, until REAL NOT NULL DEFAULT 0)")
            conn.execute("INSERT INTO leases (key) VALUES ('k')")
            lease = Lease(D, dialect="sqlite", clock=clock, vacant="0")

            def run(q: Sql) -> int:
                return conn.execute(q.text, q.params).rowcount

            def holder() -> str | None:
                return conn.execute("SELECT holder FROM leases").fetchone()[0]

            yield Table(lease, run, "?"), clock, holder
        return
    store: MemoryStore = request.getfixturevalue("store")
    name = f"leases_{uuid.uuid4().hex[:8]}"
    with store.pool.connection() as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (key TEXT PRIMARY KEY, holder TEXT, until TIMESTAMPTZ)").format(
            sql.Identifier(name)))  # fmt: skip
        conn.execute(sql.SQL("INSERT INTO {} (key) VALUES ('k')").format(sql.Identifier(name)))
    lease = Lease(D, clock=clock)

    def run_pg(q: Sql) -> int:
        with store.pool.connection() as conn:
            return conn.execute(q.text.replace("leases", name), q.params).rowcount

    def holder_pg() -> str | None:
        with store.pool.connection() as conn:
            return conn.execute(sql.SQL("SELECT holder FROM {}").format(sql.Identifier(name))).fetchone()[0]

    try:
        yield Table(lease, run_pg, "%s"), clock, holder_pg
    finally:
        with store.pool.connection() as conn:
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))


def test_a_lease_is_held_through_its_limit_and_taken_over_just_after(table) -> None:
    t, clock, holder = table
    assert t.take("a")
    clock.t = T0 + D / 2
    assert not t.take("b")
    clock.t = T0 + D  # the limit itself: still a's
    assert not t.take("b")
    assert holder() == "a"
    clock.t = T0 + D + EPS  # just past it: anyone may take it
    assert t.take("b")
    assert holder() == "b"


def test_a_renewal_moves_the_limit_and_only_the_holder_renews(table) -> None:
    t, clock, holder = table
    assert t.take("a")
    clock.t = T0 + 50.0
    assert not t.renew("b")  # not b's: nothing moves
    assert t.renew("a")  # a's: held until T0 + 50 + D now
    clock.t = T0 + 50.0 + D
    assert not t.take("b")
    clock.t = T0 + 50.0 + D + EPS
    assert t.take("b")
    clock.t += 1.0
    assert not t.renew("a")  # a lost it: its renewal finds nothing (retention's run stops here)
    assert holder() == "b"


def test_a_release_by_anyone_but_the_holder_does_nothing(table) -> None:
    t, clock, holder = table
    assert t.take("a")
    clock.t = T0 + D + EPS
    assert t.take("b")  # a's lease ran out, b took it
    assert not t.release("a")  # a's late release leaves b's lease
    assert holder() == "b"
    assert not t.take("c")
    assert t.release("b")
    assert holder() is None
    assert t.take("c")  # given back: free at once, before its limit


def test_a_lease_must_last_and_sqlite_needs_a_clock() -> None:
    with pytest.raises(ValueError):
        Lease(0.0)
    with pytest.raises(ValueError):
        Lease(D, dialect="sqlite")


def test_the_fact_lock_is_the_same_lease(store: MemoryStore) -> None:
    """`RowLocks` on the moved clock: a second writer waits while the first holds the lock
    through its limit, and takes it over just after; the first's late release leaves it."""
    from memory.storage.locks import LEASE_S, RowLocks
    from memory.types import StoreBusy

    clock = FakeClock(T0)
    locks = RowLocks(store.pool, store.table, clock=clock)
    key = f"lease-{uuid.uuid4().hex[:8]}"
    first = locks.hold(key, wait_s=0.0)
    first.__enter__()  # the first writer stalls: never releases in time
    clock.t = T0 + LEASE_S
    with pytest.raises(StoreBusy), locks.hold(key, wait_s=0.0):
        pass
    clock.t = T0 + LEASE_S + EPS
    with locks.hold(key, wait_s=0.0) as fence:
        first.__exit__(None, None, None)  # the stale writer's release, while the second holds it
        with store.pool.connection() as conn:
            row = conn.execute(
                sql.SQL("SELECT holder FROM {} WHERE key = %s").format(sql.Identifier(f"{store.table}_locks")), [key]
            ).fetchone()
        assert row == (fence.holder,)


def test_a_journal_row_is_the_same_lease(tmp_path: Path) -> None:
    """The journal's rows on the moved clock: another queue takes a row over only just
    past its holder's limit, and the stale holder's release then leaves the row alone."""
    from memory.journal.queue import DurableWriteQueue
    from memory.types import Turn

    async def never(turn: Turn) -> None:
        raise AssertionError("no consumer runs here")

    clock = FakeClock(T0)
    journal = tmp_path / "journal.db"
    stale = DurableWriteQueue(journal, never, lease_s=D, clock=clock)
    other = DurableWriteQueue(journal, never, lease_s=D, clock=clock)
    assert stale.enqueue(Turn("u", "my sister is Anna", "s", "t-1", "2026-01-01T00:00:00+00:00"))
    clock.t = T0 + D
    assert other.adopt_orphans() == 0  # held through its limit (its pid is alive: no other way in)
    clock.t = T0 + D + EPS
    assert other.adopt_orphans() == 1
    stale._release_leases()  # the stale holder closes late: the row is not its own to give back
    assert (stale.owned_pending_count(), other.owned_pending_count()) == (0, 1)
