"""Mem0's memory table: its layout, the indexes Mem0 does not make, and our queries on it.

Mem0's pgvector store keeps each memory as one row (`id` UUID, `vector`, `payload`
JSONB holding the text under `data`, the owner under `user_id`, and whatever metadata
the writer passed: our `category`, `slot`, `write_id`, `session_id`, `seq`, the lexical
form `lex` / `lex_v`, Mem0's `created_at` / `updated_at` / `hash`). Writes go through
Mem0 (`Memory.add` / `update`, so its history keeps every change); but Mem0 has no
indexed way to ask what the product asks of that table (the current fact for a slot,
a turn replayed by write id, full-text and substring recall, a plain cosine with a
user filter the planner can index, the turns next to a recalled one, what retention
may delete). Those queries are here, and only here: this module is the one place that
knows Mem0's schema (`payload->>...` appears nowhere else in `memory/`), so an upgrade
of Mem0 that moves a column or a key is one file to read.

Every query names the JSON keys literally (`payload->>'slot' = %s`), never as a
parameter: a prepared statement with the key as a parameter cannot use the expression
indexes below. Every query of a user's rows names the user by the `user_id` column, the
partition key: Postgres then reads that user's partition only (`partitions.py`).
Table names are `sql.Identifier`s.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from psycopg import Connection, sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from memory.storage import generations
from memory.storage.lookup import Hit, LexicalHits, Scope, Turn
from memory.storage.partitions import PARTITIONED, PARTITIONS, create_partitioned, migrate_in_place
from memory.storage.replicas import ReadRouter

T = TypeVar("T")

# The payload's creation time as Postgres can read it: Mem0 writes ISO times with an
# offset; a row whose `created_at` is anything else is never taken for old.
_ISO = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"
# When a row last changed: Mem0 sets `updated_at` on update only.
_NEWEST = sql.SQL("COALESCE(payload->>'updated_at', payload->>'created_at')")
# A raw turn (NORMAL) carries no category; a durable fact (GATED) does.
_RAW_TURN = sql.SQL("NOT (payload ? 'category')")
# A GATED fact that holds now: superseded values carry the day they stopped (`valid_until`).
_HOLDS_NOW = sql.SQL("NOT (payload ? 'valid_until')")
# The HNSW index's search settings, per connection (postgres.py), for Mem0's own search
# (MEMORY_RETRIEVAL_LEXICAL=off). An HNSW scan returns at most `ef_search` rows before the
# user filter is applied, so a user with 1% of the rows would get almost nothing back:
# pgvector 0.8's iterative scan keeps walking the graph until enough rows pass. The
# product's own vector stage is exact for a user of fewer than `WALK_FROM` rows and walks
# the user's partition's graph above (`nearest_and_ids`).
HNSW_SETTINGS = (("hnsw.iterative_scan", "relaxed_order"), ("hnsw.ef_search", "100"))
# From this many rows of a user the SQL vector stage walks the partition's HNSW graph
# (iterative scan) instead of scanning every row of the user: `python -m bench.fleet.vector_stage`
# (docs/latency.md) measured the exact scan at 15 ms for 1,000 rows, 98 ms for 10,000 and
# 535 ms for 50,000, the walk at 8-18, 10 and 19 ms, with recall@5 1.000 against exact at
# each size; below 1,000 rows the walk is the slower (3 ms against 1 at 100 rows) and a
# small user among many in a partition is where a filtered walk can stop short.
WALK_FROM = 2_000
_SIZE_TTL_S = 600.0  # how long a user's "walk or scan" stands before it is counted again
_OLDER_THAN = sql.SQL("payload->>'created_at' ~ {iso} AND (payload->>'created_at')::timestamptz < %s").format(
    iso=sql.Literal(_ISO)
)


Row = tuple[str, dict[str, Any]]  # (id, payload)


def entities_table(table: str) -> str:
    """The table where Mem0 keeps the entities it linked to a user's memories."""
    return f"{table}_entities"


def create_table(
    conn: Connection, table: str, dims: int, *, partitions: int = PARTITIONS, indexes: bool = True
) -> None:
    """Mem0's table, partitioned by user, and the indexes Mem0 does not make (in the
    caller's transaction). A table of the previous layout (one table, no `user_id`
    column) is left as it is: `partitions.migrate_in_place` moves it.

    Mem0's layout (`id`, `vector`, `payload`) plus a `user_id` column copied from the
    payload (Mem0's own statements are told it: `user_scoped_vectors`), the hash
    partitions' key: a user's look-up, write and forget touch one partition and its
    indexes, and the same column is what Citus distributes by (docs/scaling.md).

    Mem0's pgvector store indexes only the vector; every per-user query would then scan
    the whole table. Added: a user index, a trigram index on the memory text (substring
    recall of short and Chinese queries), a full-text index on the lexical form `lex`
    the store writes with each memory (Postgres cannot segment Chinese by itself), a
    turn index to find the turns said just before and after a recalled one, and a unique
    index that makes a replayed write fail rather than store a turn twice. Each is made
    on the partitioned table, so every partition has its own.
    """
    t = sql.Identifier(table)
    if (
        create_partitioned(
            conn,
            table,
            sql.SQL(
                "id UUID NOT NULL, vector vector({dims}), payload JSONB, user_id TEXT NOT NULL, "
                "PRIMARY KEY (user_id, id), CONSTRAINT {check} CHECK (user_id = payload->>'user_id')"
            ).format(dims=sql.Literal(dims), check=sql.Identifier(f"{table}_user_in_payload")),
            partitions,
        )
        != PARTITIONED
        or not indexes
    ):
        return
    for name, using in (
        ("hnsw", sql.SQL("USING hnsw (vector vector_cosine_ops)")),
        ("user", sql.SQL("(user_id, (payload->>'category'))")),
        # A turn replayed after a crash must not be stored twice, even when two
        # attempts race: the second insert fails and its retry finds the first.
        ("write_uidx", sql.SQL("(user_id, (payload->>'write_id')) WHERE payload ? 'write_id'")),
        ("trgm", sql.SQL("USING gin ((payload->>'data') gin_trgm_ops)")),
        # Full-text recall over the normalised, segmented form (memory/language/lexical.py).
        ("lex", sql.SQL("USING gin (to_tsvector('simple', payload->>'lex'))")),
        # The turns next to a recalled raw turn, by session and position (retrieval).
        ("turn", sql.SQL("(user_id, (payload->>'session_id'), (payload->>'seq')) WHERE payload ? 'seq'")),
        # A user's raw turns newest first, a page at a time (the operator's page of a user
        # with 10,000 turns reads 100 rows, not all of them).
        ("raw", sql.SQL("(user_id, (payload->>'created_at')) WHERE NOT (payload ? 'category')")),
    ):
        unique = sql.SQL("UNIQUE ") if name.endswith("uidx") else sql.SQL("")
        suffix = name if name.endswith("uidx") else f"{name}_idx"
        conn.execute(
            sql.SQL("CREATE {}INDEX IF NOT EXISTS {} ON {} {}").format(
                unique, sql.Identifier(f"{table}_{suffix}"), t, using
            )
        )


def migrate_table(conn: Connection, table: str, dims: int, *, partitions: int = PARTITIONS) -> int:
    """Move a Mem0 table of the previous layout (one table, the user only in the payload)
    into the partitioned one, in place, in the caller's transaction; how many rows moved
    (0 when it is partitioned already)."""
    return migrate_in_place(
        conn,
        table,
        lambda c, indexes: create_table(c, table, dims, partitions=partitions, indexes=indexes),
        columns=("id", "vector", "payload", "user_id"),
        select=sql.SQL("id, vector, payload, COALESCE(payload->>'user_id', '')"),
    )


_scope = threading.local()


@contextmanager
def for_user(user_id: str) -> Iterator[None]:
    """Mem0's statements on this thread are about `user_id`'s rows (`user_scoped_vectors`):
    Mem0 reads, updates and deletes a memory by its id alone."""
    previous = getattr(_scope, "user_id", None)
    _scope.user_id = user_id
    try:
        yield
    finally:
        _scope.user_id = previous


def user_scoped_vectors(pool: ConnectionPool, table: str, dims: int) -> Any:
    """Mem0's pgvector store with every statement of a user's row naming the user.

    Mem0 writes `(id, vector, payload)` and reads, updates and deletes by `id` alone: on
    the partitioned table its insert would lack the partition key, and a statement by id
    would probe every partition's primary key. This subclass writes `user_id` from the
    payload, and adds it to the statements by id (the payload's owner on an update, else
    the user the store named with `for_user`; a statement with neither stays by id, which
    is correct, only slower) and to searches filtered by user. Mem0 is imported here,
    when a store builds it, never when this module is."""
    from mem0.vector_stores.pgvector import OutputData, PGVector, _build_filter_conditions

    t = sql.Identifier(table)

    def owner(payload: dict[str, Any] | None = None) -> str | None:
        return (payload or {}).get("user_id") or getattr(_scope, "user_id", None)

    def by_id(vector_id: str, user: str | None) -> tuple[sql.Composable, list[Any]]:
        if user:
            return sql.SQL("user_id = %s AND id = %s"), [user, vector_id]
        return sql.SQL("id = %s"), [vector_id]

    def filtered(filters: dict[str, Any] | None) -> tuple[list[sql.Composable], list[Any]]:
        conditions, params = _build_filter_conditions(filters)
        where: list[sql.Composable] = [sql.SQL(c) for c in conditions]  # Mem0's own fragments, its parameters
        if isinstance((filters or {}).get("user_id"), str):
            where.insert(0, sql.SQL("user_id = %s"))
            params.insert(0, filters["user_id"])  # type: ignore[index]
        return where, params

    def clause(where: list[sql.Composable], word: str = "WHERE") -> sql.Composable:
        return sql.SQL(f"{word} ") + sql.SQL(" AND ").join(where) if where else sql.SQL("")

    class UserScopedPGVector(PGVector):  # type: ignore[misc, valid-type]
        def insert(self, vectors: list[list[float]], payloads: Any = None, ids: Any = None) -> None:
            rows = [
                (mem_id, vector_literal(vector), Jsonb(payload), payload.get("user_id") or "")
                for mem_id, vector, payload in zip(ids, vectors, payloads, strict=True)
            ]
            with self._get_cursor(commit=True) as cur:
                cur.executemany(
                    sql.SQL("INSERT INTO {} (id, vector, payload, user_id) VALUES (%s, %s::vector, %s, %s)").format(t),
                    rows,
                )

        def get(self, vector_id: str) -> Any:
            cond, params = by_id(vector_id, owner())
            with self._get_cursor() as cur:
                cur.execute(sql.SQL("SELECT id, payload FROM {} WHERE {}").format(t, cond), params)
                row = cur.fetchone()
            return OutputData(id=str(row[0]), score=None, payload=row[1]) if row else None

        def update(self, vector_id: str, vector: list[float] | None = None, payload: dict[str, Any] | None = None):
            cond, params = by_id(vector_id, owner(payload))
            sets, values = [], []
            if vector is not None:
                sets.append(sql.SQL("vector = %s::vector"))
                values.append(vector_literal(vector))
            if payload is not None:
                sets.append(sql.SQL("payload = %s"))
                values.append(Jsonb(payload))
            if sets:
                with self._get_cursor(commit=True) as cur:
                    cur.execute(
                        sql.SQL("UPDATE {} SET {} WHERE {}").format(t, sql.SQL(", ").join(sets), cond),
                        [*values, *params],
                    )

        def delete(self, vector_id: str) -> None:
            cond, params = by_id(vector_id, owner())
            with self._get_cursor(commit=True) as cur:
                cur.execute(sql.SQL("DELETE FROM {} WHERE {}").format(t, cond), params)

        def search(self, query: str, vectors: list[float], top_k: int | None = 5, filters: Any = None) -> list[Any]:
            where, params = filtered(filters)
            with self._get_cursor() as cur:
                cur.execute(
                    sql.SQL(
                        "SELECT id, vector <=> %s::vector AS distance, payload FROM {} {} ORDER BY distance LIMIT %s"
                    ).format(t, clause(where)),
                    [vector_literal(vectors), *params, top_k],
                )
                rows = cur.fetchall()
            return [OutputData(id=str(r[0]), score=max(0.0, 1.0 - float(r[1])), payload=r[2]) for r in rows]

        def keyword_search(self, query: str, top_k: int = 5, filters: Any = None) -> list[Any] | None:
            where, params = filtered(filters)
            lemmas = sql.SQL("to_tsvector('simple', payload->>'text_lemmatized')")
            try:
                with self._get_cursor() as cur:
                    cur.execute(
                        sql.SQL(
                            "SELECT id, ts_rank_cd({l}, plainto_tsquery('simple', %s)) AS score, payload FROM {t} "
                            "WHERE {l} @@ plainto_tsquery('simple', %s) {w} ORDER BY score DESC LIMIT %s"
                        ).format(l=lemmas, t=t, w=clause(where, "AND")),
                        [query, query, *params, top_k],
                    )
                    rows = cur.fetchall()
            except Exception:  # noqa: BLE001 - as Mem0's own: no keyword part then
                return None
            return [OutputData(id=str(r[0]), score=float(r[1]), payload=r[2]) for r in rows]

        def list(self, filters: Any = None, top_k: int | None = 100) -> list[Any]:
            where, params = filtered(filters)
            with self._get_cursor() as cur:
                cur.execute(
                    sql.SQL("SELECT id, payload FROM {} {} LIMIT %s").format(t, clause(where)), [*params, top_k]
                )
                rows = cur.fetchall()
            return [[OutputData(id=str(r[0]), score=None, payload=r[1]) for r in rows]]

    return UserScopedPGVector(
        dbname=None, collection_name=table, embedding_model_dims=dims, user=None, password=None, host=None,
        port=None, diskann=False, hnsw=True, connection_pool=pool,
    )  # fmt: skip


def stored_dims(pool: ConnectionPool, table: str) -> int | None:
    """The dimension of the table's vectors; None when the table is not made yet
    (a fresh data directory) or its column has no fixed dimension."""
    with pool.connection() as conn:
        row = conn.execute(
            # to_regclass: no row for a table not made yet;
            # quote_ident: the table's name as created, capitals kept ("Memories").
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(quote_ident(%s)) AND attname = 'vector'",
            [table],
        ).fetchone()
    return row[0] if row and row[0] > 0 else None


def vector_literal(vector: Sequence[float]) -> str:
    """A query vector in pgvector's text form."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def vector_array(value: Any) -> np.ndarray:
    """A pgvector value read in binary: raw bytes (int16 dims, int16 unused, then
    big-endian float4s), or pgvector's `Vector` where a connection has its adapters
    registered (a shared database whose owner configures them)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(value, dtype=">f4", offset=4)
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


class Mem0Table:
    """The queries the product runs on Mem0's table, over a pool shared with Mem0.

    Methods are named by what they answer. Each runs in a transaction of its own, on a
    connection of the pool, unless it is given `conn`: then it runs there, in the
    caller's transaction (a forget's statements, retention under its session lock).
    """

    def __init__(self, pool: ConnectionPool, table: str, reads: ReadRouter | None = None) -> None:
        self.pool = pool
        self.name = table
        self.reads = reads  # where a look-up reads: a replica or the primary (replicas.py)
        self._t = sql.Identifier(table)
        self._walks: dict[str, tuple[float, bool]] = {}  # user -> (when counted, has WALK_FROM rows or more)

    @contextmanager
    def _conn(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
        else:
            with self.pool.connection() as own:
                yield own

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A pooled connection in autocommit for one read: a single round trip, where a
        transaction costs three (BEGIN, the query, COMMIT), each paying the network's
        round trip to a remote database. Restored for the pool's next user."""
        with self.pool.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                if not conn.closed:
                    conn.autocommit = False

    def _lookup(self, user_id: str, run: Callable[[Connection], T]) -> T:
        """`run(conn)` for a look-up of the user's rows (the reply's reads: recall, the
        profile), in autocommit: on a read replica that has replayed the user's last
        write, else on the primary (`replicas.ReadRouter`). The write path's reads (the
        slot's current fact, a replayed write) stay on the primary (`_reading`)."""

        def autocommit(conn: Connection) -> T:
            conn.autocommit = True
            try:
                return run(conn)
            finally:
                if not conn.closed:
                    conn.autocommit = False

        if self.reads is None:
            with self.pool.connection() as conn:
                return autocommit(conn)
        return self.reads.read(user_id, autocommit)

    @staticmethod
    def _where(scope: Scope) -> tuple[sql.Composable, list[Any]]:
        """The user (and session, category) filter, with literal JSON keys so the user index applies."""
        where: list[sql.Composable] = [sql.SQL("user_id = %s")]
        params: list[Any] = [scope.user_id]
        if scope.exclude_session is not None:
            where.append(sql.SQL("payload->>'session_id' IS DISTINCT FROM %s"))
            params.append(scope.exclude_session)
        if scope.categories:
            where.append(sql.SQL("payload->>'category' = ANY(%s)"))
            params.append(list(scope.categories))
        if not scope.past:
            where.append(_HOLDS_NOW)
        return sql.SQL(" AND ").join(where), params

    # ------------------------------------------------------------ the store's look-ups
    def list_user(
        self, user_id: str, *, categories: Sequence[str] = (), limit: int = 1000, past: bool = True
    ) -> list[Row]:
        """A user's rows, newest first (indexed by user and category); `past=False`: not
        the superseded values GATED keeps searchable."""
        where, params = self._where(Scope(user_id, list(categories) or None, past=past))
        query = sql.SQL("SELECT id, payload FROM {} WHERE {} ORDER BY {} DESC LIMIT %s").format(self._t, where, _NEWEST)
        with self._reading() as conn:
            rows = conn.execute(query, [*params, limit]).fetchall()
        return [(str(r[0]), r[1]) for r in rows]

    def newest_per_category(
        self, user_id: str, categories: Sequence[str], per_category: int, slots: Sequence[str]
    ) -> list[Row]:
        """Each category's `per_category` newest rows of the user that hold now (no
        superseded value), plus any whose slot is in `slots` however old, newest first."""
        query = sql.SQL(
            "SELECT id, payload FROM (SELECT id, payload, row_number() OVER "
            "(PARTITION BY payload->>'category' ORDER BY {newest} DESC) AS n FROM {t} "
            "WHERE user_id = %s AND payload->>'category' = ANY(%s) AND {now}) ranked "
            "WHERE n <= %s OR payload->>'slot' = ANY(%s) ORDER BY {newest} DESC"
        ).format(newest=_NEWEST, t=self._t, now=_HOLDS_NOW)
        params = [user_id, list(categories), per_category, list(slots)]
        rows = self._lookup(user_id, lambda conn: conn.execute(query, params).fetchall())
        return [(str(r[0]), r[1]) for r in rows]

    def current_for_slot(self, user_id: str, slot: str) -> Row | None:
        """The user's fact that holds `slot` now (the last updated, should there be two)."""
        query = sql.SQL(
            "SELECT id, payload FROM {} WHERE user_id = %s AND payload->>'slot' = %s "
            "ORDER BY payload->>'updated_at' DESC LIMIT 1"
        ).format(self._t)
        with self._reading() as conn:
            row = conn.execute(query, [user_id, slot]).fetchone()
        return (str(row[0]), row[1]) if row else None

    def by_write_id(self, user_id: str, write_id: str) -> Row | None:
        """The user's row a write with this id stored, if any (a replay finds its first attempt)."""
        query = sql.SQL("SELECT id, payload FROM {} WHERE payload->>'write_id' = %s AND user_id = %s LIMIT 1").format(
            self._t
        )
        with self._reading() as conn:
            row = conn.execute(query, [write_id, user_id]).fetchone()
        return (str(row[0]), row[1]) if row else None

    # ------------------------------------------------------------ the lexical index
    def stale_lex(self, user_id: str, version: str, after: Any, limit: int) -> list[tuple[Any, str | None, str]]:
        """(id, text, index words beside the text) of the user's rows whose `lex` is not of
        `version`, in id order after `after`. The words beside the text are the write-time
        context and resolved dates (`memory/language/indexing.py`), kept in the payload."""
        query = sql.SQL(
            "SELECT id, payload->>'data', concat_ws(' ', payload->>'ctx', "
            "(SELECT string_agg(d, ' ') FROM jsonb_array_elements_text("
            "CASE WHEN jsonb_typeof(payload->'dates') = 'array' THEN payload->'dates' ELSE '[]' END) d)) "
            "FROM {} WHERE user_id = %s "
            "AND payload->>'lex_v' IS DISTINCT FROM %s AND id > %s ORDER BY id LIMIT %s"
        ).format(self._t)
        with self._reading() as conn:
            return conn.execute(query, [user_id, version, after, limit]).fetchall()

    def merge_payloads(self, user_id: str, updates: Sequence[tuple[dict[str, Any], Any, str]]) -> None:
        """Merge each (fields, id, text) into the user's row's payload, where the row still
        holds that text (a row rewritten meanwhile is its writer's)."""
        query = sql.SQL(
            "UPDATE {} SET payload = payload || %s WHERE user_id = %s AND id = %s AND payload->>'data' = %s"
        ).format(self._t)
        with self.pool.connection() as conn, conn.cursor() as cur:
            cur.executemany(query, [(Jsonb(fields), user_id, row_id, text) for fields, row_id, text in updates])

    def rows_after(self, user_id: str | None, after: Any, limit: int) -> list[tuple[Any, dict[str, Any]]]:
        """(id, payload) of one user's rows (None: every user's), in id order after `after`."""
        where = sql.SQL("user_id = %s AND id > %s") if user_id is not None else sql.SQL("id > %s")
        query = sql.SQL("SELECT id, payload FROM {} WHERE {} ORDER BY id LIMIT %s").format(self._t, where)
        with self._reading() as conn:
            return conn.execute(query, [*([user_id] if user_id is not None else []), after, limit]).fetchall()

    def rewrite(self, user_id: str, row_id: Any, text: str, fields: dict[str, Any], vector: Sequence[float]) -> bool:
        """Merge `fields` into the user's row and give it `vector`, where it still holds
        `text` (a row rewritten meanwhile is its writer's). Whether it did. The user's
        generation moves in the same commit: other processes' held rows are stale from it."""
        query = sql.SQL(
            "UPDATE {} SET payload = payload || %s, vector = %s::vector "
            "WHERE user_id = %s AND id = %s AND payload->>'data' = %s"
        ).format(self._t)
        with self.pool.connection() as conn:
            done = conn.execute(query, [Jsonb(fields), vector_literal(vector), user_id, row_id, text]).rowcount == 1
            if done:
                generations.bump(conn, self.name, user_id)
            return done

    def set_fields(self, user_id: str, row_id: str, fields: dict[str, Any]) -> None:
        """Merge `fields` into one of the user's rows' payload, whatever its text (an import's dates)."""
        query = sql.SQL("UPDATE {} SET payload = payload || %s WHERE user_id = %s AND id = %s").format(self._t)
        with self.pool.connection() as conn:
            conn.execute(query, [Jsonb(fields), user_id, row_id])

    # ------------------------------------------------------------ deletes
    def delete_user(self, user_id: str, conn: Connection | None = None) -> list[str]:
        """Delete every row of the user (one statement, no cap); their ids."""
        with self._conn(conn) as c:
            rows = c.execute(
                sql.SQL("DELETE FROM {} WHERE user_id = %s RETURNING id::text").format(self._t), [user_id]
            ).fetchall()
        return [r[0] for r in rows]

    def delete_user_entities(self, user_id: str, conn: Connection | None = None) -> None:
        """Delete the entities Mem0 linked to the user, where Mem0 made its entity table."""
        entities = entities_table(self.name)
        with self._conn(conn) as c:
            if c.execute("SELECT to_regclass(quote_ident(%s))", [entities]).fetchone()[0] is not None:
                c.execute(
                    sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(entities)), [user_id]
                )

    def delete_turn_writes(self, user_id: str, write_id: str) -> list[str]:
        """Delete the user's rows written by this write id or by any write of the same turn
        (`<turn>:<n>`, a turn's facts); their ids."""
        return self._delete_where(
            user_id,
            sql.SQL("payload->>'write_id' = %s OR starts_with(payload->>'write_id', %s)"),
            [write_id, write_id.split(":")[0] + ":"],
        )

    def delete_row(self, user_id: str, mem_id: str) -> list[str]:
        """Delete the user's row with this id; its id, or nothing when it was gone."""
        return self._delete_where(user_id, sql.SQL("id = %s::uuid"), [mem_id])

    def _delete_where(self, user_id: str, condition: sql.Composable, params: Sequence[Any]) -> list[str]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                sql.SQL("DELETE FROM {} WHERE user_id = %s AND ({}) RETURNING id::text").format(self._t, condition),
                [user_id, *params],
            ).fetchall()
        return [r[0] for r in rows]

    # ------------------------------------------------------------ retention
    def count_facts_older_than(self, cutoff: datetime, conn: Connection | None = None) -> int:
        """Durable facts (rows with a category) created before `cutoff`."""
        with self._conn(conn) as c:
            query = sql.SQL("SELECT count(*) FROM {} WHERE payload ? 'category' AND {}").format(self._t, _OLDER_THAN)
            return c.execute(query, [cutoff]).fetchone()[0]

    def count_raw_turns_older_than(self, cutoff: datetime, conn: Connection | None = None) -> int:
        """Raw turns (rows without a category) created before `cutoff`."""
        with self._conn(conn) as c:
            query = sql.SQL("SELECT count(*) FROM {} WHERE {} AND {}").format(self._t, _RAW_TURN, _OLDER_THAN)
            return c.execute(query, [cutoff]).fetchone()[0]

    def delete_raw_turns_older_than(self, cutoff: datetime, limit: int, conn: Connection | None = None) -> list[str]:
        """Delete at most `limit` raw turns created before `cutoff`; their ids."""
        query = sql.SQL(
            "DELETE FROM {m} WHERE (user_id, id) IN (SELECT user_id, id FROM {m} WHERE {raw} AND {old} LIMIT %s) "
            "RETURNING id::text"
        ).format(m=self._t, raw=_RAW_TURN, old=_OLDER_THAN)
        with self._conn(conn) as c:
            return [r[0] for r in c.execute(query, [cutoff, limit]).fetchall()]

    # ------------------------------------------------------------ the operator's view
    def user_counts(self, user_id: str | None = None) -> dict[str, tuple[int, int, str | None]]:
        """user -> (raw turns, facts, newest time): of one user (the user index), or of every
        user with a row. The one count of memories every page and command shows."""
        where = sql.SQL("WHERE user_id = %s") if user_id is not None else sql.SQL("")
        query = sql.SQL(
            "SELECT user_id, count(*) FILTER (WHERE NOT payload ? 'category'), "
            "count(*) FILTER (WHERE payload ? 'category'), {} FROM {} {} GROUP BY 1"
        ).format(sql.SQL("max({})").format(_NEWEST), self._t, where)
        with self._reading() as conn:
            rows = conn.execute(query, [] if user_id is None else [user_id]).fetchall()
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def user_summaries(self) -> dict[str, tuple[int, int, str | None]]:
        """user -> (raw turns, facts, newest time), for every user with a row."""
        return self.user_counts()

    def has_user(self, user_id: str) -> bool:
        """Does the user have any row (one index probe; `list_user(limit=1)` sorts them all)?"""
        query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE user_id = %s)").format(self._t)
        with self._reading() as conn:
            return bool(conn.execute(query, [user_id]).fetchone()[0])

    def count_user(self, user_id: str) -> tuple[int, int]:
        """(raw turns, facts) of one user (the user index)."""
        raw, facts, _ = self.user_counts(user_id).get(user_id, (0, 0, None))
        return raw, facts

    def user_rows_after(self, user_id: str, after: str | None, limit: int) -> list[Row]:
        """Up to `limit` of the user's rows in id order after the id `after` (None: from the
        first), without the lexical index: an export reads every row, a page at a time,
        holding no connection between pages."""
        query = sql.SQL(
            "SELECT id, payload - 'lex' - 'lex_v' FROM {} WHERE user_id = %s AND id > %s::uuid ORDER BY id LIMIT %s"
        ).format(self._t)
        with self._reading() as conn:
            rows = conn.execute(query, [user_id, after or str(uuid.UUID(int=0)), limit]).fetchall()
        return [(str(r[0]), r[1]) for r in rows]

    def user_ids(self, user_id: str) -> list[str]:
        """The ids of every row of the user (what Mem0's history file is keyed by)."""
        query = sql.SQL("SELECT id::text FROM {} WHERE user_id = %s").format(self._t)
        with self._reading() as conn:
            return [r[0] for r in conn.execute(query, [user_id]).fetchall()]

    def user_page(self, user_id: str, *, facts: bool, offset: int, limit: int) -> list[Row]:
        """One page of a user's facts (by category, newest first within one) or raw turns
        (newest first): the operator's page of a user with 10,000 memories reads 100."""
        kind = sql.SQL("payload ? 'category'") if facts else _RAW_TURN
        # Facts by category (the user index gives the categories in order); raw turns are
        # never updated, so by when they were said (the raw-turn index gives the page).
        order = (
            sql.SQL("payload->>'category', {} DESC, id").format(_NEWEST)
            if facts
            else sql.SQL("payload->>'created_at' DESC, id DESC")
        )
        query = sql.SQL(
            "SELECT id, payload - 'lex' - 'lex_v' FROM {} WHERE user_id = %s AND {} ORDER BY {} OFFSET %s LIMIT %s"
        ).format(self._t, kind, order)
        with self._reading() as conn:
            rows = conn.execute(query, [user_id, offset, limit]).fetchall()
        return [(str(r[0]), r[1]) for r in rows]

    def created_per_day(self, since: datetime, zone: str) -> list[tuple[Any, int, int]]:
        """(day in `zone`, raw turns, facts) created on each day since `since`, of the
        memories still kept (a sequential scan: for the operator's chart, not a session)."""
        query = sql.SQL(
            "SELECT ((payload->>'created_at')::timestamptz AT TIME ZONE %s)::date AS day, "
            "count(*) FILTER (WHERE NOT payload ? 'category'), count(*) FILTER (WHERE payload ? 'category') "
            "FROM {} WHERE CASE WHEN payload->>'created_at' ~ {} THEN (payload->>'created_at')::timestamptz END >= %s "
            "GROUP BY 1 ORDER BY 1"
        ).format(self._t, sql.Literal(_ISO))
        with self._reading() as conn:
            return conn.execute(query, [zone, since]).fetchall()

    # ------------------------------------------------------------ retrieval stages (lookup.LookupSource)
    def check_fresh(self, user_id: str) -> None:
        """The statements read the rows as they are: nothing to check."""

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[Hit]:
        """(id, no cosine, payload, "id") of the user's rows with these ids."""
        query = sql.SQL(
            "SELECT id::text, NULL, payload, 'id' FROM {} WHERE user_id = %s AND id = ANY(%s::uuid[])"
        ).format(self._t)
        return self._lookup(user_id, lambda conn: conn.execute(query, [user_id, list(ids)]).fetchall())

    def lexical_hits(
        self,
        scope: Scope,
        terms: Sequence[str],
        patterns: Sequence[str],
        *,
        scan: int,
        limit: int,
        substring_below: float,
    ) -> LexicalHits:
        """Both lexical stages in one round trip: what `fulltext_hits(scope, terms)` gives,
        and, only when that is fewer than `substring_below` rows, what
        `substring_hits(scope, patterns, scan, limit)` gives (a one-time filter: Postgres
        does not start the substring scan when full text found enough)."""
        where, params = self._where(scope)
        parts: list[sql.Composable] = []
        args: list[Any] = []
        if terms:
            tsquery = " | ".join("'" + t.replace("'", "''") + "'" for t in terms)
            ft = sql.SQL(
                "SELECT id::text AS id, payload->>'lex' AS lex FROM {t} WHERE {w} "
                "AND to_tsvector('simple', payload->>'lex') @@ to_tsquery('simple', %s)"
            ).format(t=self._t, w=where)
            args += [*params, tsquery]
        else:
            ft = sql.SQL("SELECT NULL::text AS id, NULL::text AS lex WHERE false")
        parts.append(sql.SQL("SELECT 'f', id, lex FROM ft"))
        if patterns:
            hits = sql.SQL(" + ").join(sql.SQL("(data ILIKE %s)::int") for _ in patterns)
            parts.append(
                sql.SQL(
                    "(SELECT 's', id, NULL FROM (SELECT id::text AS id, payload->>'data' AS data FROM {t} WHERE {w} "
                    "AND payload->>'data' ILIKE ANY(%s) AND (SELECT count(*) FROM ft) < %s LIMIT %s) m "
                    "ORDER BY {hits} DESC LIMIT %s)"
                ).format(t=self._t, w=where, hits=hits)
            )
            args += [*params, list(patterns), substring_below, scan, *patterns, limit]
        query = sql.SQL("WITH ft AS MATERIALIZED ({}) {}").format(ft, sql.SQL(" UNION ALL ").join(parts))
        rows = self._lookup(scope.user_id, lambda conn: conn.execute(query, args).fetchall())
        return [(r[1], r[2]) for r in rows if r[0] == "f"], [r[1] for r in rows if r[0] == "s"]

    def nearest_and_ids(
        self, scope: Scope, vector: Sequence[float], limit: int, ids: Sequence[str], *, neighbours: bool = False
    ) -> list[Hit]:
        """One round trip: (id, cosine, payload, "vector") of the scope's `limit` rows
        nearest to `vector`, then (id, cosine, payload, "id") of the user's rows with these
        ids; with `neighbours`, then (id, cosine, payload, "neighbour") of the user's raw
        turns said just before or after any of those (same session, position -1 or +1:
        what `turns` would fetch for them). Plain cosine: Mem0's own search folds a
        keyword pass into it.

        Exact: the distance to every row of the scope (the user index, in the user's
        partition), then the nearest. An HNSW walk filtered to one user returns the first
        rows of that user it meets, not the nearest: in a table of 1,000,000 memories a
        user of 10,000 got 0.56 of its true 5 nearest through the shared index, 0.84
        through its partition's (`python -m bench.fleet.tenant_recall`, docs/scaling.md). The
        scan costs time linear in the user's rows (a user of 1,000: p50 6 ms; of 10,000:
        p50 53 ms on 2 busy cores); the subquery fence (`OFFSET 0`) keeps the planner off
        the HNSW index.
        """
        walk = self.walks(scope.user_id, count=False)  # counted at session start, never on the reply's path
        query, args = self.nearest_statement(scope, vector, limit, ids, neighbours=neighbours, walk=walk)
        rows = self._lookup(scope.user_id, lambda conn: conn.execute(query, args).fetchall())
        if walk and sum(1 for r in rows if r[3] == "vector") < limit:
            # The walk stopped short (a pooler's connection without the iterative scan, a
            # scope that few of the rows pass): the exact scan.
            query, args = self.nearest_statement(scope, vector, limit, ids, neighbours=neighbours)
            rows = self._lookup(scope.user_id, lambda conn: conn.execute(query, args).fetchall())
        return rows

    def walks(self, user_id: str, *, count: bool = True) -> bool:
        """Does the user's vector stage walk the HNSW graph (`WALK_FROM` rows or more)? Counted
        (up to WALK_FROM, no row read) at session start (`MemoryStore.open_session_index`) and
        held `_SIZE_TTL_S`; a look-up (`count=False`) takes what is held, else the exact scan."""
        now = time.monotonic()
        held = self._walks.get(user_id)
        if held is not None and (now - held[0] < _SIZE_TTL_S or not count):
            return held[1]
        if not count:
            return False
        big = self.user_has_more_than(user_id, WALK_FROM - 1)
        if len(self._walks) > 1000:  # a process serving many users keeps only the recent ones
            self._walks = {u: v for u, v in self._walks.items() if now - v[0] < _SIZE_TTL_S}
        self._walks[user_id] = (now, big)
        return big

    def nearest_statement(
        self,
        scope: Scope,
        vector: Sequence[float],
        limit: int,
        ids: Sequence[str],
        *,
        neighbours: bool = False,
        walk: bool = False,
    ) -> tuple[sql.Composable, list[Any]]:
        """The statement `nearest_and_ids` runs, and its arguments (for EXPLAIN). `walk`: the
        nearest by the partition's HNSW graph, filtered to the scope (pgvector's iterative
        scan, `HNSW_SETTINGS`), twice `limit` taken in the walk's relaxed order and the best
        `limit` of them by exact distance; else every row of the scope (the user index) ranked."""
        where, params = self._where(scope)
        literal = vector_literal(vector)
        if walk:
            nearest = sql.SQL(
                "(SELECT id, vector, payload, 'vector' AS stage FROM (SELECT id, vector, payload FROM {t} WHERE {w} "
                " ORDER BY vector <=> %s::vector LIMIT %s) walked ORDER BY vector <=> %s::vector LIMIT %s)"
            ).format(t=self._t, w=where)
            near_args: list[Any] = [*params, literal, 2 * limit, literal, limit]
        else:
            nearest = sql.SQL(
                "(SELECT id, vector, payload, 'vector' AS stage FROM (SELECT id, vector, payload FROM {t} WHERE {w} "
                " OFFSET 0) mine ORDER BY vector <=> %s::vector LIMIT %s)"
            ).format(t=self._t, w=where)
            near_args = [*params, literal, limit]
        query = sql.SQL(
            "WITH c AS MATERIALIZED ({nearest} "
            "UNION ALL (SELECT id, vector, payload, 'id' FROM {t} WHERE user_id = %s AND id = ANY(%s::uuid[]))) "
            "SELECT id::text, 1 - (vector <=> %s::vector), payload, stage FROM c"
        ).format(nearest=nearest, t=self._t)
        args: list[Any] = [*near_args, scope.user_id, list(ids), literal]
        if neighbours:
            query = sql.SQL("{} UNION ALL {}").format(query, self._neighbours_of_c())
            args += [literal, scope.user_id]
        return query, args

    def candidates(
        self,
        scope: Scope,
        vector: Sequence[float],
        terms: Sequence[str],
        patterns: Sequence[str],
        *,
        limit: int,
        scan: int,
        substring_below: float,
        neighbours: bool = False,
    ) -> list[Hit]:
        """A look-up's every stage in ONE statement, one round trip, after the query's
        embedding: what `lexical_hits` and then `nearest_and_ids` give, without the trip
        between them.

        Rows (id, cosine, payload, stage), stage one of: "vector" (the scope's `limit`
        nearest, exact: `nearest_and_ids`), "fulltext" and "substring" (the lexical hits, with their cosine:
        an id both stages found comes once per stage), "neighbour" (the user's raw turns
        said just before or after any of those). The full-text hits past `limit` are cut
        here as `lookup.rank_fulltext` cuts them: by the summed rarity, among the hits, of
        the terms each holds (ln(1 + n / df) per term), ties by id. The substring stage
        runs only when full text found fewer than `substring_below` rows. Every part names
        the user in its WHERE (one partition of a table partitioned by user)."""
        where, params = self._where(scope)
        literal = vector_literal(vector)
        wanted = list(dict.fromkeys(terms))
        if wanted:
            tsquery = " | ".join("'" + t.replace("'", "''") + "'" for t in wanted)
            ft = sql.SQL(
                "SELECT id, string_to_array(payload->>'lex', ' ') AS toks FROM {t} WHERE {w} "
                "AND to_tsvector('simple', payload->>'lex') @@ to_tsquery('simple', %s)"
            ).format(t=self._t, w=where)
            ft_args: list[Any] = [*params, tsquery]
        else:
            ft, ft_args = sql.SQL("SELECT NULL::uuid AS id, NULL::text[] AS toks WHERE false"), []
        if patterns:
            hits = sql.SQL(" + ").join(sql.SQL("(data ILIKE %s)::int") for _ in patterns)
            sub = sql.SQL(
                "SELECT id FROM (SELECT id, payload->>'data' AS data FROM {t} WHERE {w} "
                "AND payload->>'data' ILIKE ANY(%s) AND (SELECT n FROM n) < %s LIMIT %s) m "
                "ORDER BY {hits} DESC LIMIT %s"
            ).format(t=self._t, w=where, hits=hits)
            sub_args: list[Any] = [*params, list(patterns), substring_below, scan, *patterns, limit]
        else:
            sub, sub_args = sql.SQL("SELECT NULL::uuid AS id WHERE false"), []
        query = sql.SQL(
            "WITH ft AS MATERIALIZED ({ft}), n AS (SELECT count(*) AS n FROM ft), "
            "held AS (SELECT ft.id, x.term FROM ft, unnest(%s::text[]) AS x(term) WHERE x.term = ANY(ft.toks)), "
            "df AS (SELECT term, count(*) AS df FROM held GROUP BY term), "
            "ftk AS MATERIALIZED (SELECT ft.id FROM ft LEFT JOIN (held JOIN df USING (term)) ON held.id = ft.id, n "
            " GROUP BY ft.id ORDER BY coalesce(sum(ln(1 + n.n::float8 / df.df)), 0) DESC, ft.id::text LIMIT %s), "
            "sub AS MATERIALIZED ({sub}), "
            "c AS MATERIALIZED ("
            "(SELECT id, vector, payload, 'vector' AS stage FROM (SELECT id, vector, payload FROM {t} WHERE {w} "
            " OFFSET 0) mine ORDER BY vector <=> %s::vector LIMIT %s) "
            "UNION ALL (SELECT m.id, m.vector, m.payload, l.stage FROM {t} m JOIN "
            " (SELECT id, 'fulltext' AS stage FROM ftk UNION ALL SELECT id, 'substring' FROM sub) l ON l.id = m.id "
            " WHERE m.user_id = %s)) "
            "SELECT id::text, 1 - (vector <=> %s::vector), payload, stage FROM c"
        ).format(ft=ft, sub=sub, t=self._t, w=where)
        args: list[Any] = [*ft_args, wanted, limit, *sub_args, *params, literal, limit, scope.user_id, literal]
        if neighbours:
            query = sql.SQL("{} UNION ALL {}").format(query, self._neighbours_of_c())
            args += [literal, scope.user_id]
        return self._lookup(scope.user_id, lambda conn: conn.execute(query, args).fetchall())

    def _neighbours_of_c(self) -> sql.Composable:
        """The user's raw turns said just before or after a row of `c` (same session,
        position -1 or +1), as (id, cosine, payload, "neighbour")."""
        return sql.SQL(
            "SELECT n.id::text, 1 - (n.vector <=> %s::vector), n.payload, 'neighbour' FROM {t} n "
            "WHERE n.user_id = %s AND n.payload ? 'seq' "
            "AND (n.payload->>'session_id', n.payload->>'seq') IN ("
            "SELECT c.payload->>'session_id', ((c.payload->>'seq')::bigint + d.step)::text "
            "FROM c, (VALUES (-1), (1)) AS d(step) "
            "WHERE c.payload ? 'seq' AND c.payload->>'seq' ~ '^-?[0-9]{{1,18}}$')"
        ).format(t=self._t)

    def turns(
        self, user_id: str, sessions: Sequence[str], seqs: Sequence[str], vector: Sequence[float] | None
    ) -> list[Turn]:
        """(id, cosine to `vector` or None, payload) of the user's raw turns in these sessions
        at these positions (any pairing of the two: the caller keeps the pairs it wants)."""
        cos = sql.SQL("1 - (vector <=> %s::vector)") if vector is not None else sql.SQL("NULL")
        query = sql.SQL(
            "SELECT id::text, {cos}, payload FROM {t} WHERE user_id = %s "
            "AND payload->>'session_id' = ANY(%s) AND payload->>'seq' = ANY(%s) AND payload ? 'seq'"
        ).format(cos=cos, t=self._t)
        params: list[Any] = [vector_literal(vector)] if vector is not None else []
        params += [user_id, list(sessions), list(seqs)]
        return self._lookup(user_id, lambda conn: conn.execute(query, params).fetchall())

    def user_has_more_than(self, user_id: str, n: int) -> bool:
        """Does the user have more than `n` rows? Counted up to n + 1 only, reading no
        vector (50,000 memories: 0.1 s, where reading 20,001 vectors took 1-4 s)."""
        query = sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} WHERE user_id = %s LIMIT %s) s").format(self._t)
        return self._lookup(user_id, lambda conn: conn.execute(query, [user_id, n + 1]).fetchone()[0]) > n

    def user_snapshot(self, user_id: str, ids: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
        """The user's rows (or those with these ids) as a session's in-process index holds
        them (the fields of `snapshot.Row`, in order): id, row version, vector (read in binary), the payload
        as JSON text, and the payload's fields the look-up's stages filter and match on,
        extracted here by the same `->>` and `?` the statements use. The row version is
        `xmin`, which every insert and update changes (a replica has the primary's)."""
        only = sql.SQL(" AND id = ANY(%s::uuid[])") if ids is not None else sql.SQL("")
        query = sql.SQL(
            "SELECT id::text, xmin::text, vector, payload::text, payload->>'user_id', payload->>'data', "
            "payload->>'lex', payload->>'session_id', payload->>'category', payload ? 'valid_until', "
            "CASE WHEN payload ? 'seq' THEN payload->>'seq' END FROM {} WHERE user_id = %s{}"
        ).format(self._t, only)
        args: list[Any] = [user_id] + ([list(ids)] if ids is not None else [])

        def read(conn: Connection) -> list[Any]:
            with conn.cursor(binary=True) as cur:
                return cur.execute(query, args).fetchall()

        rows = self._lookup(user_id, read)
        return [(r[0], r[1], None if r[2] is None else vector_array(r[2]), *r[3:]) for r in rows]

    def user_versions(self, user_id: str) -> dict[str, str]:
        """id -> row version (`xmin`) of each of the user's rows: what changed since a
        snapshot, in one small statement (no vector, no payload)."""
        query = sql.SQL("SELECT id::text, xmin::text FROM {} WHERE user_id = %s").format(self._t)
        return dict(self._lookup(user_id, lambda conn: conn.execute(query, [user_id]).fetchall()))

    def user_vectors(self, user_id: str, limit: int) -> list[tuple[str, np.ndarray]]:
        """(id, vector) of up to `limit` of the user's rows, read in binary."""
        # In id order: the same rows give the same densities, whatever order the heap returns.
        query = sql.SQL("SELECT id::text, vector FROM {} WHERE user_id = %s ORDER BY id LIMIT %s").format(self._t)

        def read(conn: Connection) -> list[Any]:
            with conn.cursor(binary=True) as cur:
                return cur.execute(query, [user_id, limit]).fetchall()

        return [(mem_id, vector_array(v)) for mem_id, v in self._lookup(user_id, read)]


__all__ = [
    "HNSW_SETTINGS", "Mem0Table", "Row", "create_table", "entities_table", "for_user", "migrate_table",
    "stored_dims", "user_scoped_vectors", "vector_array", "vector_literal",
]  # fmt: skip
