"""The archive's table, indexes and search function, made next to Mem0's table.

`match_conversations(query_embedding, match_count, filter)` is what the product calls.
`filter` must name a `user_id` (the function refuses to search across users) and may
name a `chat_id`, `exclude_chat_id`, `message_types` and `min_similarity`.

The search is exact over the user's rows (a btree on `user_id` picks them, a
MATERIALIZED CTE keeps the planner from walking the HNSW index instead): a user has
thousands of messages at most, which take a few milliseconds to score, and an HNSW
walk with a filter this selective (one user in thousands) either returns too few rows
(`ef_search` candidates, then the filter) or, with pgvector's iterative scans, visits
much of the graph (bench/retrieval/archive.py measures both). The HNSW index is there for
searches without a user filter (an operator's analysis), never the product's.
"""

from __future__ import annotations

from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

from memory.storage.partitions import PARTITIONED, create_partitioned, migrate_in_place, move_if_old

MESSAGE_TYPES: tuple[str, ...] = ("user", "assistant", "summary")
COVERING_MAX_BYTES = 2600  # a btree entry's limit is 2704 bytes with 8 kB pages


def archive_table(collection: str) -> str:
    """`conversation_embeddings` beside the default collection; a collection of another
    name (another embedder, another dimension) gets an archive of its own."""
    return "conversation_embeddings" if collection == "memories" else f"{collection}_conversation_embeddings"


def match_function(collection: str) -> str:
    return "match_conversations" if collection == "memories" else f"{collection}_match_conversations"


ARCHIVE_COLUMNS = ("id", "chat_id", "user_id", "content", "embedding", "message_type", "created_at", "covered_by",
                   "metadata")  # fmt: skip


def create_archive_table(conn: Connection, table: str, dims: int, *, indexes: bool = True) -> None:
    """The archive's table, hashed into partitions by `user_id` (as Mem0's table:
    docs/scaling.md, "Partitions by user"), and its indexes on every partition; a table
    of the previous layout is left as it is (`partitions.migrate_in_place` moves it)."""
    t = sql.Identifier(table)
    columns = sql.SQL(
        """id           TEXT NOT NULL,
           chat_id      TEXT NOT NULL,
           user_id      TEXT NOT NULL,
           content      TEXT NOT NULL,
           embedding    vector({dims}) NOT NULL,
           message_type TEXT NOT NULL CHECK (message_type IN ('user', 'assistant', 'summary')),
           created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
           covered_by   TEXT,
           metadata     JSONB NOT NULL DEFAULT '{{}}'::jsonb,
           PRIMARY KEY (user_id, id)"""
    ).format(dims=sql.Literal(dims))
    if create_partitioned(conn, table, columns) != PARTITIONED or not indexes:
        return
    # A user's vectors side by side in one btree (an index-only scan reads them from a
    # few hundred adjacent pages, not one heap page per message: bench/retrieval/archive.py). A
    # btree entry holds at most ~2.7 kB: 384-d vectors (1.5 kB) fit, 1536-d ones do not.
    covering = (
        [("cover", sql.SQL("(user_id) INCLUDE (id, chat_id, message_type, embedding)"))]
        if dims * 4 + 200 <= COVERING_MAX_BYTES
        else []
    )
    for name, using in (
        ("hnsw", sql.SQL("USING hnsw (embedding vector_cosine_ops)")),
        ("user", sql.SQL("(user_id, created_at)")),
        ("chat", sql.SQL("(chat_id, created_at)")),
        # Retention walks old user/assistant messages only: summaries are kept.
        ("age", sql.SQL("(created_at) WHERE message_type <> 'summary'")),
        *covering,
    ):
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} {}").format(sql.Identifier(f"{table}_{name}_idx"), t, using)
        )


def ensure_archive_schema(
    pool: ConnectionPool, collection: str, dims: int, default_min_similarity: float, *, migrate_any_size: bool = False
) -> None:
    """Create the table, its indexes and the search function (idempotent, one process at
    a time: job processes start together). A table of the previous layout is moved into
    partitions first, as Mem0's table is (`postgres.ensure_schema`)."""
    from memory.storage.postgres import AUTO_MIGRATE_ROWS

    table = archive_table(collection)
    columns = sql.SQL(", ").join(map(sql.Identifier, ARCHIVE_COLUMNS))

    def move(conn: Connection) -> int:
        return migrate_in_place(
            conn, table, lambda c, indexes: create_archive_table(c, table, dims, indexes=indexes),
            columns=ARCHIVE_COLUMNS, select=columns,
        )  # fmt: skip

    with pool.connection() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-archive-schema', 0))")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        move_if_old(conn, table, None if migrate_any_size else AUTO_MIGRATE_ROWS, move)
        create_archive_table(conn, table, dims)
        # When fleet-wide upkeep (retention) last ran: one run per period, whoever runs it.
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memory_maintenance (name TEXT PRIMARY KEY, ran_at TIMESTAMPTZ NOT NULL)"
        )
        conn.execute(
            sql.SQL(
                """CREATE OR REPLACE FUNCTION {fn}(query_embedding vector({dims}), match_count integer, filter jsonb)
                RETURNS TABLE (id text, chat_id text, content text, message_type text,
                               similarity double precision, created_at timestamptz)
                LANGUAGE plpgsql STABLE AS $fn$
                DECLARE
                    uid   text := filter->>'user_id';
                    types text[] := ARRAY['user', 'assistant', 'summary'];
                    min_sim double precision := COALESCE((filter->>'min_similarity')::double precision, {default});
                    cond  text := 'c.user_id = $1 AND c.message_type = ANY($2)';
                BEGIN
                    IF uid IS NULL OR uid = '' THEN
                        RAISE EXCEPTION 'match_conversations: filter must name a user_id (never across users)'
                            USING ERRCODE = '22023';
                    END IF;
                    IF filter ? 'message_types' THEN
                        types := ARRAY(SELECT jsonb_array_elements_text(filter->'message_types'));
                    END IF;
                    IF filter ? 'chat_id' THEN cond := cond || ' AND c.chat_id = $3'; END IF;
                    IF filter ? 'exclude_chat_id' THEN cond := cond || ' AND c.chat_id <> $4'; END IF;
                    -- Planned per call with its values (EXECUTE): the user's rows from the btree
                    -- (index-only where the covering index exists), scored exactly in the
                    -- MATERIALIZED CTE; the heap is read for the best few only.
                    RETURN QUERY EXECUTE format(
                        'WITH mine AS MATERIALIZED (SELECT c.id, 1 - (c.embedding <=> $5) AS similarity '
                        'FROM %I c WHERE %s), top AS (SELECT m.id, m.similarity FROM mine m '
                        'WHERE m.similarity >= $6 ORDER BY m.similarity DESC LIMIT $7) '
                        'SELECT c.id, c.chat_id, c.content, c.message_type, top.similarity, c.created_at '
                        'FROM top JOIN %I c ON c.user_id = $1 AND c.id = top.id '
                        'ORDER BY top.similarity DESC, c.created_at DESC',
                        {table}, cond, {table})
                    USING uid, types, filter->>'chat_id', filter->>'exclude_chat_id', query_embedding, min_sim,
                          GREATEST(match_count, 0);
                END
                $fn$"""
            ).format(
                fn=sql.Identifier(match_function(collection)),
                dims=sql.Literal(dims),
                default=sql.Literal(float(default_min_similarity)),
                table=sql.Literal(table),
            )
        )
        conn.commit()
