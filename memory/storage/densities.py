"""The users' memory densities, stored beside their rows (`<collection>_densities`).

The hubness correction (`retriever._Density`) needs each memory's mean cosine to its
nearest fellow memories: about a second of CPU per 10,000 memories, which every job
process serving the user would otherwise spend again at session start. It is computed
once, stored here (one row per user: the memory ids and their densities as float32
bytes), and read by the next process; recomputed when the user's rows have changed by
more than `STALE_SHARE` or it is older than `MAX_AGE`. A "forget me" deletes the row
(`userdata.PLACES`, "densities").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

# Recomputed when the user's memories number this share more or fewer than when stored, or after MAX_AGE.
STALE_SHARE = 0.1
MAX_AGE = timedelta(days=1)


def densities_table(table: str) -> str:
    """The table of stored densities kept beside a memory table."""
    return f"{table}_densities"


def ensure_densities_schema(conn: Connection[Any], table: str) -> None:
    """Create the table (idempotent; in `postgres.ensure_schema`'s transaction)."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (user_id TEXT PRIMARY KEY, computed_at TIMESTAMPTZ NOT NULL, "
            "k INT NOT NULL, mean DOUBLE PRECISION NOT NULL, ids TEXT NOT NULL, densities BYTEA NOT NULL)"
        ).format(sql.Identifier(densities_table(table)))
    )


@dataclass(frozen=True)
class Stored:
    """One user's densities as stored."""

    ids: list[str]
    values: np.ndarray  # float32, one per id
    mean: float
    k: int
    computed_at: datetime

    def fresh(self, rows_now: int, kept: int, now: datetime | None = None) -> bool:
        """Still good for a user who has `rows_now` memories now, `kept` of them among the
        stored ids: the memories gone plus the new ones within `STALE_SHARE` (a forget of
        some and as many new ones change no count)."""
        now = now or datetime.now(UTC)
        changed = (len(self.ids) - kept) + (rows_now - kept)
        return changed / max(len(self.ids), 1) <= STALE_SHARE and now - self.computed_at < MAX_AGE


class DensityStore:
    """Read, write and delete the stored densities over the store's pool."""

    def __init__(self, pool: ConnectionPool, table: str) -> None:
        self.pool = pool
        self._t = sql.Identifier(densities_table(table))
        self._memories = sql.Identifier(table)

    def memories(self, user_id: str, ids: list[str]) -> tuple[int, int]:
        """How many memories the user has now, and how many of `ids` are among them (the
        primary key's index, no row read)."""
        query = sql.SQL(
            "SELECT (SELECT count(*) FROM {t} WHERE user_id = %s), "
            "(SELECT count(*) FROM {t} WHERE user_id = %s AND id = ANY(%s::uuid[]))"
        ).format(t=self._memories)
        with self.pool.connection() as conn:
            now, kept = conn.execute(query, [user_id, user_id, ids]).fetchone()
        return int(now), int(kept)

    def read(self, user_id: str) -> Stored | None:
        query = sql.SQL("SELECT ids, densities, mean, k, computed_at FROM {} WHERE user_id = %s").format(self._t)
        with self.pool.connection() as conn:
            row = conn.execute(query, [user_id]).fetchone()
        if row is None:
            return None
        ids, raw, mean, k, at = row
        values = np.frombuffer(bytes(raw), dtype="<f4")
        split = ids.split(",") if ids else []
        if len(split) != len(values):  # a damaged row is recomputed, never half used
            return None
        return Stored(split, values, float(mean), int(k), at)

    def write(self, user_id: str, ids: list[str], values: np.ndarray, mean: float, k: int) -> None:
        """Store (or replace) the user's densities, unless the user has no memories any more."""
        query = sql.SQL(
            "INSERT INTO {} (user_id, computed_at, k, mean, ids, densities) SELECT %s, now(), %s, %s, %s, %s "
            "WHERE EXISTS (SELECT 1 FROM {} WHERE user_id = %s) "
            "ON CONFLICT (user_id) DO UPDATE SET computed_at = EXCLUDED.computed_at, k = EXCLUDED.k, "
            "mean = EXCLUDED.mean, ids = EXCLUDED.ids, densities = EXCLUDED.densities"
        ).format(self._t, self._memories)
        payload = np.asarray(values, dtype="<f4").tobytes()
        with self.pool.connection() as conn:  # a user forgotten meanwhile (no memories left) gets no row
            conn.execute(query, [user_id, k, mean, ",".join(ids), payload, user_id])

    def rows(self, user_id: str) -> list[dict[str, Any]]:
        """The stored row as an export shows it: what it covers, not the numbers."""
        stored = self.read(user_id)
        if stored is None:
            return []
        return [{"memories": len(stored.ids), "k": stored.k, "computed_at": stored.computed_at.isoformat()}]

    def delete_user(self, user_id: str) -> int:
        """The user's stored densities gone; how many rows (0 or 1)."""
        query = sql.SQL("DELETE FROM {} WHERE user_id = %s").format(self._t)
        with self.pool.connection() as conn:
            return conn.execute(query, [user_id]).rowcount


__all__ = ["MAX_AGE", "STALE_SHARE", "DensityStore", "Stored", "densities_table", "ensure_densities_schema"]
