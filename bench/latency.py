"""How much delay memory adds to a reply: `python -m bench.latency`.

Drives a real `AgentSession` (tests/harness: timed scripted STT with interim
transcripts, a fake LLM that records when each request arrives and what it
carries, instant TTS) with the real memory module on the embedded Postgres and
the local embedder, preloaded with 10,000 memories for the user and 100,000 in
all. In the same run it measures the same pipeline with memory off, and reports
per mode the added delay from the end of the user's speech to the LLM request
(memory on minus memory off, paired by turn), LLM requests per user turn, and
the share of turns whose injected memories are the ones for that turn (the
block the LLM saw equals a reference look-up for that turn's words, made with no
budget). Three stress scenarios: a store that stalls 5 s on every call, an
embedder that takes 200 ms a call (as a remote embedding API would), and a
journal holding 40 long turns of another user when the session starts (an outage
just over, or a stopped worker's turns): they are written while the user talks.

The process is prepared as the worker's prewarm prepares it: models loaded, then
the long-lived heap frozen out of the garbage collector's full passes
(memory/heap.py; `--gc default` leaves it, to compare). In the same run it times
one full pass before and after freezing, and it records every full pass that
happens during each scenario: each holds the GIL, so a reply waits for it.

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import logging
import os
import platform
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memory  # noqa: F401  (Mem0 telemetry off before mem0 is imported)
from livekit.agents import Agent

from bench.evaldata import default_eval_dir
from memory import embedder as embedder_mod
from memory import heap, lexical
from memory.archive.session import ArchiveSession
from memory.gatekeeper import Gatekeeper
from memory.livekit_glue import MemoryAgent, MemorySession, fit_recalled
from memory.prompts import load_prompt
from memory.service import MemoryService, Turn
from memory.settings import DURABLE_CATEGORIES, MemoryMode, MemorySettings, load_settings
from memory.store import MemoryRecord, MemoryStore, now_iso
from memory.write_queue import DurableWriteQueue
from tests.harness import LLMRequest, RecordingLLM, VoiceHarness
from tests.harness.fakes import SpeechEventType

log = logging.getLogger("bench.latency")
BENCH_USER = "bench-user"


# ------------------------------------------------------------------ preload
def _eval_file(name: str) -> Path:
    """An eval file the workload is made of; without it the benchmark would silently
    measure another workload (synthetic notes, no memory questions)."""
    path = default_eval_dir() / name
    if not path.exists():
        raise SystemExit(f"bench.latency: {path} not found; set EVAL_DIR to the eval files' directory")
    return path


def _memory_texts(limit: int) -> list[str]:
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
        from memory.lexical import lex_fields
    except ImportError:  # lexical stage not installed: Mem0's fields only
        def lex_fields(text: str) -> dict[str, str]:  # type: ignore[misc]
            return {}

    texts = _memory_texts(user_memories)
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
        with conn.cursor().copy(sql.SQL("COPY {} (id, vector, payload) FROM STDIN WITH (FORMAT BINARY)").format(table)) as copy:
            copy.set_types(["uuid", "vector", "jsonb"])
            for n in range(total):
                if n < user_memories:
                    user, k = BENCH_USER, n
                else:
                    user, k = f"other-{n % 90}", rng.randrange(len(texts))
                payload = {
                    "data": texts[k], "user_id": user, "role": "user", "hash": "",
                    "created_at": now, "updated_at": now, **lex_fields(texts[k]),
                }
                if k % 2 == 0:  # half are GATED-style facts with a durable category
                    payload["category"] = DURABLE_CATEGORIES[(k // 2) % len(DURABLE_CATEGORIES)]
                copy.write_row([uuid.uuid4(), vectors[k], Jsonb(payload)])
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
    print(f"preload: {total} rows in {time.perf_counter() - t0:.0f} s (index {time.perf_counter() - t1:.0f} s)", flush=True)


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
_ASK_EN = [
    "Do you remember {q}",
    "What do you know about {q}",
    "Can you remind me {q}",
]
_STATEMENTS = [
    "I went hiking with my sister last weekend and it was great",
    "My favourite food is spicy ramen",
    "I'm thinking about learning to play the piano",
    "ok thanks",
    "That sounds good to me",
    "我最近在学做饭，昨天做了红烧肉",
    "我妹妹下个月要结婚了",
    "好的，谢谢",
]


def build_turns(n: int, seed: int = 3) -> list[str]:
    """A realistic mix: memory questions (English, Chinese), statements and chit-chat."""
    questions: list[str] = []
    for name in ("locomo.dev.json", "memdaily.dev.json"):
        data = json.loads(_eval_file(name).read_text(encoding="utf-8"))
        questions.extend(q["query"] for q in data["queries"] if len(q["query"]) < 120)
    rng = random.Random(seed)
    rng.shuffle(questions)
    turns: list[str] = []
    for i in range(n):
        kind = i % 4
        if kind in (0, 1) and questions:
            q = questions.pop()
            if kind == 0 and q.isascii():
                q = rng.choice(_ASK_EN).format(q=q[0].lower() + q[1:])
            turns.append(q)
        else:
            turns.append(rng.choice(_STATEMENTS) + ("" if rng.random() < 0.5 else f" ({i})"))
    return turns


def interims_for(text: str, max_parts: int = 5) -> list[str]:
    """Growing prefixes, ending with the whole utterance, as streaming STT sends them."""
    words = text.split() if " " in text else list(text)
    joiner = " " if " " in text else ""
    parts = max(1, min(max_parts, len(words)))
    return [joiner.join(words[: max(1, round(len(words) * (i + 1) / parts))]) for i in range(parts)]


# ---------------------------------------------------------------- scenarios
@dataclass
class TurnRecord:
    text: str
    delay_s: float | None
    requests: int
    own_memories: bool | None
    injected: int


@dataclass
class ScenarioResult:
    name: str
    turns: list[TurnRecord] = field(default_factory=list)
    wall_s: float = 0.0
    budget_missed: int = 0
    gc_full_passes_ms: list[float] = field(default_factory=list)


@contextmanager
def full_passes(out: list[float]) -> Iterator[None]:
    """Record the duration of every full (oldest-generation) collection in the block."""
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            out.append((time.perf_counter() - started.pop()) * 1000)

    gc.callbacks.append(on_gc)
    try:
        yield
    finally:
        gc.callbacks.remove(on_gc)


@contextmanager
def stalled_store(store: MemoryStore, seconds: float) -> Iterator[None]:
    """Every database call blocks for `seconds` before it starts (a hung Postgres).

    The stall is put on the connection pool that Mem0 and our own SQL share, so
    every stage of every read and write sees it.
    """
    pool = store.pool
    original = pool.connection

    @contextmanager
    def slow_connection(*a: Any, **kw: Any) -> Iterator[Any]:
        time.sleep(seconds)
        with original(*a, **kw) as conn:
            yield conn

    pool.connection = slow_connection  # type: ignore[method-assign]
    try:
        yield
    finally:
        pool.connection = original  # type: ignore[method-assign]


@contextmanager
def slow_embedder(store: MemoryStore, seconds: float) -> Iterator[None]:
    """Every embedding the cache cannot answer takes `seconds` (a remote embedding API)."""
    emb = store.mem0.embedding_model
    original = emb.embed
    cache = getattr(emb, "_cache", {})
    cache.clear()

    def embed(text: str, memory_action: Any = None) -> list[float]:
        if not (memory_action == "search" and text in cache):
            time.sleep(seconds)
        return original(text, memory_action)

    emb.embed = embed
    try:
        yield
    finally:
        emb.embed = original


BACKLOG_USER = "bench-backlog"
# Scenarios whose turns' last words reach memory with the final transcript only.
FINAL_WORDS_SCENARIOS = ("off (final words baseline)", "NORMAL, 40 long turns waiting")


@contextmanager
def journal_backlog(store: MemoryStore, settings: MemorySettings, turns: int, chars: int) -> Iterator[None]:
    """`turns` turns of `chars` characters of another user wait in the journal, released
    by a worker that stopped: the session's queue takes them over and writes them while
    the user talks. Embedding one such turn keeps the local model busy for 0.3-0.4 s."""
    texts = _memory_texts(4 * turns)
    queue = DurableWriteQueue(settings.journal_path, lambda turn: asyncio.sleep(0))
    for i in range(turns):
        text = " ".join(texts[4 * i :])[:chars]
        queue.enqueue(Turn(BACKLOG_USER, text, "bench-backlog", f"bench-backlog-{uuid.uuid4().hex}", now_iso(), seq=i))
    queue._release_leases()  # as a stopped worker leaves them: anyone may take them
    queue._closed = True
    if queue._conn is not None:
        queue._conn.close()
        queue._conn = None
    try:
        yield
    finally:
        import sqlite3

        from psycopg import sql

        with sqlite3.connect(settings.journal_path) as conn:
            conn.execute("DELETE FROM pending_writes WHERE json_extract(payload, '$.user_id') = ?", (BACKLOG_USER,))
        with store.pool.connection() as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(store.table)),
                         [BACKLOG_USER])  # fmt: skip


def _block(request: LLMRequest) -> str:
    for role, text in request.messages:
        if role == "system" and text.startswith("<recalled_memories>"):
            return text
    return ""


async def run_scenario(
    name: str,
    store: MemoryStore,
    settings: MemorySettings | None,
    turns: list[str],
    *,
    interim_gap: float,
    reference: bool,
    words_in_final: bool = False,
) -> ScenarioResult:
    result = ScenarioResult(name)
    service: MemoryService | None = None
    session_memory: MemorySession | None = None
    refs: list[list[str]] = []

    def own_ids(records: list[MemoryRecord]) -> list[str]:
        # This session's own writes are left out on both sides: those turns are in
        # the chat history already, and a look-up may run just before or after one lands.
        # Memories already in the session-start profile are not repeated per turn.
        sid = session_memory.session_id if session_memory else None
        shown = {r.id for r in (session_memory.profile or [])} if session_memory else set()
        return [r.id for r in records if r.metadata.get("session_id") != sid and r.id not in shown]

    async def respond(request: LLMRequest) -> str:
        # Reference look-up for this request's words, with no budget: what the
        # turn should carry. Runs after the arrival time is recorded.
        if service is not None and reference and request.messages and request.messages[-1][0] == "user":
            text = request.messages[-1][1]
            context = session_memory.earlier_turns() if session_memory else []
            recs = (
                await asyncio.to_thread(
                    service.recall_sync, BENCH_USER, text, context, session_memory.session_id if session_memory else None
                )
                if service.wants_recall(text)
                else []
            )
            # Bounded as the reply's block is (MEMORY_RECALL_MAX_CHARS): what fits is what it should carry.
            profile = {r.id for r in (session_memory.profile or [])} if session_memory else set()
            recs, _ = fit_recalled([r for r in recs if r.id not in profile], service.settings.recall_max_chars)
            refs.append(own_ids(recs))
        return "Sure."

    # No copy of each request's context: 200 turns of them would grow the heap as
    # turns², as no worker's does, and the full-GC figures would measure the harness.
    llm = RecordingLLM(respond, keep_context=False)
    if settings is None:
        agent: Agent = Agent(instructions=load_prompt("system"))
    else:
        extraction = RecordingLLM(
            lambda req: json.dumps({"facts": []}), ttft=0.3
        )  # GATED's extraction LLM: a remote call, in the background
        service = MemoryService(store, settings, gatekeeper=Gatekeeper(extraction))
        session_memory = MemorySession(service, user_id=BENCH_USER)
        agent = MemoryAgent(session_memory)
    harness = VoiceHarness(agent, llm=llm, preflight=True, timeout=30.0)
    if session_memory is not None:
        session_memory.attach(harness.session)
        if "archive" in name:  # both sides archived, summaries made (a remote model: 0.5 s) and swapped in
            summarizer = RecordingLLM(lambda _r: "The user went through a list of everyday topics; nothing decided.",
                                      ttft=0.5, keep_context=False)  # fmt: skip
            archive = ArchiveSession(session_memory, summarizer=summarizer)
            archive.attach(harness.session)
    t0 = time.perf_counter()
    with full_passes(result.gc_full_passes_ms):
        await _drive(harness, llm, turns, result, session_memory, refs, own_ids, reference, interim_gap, words_in_final)
    if "archive" in name and session_memory is not None:
        st = archive.stats  # the swap is the only work a summary puts on a reply's path
        swap = sorted(st.swap_s)
        print(f"  archive: {st.archived} messages, {st.summaries} summaries, {st.swaps} requests with the summary "
              f"swapped in, swap max {max(swap, default=0) * 1000:.3f} ms", flush=True)
    if session_memory is not None:
        await session_memory.aclose(drain_timeout_s=2.0)
        result.budget_missed = sum(1 for t in session_memory.turns if t.recall and t.recall.missed_budget)
    result.wall_s = time.perf_counter() - t0
    return result


async def _drive(
    harness: VoiceHarness,
    llm: RecordingLLM,
    turns: list[str],
    result: ScenarioResult,
    session_memory: MemorySession | None,
    refs: list[list[str]],
    own_ids: Callable[[list[MemoryRecord]], list[str]],
    reference: bool,
    interim_gap: float,
    words_in_final: bool = False,
) -> None:
    """Say every turn and record, per turn, when the LLM request came and what it carried."""
    async with harness:
        for text in turns:
            n_req, n_emit = llm.count, len(harness.stt.emitted)
            n_refs = len(refs)
            interims = interims_for(text)
            if words_in_final and len(interims) > 1:
                # The last words come with the final transcript only (as a streaming STT
                # often sends them): the look-up for the whole turn starts at the final.
                interims = interims[:-1]
            await harness.user_says(text, interims, interim_gap=interim_gap)
            eos = [t for kind, t, _ in harness.stt.emitted[n_emit:] if kind == SpeechEventType.END_OF_SPEECH]
            reqs = llm.requests[n_req:]
            delay = (reqs[0].arrived_at - eos[0]) if reqs and eos else None
            own: bool | None = None
            injected = 0
            if session_memory is not None and session_memory.turns:
                log_ = session_memory.turns[-1]
                injected = log_.injected
                # what the LLM saw must match what the log says was injected
                lines = [ln for ln in _block(reqs[-1]).splitlines() if ln.startswith("- ")] if reqs else []
                assert len(lines) == log_.injected, (lines, log_)
                if reference and len(refs) > n_refs:
                    got = set(own_ids([r for r in (log_.recall.records if log_.recall else []) if r.id in log_.injected_ids]))
                    own = got == set(refs[n_refs])
                    if not own and os.environ.get("BENCH_DEBUG_OWN"):
                        rec = {r.id: r.text[:40] for r in (log_.recall.records if log_.recall else [])}
                        print(f"own mismatch: {text!r} prefetched={log_.recall.prefetched if log_.recall else None} "
                              f"only-injected={[rec.get(i) for i in got - set(refs[n_refs])]} "
                              f"only-reference={len(set(refs[n_refs]) - got)}", file=sys.stderr)  # fmt: skip
            result.turns.append(TurnRecord(text, delay, len(reqs), own, injected))


# ------------------------------------------------------------------- report
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def summarise(res: ScenarioResult, baseline: ScenarioResult) -> dict[str, Any]:
    pairs = [
        (i, t.delay_s, b.delay_s)
        for i, (t, b) in enumerate(zip(res.turns, baseline.turns))
        if t.delay_s is not None and b.delay_s is not None
    ]
    added = [(a - b) * 1000 for _, a, b in pairs]
    # Requests start at the preflight, before end of speech; this is what the user can
    # notice: how much later than without memory the request comes after they stopped.
    after_eos = [(max(0.0, a) - max(0.0, b)) * 1000 for _, a, b in pairs]
    own = [t.own_memories for t in res.turns if t.own_memories is not None]
    return {
        "turns": len(res.turns),
        "added_ms_p50": round(pct(added, 50), 2),
        "added_ms_p95": round(pct(added, 95), 2),
        "added_ms_max": round(max(added), 2) if added else None,
        "added_ms_max_turn": pairs[added.index(max(added))][0] if added else None,  # 0 = the session's first turn
        "added_after_end_of_speech_ms_p95": round(pct(after_eos, 95), 2),
        "delay_ms_p50": round(pct([t.delay_s * 1000 for t in res.turns if t.delay_s is not None], 50), 2),
        "llm_requests_per_turn": round(sum(t.requests for t in res.turns) / max(1, len(res.turns)), 3),
        "own_turn_memories": round(sum(own) / len(own), 4) if own else None,
        "turns_with_memories": sum(1 for t in res.turns if t.injected),
        "budget_missed": res.budget_missed,
        "gc_full_passes": len(res.gc_full_passes_ms),
        "gc_full_pass_max_ms": round(max(res.gc_full_passes_ms), 1) if res.gc_full_passes_ms else None,
        "wall_s": round(res.wall_s, 1),
    }


async def amain(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {"MEMORY_DATA_DIR": str(data_dir), "MEMORY_COLLECTION": "bench_latency", "MEMORY_BUDGET_MS": str(args.budget_ms)}
    base = load_settings(env, dotenv=False)
    store = MemoryStore.open(base)
    preload(store, args.user_memories, args.total_memories)
    # As the worker's prewarm does: models loaded, then the long-lived heap frozen.
    embedder_mod.local_model()
    lexical.warm_up()
    gc_info: dict[str, Any] = {"mode": args.gc, "full_pass_ms_unfrozen": round(heap.full_pass_ms(), 1)}
    if args.gc == "frozen":
        gc_info["frozen_objects"] = heap.settle()
        gc_info["full_pass_ms_frozen"] = round(heap.full_pass_ms(), 1)
    all_turns = build_turns(max(args.turns, args.stress_turns))
    turns, slow_turns = all_turns[: args.turns], all_turns[: args.stress_turns]
    normal = dataclasses.replace(base, mode=MemoryMode.NORMAL)
    gated = dataclasses.replace(base, mode=MemoryMode.GATED)

    # Warm-up: first-call costs (imports, connections, caches) are not a turn's cost.
    await run_scenario("warmup", store, normal, turns[:4], interim_gap=args.interim_gap, reference=False)
    forget_sessions(store)  # the warm-up's turns must not be found by the scenarios' same words

    results: dict[str, ScenarioResult] = {}
    specs: list[tuple[str, MemorySettings | None, list[str], Callable[[], Any] | None]] = [
        ("off", None, turns, None),
        ("NORMAL", normal, turns, None),
        ("GATED", gated, turns, None),
        ("off (stress baseline)", None, slow_turns, None),
        ("off (final words baseline)", None, slow_turns, None),
        ("NORMAL, embedder 200 ms", normal, slow_turns, lambda: slow_embedder(store, 0.2)),
        # Before the stalled store: its stalled calls go on for up to 5 s after it.
        ("NORMAL, 40 long turns waiting", normal, slow_turns, lambda: journal_backlog(store, normal, 40, 1500)),
        ("NORMAL, store stalls 5 s", normal, slow_turns, lambda: stalled_store(store, 5.0)),
    ]
    specs += [
        ("off (archive baseline)", None, turns, None),
        ("NORMAL, archive + summaries", normal, turns, None),
        ("GATED, archive + summaries", gated, turns, None),
    ]
    wanted = {"main": specs[:3], "stress": specs[3:8], "archive": specs[8:]}
    specs = [spec for group in args.scenarios.split(",") for spec in wanted[group.strip()]]
    for name, settings, tts, ctx in specs:
        forget_sessions(store)  # each scenario meets the preloaded store only
        print(f"running {name}: {len(tts)} turns ...", flush=True)
        if args.gc == "frozen":
            # A worker's job process runs one session after prewarm; here one process
            # runs them all, so the previous scenario's leftovers are collected and what
            # lives on is frozen, as prewarm leaves a fresh job process.
            heap.settle()
        with (ctx() if ctx else _null()):
            results[name] = await run_scenario(
                name, store, settings, tts, interim_gap=args.interim_gap,
                reference=ctx is None and settings is not None,
                words_in_final=name in FINAL_WORDS_SCENARIOS,
            )
    pairs = {
        "NORMAL": ("NORMAL", "off"),
        "GATED": ("GATED", "off"),
        "NORMAL_embedder_200ms": ("NORMAL, embedder 200 ms", "off (stress baseline)"),
        "NORMAL_store_stall_5s": ("NORMAL, store stalls 5 s", "off (stress baseline)"),
        "NORMAL_journal_backlog": ("NORMAL, 40 long turns waiting", "off (final words baseline)"),
        "NORMAL_archive": ("NORMAL, archive + summaries", "off (archive baseline)"),
        "GATED_archive": ("GATED, archive + summaries", "off (archive baseline)"),
    }
    summary = {k: summarise(results[a], results[b]) for k, (a, b) in pairs.items() if a in results}
    forget_sessions(store)
    rows, user_rows = store_size(store)
    store.close()
    return summary, gc_info, {"rows": rows, "user_rows": user_rows}


@contextmanager
def _null() -> Iterator[None]:
    yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per main scenario (default 200)")
    parser.add_argument("--stress-turns", type=int, default=40, help="turns per stress scenario (default 40)")
    parser.add_argument("--user-memories", type=int, default=10_000)
    parser.add_argument("--total-memories", type=int, default=100_000)
    parser.add_argument("--budget-ms", type=float, default=150.0)
    parser.add_argument("--interim-gap", type=float, default=0.12, help="seconds between STT events")
    parser.add_argument("--scenarios", default="main,stress", help="main, stress, archive (memory with and without the archive and summaries), comma-separated (default main,stress)")
    parser.add_argument("--gc", choices=("frozen", "default"), default="frozen",
                        help="frozen (as the worker's prewarm leaves it, default) or default (nothing frozen)")
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_DATA_DIR", "/tmp/bench-latency"))
    args = parser.parse_args()
    unknown = {g.strip() for g in args.scenarios.split(",")} - {"main", "stress", "archive"}
    if unknown:  # before minutes of preload, not after
        parser.error(f"--scenarios: unknown {', '.join(sorted(unknown))} (main, stress, archive, or a list)")
    logging.basicConfig(level=logging.WARNING)
    summary, gc_info, store_info = asyncio.run(amain(args))

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"budget {args.budget_ms:g} ms; STT events every {args.interim_gap * 1000:g} ms; "
          f"store {store_info['rows']:,} rows, {store_info['user_rows']:,} the user's")
    frozen = gc_info.get("full_pass_ms_frozen")
    print(f"garbage collector: {gc_info['mode']}; one full pass "
          f"{gc_info['full_pass_ms_unfrozen']:.1f} ms with nothing frozen"
          + (f", {frozen:.1f} ms with {gc_info['frozen_objects']:,} objects frozen" if frozen is not None else ""))
    header = (f"{'scenario':28} {'turns':>5} {'added p50':>10} {'added p95':>10} {'max':>8} {'LLM req/turn':>12} "
              f"{'own mem':>8} {'w/ mem':>7} {'missed':>7} {'full GC':>8} {'GC max':>7}")
    print(header)
    print("-" * len(header))
    for name, s in summary.items():
        own = "-" if s["own_turn_memories"] is None else f"{s['own_turn_memories']:.3f}"
        print(f"{name:28} {s['turns']:>5} {s['added_ms_p50']:>8.1f}ms {s['added_ms_p95']:>8.1f}ms "
              f"{s['added_ms_max']:>6.0f}ms {s['llm_requests_per_turn']:>12.2f} {own:>8} "
              f"{s['turns_with_memories']:>7} {s['budget_missed']:>7} {s['gc_full_passes']:>8} "
              f"{'-' if s['gc_full_pass_max_ms'] is None else format(s['gc_full_pass_max_ms'], '.0f') + 'ms':>7}")
    print(json.dumps({"bench": "latency", "budget_ms": args.budget_ms, "gc": gc_info, "store": store_info,
                      "results": summary}))


if __name__ == "__main__":
    sys.exit(main())
