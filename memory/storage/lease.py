"""A lease kept in a table row: one holder, until a time; after that time anyone may take it.

Three things in the product hold a claim this way: the fact lock of a user
(`storage/locks.py`, Postgres), the fleet's retention run (`archive/retention.py`,
Postgres) and each journal row (`journal/`, SQLite). The rules are written here once,
as the SQL conditions and assignments their statements are built from:

- a lease is held through its `until` instant and free strictly after it
  (`until < now`), or when nobody holds it (`holder` or `until` empty);
- taking it sets the holder and `until = now + duration_s`, and only where it is free;
- renewing and giving it back are done only by its holder (`holder = me`): a holder
  that lost the lease renews nothing and gives nobody's lease back.

Each statement is one atomic UPDATE (or upsert, or DELETE): of the processes that try
at once, one gets it.

Time comes from a `Clock`. `None` is the database's own clock (Postgres `now()`: one
clock for the whole fleet, so no two hosts' clocks disagree on who holds a lock); the
journal, on one machine, reads the process's wall clock. A test passes a clock it moves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, Protocol

Dialect = Literal["postgres", "sqlite"]


class Clock(Protocol):
    """Seconds since the epoch, as `time.time()`."""

    def now(self) -> float: ...


class WallClock:
    """The process's clock."""

    def now(self) -> float:
        return time.time()


WALL_CLOCK = WallClock()


@dataclass(frozen=True)
class Sql:
    """A piece of a statement and its positional parameters, in order."""

    text: str
    params: tuple[object, ...] = ()

    def __add__(self, other: Sql | str) -> Sql:
        if isinstance(other, str):
            return Sql(self.text + other, self.params)
        return Sql(self.text + other.text, self.params + other.params)

    def __radd__(self, other: str) -> Sql:
        return Sql(other + self.text, self.params)


@dataclass(frozen=True)
class Lease:
    """The lease of one table: how long it lasts, which columns hold it, and its clock.

    `vacant`: what `until` is set to when the lease is given back (`NULL`, or `0` where
    the column is NOT NULL: the journal's)."""

    duration_s: float
    holder: str = "holder"
    until: str = "until"
    dialect: Dialect = "postgres"
    clock: Clock | None = None
    vacant: str = "NULL"

    def __post_init__(self) -> None:
        if self.duration_s <= 0:
            raise ValueError("a lease must last a positive time")
        if self.dialect == "sqlite" and self.clock is None:
            raise ValueError("SQLite has no clock of the fleet: pass one")

    def at(self) -> LeaseAt:
        """The lease's clauses at one instant (the clock is read once, for the whole statement)."""
        return LeaseAt(self, None if self.clock is None else self.clock.now())


@dataclass(frozen=True)
class LeaseAt:
    """The clauses of a lease's statements, all at the instant `now` (None: the database's `now()`)."""

    lease: Lease
    now: float | None

    @property
    def _p(self) -> str:
        return "%s" if self.lease.dialect == "postgres" else "?"

    def _now(self) -> Sql:
        if self.now is None:
            return Sql("now()")
        if self.lease.dialect == "postgres":
            return Sql("to_timestamp(%s)", (self.now,))
        return Sql("?", (self.now,))

    def until_value(self) -> Sql:
        """The end of a lease taken or renewed now."""
        if self.lease.dialect == "postgres":
            return self._now() + Sql(" + make_interval(secs => %s)", (self.lease.duration_s,))
        assert self.now is not None
        return Sql("?", (self.now + self.lease.duration_s,))

    def expired(self, prefix: str = "") -> Sql:
        """Its time has passed: held through `until` itself, free strictly after it."""
        return Sql(f"{prefix}{self.lease.until} < ") + self._now()

    def free(self, prefix: str = "") -> Sql:
        """Nobody holds it, or the holder's time has passed: it may be taken."""
        h, u = f"{prefix}{self.lease.holder}", f"{prefix}{self.lease.until}"
        return Sql(f"({h} IS NULL OR {u} IS NULL OR ") + self.expired(prefix) + ")"

    def held_by(self, holder: str) -> Sql:
        """Only its holder's renewal and release touch it."""
        return Sql(f"{self.lease.holder} = {self._p}", (holder,))

    def take(self, holder: str) -> Sql:
        """SET clause: `holder` holds it from now for `duration_s` (under `free()`)."""
        return Sql(f"{self.lease.holder} = {self._p}, {self.lease.until} = ", (holder,)) + self.until_value()

    def renew(self) -> Sql:
        """SET clause: `duration_s` more from now (under `held_by`)."""
        return Sql(f"{self.lease.until} = ") + self.until_value()

    def vacate(self) -> Sql:
        """SET clause: nobody holds it (under `held_by`)."""
        return Sql(f"{self.lease.holder} = NULL, {self.lease.until} = {self.lease.vacant}")


__all__ = ["WALL_CLOCK", "Clock", "Dialect", "Lease", "LeaseAt", "Sql", "WallClock"]
