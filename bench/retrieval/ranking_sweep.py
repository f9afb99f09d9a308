"""A grid of the last ranking step's settings, cross-validated by store, in one look-up per query.

    uv run python -m bench.retrieval.ranking_sweep --data FILE [--part dev] [--self-questions]
        [--question-weight 1 .5 .3] [--echo-weight 1 .5 .3] [--near-copies 0 .6] [--folds 5]

The settings of `memory/retrieval/ranking.py` (MEMORY_RETRIEVAL_QUESTION_WEIGHT,
_ECHO_WEIGHT, _NEAR_COPIES) act after every candidate is fetched and scored, so each
query is looked up once (`Retriever` with all three off) and its scored candidates are
kept; every point of the grid then re-ranks them exactly as `Retriever.retrieve` does
(`Retriever.with_speech_acts`, the threshold, `worth_showing`). A grid of 30 points costs
one run of `bench.retrieval.run` instead of 30. The stores and their loading are
`bench.retrieval.run`'s (its collections are reused), and so are the measures.

For each fold of stores the point best on the other folds (mean of hit@1 and hit@5 over
the plain file and, with --self-questions, its self-question variant) is chosen and
measured on the fold: the pooled figures of the chosen points say what choosing on
this file is worth on users it did not see. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.evaldata import EvalDataError, load_retrieval
from bench.common.holdout import PARTS, select_retrieval
from bench.retrieval import report as rr
from bench.retrieval import run as R
from bench.retrieval import stores as rs
from bench.retrieval.self_questions import self_questions
from memory.retrieval.ranking import NearCopies
from memory.retrieval.retriever import Candidate, Retriever, worth_showing


class _Recorder(Retriever):
    """The product's retriever, keeping each look-up's scored candidates before the last step."""

    last: list[Candidate]

    def with_speech_acts(self, ranked: list[Candidate], query: str) -> list[Candidate]:
        self.last = copy.deepcopy(ranked)
        for cand in self.last:
            cand.payload["_fused"] = cand.score
        return super().with_speech_acts(ranked, query)


def record(store: Any, settings: Any, queries: Sequence[Any], now: dict[str, Any]) -> tuple[Retriever, list]:
    """Each query's scored candidates, with the last step off (looked up once), and the
    retriever (its users' vectors, read at their session start, tell near-copies)."""
    retriever = _Recorder(store, settings)
    for user in sorted({rs.user_for(q.store_id) for q in queries}):
        retriever.prepare(user)
    out = []
    model = store.mem0.embedding_model
    for q in queries:
        # The session's earlier turns were embedded when they were said (as `run_method` has it).
        for turn in R.earlier_turns(q)[-settings.retrieval.context_turns :] if settings.retrieval.context_turns else []:
            model.embed(retriever.embedding_text(turn), "search")
        retriever.last = []
        retriever.retrieve(rs.user_for(q.store_id), q.query, top_k=10, context=R.earlier_turns(q), now=now.get(q.id))
        out.append(retriever.last)
    return retriever, out


def rerank(
    retriever: Retriever, vectors: Retriever, cands: list[Candidate], query: Any, names: dict[str, str], k: int = 10
) -> rr.QueryResult:
    """What `Retriever.retrieve` returns with `retriever`'s settings, from the kept
    candidates; near-copies told by the vectors `vectors` read for the user."""
    for cand in cands:  # as fetched and scored (`record` kept the scores in `_fused`)
        cand.score = cand.payload["_fused"]
        cand.copies = []
    started = time.perf_counter()
    ranked = retriever.with_speech_acts(list(cands), query.query)
    r = retriever.settings.retrieval
    floor = r.threshold if r.fusion == "weighted" else 0.0
    near = NearCopies(r.near_copies, vectors.density(rs.user_for(query.store_id)).vector) if r.near_copies > 0 else None
    shown = worth_showing((c for c in ranked if c.score >= floor), near=near, limit=k)
    ids = [str(c.payload.get("memory_id")) for c in shown]
    copies = [frozenset(names.get(x, x) for x in c.copies) for c in shown]
    ms = (time.perf_counter() - started) * 1000  # the last step's own time, on the look-up's clock
    return rr.QueryResult(query, ids, ms, [c.score for c in shown], copies)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.retrieval.ranking_sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--part", choices=PARTS, default="dev")
    ap.add_argument("--data-dir", type=Path, default=rs.DEFAULT_DATA_DIR)
    ap.add_argument("--self-questions", action="store_true")
    ap.add_argument("--question-weight", type=float, nargs="+", default=[1.0, 0.5, 0.3, 0.2, 0.1])
    ap.add_argument("--echo-weight", type=float, nargs="+", default=[1.0, 0.5, 0.3, 0.1])
    ap.add_argument("--near-copies", type=float, nargs="+", default=[0.0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--base", default="full", help="the method (bench.retrieval.run's names) the grid varies")
    ap.add_argument("--embed-cache", type=Path, default=None, help="passage vectors (DATA_DIR/passages.sqlite)")
    args = ap.parse_args(argv)
    try:
        data = select_retrieval(load_retrieval(args.data), args.part)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _, overrides = R.parse_method(args.base)
    # All three off, but the users' vectors read (a near-copy threshold no two memories reach).
    off = {"retrieval_question_weight": 1.0, "retrieval_echo_weight": 1.0, "retrieval_near_copies": 1.5}
    now = R.asked_at(data)
    variants = rs.VARIANTS if args.self_questions else (rs.PLAIN,)
    added = {rs.PLAIN: {}, rs.SELFQ: self_questions(data, now)}
    queries = list(data.queries)
    kept: dict[str, list[list[Candidate]]] = {}
    readers: dict[str, Retriever] = {}
    names: dict[str, dict[str, str]] = {}
    stores = {}
    try:
        for variant in variants:
            store = stores[variant] = rs.open_store(data, args.data_dir, None, variant)
            rs.load(store, data, cache=args.embed_cache or args.data_dir / "passages.sqlite", extra=added[variant])
            readers[variant], kept[variant] = record(store, store.settings.tuned(**{**overrides, **off}), queries, now)
            names[variant] = R.memory_ids(store, sorted({rs.user_for(q.store_id) for q in queries}))
            print(f"  {variant}: candidates of {len(queries)} queries kept", file=sys.stderr)
        grid = list(itertools.product(args.question_weight, args.echo_weight, args.near_copies))
        runs: dict[str, dict[str, list[rr.QueryResult]]] = {}
        table = []
        for qw, ew, near in grid:
            name = f"q{qw:g} e{ew:g} n{near:g}"
            settings = stores[variants[0]].settings.tuned(
                **overrides, retrieval_question_weight=qw, retrieval_echo_weight=ew, retrieval_near_copies=near
            )
            retriever = Retriever(stores[variants[0]], settings)
            runs[name] = {
                v: [rerank(retriever, readers[v], c, q, names[v]) for c, q in zip(kept[v], queries, strict=True)]
                for v in variants
            }
            row: dict[str, Any] = {"point": name}
            for v in variants:
                m = rr.metrics(runs[name][v])
                row[v] = {key: m[key] for key in ("hit@1", "hit@5", "ndcg@5", "hit@1+copies", "hit@5+copies")}
                row[v]["step_ms"] = rr.timing(runs[name][v])
            table.append(row)
            print(f"  {name}: " + "  ".join(f"{v} hit@1 {row[v]['hit@1']:.3f} hit@5 {row[v]['hit@5']:.3f}"
                                          for v in variants), file=sys.stderr)  # fmt: skip
    finally:
        for store in stores.values():
            store.close()
    print(f"\n{data.name} ({args.part}), {len(queries)} queries: the grid on all its stores")
    cols = ("hit@1", "hit@5", "ndcg@5", "hit@5+copies")
    print(f"{'point':<18}" + "".join(f"{v + ' ' + c:>20}" for v in variants for c in cols))
    for row in table:
        print(f"{row['point']:<18}" + "".join(f"{row[v][c]:>20.3f}" for v in variants for c in cols))
    folds = rr.store_folds(runs[next(iter(runs))][variants[0]], args.folds)
    cv = rr.cross_validate(runs, folds)
    rr.print_cv(cv)
    load_avg = [round(x, 2) for x in os.getloadavg()]
    print(f"\nload average {load_avg[0]} {load_avg[1]} {load_avg[2]}")
    if cv:
        chosen = [f["chosen"] for f in cv["folds"]]
        print(f"chosen per fold: {', '.join(chosen)} (most often: {statistics.mode(chosen)})")
    print(json.dumps({"file": data.name, "part": args.part, "grid": table, "cv": cv, "load_avg": load_avg}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
