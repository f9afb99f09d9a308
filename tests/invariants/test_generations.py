"""Per-user change counters (memory/storage/generations.py), as invariants on the real
database, each test in a table of its own made here (so a schema statement that makes
another table is seen): a user never bumped is at 0, each bump adds 1 and only to its
user, a bump inside a transaction that rolls back never happened, `bump_now` commits on its
own, and the row's key is a digest of the id (no identity in the table), the same in every
process of every version (a fleet mid-upgrade reads the keys the other version wrote)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from psycopg import sql

from memory.storage import generations
from memory.storage.store import MemoryStore


@pytest.fixture
def table(store: MemoryStore) -> Iterator[str]:
    name = f"gen_inv_{uuid.uuid4().hex[:10]}"
    with store.pool.connection() as conn:
        generations.ensure_generations_schema(conn, name)
        generations.ensure_generations_schema(conn, name)  # again at the next start: no error
    yield name
    with store.pool.connection() as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(f"{name}_generations")))


def test_the_table_and_the_key_as_documented() -> None:
    assert generations.generations_table("memories") == "memories_generations"
    # sha256 of the UTF-8 id, its first 32 hex digits (the values a running fleet has stored)
    assert generations.user_key("alice") == "2bd806c97f0e00af1a1fc3328fa763a9"
    assert generations.user_key("zoë") == "2752b88686847fa5c86f47b94ce652b7"


def test_each_bump_adds_one_to_its_user_only(store: MemoryStore, table: str) -> None:
    assert generations.current(store.pool, table, "alice") == 0
    with store.pool.connection() as conn:
        generations.bump(conn, table, "alice")
    assert generations.current(store.pool, table, "alice") == 1
    with store.pool.connection() as conn:
        generations.bump(conn, table, "alice")
        generations.bump(conn, table, "alice")
    assert generations.current(store.pool, table, "alice") == 3
    assert generations.current(store.pool, table, "bob") == 0
    generations.bump_now(store.pool, table, "bob")
    assert (generations.current(store.pool, table, "alice"), generations.current(store.pool, table, "bob")) == (3, 1)


def test_the_table_holds_digests_not_identities(store: MemoryStore, table: str) -> None:
    generations.bump_now(store.pool, table, "alice")
    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL("SELECT user_key, generation FROM {}").format(sql.Identifier(f"{table}_generations"))
        ).fetchall()
    assert rows == [("2bd806c97f0e00af1a1fc3328fa763a9", 1)]


def test_a_bump_commits_with_its_transaction_and_bump_now_on_its_own(store: MemoryStore, table: str) -> None:
    with store.pool.connection() as conn:
        generations.bump(conn, table, "alice")
        conn.rollback()  # the change it came with did not commit: neither did the bump
    assert generations.current(store.pool, table, "alice") == 0
    with store.pool.connection() as conn:  # bump_now's own connection commits before it returns
        generations.bump_now(store.pool, table, "alice")
        assert conn.execute(
            sql.SQL("SELECT generation FROM {} WHERE user_key = %s").format(sql.Identifier(f"{table}_generations")),
            ["2bd806c97f0e00af1a1fc3328fa763a9"],
        ).fetchone() == (1,)
