"""Per-user change counters on the primary: how a process learns, in one small statement,
that another process forgot, redacted or imported a user's memories.

A job process holds the caller's rows (`session_index.py`) and refreshes them in the
background; a forget or a redaction made elsewhere (`memory.admin`, the web page, MCP,
another worker) would reach the model once more from the held rows. Each of those bumps
the user's generation in the same transaction as its change (or right after it commits,
where the change is many transactions); a look-up compares it before it reads the held
rows (`SessionIndexes.check`). Rows are keyed by a digest of the user id: the table holds
no identity, and nothing of it is a user's data to forget.
"""

from __future__ import annotations

import hashlib

from psycopg import Connection, sql
from psycopg_pool import ConnectionPool


def generations_table(table: str) -> str:
    """The table of per-user generations kept beside a memory table."""
    return f"{table}_generations"


def user_key(user_id: str) -> str:
    """The row's key: a digest of the stored user id (no identity in the table)."""
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def ensure_generations_schema(conn: Connection, table: str) -> None:
    conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (user_key TEXT PRIMARY KEY, generation BIGINT NOT NULL)").format(
            sql.Identifier(generations_table(table))
        )
    )


def bump(conn: Connection, table: str, user_id: str) -> None:
    """One more change of the user's memories another process must see at once (in the
    caller's transaction: it commits with the change)."""
    conn.execute(
        sql.SQL(
            "INSERT INTO {t} AS g (user_key, generation) VALUES (%s, 1) "
            "ON CONFLICT (user_key) DO UPDATE SET generation = g.generation + 1"
        ).format(t=sql.Identifier(generations_table(table))),
        [user_key(user_id)],
    )


def bump_now(pool: ConnectionPool, table: str, user_id: str) -> None:
    """`bump` in a transaction of its own (after a change made of many transactions)."""
    with pool.connection() as conn:
        bump(conn, table, user_id)


def current(pool: ConnectionPool, table: str, user_id: str) -> int:
    """The user's generation (0: never bumped): one statement on the primary's index."""
    with pool.connection() as conn:
        row = conn.execute(
            sql.SQL("SELECT generation FROM {} WHERE user_key = %s").format(sql.Identifier(generations_table(table))),
            [user_key(user_id)],
        ).fetchone()
    return int(row[0]) if row else 0
