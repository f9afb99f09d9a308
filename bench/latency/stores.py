"""The latency benchmark's store and turns: the preloaded table (real evaluation texts, the
bench user's among other users'), the spoken fixtures, and the route to the database."""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import harness as harness_mod
from bench.common.evaldata import EvalDataError, eval_file
from harness import Utterance
from memory.settings import DURABLE_CATEGORIES, MemorySettings
from memory.storage import embedder as embedder_mod
from memory.storage.store import MemoryStore

BENCH_USER = "bench-user"


# ------------------------------------------------------------------ preload
def _eval_file(name: str) -> Path:
    """An eval file the workload is made of; without it the benchmark would silently
    measure another workload (synthetic notes, no memory questions)."""
    try:
        return eval_file(name)
    except EvalDataError as exc:
        raise SystemExit(f"bench.latency.run: {exc}") from None


def memory_texts(limit: int) -> list[str]:
    """Real memory texts from the public eval files (English and Chinese), de-duplicated."""
    texts: list[str] = []
    seen: set[str] = set()
    for name in ("memdaily.dev.json", "locomo.dev.json", "madial_zh.dev.json", "madial_en.dev.json"):
        data = json.loads(_eval_file(name).read_text(encoding="utf-8"))
        for st in data["stores"]:
            for mem in st["memories"]:
                text = mem["text"].strip()
                if text and text not in seen and len(text) < 600:
                    seen.add(text)
                    texts.append(text)
    i = 0
    while len(texts) < limit:  # top up with varied synthetic notes if the files are short
        texts.append(f"Note {i}: the user mentioned plan number {i} for project {i % 97}.")
        i += 1
    random.Random(7).shuffle(texts)
    return texts[:limit]


def preload(store: MemoryStore, user_memories: int, total: int) -> None:
    """Bulk-load the table once (COPY with real embeddings; reused on the next run).

    The user's memories are real eval texts embedded by the local model. Other
    users' rows reuse those texts and vectors, so the index and the table have
    realistic size without embedding 100,000 texts on every machine.
    """
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg.types.json import Jsonb

    table = sql.Identifier(store.table)
    forget_sessions(store)
    count, mine = store_size(store)
    if count == total and mine == user_memories:
        print(f"preload: reusing {count} rows ({mine} for {BENCH_USER})", flush=True)
        # Rows preloaded by an older lexical index are rewritten now, not by the first
        # scenario's session start while its turns are being timed.
        if redone := store.reindex_lex(BENCH_USER, pause_s=0.0):
            print(f"preload: re-indexed {redone} rows for full-text recall", flush=True)
        return
    try:
        from memory.language.lexical import lex_fields
    except ImportError:  # lexical stage not installed: Mem0's fields only

        def lex_fields(text: str) -> dict[str, str]:
            return {}

    texts = memory_texts(user_memories)
    t0 = time.perf_counter()
    model = embedder_mod.local_model()
    vectors = []
    for i in range(0, len(texts), 64):
        vectors.extend(model.passage(texts[i : i + 64]))
        print(f"\rpreload: embedded {min(i + 64, len(texts))}/{len(texts)}", end="", flush=True)
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    rng = random.Random(11)
    now = "2026-01-01T00:00:00+00:00"
    # A connection of its own: pgvector's adapters, registered for the COPY, would
    # otherwise stay on a pooled connection and change what later reads get back.
    with psycopg.connect(store.url) as conn:
        register_vector(conn)
        conn.execute(sql.SQL("TRUNCATE {}").format(table))
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(f"{store.table}_hnsw_idx")))
        with conn.cursor().copy(
            sql.SQL("COPY {} (id, vector, payload, user_id) FROM STDIN WITH (FORMAT BINARY)").format(table)
        ) as copy:
            copy.set_types(["uuid", "vector", "jsonb", "text"])
            for n in range(total):
                if n < user_memories:
                    user, k = BENCH_USER, n
                else:
                    user, k = f"other-{n % 90}", rng.randrange(len(texts))
                payload = {
                    "data": texts[k],
                    "user_id": user,
                    "role": "user",
                    "hash": "",
                    "created_at": now,
                    "updated_at": now,
                    **lex_fields(texts[k]),
                }
                if k % 2 == 0:  # half are GATED-style facts with a durable category
                    payload["category"] = DURABLE_CATEGORIES[(k // 2) % len(DURABLE_CATEGORIES)]
                copy.write_row([uuid.uuid4(), vectors[k], Jsonb(payload), user])
        conn.commit()
        print("preload: building the HNSW index ...", flush=True)
        t1 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING hnsw (vector vector_cosine_ops)").format(
                sql.Identifier(f"{store.table}_hnsw_idx"), table
            )
        )
        conn.execute(sql.SQL("ANALYZE {}").format(table))
        conn.commit()
    print(
        f"preload: {total} rows in {time.perf_counter() - t0:.0f} s (index {time.perf_counter() - t1:.0f} s)",
        flush=True,
    )


def forget_sessions(store: MemoryStore) -> int:
    """Remove what earlier runs' sessions wrote (preloaded rows carry no session): each
    run would otherwise grow the store and find its turns' own words from the last run."""
    from psycopg import sql

    with store.pool.connection() as conn:
        cur = conn.execute(
            sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s AND payload ? 'session_id'").format(
                sql.Identifier(store.table)
            ),
            [BENCH_USER],
        )
        return cur.rowcount


def store_size(store: MemoryStore) -> tuple[int, int]:
    """Rows in all, and the bench user's."""
    from psycopg import sql

    with store.pool.connection() as conn:
        return conn.execute(
            sql.SQL("SELECT count(*), count(*) FILTER (WHERE payload->>'user_id' = %s) FROM {}").format(
                sql.Identifier(store.table)
            ),
            [BENCH_USER],
        ).fetchone()


# -------------------------------------------------------------------- turns
def bench_utterances(n: int) -> list[Utterance]:
    """The spoken fixtures (harness/speech: eval questions, statements and chit-chat in
    English and Chinese), repeated in order to make `n` turns."""
    pool = [u for key, u in sorted(harness_mod.load_utterances().items()) if key.startswith("u")]
    return [pool[i % len(pool)] for i in range(n)]


@dataclass
class Network:
    """The route from the worker to its database: the embedded server's Unix socket, or a
    loopback TCP proxy that delays every packet (`--db-rtt-ms`), optionally with PgBouncer
    behind it (`--pgbouncer`)."""

    rtt_ms: float | None = None
    pgbouncer: bool = False
    url: str | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def describe(self) -> str:
        if self.rtt_ms is None and not self.pgbouncer:
            return "embedded, Unix socket"
        hops = [f"TCP proxy adding {self.rtt_ms:g} ms round trip"] if self.rtt_ms is not None else []
        return " -> ".join([*hops, *(["PgBouncer (transaction mode)"] if self.pgbouncer else []), "Postgres"])

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def remote_database(args: argparse.Namespace, base: MemorySettings, env: dict[str, str]) -> Network:
    """Start what stands between the worker and its database, as `args` ask."""
    from psycopg.conninfo import conninfo_to_dict

    from harness.netdelay import DelayProxy
    from harness.pgbouncer import PgBouncer
    from memory.storage.postgres import embedded_url

    net = Network(args.db_rtt_ms, args.pgbouncer)
    if args.db_rtt_ms is None and not args.pgbouncer:
        return net
    upstream = embedded_url(base.pgdata)  # started here, and kept: this process is one of its users
    info = conninfo_to_dict(upstream)
    target = f"unix:{info['host']}/.s.PGSQL.{info.get('port') or 5432}"
    if args.pgbouncer:
        bouncer = PgBouncer(upstream).start()
        net.closers.append(bouncer.stop)
        target, upstream = f"127.0.0.1:{bouncer.port}", bouncer.url
    net.url = upstream
    if args.db_rtt_ms is not None:
        proxy = DelayProxy(target, args.db_rtt_ms).start()
        net.closers.append(proxy.stop)
        user, dbname = info.get("user") or "postgres", info.get("dbname") or "postgres"
        net.url = f"postgresql://{user}@127.0.0.1:{proxy.port}/{dbname}"
    print(f"database: {net.describe()}", flush=True)
    return net
