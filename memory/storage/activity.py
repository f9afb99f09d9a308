"""What the agent did, per day, for the operator's chart: replies that looked memory up and
memories they carried. Counts only: no user, no text, nothing a "forget me" must reach.

The store keeps memories with their creation time, so memories and facts per day can be
counted from the rows themselves; a look-up leaves no row. Each session adds its counts
here once, when it closes (one UPSERT per call, off the reply path), so a call cut off
by a killed process is missing from the chart: the figures are a floor, not a ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

# The counts a session adds: replies that ran a look-up, memories injected into replies.
KINDS: tuple[str, ...] = ("recalls", "injected")


def activity_table(table: str) -> str:
    """The table of daily counts kept beside a memory table."""
    return f"{table}_daily"


def ensure_activity_schema(conn: Connection[Any], table: str) -> None:
    """Create the daily counts table (idempotent; in `postgres.ensure_schema`'s transaction)."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (day DATE NOT NULL, kind TEXT NOT NULL, n BIGINT NOT NULL DEFAULT 0, "
            "PRIMARY KEY (day, kind))"
        ).format(sql.Identifier(activity_table(table)))
    )


class DailyActivity:
    """Daily counts over the memory store's connection pool (blocking calls)."""

    def __init__(self, pool: ConnectionPool, table: str) -> None:
        self.pool = pool
        self._t = sql.Identifier(activity_table(table))

    def add(self, day: date, counts: Mapping[str, int]) -> None:
        """Add these counts to the day's (one statement; zero counts are left out)."""
        unknown = [kind for kind in counts if kind not in KINDS]
        if unknown:
            raise ValueError(f"unknown activity kind(s): {', '.join(unknown)}; known: {', '.join(KINDS)}")
        rows = [(day, kind, int(n)) for kind, n in counts.items() if n]
        if not rows:
            return
        query = sql.SQL(
            "INSERT INTO {t} (day, kind, n) SELECT * FROM unnest(%s::date[], %s::text[], %s::bigint[]) "
            "ON CONFLICT (day, kind) DO UPDATE SET n = {t}.n + EXCLUDED.n"
        ).format(t=self._t)
        with self.pool.connection() as conn:
            conn.execute(query, [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]])

    def per_day(self, since: date) -> dict[date, dict[str, int]]:
        """day -> kind -> count, from `since` on."""
        query = sql.SQL("SELECT day, kind, n FROM {} WHERE day >= %s ORDER BY day").format(self._t)
        out: dict[date, dict[str, int]] = {}
        with self.pool.connection() as conn:
            for day, kind, n in conn.execute(query, [since]).fetchall():
                out.setdefault(day, {})[kind] = int(n)
        return out
