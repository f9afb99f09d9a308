"""The per-user fact lock and its fence (memory/storage/locks.py), as invariants, every
interleaving of a stale writer and the new holder driven in order on the real database:

- the fence refuses a writer while ANOTHER writer holds the lock (the stale one wakes
  while the new holder still holds it), and after the new holder released it;
- the lock's holder writes; a write without a fence is not checked;
- a release deletes only the releaser's own lock: the stale writer's release, run after
  the new holder took the lock, leaves the new holder's lock in place (a third writer
  still waits, the new holder's writes still pass).

A lease running out is made by moving the lock's `until` into the past (the database's
clock is the lease's clock), not by waiting 60 s."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.storage.locks import Fence, LeaseLost, fenced, locks_table
from memory.storage.store import MemoryStore
from memory.types import StoreBusy


class Writer:
    """One writer's hold of the lock, entered and left when the test says."""

    def __init__(self, store: MemoryStore, key: str) -> None:
        self._cm = store.locks.hold(key, wait_s=2.0)
        self.fence: Fence | None = None

    def take(self) -> Writer:
        self.fence = self._cm.__enter__()
        return self

    def release(self) -> None:
        self._cm.__exit__(None, None, None)


def write(store: MemoryStore, row_id: str, value: str, fence: Fence | None) -> None:
    """One fenced write of the row, as the store's fact writes carry their fence."""
    extra = {"value": value, **(fence.payload() if fence else {})}
    query = sql.SQL("UPDATE {} SET payload = payload || %s WHERE id = %s").format(sql.Identifier(store.table))
    with fenced(fence) if fence else contextlib.nullcontext(), store.pool.connection() as conn:
        conn.execute(query, [Jsonb(extra), row_id])


def value(store: MemoryStore, row_id: str) -> tuple[str | None, bool]:
    """The row's value and whether a fence key was left in it."""
    query = sql.SQL("SELECT payload FROM {} WHERE id = %s").format(sql.Identifier(store.table))
    with store.pool.connection() as conn:
        (payload,) = conn.execute(query, [row_id]).fetchone()
    return payload.get("value"), any(k in payload for k in ("lock_key", "lock_holder"))


def lease_runs_out(store: MemoryStore, key: str) -> None:
    query = sql.SQL("UPDATE {} SET until = now() - interval '1 second' WHERE key = %s").format(
        sql.Identifier(locks_table(store.table))
    )
    with store.pool.connection() as conn:
        conn.execute(query, [key])


def holder(store: MemoryStore, key: str) -> str | None:
    query = sql.SQL("SELECT holder FROM {} WHERE key = %s").format(sql.Identifier(locks_table(store.table)))
    with store.pool.connection() as conn:
        row = conn.execute(query, [key]).fetchone()
    return row[0] if row else None


@pytest.fixture
def row(store: MemoryStore, user_id: str) -> Iterator[tuple[str, str]]:
    result = store.add_raw(user_id, "my sister is called Sofia")
    assert result.id is not None
    yield result.id, f"memory-facts:{user_id}"


def test_the_holder_writes_and_an_unfenced_write_is_not_checked(store: MemoryStore, row: tuple[str, str]) -> None:
    row_id, key = row
    a = Writer(store, key).take()
    write(store, row_id, "Anna", a.fence)
    assert value(store, row_id) == ("Anna", False)  # the fence's keys taken off
    write(store, row_id, "Maria", None)
    assert value(store, row_id) == ("Maria", False)
    a.release()
    assert holder(store, key) is None


def test_a_stale_writer_that_wakes_while_the_new_holder_holds_the_lock_is_refused(
    store: MemoryStore, row: tuple[str, str]
) -> None:
    row_id, key = row
    stale = Writer(store, key).take()
    lease_runs_out(store, key)
    new = Writer(store, key).take()  # takes the lock the stale writer's lease lost
    assert new.fence is not None and holder(store, key) == new.fence.holder
    with pytest.raises(LeaseLost, match="ran out during the write and another writer took it"):
        write(store, row_id, "Anna (stale)", stale.fence)  # the lock is held, by another
    write(store, row_id, "Maria", new.fence)
    assert value(store, row_id) == ("Maria", False)
    new.release()
    stale.release()


def test_a_stale_writer_that_wakes_after_the_new_holder_released_is_refused(
    store: MemoryStore, row: tuple[str, str]
) -> None:
    row_id, key = row
    stale = Writer(store, key).take()
    lease_runs_out(store, key)
    new = Writer(store, key).take()
    write(store, row_id, "Maria", new.fence)
    new.release()
    assert holder(store, key) is None
    with pytest.raises(LeaseLost):
        write(store, row_id, "Anna (stale)", stale.fence)
    assert value(store, row_id) == ("Maria", False)
    stale.release()


def test_the_stale_writers_release_after_the_new_holder_took_the_lock_leaves_that_lock(
    store: MemoryStore, row: tuple[str, str]
) -> None:
    row_id, key = row
    stale = Writer(store, key).take()
    lease_runs_out(store, key)
    new = Writer(store, key).take()
    assert new.fence is not None
    stale.release()  # the stale writer gives back what it no longer holds
    assert holder(store, key) == new.fence.holder  # the new holder's lock is still there
    with pytest.raises(StoreBusy):  # so a third writer still waits for it
        with store.locks.hold(key, wait_s=0.2):
            pass
    write(store, row_id, "Maria", new.fence)  # and the new holder's write still passes
    assert value(store, row_id) == ("Maria", False)
    new.release()
    assert holder(store, key) is None
    with store.locks.hold(key, wait_s=0.2):  # free again
        pass


def test_a_lock_taken_and_not_run_out_is_not_taken_by_another(store: MemoryStore, row: tuple[str, str]) -> None:
    _, key = row
    a = Writer(store, key).take()
    with pytest.raises(StoreBusy, match="stayed taken"):
        with store.locks.hold(key, wait_s=0.2):
            pass
    a.release()


# --- the documented durations: a lease of 60 s, a wait of 20 s, a backoff from 5 ms doubling to 100 ms


class LeaseClock:
    """The lease's clock (seconds since the epoch), moved by the test."""

    def __init__(self) -> None:
        self.t = 1_000_000.0

    def now(self) -> float:
        return self.t


def test_a_lock_is_held_for_60_s_and_free_strictly_after(store: MemoryStore, user_id: str) -> None:
    from memory.storage.locks import RowLocks

    clock = LeaseClock()
    locks = RowLocks(store.pool, store.table, clock=clock)
    key = f"memory-facts:{user_id}"
    first = locks.hold(key, wait_s=0.05)
    fence = first.__enter__()
    query = sql.SQL("SELECT extract(epoch FROM until)::float8 FROM {} WHERE key = %s").format(
        sql.Identifier(locks_table(store.table))
    )
    with store.pool.connection() as conn:
        assert conn.execute(query, [key]).fetchone() == (1_000_060.0,)
    clock.t += 60.0  # at its end: still held
    with pytest.raises(StoreBusy), locks.hold(key, wait_s=0.05):
        pass
    clock.t += 0.01  # after it: another writer takes it
    with locks.hold(key, wait_s=0.05) as taken:
        assert holder(store, key) == taken.holder != fence.holder
    first.__exit__(None, None, None)


class WaitClock:
    """`time` as `RowLocks.hold` reads it: a monotonic clock that moves only by the sleeps."""

    def __init__(self) -> None:
        self.t = 500.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def test_a_writer_waits_20_s_backing_off_from_5_ms_to_100_ms(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.storage import locks

    key = f"memory-facts:{user_id}"
    other = Writer(store, key).take()
    clock = WaitClock()
    monkeypatch.setattr(locks, "time", clock)
    waiter = locks.RowLocks(store.pool, store.table)  # this module's (the store's own may be an earlier import)
    with pytest.raises(StoreBusy) as info, waiter.hold(key):  # the default wait
        pass
    assert str(info.value) == f"the lock {key!r} stayed taken for 20 s"
    assert clock.slept[:7] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.1, 0.1])
    assert max(clock.slept) == pytest.approx(0.1)
    assert 20.0 <= sum(clock.slept) < 20.1  # it gave up at its deadline, not before or much after
    other.release()


def test_a_write_refused_for_a_lost_lease_is_retried_by_the_journal() -> None:
    from memory.errors import retryable

    # The journal drops a turn whose error says "never" (`retryable(exc) is False`) and keeps one that says "again".
    assert retryable(LeaseLost("the lock 'k' ran out during the write and another writer took it")) is True


def test_two_memory_tables_in_one_database_each_check_their_own_locks(store: MemoryStore) -> None:
    """MEMORY_COLLECTION names a table; two of them in one database (two agents, or a test
    and a live one) each get a fence check of their own, reading their own locks."""
    from memory.storage.locks import RowLocks, create_locks_table

    suffix = uuid.uuid4().hex[:8]
    tables = [f"inv_mem_a_{suffix}", f"inv_mem_b_{suffix}"]
    with store.pool.connection() as conn:
        for t in tables:
            conn.execute(sql.SQL("CREATE TABLE {} (id TEXT PRIMARY KEY, payload JSONB)").format(sql.Identifier(t)))
            create_locks_table(conn, t)
    try:
        for t in tables:
            with RowLocks(store.pool, t).hold("k", wait_s=0.5) as fence, fenced(fence), store.pool.connection() as c:
                c.execute(sql.SQL("INSERT INTO {} VALUES ('r', %s)").format(sql.Identifier(t)),
                          [Jsonb({"data": "x", **fence.payload()})])  # fmt: skip
            with store.pool.connection() as c:
                (payload,) = c.execute(sql.SQL("SELECT payload FROM {}").format(sql.Identifier(t))).fetchone()
            assert payload == {"data": "x"}  # its own lock found, the fence taken off
    finally:
        with store.pool.connection() as conn:
            for t in tables:
                conn.execute(
                    sql.SQL("DROP TABLE IF EXISTS {}, {}").format(sql.Identifier(t), sql.Identifier(f"{t}_locks"))
                )
                conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {}()").format(sql.Identifier(f"{t}_locks_fence")))


def test_taking_and_giving_back_a_lock_leaves_its_connection_as_the_pool_lent_it(
    store: MemoryStore, user_id: str
) -> None:
    """Each lock statement runs in autocommit, and the connection goes back to the pool in
    transaction mode: the next borrower's write (the fenced one among them) is one transaction."""
    import psycopg

    from memory.storage.locks import RowLocks

    class OneConnection:
        def __init__(self, conn: psycopg.Connection) -> None:
            self.conn = conn

        @contextlib.contextmanager
        def connection(self) -> Iterator[psycopg.Connection]:
            yield self.conn

    with psycopg.connect(store.url) as conn:
        locks = RowLocks(OneConnection(conn), store.table)  # type: ignore[arg-type]
        with locks.hold(f"memory-facts:{user_id}", wait_s=0.5):
            assert conn.autocommit is False
        assert conn.autocommit is False
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # nothing left open
