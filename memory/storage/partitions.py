"""Tables partitioned by user: made so, and moved so in place from the previous layout.

Every query the product runs on a user's data names the user: with the table hashed into
partitions by `user_id`, Postgres prunes the others at planning time, so a look-up, a
write and a forget touch one partition and its own indexes (a smaller HNSW graph whose
neighbours are fewer users' rows, a smaller GIN posting list, a DELETE that VACUUM
cleans up partition by partition). The key is a column, not an expression of the
payload: a primary key must contain it, and Citus distributes by a column.

The previous layout (one table) is moved in one transaction (`migrate_in_place`): the
old indexes dropped, the table renamed aside, the partitioned one made, every row copied
with its user, the indexes built over the full partitions (one bulk build each, much
faster than inserting into them row by row), the old table dropped. The table is locked
throughout; docs/scaling.md says how long that takes and when to run it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from psycopg import Connection, sql

from memory.settings import ConfigError

logger = logging.getLogger(__name__)

# Hash partitions of a new table. A table's count is fixed when it is made: changing it
# means moving every row (docs/scaling.md).
PARTITIONS = 16

ONE_TABLE = "one table"
PARTITIONED = "partitioned"


def layout(conn: Connection, table: str) -> str | None:
    """How the table is laid out now: PARTITIONED, ONE_TABLE, or None (not made yet)."""
    row = conn.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(quote_ident(%s))", [table]).fetchone()
    if row is None:
        return None
    return PARTITIONED if row[0] == "p" else ONE_TABLE


def partition_name(table: str, remainder: int) -> str:
    return f"{table}_p{remainder:02d}"


def partitions_of(conn: Connection, table: str) -> list[str]:
    """The table's partitions, by name."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(quote_ident(%s)) ORDER BY 1",
        [table],
    ).fetchall()
    return [r[0] for r in rows]


def create_partitioned(conn: Connection, table: str, columns: sql.Composable, partitions: int = PARTITIONS) -> str:
    """Make `table` (`columns`: its column and constraint list, with a `user_id` column)
    hashed by `user_id` into `partitions` partitions, if it does not exist; its layout."""
    have = layout(conn, table)
    if have is not None:
        return have
    conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}) PARTITION BY HASH (user_id)").format(sql.Identifier(table), columns)
    )
    for remainder in range(partitions):
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF {} FOR VALUES WITH (MODULUS {}, REMAINDER {})").format(
                sql.Identifier(partition_name(table, remainder)),
                sql.Identifier(table),
                sql.Literal(partitions),
                sql.Literal(remainder),
            )
        )
    return PARTITIONED


def move_if_old(conn: Connection, table: str, max_rows: int | None, move: Callable[[Connection], int]) -> None:
    """Move `table` into partitions (`move(conn)`) if it is in the previous layout and holds
    at most `max_rows` rows (None: any number); past that raise `ConfigError`: a move that
    takes minutes belongs to the worker's start-up check, never to a job process."""
    if layout(conn, table) != ONE_TABLE:
        return
    # Counted up to one past the bound (the planner's estimate is 0 for a table whose
    # indexes were made while it was empty, whatever it holds now).
    limit = sql.SQL("") if max_rows is None else sql.SQL("LIMIT {}").format(sql.Literal(max_rows + 1))
    (rows,) = conn.execute(
        sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} {}) n").format(sql.Identifier(table), limit)
    ).fetchone()
    if max_rows is not None and rows > max_rows:
        raise ConfigError(
            f"the table {table!r} (MEMORY_COLLECTION) is in the previous layout, with more than {max_rows:,} rows, "
            "and must be moved into partitions by user first: the worker's start-up does it (the table is locked "
            "meanwhile, about an hour per million rows on 2 cores: docs/scaling.md, 'Partitions by user')"
        )
    logger.warning("moving the %s rows of %s into partitions by user; the table is locked until it is done",
                   f"{rows:,}", table)  # fmt: skip
    move(conn)


def migrate_in_place(
    conn: Connection,
    table: str,
    create: Callable[..., None],
    *,
    columns: Sequence[str],
    select: sql.Composable,
) -> int:
    """Move `table` from the previous layout into the partitioned one, in the caller's
    transaction; the rows moved (0 when there is nothing to move).

    `create(conn, indexes=...)` makes the partitioned table (first without its indexes,
    then, after the copy, with them); `select` gives `columns` from a row of the old table.
    """
    if layout(conn, table) != ONE_TABLE:
        return 0
    old = f"{table}_unpartitioned"
    conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(table)))
    # The old indexes are not needed for the copy (one sequential scan), and their names
    # are the ones the new table's get.
    indexes = conn.execute(
        "SELECT i.relname, x.indisprimary, con.conname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid WHERE x.indrelid = to_regclass(quote_ident(%s))",
        [table],
    ).fetchall()
    for name, _primary, constraint in indexes:
        if constraint is not None:  # the primary key (and any unique constraint) by its constraint
            conn.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(sql.Identifier(table), sql.Identifier(constraint))
            )
        else:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
    conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(table), sql.Identifier(old)))
    create(conn, indexes=False)
    cols = sql.SQL(", ").join(map(sql.Identifier, columns))
    moved = conn.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
            sql.Identifier(table), cols, select, sql.Identifier(old)
        )
    ).rowcount
    create(conn, indexes=True)
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(old)))
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
    logger.warning("moved %d rows of %s into %d partitions by user", moved, table, len(partitions_of(conn, table)))
    return moved


__all__ = [
    "ONE_TABLE", "PARTITIONED", "PARTITIONS", "create_partitioned", "layout", "migrate_in_place", "move_if_old",
    "partition_name", "partitions_of",
]  # fmt: skip
