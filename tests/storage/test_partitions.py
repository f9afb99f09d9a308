"""Mem0's table hashed into partitions by user: each statement on a user's rows names the
user and reads one partition; a store written by the previous version is moved in place."""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

import memory.storage.postgres as postgres
from memory.language.lexical import lex_fields
from memory.retrieval.retriever import Retriever
from memory.settings import ConfigError, load_settings
from memory.storage.archive import archive_for
from memory.storage.partitions import PARTITIONS, partitions_of
from memory.storage.store import MemoryStore, check_store

# The previous version's table, as its schema code made it (memory/storage/mem0_table.py
# before partitions): Mem0's layout, the user only in the payload, the same index names.
PREVIOUS_LAYOUT = [
    "CREATE TABLE memories (id UUID PRIMARY KEY, vector vector(384), payload JSONB)",
    "CREATE INDEX memories_hnsw_idx ON memories USING hnsw (vector vector_cosine_ops)",
    "CREATE INDEX memories_user_idx ON memories ((payload->>'user_id'), (payload->>'category'))",
    "CREATE UNIQUE INDEX memories_write_uidx ON memories ((payload->>'user_id'), (payload->>'write_id')) "
    "WHERE payload ? 'write_id'",
    "CREATE INDEX memories_trgm_idx ON memories USING gin ((payload->>'data') gin_trgm_ops)",
    "CREATE INDEX memories_lex_idx ON memories USING gin (to_tsvector('simple', payload->>'lex'))",
    "CREATE INDEX memories_turn_idx ON memories ((payload->>'user_id'), (payload->>'session_id'), "
    "(payload->>'seq')) WHERE payload ? 'seq'",
    "CREATE INDEX memories_raw_idx ON memories ((payload->>'user_id'), (payload->>'created_at')) "
    "WHERE NOT (payload ? 'category')",
    "CREATE TABLE memories_forgets (user_id TEXT PRIMARY KEY, forgotten_at TIMESTAMPTZ NOT NULL, "
    "memory_ids TEXT[] NOT NULL DEFAULT '{}')",
    # The conversation archive (memory/storage/archive_schema.py before partitions).
    "CREATE TABLE conversation_embeddings (id TEXT PRIMARY KEY, chat_id TEXT NOT NULL, user_id TEXT NOT NULL, "
    "content TEXT NOT NULL, embedding vector(384) NOT NULL, message_type TEXT NOT NULL CHECK (message_type IN "
    "('user', 'assistant', 'summary')), created_at TIMESTAMPTZ NOT NULL DEFAULT now(), covered_by TEXT, "
    "metadata JSONB NOT NULL DEFAULT '{}'::jsonb)",
    "CREATE INDEX conversation_embeddings_user_idx ON conversation_embeddings (user_id, created_at)",
    "CREATE INDEX conversation_embeddings_cover_idx ON conversation_embeddings (user_id) "
    "INCLUDE (id, chat_id, message_type, embedding)",
]
INDEXES = {"memories_hnsw_idx", "memories_user_idx", "memories_write_uidx", "memories_trgm_idx", "memories_lex_idx",
           "memories_turn_idx", "memories_raw_idx", "memories_pkey"}  # fmt: skip
_TABLE = re.compile(r'(?<![\w"])"?memories"?(?![\w"])')  # the memory table itself, not memories_forgets


@contextmanager
def database(server_url: str) -> Iterator[str]:
    """A database of its own on the embedded server, dropped after."""
    name = f"mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(server_url)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def write_as_the_previous_version(url: str, rows: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """The previous version's table, written as it wrote: Mem0's own insert of
    (id, vector, payload), the user only in the payload. Returns id -> payload."""
    rng = np.random.default_rng(7)
    written = {}
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for ddl in PREVIOUS_LAYOUT:
            conn.execute(ddl)
        for user, text, extra in rows:
            vector = rng.standard_normal(384)
            payload = {"data": text, "user_id": user, "created_at": "2026-11-01T10:00:00+00:00", **lex_fields(text),
                       **extra}  # fmt: skip
            mem_id = str(uuid.uuid4())
            conn.execute(
                "INSERT INTO memories (id, vector, payload) VALUES (%s, %s, %s)",
                [mem_id, "[" + ",".join(f"{x:.6f}" for x in vector / np.linalg.norm(vector)) + "]",
                 Jsonb(payload)],
            )  # fmt: skip
            written[mem_id] = payload
        conn.execute(
            "INSERT INTO conversation_embeddings (id, chat_id, user_id, content, embedding, message_type) "
            "VALUES ('m1', 'chat-1', 'ana', 'We talked about Lisbon', %s, 'user')",
            ["[" + ",".join(["0.05"] * 384) + "]"],
        )
        conn.commit()
    return written


def test_a_store_written_by_the_previous_version_is_moved_into_partitions_in_place(
    embedded_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        ("ana", "My sister Anna lives in Lisbon", {"session_id": "s1", "seq": 0}),
        ("ana", "User's sister is Anna", {"category": "relationships", "slot": "sister", "write_id": "t1:0"}),
        ("ben", "I play the violin on Sundays", {"session_id": "s2", "seq": 0}),
        *[(f"user-{n}", f"Filler memory number {n}", {}) for n in range(9)],
    ]
    with database(embedded_server_url) as url:
        written = write_as_the_previous_version(url, rows)
        data = tempfile.mkdtemp(prefix="memory-tests-partitions-")
        settings = load_settings({"MEMORY_DATA_DIR": data, "MEMORY_DATABASE_URL": url}, dotenv=False)
        try:
            # More rows than a job process may move (its prewarm has 10 s): it refuses, naming why.
            monkeypatch.setattr(postgres, "AUTO_MIGRATE_ROWS", 11)
            with pytest.raises(ConfigError, match="previous layout, with more than 11 rows"):
                MemoryStore.open(settings)
            # The worker's start-up check, which nothing times out, moves it.
            assert check_store(settings).problems == []
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT relkind FROM pg_class WHERE relname = 'memories'").fetchone() == ("p",)
                assert len(partitions_of(conn, "memories")) == PARTITIONS
                names = {r[0] for r in conn.execute(
                    "SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                    "WHERE x.indrelid = 'memories'::regclass").fetchall()}  # fmt: skip
                assert names == INDEXES
                moved = {str(r[0]): (r[1], r[2]) for r in conn.execute("SELECT id, user_id, payload FROM memories")}
                assert conn.execute("SELECT to_regclass('memories_unpartitioned')").fetchone() == (None,)
                # The archive too: partitioned, its row kept.
                assert len(partitions_of(conn, "conversation_embeddings")) == PARTITIONS
                assert conn.execute("SELECT user_id, content FROM conversation_embeddings").fetchall() == [
                    ("ana", "We talked about Lisbon")
                ]
            assert moved == {mem_id: (payload["user_id"], payload) for mem_id, payload in written.items()}
            store = MemoryStore.open(settings)
            try:
                # What the previous version wrote is recalled, superseded, replayed and forgotten as before.
                found = Retriever(store, settings).retrieve("ana", "Where does my sister live?")
                assert "My sister Anna lives in Lisbon" in [m.text for m in found]
                assert store.upsert_fact("ana", "User's sister is Maria", category="relationships",
                                         slot="sister").event == "UPDATE"  # fmt: skip
                assert store.upsert_fact("ana", "User's sister is Anna", category="relationships", slot="sister",
                                         write_id="t1:0").event == "NOOP"  # fmt: skip
                assert sorted(m.text for m in store.list_user("ana", past=False)) == [
                    "My sister Anna lives in Lisbon", "User's sister is Maria"
                ]  # fmt: skip
                assert [m["content"] for m in archive_for(store).messages("ana")] == ["We talked about Lisbon"]
                assert store.delete_user("ben") == 1
                assert store.list_user("ben") == [] and len(store.list_user("user-3")) == 1
            finally:
                store.close()
        finally:
            shutil.rmtree(data, ignore_errors=True)


def test_every_statement_on_a_users_rows_names_the_user_and_reads_one_partition(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mem0's own statements included (its insert, and its read and update of a superseded
    # fact by id): a statement by id alone would probe every partition.
    seen: list[tuple[Any, Any]] = []
    real_execute, real_many = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def execute(self, query, params=None, **kwargs):
        seen.append((query, params))
        return real_execute(self, query, params, **kwargs)

    def executemany(self, query, params_seq, **kwargs):
        params_seq = list(params_seq)
        seen.extend((query, params) for params in params_seq)
        return real_many(self, query, params_seq, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", executemany)
    store.add_raw(user_id, "My sister Anna lives in Lisbon", metadata={"session_id": "s1", "seq": 0}, write_id="t1")
    store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister")
    store.upsert_fact(user_id, "User's sister is Maria", category="relationships", slot="sister")
    Retriever(store, store.settings).retrieve(user_id, "Where does my sister live?")
    Retriever(store, store.settings.tuned(one_trip=True)).retrieve(user_id, "Where does my sister live?")
    store.lookup.user_vectors(user_id, 100)
    store.newest_per_category(user_id, ["relationships"], 5)
    store.reindex_lex(user_id)
    store.delete_user(user_id)
    monkeypatch.undo()
    with store.pool.connection() as conn:
        on_table = [(_text(q, conn), p) for q, p in seen if _TABLE.search(_text(q, conn))]
        assert len(on_table) >= 10, on_table
        for text, params in on_table:
            assert "user_id" in text, text
            if text.lstrip().upper().startswith("INSERT"):
                continue  # routed by its user_id value, row by row
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {text}".encode(), params).fetchall())
            assert len(set(re.findall(r"memories_p\d\d", plan))) == 1, (text, plan)


def _text(query: Any, conn: psycopg.Connection) -> str:
    if isinstance(query, sql.Composable):
        return query.as_string(conn)
    return query.decode() if isinstance(query, bytes) else str(query)
