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
