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
import hashlib
import json
import math
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import stats
from bench.common.evaldata import EvalDataError, Query, RetrievalFile, Store, load_retrieval
from bench.common.holdout import PARTS, select_retrieval
from bench.retrieval.embed_cache import cached_passages
from bench.retrieval.self_questions import SelfQuestion, self_questions
from memory.language import lexical
from memory.language.indexing import INDEX_VERSION
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
# Settings that change what is written (the index), not how it is searched: each
# combination is a collection of its own, loaded once.
WRITE_KNOBS = ("retrieval_index_context", "retrieval_index_dates")
# Variants of a file: as it is, and with each store's queries (and a paraphrase of each)
# stored as the user's earlier turns (bench/retrieval/self_questions.py, `--self-questions`).
PLAIN = "plain"
SELFQ = "selfq"
VARIANTS = (PLAIN, SELFQ)
DEFAULT_DATA_DIR = Path("/tmp/bench-memory")
KS = (1, 5, 10)
# The columns of the table, and the measures given with a 95% interval (overall and per category).
COLUMNS = ("hit@1", "hit@5", "hit@10", "ndcg@5", "frac@5", "frac@10", "mrr@10")
INTERVALS = ("hit@1", "hit@5", "ndcg@5")
CLOSE_EPS = 0.001  # "decided by less than this": see `close_calls`
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


# ------------------------------------------------------------------ loading
def collection_for(data: RetrievalFile, write: tuple[bool, ...] = (False, False), variant: str = PLAIN) -> str:
    suffix = "".join(f"_{k.removeprefix('retrieval_index_')}" for k, on in zip(WRITE_KNOBS, write, strict=True) if on)
    if variant != PLAIN:
        suffix += f"_{variant}"
    return "bench_" + re.sub(r"\W+", "_", data.name).strip("_").lower() + suffix


def user_for(store_id: str) -> str:
    return f"bench:{store_id}"


def bench_env(data_dir: Path) -> dict[str, str]:
    """The environment's MEMORY_/OPENAI_ variables, pointed at the bench's own data dir."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("MEMORY_", "OPENAI_"))}
    env.pop("MEMORY_DATABASE_URL", None)  # never a real database
    env["MEMORY_DATA_DIR"] = str(data_dir)
    return env


def open_store(
    data: RetrievalFile, data_dir: Path, write: tuple[bool, ...] | None = None, variant: str = PLAIN
) -> MemoryStore:
    """The bench store of the file, for one combination of the write-side switches
    (`WRITE_KNOBS`; default: as the environment sets them) and one variant of the file
    (`VARIANTS`), in a collection of its own."""
    env = bench_env(data_dir)
    if write is None:
        write = write_side(load_settings(env, dotenv=False))
    for knob, on in zip(WRITE_KNOBS, write, strict=True):
        env["MEMORY_" + knob.upper()] = "on" if on else "off"
    env["MEMORY_COLLECTION"] = collection_for(data, write, variant)
    return MemoryStore.open(load_settings(env, dotenv=False))


def write_side(settings: MemorySettings) -> tuple[bool, ...]:
    return tuple(bool(getattr(settings.retrieval, k.removeprefix("retrieval_"))) for k in WRITE_KNOBS)


def fingerprint(s: Store, extra: Sequence[SelfQuestion] = ()) -> str:
    """What a store holds (ids and texts, the added turns of a variant, and the version of
    the index form): rows loaded from another version of the file with as many memories
    must not be reused."""
    digest = hashlib.sha256(f"index {INDEX_VERSION}\x00".encode())
    for m in s.memories:
        digest.update(f"{m.id}\x00{m.text}\x00".encode())
    for t in extra:  # (v2: a call of their own only where the file's memories have calls)
        digest.update(f"v2\x00{t.memory_id}\x00{t.text}\x00{t.timestamp}\x00".encode())
    return digest.hexdigest()[:16]


def load(
    store: MemoryStore,
    data: RetrievalFile,
    *,
    reload: bool = False,
    cache: Path | None = None,
    extra: Mapping[str, Sequence[SelfQuestion]] | None = None,
    category: str | None = None,
) -> None:
    """Write every store's memories through `add_raw`, unless they are already there;
    passage vectors from the disk cache `cache` when it has them. `extra`: turns a
    variant adds to each store (by store id), written after its memories, the same way.
    `category`: each memory written as a fact of it (GATED's look-ups read facts only)."""
    if cache is None:
        _load(store, data, reload=reload, extra=extra or {}, category=category)
        return
    with cached_passages(store, cache) as cached:
        _load(store, data, reload=reload, extra=extra or {}, category=category)
    if cached.hits or cached.misses:
        print(f"  embeddings: {cached.hits} from the cache, {cached.misses} computed", file=sys.stderr)


def _load(
    store: MemoryStore,
    data: RetrievalFile,
    *,
    reload: bool,
    extra: Mapping[str, Sequence[SelfQuestion]],
    category: str | None = None,
) -> None:
    counts = _counts(store)
    for s in data.stores:
        user = user_for(s.store_id)
        turns = turn_positions(s)
        added = extra.get(s.store_id, ())
        stamp = fingerprint(s, added)
        size = len(s.memories) + len(added)
        if not reload and counts.get(user, (0, 0))[0] == size and _stamped(store, user, stamp):
            if counts[user][1] < size:  # written by an older `index_text`
                store.reindex_lex(user, pause_s=0.0)
            _refresh_turns(store, user, turns)
            continue
        _delete_user_rows(store, user)
        started = time.perf_counter()
        before: dict[object, str] = {}  # the turn before each, per session: what it answers
        for i, m in enumerate(s.memories, 1):
            meta = {
                "memory_id": m.id,
                "store_id": s.store_id,
                "timestamp": m.timestamp,
                "speaker": m.speaker,
                "session": m.session,
                "bench_store": stamp,
                "category": category,
                **({} if category else turns.get(m.id, {})),  # a fact has no place in a call
            }
            context = [before[m.session]] if m.session is not None and m.session in before else []
            store.add_raw(user, m.text, metadata={k: v for k, v in meta.items() if v is not None}, context=context)
            if m.session is not None:
                before[m.session] = m.text
            if i % 250 == 0 or i == len(s.memories):
                rate = i / (time.perf_counter() - started)
                print(f"  loading {s.store_id}: {i}/{len(s.memories)} ({rate:.0f}/s)", file=sys.stderr)
        # A variant's turns: each the first turn of a call of its own where the file's memories
        # are turns of calls; where they are not (MemDaily's, MADial's), without one either, so
        # that only what they say tells them from the file's memories, not their structure.
        calls = any(m.session is not None for m in s.memories)
        for t in added:
            meta = {"memory_id": t.memory_id, "store_id": s.store_id, "timestamp": t.timestamp,
                    "session_id": t.session if calls else None, "seq": 0 if calls else None,
                    "bench_store": stamp}  # fmt: skip
            store.add_raw(user, t.text, metadata={k: v for k, v in meta.items() if v is not None})
        if added:
            print(f"  loading {s.store_id}: {len(added)} earlier questions", file=sys.stderr)


def turn_positions(s: Store) -> dict[str, dict[str, Any]]:
    """`session_id` and `seq` of each memory that has a session, as the agent writes them
    for a raw turn: the session, and the position in it (the file's order)."""
    out: dict[str, dict[str, Any]] = {}
    seqs: dict[str, int] = defaultdict(int)
    for m in s.memories:
        if m.session is None:
            continue
        session = f"{s.store_id}:{m.session}"
        out[m.id] = {"session_id": session, "seq": seqs[session]}
        seqs[session] += 1
    return out


def _refresh_turns(store: MemoryStore, user: str, turns: dict[str, dict[str, Any]]) -> None:
    """Add `session_id`/`seq` to rows loaded before the bench wrote them."""
    from psycopg import sql
    from psycopg.types.json import Jsonb

    if not turns:
        return
    t = sql.Identifier(store.table)
    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT id, payload->>'memory_id' FROM {} WHERE payload->>'user_id' = %s AND NOT payload ? 'seq'"
            ).format(t),
            [user],
        ).fetchall()
        for row_id, memory_id in rows:
            if memory_id in turns:
                conn.execute(sql.SQL("UPDATE {} SET payload = payload || %s WHERE id = %s").format(t),
                             [Jsonb(turns[memory_id]), row_id])  # fmt: skip


def _counts(store: MemoryStore) -> dict[str, tuple[int, int]]:
    """Rows per user, and how many carry the current `lex` version."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT payload->>'user_id', count(*), count(*) FILTER (WHERE payload->>'lex_v' = %s) FROM {} GROUP BY 1"
    ).format(sql.Identifier(store.table))
    with store.pool.connection() as conn:
        rows = conn.execute(query, [str(lexical.LEX_VERSION)]).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def _stamped(store: MemoryStore, user: str, stamp: str) -> bool:
    """Were all of the user's rows loaded from this very store?"""
    from psycopg import sql

    query = sql.SQL(
        "SELECT bool_and(payload->>'bench_store' IS NOT DISTINCT FROM %s) FROM {} WHERE payload->>'user_id' = %s"
    )
    with store.pool.connection() as conn:
        (same,) = conn.execute(query.format(sql.Identifier(store.table)), [stamp, user]).fetchone()
    return bool(same)


def _delete_user_rows(store: MemoryStore, user: str) -> None:
    """Bench collections only: drop a half-loaded store before loading it again."""
    from psycopg import sql

    with store.pool.connection() as conn:
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(store.table)), [user]
        )


# -------------------------------------------------------------- measuring
@dataclasses.dataclass
class QueryResult:
    query: Query
    ranked: list[str]  # memory ids, best first
    ms: float
    scores: list[float] = dataclasses.field(default_factory=list)  # fused scores, same order
    # The memory ids each shown memory stands for besides its own: its copies among the
    # candidates (exact, or near with MEMORY_RETRIEVAL_NEAR_COPIES), same order.
    copies: list[frozenset[str]] = dataclasses.field(default_factory=list)


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
    out.update({f"relevant_p{p:02d}": _quantile(relevant, p / 100) for p in (1, 5, 10, 50)})
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
        out.update({f"foreign_top1_p{p:02d}": _quantile(foreign, p / 100) for p in (50, 90, 99)})
    return out


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    return round(values[min(len(values) - 1, int(q * len(values)))], 4)


def metrics(results: Sequence[QueryResult]) -> dict[str, float]:
    n = len(results)
    if not n:
        return {"n": 0}
    sums: dict[str, float] = defaultdict(float)
    for k in KS:
        sums[f"hit@{k}"] = sum(per_query_hits(results, k))
    for k in (1, 5):
        sums[f"hit@{k}+copies"] = sum(per_query_hits(results, k, copies=True))
    sums["ndcg@5"] = sum(per_query_ndcg(results, 5))
    for r in results:
        relevant = set(r.query.relevant)
        for k in (5, 10):
            sums[f"frac@{k}"] += len(relevant.intersection(r.ranked[:k])) / min(k, len(relevant))
        rank = next((i for i, m in enumerate(r.ranked[:10], 1) if m in relevant), None)
        sums["mrr@10"] += 1.0 / rank if rank else 0.0
    out = {"n": n}
    for key in (*COLUMNS, "hit@1+copies", "hit@5+copies"):
        out[key] = round(sums[key] / n, 4)
    return out


def per_query_hits(results: Sequence[QueryResult], k: int, *, copies: bool = False) -> list[int]:
    """1 for each query with a relevant memory in its top k, else 0, in query order. With
    `copies`, a shown memory also counts for the copies it stands for (`QueryResult.copies`):
    "hit@k+copies", the figure for a reply that gets one line for what was said several
    times (a near-copy of the labelled memory is as good to the reply as the memory)."""
    out = []
    for r in results:
        relevant = set(r.query.relevant)
        shown = set(r.ranked[:k])
        if copies:
            for also in r.copies[:k]:
                shown |= also
        out.append(int(not relevant.isdisjoint(shown)))
    return out


def per_query_ndcg(results: Sequence[QueryResult], k: int) -> list[float]:
    """NDCG@k of each query, relevance 0/1: the relevant memories' places in the top k,
    each worth 1/log2(rank + 1), over the best the query could get (all its relevant
    memories first), in query order."""
    out = []
    for r in results:
        relevant = set(r.query.relevant)
        dcg = sum(1.0 / math.log2(i + 1) for i, m in enumerate(r.ranked[:k], 1) if m in relevant)
        ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(relevant)) + 1))
        out.append(dcg / ideal)
    return out


def per_query(results: Sequence[QueryResult], measure: str) -> list[float]:
    """Each query's value of `measure` ("hit@K" or "ndcg@K"), in query order."""
    name, _, k = measure.partition("@")
    if name == "hit":
        at, plus, _ = k.partition("+")
        return [float(x) for x in per_query_hits(results, int(at), copies=bool(plus))]
    if name == "ndcg":
        return per_query_ndcg(results, int(k))
    raise ValueError(f"unknown measure {measure!r}")


def intervals(results: Sequence[QueryResult]) -> dict[str, Any]:
    """95% bootstrap interval of each of `INTERVALS` over the queries, and over the
    stores when there are several (`..._ci95_stores`, with their number): the held-out
    halves hold other users, so that is how far the figure may move there."""
    if not results:
        return {}
    out: dict[str, Any] = {
        f"{m}_ci95": [round(x, 4) for x in stats.mean_interval(per_query(results, m))] for m in INTERVALS
    }
    stores = [r.query.store_id for r in results]
    if len(set(stores)) > 1:
        for m in INTERVALS:
            low, high = stats.mean_interval(per_query(results, m), groups=stores)
            out[f"{m}_ci95_stores"] = [round(low, 4), round(high, 4)]
        out["stores"] = len(set(stores))
    return out


def close_calls(results: Sequence[QueryResult], k: int = 5, eps: float = CLOSE_EPS) -> dict[str, Any]:
    """Queries whose hit@k is decided by less than `eps` of fused score: a hit whose
    best relevant memory leads the memory ranked k+1 by less, or a miss whose best
    relevant memory (within the returned list) trails the k-th by less.

    These are the queries a rounding difference between machines, or a 1% change of
    any weight, turns over; the interval says how wide the noise is, this says where.
    """
    hits = misses = 0
    for r in results:
        best = next((i for i, m in enumerate(r.ranked) if m in r.query.relevant), None)
        if best is None or len(r.scores) != len(r.ranked):
            continue
        if best < k:
            close = len(r.scores) > k and r.scores[best] - r.scores[k] < eps
            hits += close
        else:
            close = r.scores[k - 1] - r.scores[best] < eps
            misses += close
    return {"eps": eps, "hits": hits, "misses": misses}


def compare(base: Sequence[QueryResult], other: Sequence[QueryResult], k: int = 5) -> dict[str, Any]:
    """`other`'s paired difference in hit@k from `base` (the same queries, in order), and
    under `also` in each measure of `INTERVALS`."""
    p = stats.paired(per_query_hits(base, k), per_query_hits(other, k))
    also = {}
    for m in INTERVALS:
        q = stats.paired(per_query(base, m), per_query(other, m))
        also[m] = {"diff": round(q.diff, 4), "ci95": [round(q.low, 4), round(q.high, 4)], "clear": q.clear}
    return {f"hit@{k}_diff": round(p.diff, 4), "ci95": [round(p.low, 4), round(p.high, 4)],
            "better": p.better, "worse": p.worse, "clear": p.clear, "also": also}  # fmt: skip


def timing(results: Sequence[QueryResult]) -> dict[str, float]:
    ms = sorted(r.ms for r in results)
    if not ms:
        return {}
    return {
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)], 1),
        "mean_ms": round(statistics.fmean(ms), 1),
    }


def summarise(results: Sequence[QueryResult]) -> dict[str, Any]:
    by_cat: dict[str, list[QueryResult]] = defaultdict(list)
    for r in results:
        by_cat[r.query.category].append(r)
    overall = {**metrics(results), "hits@5": sum(per_query_hits(results, 5)), **intervals(results)}
    return {
        "overall": {**overall, "close@5": close_calls(results)},
        "categories": {c: {**metrics(rs), **intervals(rs)} for c, rs in sorted(by_cat.items())},
        **timing(results),
    }


def print_table(name: str, k: int, summaries: dict[str, dict[str, Any]]) -> None:
    cols = COLUMNS
    print(f"\n{name}  (top_k={k})")
    header = f"{'method':<28} {'category':<16} {'n':>5} " + " ".join(f"{c:>7}" for c in cols)
    print(header + f" {'p50 ms':>7} {'p95 ms':>7}")
    print("-" * (len(header) + 16))
    for method, summ in summaries.items():
        rows = [("all", summ["overall"])] + list(summ["categories"].items())
        for i, (cat, m) in enumerate(rows):
            cells = " ".join(f"{m.get(c, 0):>7.3f}" for c in cols)
            times = f" {summ.get('p50_ms', 0):>7.1f} {summ.get('p95_ms', 0):>7.1f}" if i == 0 else ""
            print(f"{method if i == 0 else '':<28} {cat:<16} {m['n']:>5} {cells}{times}")
        overall = summ["overall"]
        if "hit@5_ci95" in overall:
            low, high = overall["hit@5_ci95"]
            close = overall["close@5"]
            line = f"hit@5 {overall['hits@5']}/{overall['n']}, 95% interval {low:.3f}-{high:.3f} over queries"
            if "hit@5_ci95_stores" in overall:
                s_low, s_high = overall["hit@5_ci95_stores"]
                line += f", {s_low:.3f}-{s_high:.3f} over its {overall['stores']} stores"
            print(f"{'':<28} {line}; decided by < {close['eps']} of score: {close['hits']} hits, "
                  f"{close['misses']} misses")  # fmt: skip
        if (
            overall.get("hit@5+copies", overall["hit@5"]) != overall["hit@5"]
            or overall.get("hit@1+copies", overall["hit@1"]) != overall["hit@1"]
        ):
            print(f"{'':<28} counting the copies a shown memory stands for: hit@1 {overall['hit@1+copies']:.3f}, "
                  f"hit@5 {overall['hit@5+copies']:.3f}")  # fmt: skip
        if "calibration" in summ:
            print(f"{'':<28} scores: " + ", ".join(f"{k} {v:.3f}" for k, v in summ["calibration"].items()))
    print_intervals(summaries)
    paired = [(m, s[key]) for m, s in summaries.items() for key in s if key.startswith("vs ") and key != "vs plain"]
    if paired:
        base = next(iter(summaries))
        print(f"\npaired against {base} (same queries; 95% bootstrap interval of the hit@5 difference)")
        for method, p in paired:
            verdict = "a difference" if p["clear"] else "within noise"
            low, high = p["ci95"]
            print(f"  {method:<28} {p['hit@5_diff']:+.3f} [{low:+.3f}, {high:+.3f}]  "
                  f"better on {p['better']}, worse on {p['worse']}: {verdict}")  # fmt: skip


def print_intervals(summaries: dict[str, dict[str, Any]]) -> None:
    """hit@1, hit@5 and NDCG@5 with their 95% intervals over queries, per method and category."""
    print("\n95% bootstrap intervals over queries (over stores in brackets where a file has several)")
    print(f"{'method':<28} {'category':<16} " + " ".join(f"{m:<26}" for m in INTERVALS))
    for method, summ in summaries.items():
        rows = [("all", summ["overall"])] + list(summ["categories"].items())
        for i, (cat, m) in enumerate(rows):
            cells = []
            for measure in INTERVALS:
                low, high = m.get(f"{measure}_ci95", (0.0, 0.0))
                cell = f"{m.get(measure, 0):.3f} {low:.3f}-{high:.3f}"
                if f"{measure}_ci95_stores" in m and i == 0:
                    s_low, s_high = m[f"{measure}_ci95_stores"]
                    cell += f" [{s_low:.2f}-{s_high:.2f}]"
                cells.append(f"{cell:<26}")
            print(f"{method if i == 0 else '':<28} {cat:<16} " + " ".join(cells))


def print_variants(summaries: dict[str, dict[str, Any]]) -> None:
    """What the self-question variant costs each method: its paired difference from the
    same method on the plain file."""
    rows = [(m, s["vs plain"]) for m, s in summaries.items() if "vs plain" in s]
    if not rows:
        return
    print("\nself-question variant against the plain file (same method, same queries; 95% paired interval)")
    for method, p in rows:
        cells = "  ".join(
            f"{m} {p['also'][m]['diff']:+.3f} [{p['also'][m]['ci95'][0]:+.3f}, {p['also'][m]['ci95'][1]:+.3f}]"
            for m in INTERVALS
        )
        print(f"  {method:<28} {cells}")


def cross_validate(runs: Mapping[str, Mapping[str, Sequence[QueryResult]]], folds: Sequence[Sequence[str]]) -> dict:
    """Choosing among the methods run, cross-validated by store: for each fold of stores,
    the method with the best mean of hit@1 and hit@5 (over the variants run) on the other
    folds, and its figures on this one. `runs`: method -> variant -> results. The pooled
    figures of the chosen methods are what the choice is worth on stores it did not see."""
    if len(folds) < 2 or not runs:
        return {}

    both = {id(rs): [a + b for a, b in zip(per_query_hits(rs, 1), per_query_hits(rs, 5), strict=True)]
            for by_variant in runs.values() for rs in by_variant.values()}  # fmt: skip

    def value(results: Sequence[QueryResult], stores: set[str]) -> tuple[float, int]:
        hits = [h for r, h in zip(results, both[id(results)], strict=True) if r.query.store_id in stores]
        return sum(hits) / 2, len(hits)

    out: dict[str, Any] = {"folds": [], "pooled": {}}
    pooled: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for fold in folds:
        inside = {r.query.store_id for rs in next(iter(runs.values())).values() for r in rs} - set(fold)
        scores = {}
        for method, by_variant in runs.items():
            total = [value(rs, inside) for rs in by_variant.values()]
            scores[method] = sum(t for t, _ in total) / max(1, sum(n for _, n in total))
        chosen = max(scores, key=lambda m: (scores[m], -list(runs).index(m)))
        row: dict[str, Any] = {"stores": list(fold), "chosen": chosen}
        for variant, rs in runs[chosen].items():
            held = [r for r in rs if r.query.store_id in fold]
            for m in INTERVALS:
                pooled[variant][m] += per_query(held, m)
            row[variant] = {m: round(statistics.fmean(per_query(held, m)), 4) for m in INTERVALS}
        out["folds"].append(row)
    for variant, by_measure in pooled.items():
        out["pooled"][variant] = {m: round(statistics.fmean(v), 4) for m, v in by_measure.items()}
    return out


def print_cv(cv: Mapping[str, Any]) -> None:
    if not cv:
        return
    print("\ncross-validated by store: each fold gets the method best on the other folds")
    for row in cv["folds"]:
        cells = "  ".join(f"{v}: " + " ".join(f"{m} {x:.3f}" for m, x in row[v].items()) for v in VARIANTS if v in row)
        print(f"  {'+'.join(row['stores']):<40} {row['chosen']:<36} {cells}")
    for variant, figures in cv["pooled"].items():
        print(f"  pooled ({variant}): " + " ".join(f"{m} {x:.3f}" for m, x in figures.items()))


# -------------------------------------------------------------------- main
def store_folds(results: Sequence[QueryResult], k: int, seed: int = stats.SEED) -> list[list[str]]:
    """The stores of the results in `k` folds (whole stores, shuffled with a fixed seed)."""
    import random

    names = sorted({r.query.store_id for r in results})
    random.Random(seed).shuffle(names)
    k = min(k, len(names))
    return [sorted(names[i::k]) for i in range(k)] if k >= 2 else []


def fold_figures(
    results: Sequence[QueryResult], base: Sequence[QueryResult] | None, folds: Sequence[Sequence[str]]
) -> list[dict[str, Any]]:
    """hit@5 in each fold of stores, and the difference from `base` there."""
    out = []
    own, theirs = per_query_hits(results, 5), per_query_hits(base, 5) if base is not None else []
    for stores in folds:
        idx = [i for i, r in enumerate(results) if r.query.store_id in stores]
        hits = [own[i] for i in idx]
        row: dict[str, Any] = {"stores": list(stores), "n": len(idx), "hit@5": round(sum(hits) / len(idx), 4)}
        if base is not None:
            base_hits = [theirs[i] for i in idx]
            row["diff"] = round((sum(hits) - sum(base_hits)) / len(idx), 4)
        out.append(row)
    return out


def print_folds(summaries: dict[str, dict[str, Any]]) -> None:
    rows = [(m, s["folds"]) for m, s in summaries.items() if s.get("folds")]
    if not rows:
        return
    print("\nhit@5 per fold of stores (difference from the first method)")
    for method, folds in rows:
        cells = "  ".join(
            f"{'+'.join(f['stores'])}: {f['hit@5']:.3f}" + (f" ({f['diff']:+.3f})" if "diff" in f else "")
            for f in folds
        )
        print(f"  {method:<28} {cells}")


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
