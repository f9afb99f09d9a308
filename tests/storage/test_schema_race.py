"""Job processes that start together on a fresh database all get their store."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory.storage.store import MemoryStore
from tests.storage.schema_at_once import create_schema_at_once


def test_processes_creating_the_schema_at_once_all_succeed(store: MemoryStore) -> None:
    # LiveKit starts a worker's idle job processes together; on a fresh database each
    # ran CREATE EXTENSION ... IF NOT EXISTS at the same moment, and all but one could
    # fail with a unique violation in pg_extension.
    name = f"race_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(store.url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(**{**conninfo_to_dict(store.url), "dbname": name})
    try:
        for _ in range(3):  # three fresh starts: the race needs no luck to show
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS memories_race, memories_race_forgets")
                conn.execute("DROP EXTENSION IF EXISTS pg_trgm CASCADE")
                conn.execute("DROP EXTENSION IF EXISTS vector CASCADE")
            assert create_schema_at_once(url, "memories_race") == []
    finally:
        with psycopg.connect(store.url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
