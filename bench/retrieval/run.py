"""Retrieval benchmark: the product's own write path and `Retriever`, on public data.

    uv run python -m bench.retrieval.run --data bench/data/eval/madial_en.dev.json [--k 10]
        [--method dense full no-fulltext ...] [--limit-queries N] [--calibrate]
    uv run python -m bench.retrieval.run --set temporal    # GATED facts over time (bench/retrieval/temporal.py)

Each store of the file becomes one user whose memories are written with
`MemoryStore.add_raw` (NORMAL raw memories: one embedding each, the `lex` field
included), in a dedicated data directory and collection (`bench_<file>`), so bench
data never mixes with a user's. A rerun reuses the loaded rows when their count
matches. Every query then goes through the same `Retriever` the agent uses, with
the embedder's query cache cleared first, so the time includes the embedding, and
with the long-lived heap frozen out of full garbage collections as the worker's
prewarm leaves it (memory/ops/heap.py).

Methods are named settings (see METHODS); extra overrides can follow a comma,
e.g. `full,retrieval_lexical_weight=0.4`. Reported per method: hit@1/5/10,
frac@5/10, MRR@10 overall and per category, p50/p95 query time, a 95%
bootstrap interval for each hit@k, and each method's paired difference in hit@5
from the first method named (bench/common/stats.py: on a 76-query file one query is 1.3
points, so an interval says whether a gap is an effect), on files with several
stores a hit@5 interval over stores (how far the figure may move on other users),
and how many queries were decided by under 0.001 of fused score (`close_calls`);
with --calibrate, the score quantiles used to set MEMORY_RETRIEVAL_THRESHOLD. The
last line of the output is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common.evaldata import EvalDataError, Query, RetrievalFile, load_retrieval
from bench.common.holdout import PARTS, select_retrieval
from bench.retrieval.report import (
    QueryResult,
    compare,
    cross_validate,
    fold_figures,
    print_cv,
    print_folds,
    print_table,
    print_variants,
    quantile,
    store_folds,
    summarise,
)
from bench.retrieval.self_questions import self_questions
from bench.retrieval.stores import (
    DEFAULT_DATA_DIR,
    PLAIN,
    SELFQ,
    VARIANTS,
    bench_env,
    load,
    open_store,
    user_for,
    write_side,
)
from memory.ops import heap
from memory.retrieval.retriever import Retriever
from memory.settings import MemorySettings, RetrievalSettings, load_settings
from memory.storage.store import MemoryStore
from memory.types import parse_time

STRUCTURE_OFF: dict[str, Any] = {
    "retrieval_index_context": False, "retrieval_index_dates": False, "retrieval_time_weight": 0.0,
    "retrieval_when_weight": 0.0, "retrieval_sessions": 0.0,
}  # fmt: skip
# Named configurations: "dense" is retrieval before this work, "full" the defaults,
# the others switch one stage or choice off (the ablation).
METHODS: dict[str, dict[str, Any]] = {
    "dense": {"retrieval_lexical": False, **STRUCTURE_OFF},
    "full": {},
    "rrf": {"retrieval_fusion": "rrf"},
    "no-vector": {"retrieval_vector": False},
    "no-fulltext": {"retrieval_fulltext": False},
    "no-substring": {"retrieval_substring": False},
    "no-lexical-recall": {"retrieval_fulltext": False, "retrieval_substring": False},
    "no-pronouns": {"retrieval_pronouns": False},
    "no-partial": {"retrieval_partial": False},
    "no-idf": {"retrieval_idf": False},
    "no-rarity": {"retrieval_rarity": 0.0},
    "no-focus": {"retrieval_focus_weight": 1.0},
    "no-density": {"retrieval_density": 0.0},
    "no-threshold": {"retrieval_threshold": 0.0},
    "no-embed-cap": {"retrieval_embed_tokens": 0},
    "no-context": {"retrieval_context_turns": 0},
    "no-neighbours": {"retrieval_neighbours": 0.0},
    "flat-keywords": {"retrieval_head_weight": 1.0},
    # Structure (issue 32). "flat": all of it off (retrieval before); each switch alone on
    # top of flat; `full` has them all (the defaults).
    "flat": STRUCTURE_OFF,
    "ctx": {**STRUCTURE_OFF, "retrieval_index_context": True},
    "dates": {**STRUCTURE_OFF, "retrieval_index_dates": True},
    "time": {**STRUCTURE_OFF, "retrieval_time_weight": RetrievalSettings.time_weight},
    "when": {**STRUCTURE_OFF, "retrieval_index_dates": True, "retrieval_when_weight": RetrievalSettings.when_weight},
    "sessions": {**STRUCTURE_OFF, "retrieval_sessions": RetrievalSettings.sessions},
    # What was said before what was asked (issue 38). "pre38": all of it off (retrieval
    # before); the others switch one part off.
    "pre38": {"retrieval_question_weight": 1.0, "retrieval_echo_weight": 1.0, "retrieval_near_copies": 0.0,
              "retrieval_unit_score": False},
    "no-questions": {"retrieval_question_weight": 1.0},
    "no-echo": {"retrieval_echo_weight": 1.0},
    "no-near-copies": {"retrieval_near_copies": 0.0},
    "no-unit-score": {"retrieval_unit_score": False},
}  # fmt: skip
RANKING_FLOOR = 0.02  # the relevance cut the ranking is measured at (the old junk floor)


def parse_method(spec: str) -> tuple[str, dict[str, Any]]:
    """'full,retrieval_pool=50' -> ('full,retrieval_pool=50', {...overrides})."""
    name, *extra = spec.split(",")
    if name not in METHODS:
        raise SystemExit(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    overrides = dict(METHODS[name])
    fields = {"retrieval_" + f.name for f in dataclasses.fields(RetrievalSettings)}
    for item in extra:
        key, _, raw = item.partition("=")
        if key not in fields:
            raise SystemExit(f"{spec}: {key!r} is not a retrieval setting; known: {', '.join(sorted(fields))}")
        default = getattr(RetrievalSettings, key.removeprefix("retrieval_"))
        if isinstance(default, bool):
            overrides[key] = raw.lower() in ("1", "true", "yes", "on")
        elif isinstance(default, (int, float)):
            overrides[key] = type(default)(float(raw))
        else:
            overrides[key] = raw
    return spec, overrides


def asked_at(data: RetrievalFile) -> dict[str, datetime]:
    """When each query is asked: its own time, else just after the store's last memory
    (LoCoMo and MADial ask after the conversations)."""
    last: dict[str, datetime] = {}
    for s in data.stores:
        times = [t for t in (parse_time(m.timestamp) for m in s.memories) if t is not None]
        if times:
            last[s.store_id] = max(times)
    out = {}
    for q in data.queries:
        when = parse_time(q.timestamp) or last.get(q.store_id)
        if when is not None:
            out[q.id] = when
    return out


def run_method(
    store: MemoryStore,
    settings: MemorySettings,
    queries: Sequence[Query],
    k: int,
    now: dict[str, datetime] | None = None,
) -> list[QueryResult]:
    now = now or {}
    retriever = Retriever(store, settings)
    retriever.warm_up()
    users = sorted({user_for(q.store_id) for q in queries})
    store.session_index.keep = max(store.session_index.keep, len(users))  # a job process holds one; the bench all
    for user in users:
        store.open_session_index(user)  # MEMORY_SESSION_INDEX: the user's rows into the process, as session start
        retriever.prepare(user)  # what session start does, off the reply's clock
    cache = getattr(store.mem0.embedding_model, "_cache", None)
    names = memory_ids(store, sorted({user_for(q.store_id) for q in queries}))
    for q in queries[:3]:  # warm the pool, the model and the plans; not timed
        retriever.retrieve(user_for(q.store_id), q.query, top_k=k, context=earlier_turns(q))
    heap.settle()  # as prewarm leaves a worker: loaded data is out of the full GC passes
    out = []
    for q in queries:
        context = earlier_turns(q)
        if cache is not None:
            cache.clear()  # every query pays for its embedding, as a new utterance would
            if settings.retrieval.context_turns and settings.retrieval.vector:
                # ...but not for the earlier turns': the agent embedded each when it was said.
                for turn in context[-settings.retrieval.context_turns :]:
                    store.mem0.embedding_model.embed(retriever.embedding_text(turn), "search")
        started = time.perf_counter()
        records = retriever.retrieve(
            user_for(q.store_id), q.query, top_k=max(k, 10), context=context, now=now.get(q.id)
        )
        ms = (time.perf_counter() - started) * 1000
        ids = [str(r.metadata.get("memory_id")) for r in records]
        copies = [frozenset(names.get(c, c) for c in r.metadata.get("copies") or ()) for r in records]
        out.append(QueryResult(q, ids, ms, [r.score for r in records], copies))
    return out


def memory_ids(store: MemoryStore, users: Sequence[str]) -> dict[str, str]:
    """The file's memory id of each row of these users (what a copy's row id stands for)."""
    from psycopg import sql

    query = sql.SQL("SELECT id::text, payload->>'memory_id' FROM {} WHERE payload->>'user_id' = ANY(%s)")
    with store.pool.connection() as conn:
        rows = conn.execute(query.format(sql.Identifier(store.table)), [list(users)]).fetchall()
    return {row_id: mem_id for row_id, mem_id in rows if mem_id is not None}


def earlier_turns(q: Query) -> list[str]:
    """The user's earlier turns of the dialogue before the query (`context`), as the
    agent passes them: the lines of the speaker whose lines make up the query, minus
    those lines themselves. Files without `context` give none."""
    lines = [line.partition(":") for line in q.context]
    own = [(who.strip(), text.strip()) for who, sep, text in lines if sep and text.strip()]
    speakers = {who for who, text in own if text in q.query}
    return [text for who, text in own if who in speakers and text not in q.query]


def calibration(
    store: MemoryStore, settings: MemorySettings, data: RetrievalFile, results: Sequence[QueryResult], k: int
) -> dict[str, float]:
    """Score quantiles for choosing MEMORY_RETRIEVAL_THRESHOLD from data, not from items.

    `relevant_*`: the scores of relevant memories that made the top k (what a
    threshold must keep). `foreign_top1_*`: the best score when the same query is
    asked of another store of the file, where nothing is relevant (what a
    threshold should drop).
    """
    relevant = sorted(
        score for r in results for mem_id, score in zip(r.ranked, r.scores, strict=False) if mem_id in r.query.relevant
    )
    out = {"relevant_min": relevant[0] if relevant else 0.0}
    out.update({f"relevant_p{p:02d}": quantile(relevant, p / 100) for p in (1, 5, 10, 50)})
    stores = [s.store_id for s in data.stores]
    if len(stores) > 1:
        retriever = Retriever(store, settings)
        for store_id in stores:
            retriever.prepare(user_for(store_id))  # as `run_method`: the same scoring as the agent's
        foreign = sorted(
            (hits[0].score if hits else 0.0)
            for r in results
            for hits in [
                retriever.retrieve(
                    user_for(stores[(stores.index(r.query.store_id) + 1) % len(stores)]), r.query.query, top_k=k
                )
            ]
        )
        out.update({f"foreign_top1_p{p:02d}": quantile(foreign, p / 100) for p in (50, 90, 99)})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    # `--set temporal`: facts over time, GATED's write path and its questions about the past
    # (bench/retrieval/temporal.py, issue 42): a set of its own, with its own flags.
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--set", choices=("temporal",))
    chosen, rest = pre.parse_known_args(argv)
    if chosen.set == "temporal":
        from bench.retrieval import temporal

        return temporal.main(rest)
    ap = argparse.ArgumentParser(prog="python -m bench.retrieval.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a retrieval file (bench/data/eval/README.md)")
    ap.add_argument("--k", type=int, default=10, help="memories retrieved per query (default 10)")
    ap.add_argument("--method", nargs="+", default=["dense", "full"], help=f"any of: {', '.join(METHODS)}")
    ap.add_argument("--limit-queries", type=int, default=None, help="only the first N queries")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="bench data dir (not a user's)")
    ap.add_argument("--reload", action="store_true", help="write the memories again even if loaded")
    ap.add_argument("--calibrate", action="store_true", help="also report score quantiles for the threshold")
    ap.add_argument(
        "--part",
        choices=PARTS,
        default="all",
        help="the stores of bench/data/holdout.json's development part, its held-out part, or all",
    )
    ap.add_argument("--folds", type=int, default=5, help="report hit@5 per fold of stores (default 5; 0: none)")
    ap.add_argument("--embed-cache", type=Path, default=None,
                    help="passage vectors cached on disk between runs (default: DATA_DIR/passages.sqlite; "
                         "'none': off)")  # fmt: skip
    ap.add_argument("--self-questions", action="store_true",
                    help="also run every method on the self-question variant: each store holds its queries "
                         "and a paraphrase of each as the user's earlier turns "
                         "(bench/retrieval/self_questions.py)")  # fmt: skip
    ap.add_argument("--cv", action="store_true",
                    help="cross-validate the choice among the methods by store (--folds folds)")  # fmt: skip
    args = ap.parse_args(argv)

    try:
        data = select_retrieval(load_retrieval(args.data), args.part)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(set(args.method)) < len(args.method):  # results are keyed by the spec
        print(f"error: --method lists a method twice: {' '.join(args.method)}", file=sys.stderr)
        return 2
    methods = [parse_method(m) for m in args.method]
    queries = list(data.queries[: args.limit_queries] if args.limit_queries else data.queries)
    cache = None if str(args.embed_cache) == "none" else (args.embed_cache or args.data_dir / "passages.sqlite")
    now = asked_at(data)
    variants = VARIANTS if args.self_questions else (PLAIN,)
    # The variant's added turns: every query of the part's stores, not only those run.
    added = {PLAIN: {}, SELFQ: self_questions(data, now)}
    stores: dict[tuple[tuple[bool, ...], str], MemoryStore] = {}
    runs: dict[str, dict[str, list[QueryResult]]] = defaultdict(dict)
    try:
        summaries: dict[str, dict[str, Any]] = {}
        first: dict[str, list[QueryResult]] = {}
        folds: list[list[str]] = []
        defaults = load_settings(bench_env(args.data_dir), dotenv=False)
        for spec, overrides in methods:
            write = write_side(defaults.tuned(**overrides))
            for variant in variants:
                key = (write, variant)
                if key not in stores:
                    stores[key] = open_store(data, args.data_dir, write, variant)
                    started = time.perf_counter()
                    load(stores[key], data, reload=args.reload, cache=cache, extra=added[variant])
                    print(f"store ready in {time.perf_counter() - started:.1f}s ({stores[key].table})",
                          file=sys.stderr)  # fmt: skip
                store = stores[key]
                # The ranking at the junk floor: hit@k measures the order, not the relevance cut
                # (MEMORY_RETRIEVAL_THRESHOLD), whose block `bench.retrieval.block` measures.
                settings = store.settings.tuned(**{"retrieval_threshold": RANKING_FLOOR, **overrides})
                results = run_method(store, settings, queries, args.k, now)
                runs[spec][variant] = results
                name = spec if variant == PLAIN else f"{spec} +{variant}"
                summaries[name] = summarise(results)
                if variant not in first:
                    first[variant] = results
                    if not folds and args.folds:
                        folds = store_folds(results, args.folds)
                else:
                    first_name = methods[0][0] if variant == PLAIN else f"{methods[0][0]} +{variant}"
                    summaries[name][f"vs {first_name}"] = compare(first[variant], results)
                if variant != PLAIN:
                    summaries[name]["vs plain"] = compare(runs[spec][PLAIN], results)
                if folds:
                    base = None if results is first[variant] else first[variant]
                    summaries[name]["folds"] = fold_figures(results, base, folds)
                if args.calibrate and settings.retrieval.lexical:
                    summaries[name]["calibration"] = calibration(store, settings, data, results, args.k)
                o = summaries[name]
                print(f"  {name}: hit@1 {o['overall']['hit@1']:.3f} hit@5 {o['overall']['hit@5']:.3f}  "
                      f"p95 {o.get('p95_ms', 0):.1f} ms", file=sys.stderr)  # fmt: skip
    finally:
        for store in stores.values():
            store.close()
    print_table(f"{data.name} ({args.part}): {len(queries)} queries, {sum(len(s.memories) for s in data.stores)} "
                "memories", args.k, summaries)  # fmt: skip
    print_variants(summaries)
    print_folds(summaries)
    cv = cross_validate(runs, folds) if args.cv else {}
    print_cv(cv)
    load_avg = [round(x, 2) for x in os.getloadavg()]
    print(f"\nload average {load_avg[0]} {load_avg[1]} {load_avg[2]}")
    print(json.dumps({"file": data.name, "part": args.part, "k": args.k, "queries": len(queries),
                      "variants": list(variants), "load_avg": load_avg, "methods": summaries,
                      **({"cv": cv} if cv else {})}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
