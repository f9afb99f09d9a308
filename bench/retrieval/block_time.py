"""What issue 51's parts cost a look-up, paired per query in one process.

    uv run python -m bench.retrieval.block_time --data FILE [--queries N] [--data-dir /tmp/bench-block]

The file's stores as `bench.retrieval.block` loaded them (the same data directory); every query asked of
the shipped retriever and of the same retriever with a part changed: the question quota on
(`MEMORY_RETRIEVAL_QUESTION_POOL=3`; off by default), near-copies off
(`MEMORY_RETRIEVAL_NEAR_COPIES=0`), and both off with the old 0.02 floor ("before"). The
variants take turns in a rotated order per query (the first to ask warms the caches of
analysed texts for the others), each with the embedder's query cache cleared. Reported: p50
and p95 of each, and the median and mean of the per-query difference from "before". The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.evaldata import load_retrieval
from bench.retrieval import stores as rs
from memory.retrieval.retriever import Retriever

VARIANTS: dict[str, dict[str, object]] = {
    "shipped": {},
    "quota-3": {"retrieval_question_pool": 3},
    "no-near-copies": {"retrieval_near_copies": 0.0},
    "before": {"retrieval_question_pool": -1, "retrieval_near_copies": 0.0, "retrieval_threshold": 0.02},
}


def _at(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.retrieval.block_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a retrieval file whose stores are loaded in --data-dir")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/bench-block"))
    args = ap.parse_args(argv)
    data = load_retrieval(args.data)
    store = rs.open_store(data, args.data_dir)
    try:
        rs.load(store, data, cache=args.data_dir / "passages.sqlite")
        retrievers = {k: Retriever(store, store.settings.tuned(**v)) for k, v in VARIANTS.items()}
        users = sorted({rs.user_for(s.store_id) for s in data.stores})
        store.session_index.keep = max(store.session_index.keep, len(users))
        for user in users:
            store.open_session_index(user)
            for r in retrievers.values():
                r.prepare(user)
        cache = getattr(store.mem0.embedding_model, "_cache", None)
        queries = list(data.queries)[: args.queries]
        for q in queries[:5]:
            for r in retrievers.values():
                r.retrieve(rs.user_for(q.store_id), q.query)
        gc.collect()
        times: dict[str, list[float]] = {k: [] for k in retrievers}
        names = list(retrievers)
        for n, q in enumerate(queries):
            for name in names[n % len(names) :] + names[: n % len(names)]:
                if cache is not None:
                    cache.clear()
                started = time.perf_counter()
                retrievers[name].retrieve(rs.user_for(q.store_id), q.query)
                times[name].append((time.perf_counter() - started) * 1000)
    finally:
        store.close()
    out: dict[str, dict[str, float]] = {}
    print(f"{'variant':<16} {'p50 ms':>8} {'p95 ms':>8} {'median diff':>12} {'mean diff':>10}")
    for name, values in times.items():
        diffs = [a - b for a, b in zip(values, times["before"], strict=True)]
        out[name] = {"p50_ms": round(_at(values, 0.5), 2), "p95_ms": round(_at(values, 0.95), 2),
                     "median_diff_ms": round(statistics.median(diffs), 2),
                     "mean_diff_ms": round(statistics.fmean(diffs), 2)}  # fmt: skip
        o = out[name]
        cells = f"{o['p50_ms']:>8.1f} {o['p95_ms']:>8.1f} {o['median_diff_ms']:>+12.2f} {o['mean_diff_ms']:>+10.2f}"
        print(f"{name:<16} {cells}")
    load_avg = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {load_avg[0]} {load_avg[1]} {load_avg[2]}", file=sys.stderr)
    print(json.dumps({"file": data.name, "queries": len(queries), "load_avg": load_avg, "variants": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
