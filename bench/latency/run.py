"""What memory adds to what a caller hears: `python -m bench.latency.run`.

Runs the pipeline agent.py ships (harness/): real speech (espeak-ng fixtures) into
the real Silero VAD, an STT timed like OpenAI's in each mode (realtime: interims as
the words are spoken, the final 0.2 s after the VAD's end of speech; batch: LiveKit's
StreamAdapter, one final 0.4 s after it), agent.py's turn handling (VAD, 0.5 s
endpointing, preemptive generation), an LLM with a 0.4 s time to first token and a
TTS with first audio 0.2 s after its request. With memory, the session is
agent.py's own entrypoint in LiveKit's fake job context, on the embedded Postgres
and the local embedder, preloaded with 10,000 memories for the user among 100,000.

For each STT mode it runs the same utterances with memory off and in NORMAL and
GATED, in sessions of a few turns, and reports the added delay from the end of the
user's speech to the first audio frame of the reply (memory on minus off, paired by
turn), the sessions' first turns separately, LLM requests per turn, and own-turn
memory (the block the LLM saw equals a reference look-up for the turn's words made
with no budget). Stress scenarios (realtime, NORMAL): a store that stalls 5 s on
every call, an embedder that takes 200 ms a call, and 40 long turns of another user
waiting in the journal as the session starts.

The process is prepared as a worker's prewarm prepares it: models loaded, the
long-lived heap frozen (memory/ops/heap.py). Prints a table and, last, one JSON line.
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
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livekit.agents import Agent

import harness as harness_mod
from bench.common.evaldata import EvalDataError, eval_file
from bench.common.stats import mean_interval
from bench.latency.lookup_floor import STORE_SQL, timed_stages
from bench.latency.mem0_pattern import HookTimes, async_memory, mem0_pattern
from bench.latency.work_window import Work, in_window, record_work
from harness import LLMRequest, PipelineHarness, Utterance, scripted_llm
from memory.journal.queue import DurableWriteQueue
from memory.language import lexical
from memory.livekit.blocks import fit_recalled
from memory.livekit.session import MemorySession
from memory.ops import heap
from memory.prompts import load_prompt
from memory.retrieval.retriever import Retriever
from memory.settings import DURABLE_CATEGORIES, MemoryMode, MemorySettings, load_settings
from memory.storage import embedder as embedder_mod
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, Turn, now_iso

log = logging.getLogger("bench.latency.run")
BENCH_USER = "bench-user"


# ------------------------------------------------------------------ preload
def _eval_file(name: str) -> Path:
    """An eval file the workload is made of; without it the benchmark would silently
    measure another workload (synthetic notes, no memory questions)."""
    try:
        return eval_file(name)
    except EvalDataError as exc:
        raise SystemExit(f"bench.latency.run: {exc}") from None


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
        from memory.language.lexical import lex_fields
    except ImportError:  # lexical stage not installed: Mem0's fields only

        def lex_fields(text: str) -> dict[str, str]:
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


# ---------------------------------------------------------------- scenarios
@dataclass
class TurnRecord:
    text: str
    first_audio_s: float | None  # end of speech -> first audio frame of the reply
    requests: int
    own_memories: bool | None
    injected: int
    first_of_session: bool
    waited_ms: float | None = None  # what the reply waited for memory
    request_ms: float | None = None  # end of speech -> the LLM request
    committed_ms: float | None = None  # end of speech -> LiveKit committed the user's message
    work_ms: dict[str, float] = field(default_factory=dict)  # memory's work in [end of speech, first audio]


@dataclass
class ScenarioResult:
    name: str
    turns: list[TurnRecord] = field(default_factory=list)
    wall_s: float = 0.0
    budget_missed: int = 0
    gc_full_passes_ms: list[float] = field(default_factory=list)
    peer_times: HookTimes | None = None  # Mem0's pattern: its hook's awaited calls


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

    pool.connection = slow_connection
    try:
        yield
    finally:
        pool.connection = original


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
        from psycopg import sql

        from memory.journal.queue import purge_user

        purge_user(settings.journal_path, BACKLOG_USER)
        with store.pool.connection() as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(store.table)),
                         [BACKLOG_USER])  # fmt: skip


def warm_like_prewarm(settings: MemorySettings) -> Any:
    """What `agent.prewarm` loads before a job process takes a session: both embedder
    handles, the Chinese segmenter, the VAD, the OpenAI plugins (their constructors and
    first-use imports). Returns the VAD. The caller settles the heap last, as prewarm does."""
    from livekit.plugins import silero

    import agent

    embedder_mod.local_model()
    embedder_mod.write_model()
    lexical.warm_up()
    vad = silero.VAD.load()
    agent.make_plugins(settings, vad, env={"OPENAI_API_KEY": "sk-bench-offline"})
    agent._warm_first_use_imports()
    return vad


class Caught:
    """Catches the objects of `cls` (MemorySession, ArchiveSession) that agent.entrypoint
    attaches to its session: the bench reads their turn logs and stats."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.made: list[Any] = []
        self._real = cls.attach

    def __enter__(self) -> Caught:
        made, real = self.made, self._real

        def attach(obj: Any, session: Any) -> None:
            made.append(obj)
            real(obj, session)

        self.cls.attach = attach
        return self

    def __exit__(self, *exc: object) -> None:
        self.cls.attach = self._real


async def run_scenario(
    name: str,
    stt_kind: str,
    store: MemoryStore,
    retriever: Retriever,
    settings: MemorySettings | None,
    utterances: list[Utterance],
    *,
    session_turns: int,
    reference: bool,
    vad: Any,
) -> ScenarioResult:
    """`utterances` spoken in sessions of `session_turns`; memory off when `settings` is None."""
    result = ScenarioResult(name)
    t0 = time.perf_counter()
    with full_passes(result.gc_full_passes_ms):
        for start in range(0, len(utterances), session_turns):
            await _one_session(result, stt_kind, store, retriever, settings, utterances[start : start + session_turns],
                               reference=reference, vad=vad)  # fmt: skip
    result.wall_s = time.perf_counter() - t0
    return result


async def _one_session(
    result: ScenarioResult,
    stt_kind: str,
    store: MemoryStore,
    retriever: Retriever,
    settings: MemorySettings | None,
    utterances: list[Utterance],
    *,
    reference: bool,
    vad: Any,
    peer: Any = None,
) -> None:
    """One session of `utterances`: memory off when `settings` is None, Mem0's documented
    pattern when `peer` (Mem0's AsyncMemory) is given, else the product's memory."""
    refs: list[list[str]] = []
    pending: list[tuple[str, list[str], set[str]]] = []  # reference look-ups to make
    memory: MemorySession | None = None

    def own_ids(records: list[MemoryRecord]) -> list[str]:
        # This session's own writes are left out on both sides: those turns are in the
        # chat history already, and a look-up may run just before or after one lands.
        # Memories already in the session-start profile are not repeated per turn.
        sid = memory.session_id if memory else None
        shown = {r.id for r in (memory.profile or [])} if memory else set()
        return [r.id for r in records if r.metadata.get("session_id") != sid and r.id not in shown]

    async def respond(request: LLMRequest) -> str:
        # What the reference look-up for this request needs, noted now; the look-up runs
        # after the reply has played (`_turns`): run here, it sat on the reply's path
        # (between the LLM's first token and the TTS request) in memory-on runs only.
        if memory is not None and reference and request.messages and request.messages[-1][0] == "user":
            pending.append((request.messages[-1][1], memory.earlier_turns(), {r.id for r in (memory.profile or [])}))
        return "Sure."

    # A caller's words are new to the process: the query embeddings another scenario (or
    # session) made of the same fixtures must not answer this session's look-ups.
    getattr(store.mem0.embedding_model, "_cache", {}).clear()
    if peer is not None:
        getattr(peer.embedding_model, "_cache", {}).clear()
    h = PipelineHarness(stt_kind, vad=vad, llm=scripted_llm(respond), timeout=60.0)
    # GATED's extraction LLM: a remote call, in the background
    h.plugins.memory_llm = scripted_llm(lambda _req: json.dumps({"facts": []}), ttft=0.3)
    userdata = {"settings": settings or store.settings, "store": store, "retriever": retriever}
    # Memory off is the same entrypoint, room and greeting with memory taken out: no
    # events subscribed, no writes, no profile, no injection. Mem0's pattern is memory off
    # with Mem0's documented hook as its agent's memory (bench/latency/mem0_pattern.py).
    job_id = f"bench-{uuid.uuid4().hex[:8]}"
    if peer is not None:
        times = result.peer_times = result.peer_times or HookTimes()
        wiring = mem0_pattern(peer, BENCH_USER, job_id, times, store.settings.recall_top_k)
    else:
        wiring = _null() if settings is not None else _memory_off()
    with Caught(MemorySession) as sessions, wiring, record_work() as work:
        async with h.entrypoint(userdata, user_id=BENCH_USER, job_id=job_id):
            memory = sessions.made[0] if settings is not None else None
            await _turns(h, utterances, result, memory, refs, own_ids, pending, work)
            if memory is not None:
                result.budget_missed += sum(1 for t in memory.turns if t.recall and t.recall.missed_budget)


@contextmanager
def _memory_off() -> Iterator[None]:
    """The same entrypoint with memory taken out: a plain agent (no injection, no
    working memory), no transcript or write hooks, no archive."""
    import memory
    from memory import api
    from memory.livekit.archive import ArchiveSession

    class PlainAgent(Agent):
        def __init__(self) -> None:
            super().__init__(instructions=load_prompt("system"))

    real_first, real_attach, real_close = memory.first_agent, MemorySession.attach, MemorySession.aclose
    real_archive, real_inject = ArchiveSession.attach, api._inject_into_agents

    async def aclose(self: MemorySession, **_kw: Any) -> None:
        pass

    memory.first_agent = lambda *_args, **_kw: PlainAgent()
    MemorySession.attach = lambda self, session: None
    MemorySession.aclose = aclose
    ArchiveSession.attach = lambda self, session: None
    api._inject_into_agents = lambda session, mem: None
    try:
        yield
    finally:
        memory.first_agent = real_first
        MemorySession.attach = real_attach
        MemorySession.aclose = real_close
        ArchiveSession.attach = real_archive
        api._inject_into_agents = real_inject


async def _references(
    memory: MemorySession,
    pending: list[tuple[str, list[str], set[str]]],
    refs: list[list[str]],
    own_ids: Callable[[list[MemoryRecord]], list[str]],
) -> None:
    """The reference look-ups of the requests just answered, with no budget: what each
    turn should have carried. Made once the reply has played, so never beside it."""
    service = memory.service
    while pending:
        text, earlier, shown = pending.pop(0)
        recs = (
            await asyncio.to_thread(service.recall_sync, BENCH_USER, text, earlier, memory.session_id)
            if service.wants_recall(text)
            else []
        )
        recs, _ = fit_recalled([r for r in recs if r.id not in shown], service.settings.recall_max_chars)
        refs.append(own_ids(recs))


async def _turns(
    h: PipelineHarness,
    utterances: list[Utterance],
    result: ScenarioResult,
    memory: MemorySession | None,
    refs: list[list[str]],
    own_ids: Callable[[list[MemoryRecord]], list[str]],
    pending: list[tuple[str, list[str], set[str]]],
    work: list[Work] | None,
) -> None:
    await h.greeted()
    for i, utt in enumerate(utterances):
        n_refs = len(refs)
        n_logs = len(memory.turns) if memory else 0
        turn = await h.say(utt)
        if memory is not None:
            await _references(memory, pending, refs, own_ids)
        own: bool | None = None
        injected, waited = 0, None
        if memory is not None and len(memory.turns) > n_logs:
            log_ = memory.turns[-1]
            injected = log_.injected
            waited = round(log_.recall.waited_s * 1000, 2) if log_.recall else 0.0
            # what the LLM saw must match what the log says was injected
            block = turn.requests[-1].memory_block("recalled_memories") if turn.requests else ""
            assert len([ln for ln in block.splitlines() if ln.startswith("{")]) == log_.injected, (block, log_)
            if len(refs) > n_refs:
                got = set(
                    own_ids([r for r in (log_.recall.records if log_.recall else []) if r.id in log_.injected_ids])
                )
                own = got == set(refs[-1])
                if not own and os.environ.get("BENCH_DEBUG_OWN"):
                    print(f"own mismatch: {utt.text!r} prefetched={log_.recall.prefetched if log_.recall else None} "
                          f"injected-only={len(got - set(refs[-1]))} reference-only={len(set(refs[-1]) - got)} "
                          f"earlier_context={log_.recall.earlier_context if log_.recall else None} "
                          f"requests={[r.messages[-1][1][:30] for r in turn.requests]}", file=sys.stderr)  # fmt: skip
        record = TurnRecord(utt.text, turn.first_audio_s, len(turn.requests), own, injected, i == 0, waited)
        if turn.requests:
            record.request_ms = round((turn.requests[0].arrived_at - turn.end_of_speech) * 1000, 2)
        if turn.committed_at:
            record.committed_ms = round((turn.committed_at - turn.end_of_speech) * 1000, 2)
        if work is not None and turn.first_audio is not None:
            record.work_ms = in_window(work, turn.end_of_speech, turn.first_audio)
        result.turns.append(record)


# ------------------------------------------------------------------- report
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def quantile_interval(
    values: list[float], q: float, *, resamples: int = 5000, seed: int = 20261126
) -> list[float] | None:
    """95% percentile-bootstrap interval of the q-th percentile (turns resampled): with
    24 turns a p95 is about the second largest value, and the interval says how far
    another run's could lie."""
    if len(values) < 2:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    stats = np.quantile(data[picks], q / 100, axis=1, method="nearest")
    return [round(float(np.quantile(stats, 0.025)), 1), round(float(np.quantile(stats, 0.975)), 1)]


def _ratio(peer_ms: float, ours_ms: float) -> float | None:
    """How many times the peer's added delay is ours; None when ours is at or under 1 ms
    (at the noise floor a ratio says nothing: the added delays are then both reported)."""
    return round(peer_ms / ours_ms, 2) if ours_ms > 1.0 else None


def _p(turns: list[TurnRecord], name: str, q: float) -> float | None:
    values = [getattr(t, name) for t in turns if getattr(t, name) is not None]
    return round(pct(values, q), 1) if values else None


def _work_summary(turns: list[TurnRecord]) -> dict[str, dict[str, float]]:
    """Per kind of memory work: the share of turns where it ran between the end of
    speech and the first audio frame, and its mean milliseconds there when it did."""
    kinds = sorted({k for t in turns for k in t.work_ms})
    out = {}
    for kind in kinds:
        ms = [t.work_ms[kind] for t in turns if kind in t.work_ms]
        out[kind] = {"turns_share": round(len(ms) / max(1, len(turns)), 3), "mean_ms": round(sum(ms) / len(ms), 1)}
    return out


def summarise(res: ScenarioResult, baseline: ScenarioResult) -> dict[str, Any]:
    pairs = [
        (t, (t.first_audio_s - b.first_audio_s) * 1000)
        for t, b in zip(res.turns, baseline.turns, strict=False)
        if t.first_audio_s is not None and b.first_audio_s is not None
    ]
    added = [a for _, a in pairs]
    later = [a for t, a in pairs if not t.first_of_session]
    first = [a for t, a in pairs if t.first_of_session]
    own = [t.own_memories for t in res.turns if t.own_memories is not None]
    waited = [t.waited_ms for t in res.turns if t.waited_ms is not None]
    return {
        "turns": len(res.turns),
        "added_first_audio_ms_p50": round(pct(added, 50), 2),
        "added_first_audio_ms_p95": round(pct(added, 95), 2),
        "added_first_audio_ms_max": round(max(added), 2) if added else None,
        "added_first_audio_ms_mean": round(sum(added) / len(added), 2) if added else None,
        "added_first_audio_ms_mean_ci95": [round(x, 1) for x in mean_interval(added)] if len(added) > 1 else None,
        "added_first_audio_ms_p50_ci95": quantile_interval(added, 50),
        "added_first_audio_ms_p95_ci95": quantile_interval(added, 95),
        "added_first_audio_ms_each": [round(a, 1) for a in added],
        "added_first_audio_ms_p95_later_turns": round(pct(later, 95), 2),
        "first_turn_added_ms": [round(a, 2) for a in first],
        "first_turn_added_ms_max": round(max(first), 2) if first else None,
        "first_audio_ms_p50": round(pct([t.first_audio_s * 1000 for t in res.turns if t.first_audio_s], 50), 1),
        "memory_wait_ms_p95": round(pct(waited, 95), 2) if waited else None,
        "request_ms_p50": _p(res.turns, "request_ms", 50),
        "request_ms_p50_off": _p(baseline.turns, "request_ms", 50),
        "committed_ms_p50": _p(res.turns, "committed_ms", 50),
        "work_in_window": _work_summary(res.turns),
        "llm_requests_per_turn": round(sum(t.requests for t in res.turns) / max(1, len(res.turns)), 3),
        "own_memory": round(sum(own) / len(own), 4) if own else None,
        "own_memory_turns": len(own),
        "turns_with_memories": sum(1 for t in res.turns if t.injected),
        "budget_missed": res.budget_missed,
        "gc_full_passes": len(res.gc_full_passes_ms),
        "gc_full_pass_max_ms": round(max(res.gc_full_passes_ms), 1) if res.gc_full_passes_ms else None,
        "wall_s": round(res.wall_s, 1),
    }


async def amain(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, int]]:

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "MEMORY_DATA_DIR": str(data_dir),
        "MEMORY_COLLECTION": "bench_latency",
        "MEMORY_BUDGET_MS": str(args.budget_ms),
    }
    base = load_settings(env, dotenv=False)
    network = _remote_database(args, base, env)
    if network.url:
        base = load_settings({**env, "MEMORY_DATABASE_URL": network.url}, dotenv=False)
    store = MemoryStore.open(base)
    preload(store, args.user_memories, args.total_memories)
    vad = warm_like_prewarm(base)  # then the heap is frozen, as prewarm ends
    gc_info: dict[str, Any] = {"mode": args.gc, "full_pass_ms_unfrozen": round(heap.full_pass_ms(), 1)}
    if args.gc == "frozen":
        gc_info["frozen_objects"] = heap.settle()
        gc_info["full_pass_ms_frozen"] = round(heap.full_pass_ms(), 1)
    # The look-up in SQL (MEMORY_SESSION_INDEX off) and, as "+index", on the caller's
    # memories held in the process (memory/storage/session_index.py), in the same run.
    normal = dataclasses.replace(base, mode=MemoryMode.NORMAL, session_index=False)
    gated = dataclasses.replace(base, mode=MemoryMode.GATED, session_index=False)
    indexed = [
        (f"{m} +index", dataclasses.replace(s, session_index=True)) for m, s in (("NORMAL", normal), ("GATED", gated))
    ]
    # One per process, as prewarm makes it; each scenario gets a fresh one, so that each
    # session's first turn meets what a new job process's first session meets.
    new_retriever = lambda s: Retriever(store, s)  # noqa: E731 - a one-line helper
    turns = bench_utterances(args.turns)
    stress = bench_utterances(args.stress_turns)
    peer = async_memory(store) if args.mem0_pattern else None

    kinds = [k.strip() for k in args.stt.split(",")]
    stress_specs: list[tuple[str, str, MemorySettings | None, list[Utterance], Callable[[], Any] | None]] = [
        ("off realtime (stress baseline)", "realtime", None, stress, None),
        ("NORMAL realtime, embedder 200 ms", "realtime", normal, stress, lambda: slow_embedder(store, 0.2)),
        # Before the stalled store: its stalled calls go on for up to 5 s after it.
        (
            "NORMAL realtime, 40 long turns waiting",
            "realtime",
            normal,
            stress,
            lambda: journal_backlog(store, normal, 40, 1500),
        ),
        ("NORMAL realtime, store stalls 5 s", "realtime", normal, stress, lambda: stalled_store(store, 5.0)),
    ]
    results: dict[str, ScenarioResult] = {}
    stage_times: dict[str, dict[str, list[float]]] = {}
    for kind in kinds:
        stage_times[kind], stage_times[f"{kind} +index"] = defaultdict(list), defaultdict(list)
        # Memory off, NORMAL, GATED and memory off again (the A/A pair: how far two runs
        # of the same pipeline differ on this machine), interleaved session by session,
        # the order rotated each time: a machine that gets busier during the run moves
        # all of them alike, not the scenario that happened to run then.
        # Mem0's documented pattern (bench/latency/mem0_pattern.py) runs among them, on the same store.
        group: list[tuple[str, MemorySettings | None]] = [
            (f"off {kind}", None), (f"NORMAL {kind}", normal), (f"GATED {kind}", gated),
            *([(f"{name} {kind}", s) for name, s in indexed] if args.session_index else []),
            *([(f"Mem0 pattern {kind}", None)] if peer is not None else []), (f"off again {kind}", None),
        ]  # fmt: skip
        forget_sessions(store)  # each STT mode meets the preloaded store only
        retrievers = {name: new_retriever(settings or base) for name, settings in group}
        for name, _ in group:
            results[name] = ScenarioResult(name)
        for n, start in enumerate(range(0, len(turns), args.session_turns)):
            for name, settings in group[n % len(group) :] + group[: n % len(group)]:
                batch = turns[start : start + args.session_turns]
                print(f"running {name}: session {n + 1}, {len(batch)} turns ...", flush=True)
                if args.gc == "frozen":
                    heap.settle()  # what lives on is frozen, as prewarm leaves a fresh job process
                res, t0 = results[name], time.perf_counter()
                on = settings is not None and settings.session_index
                store.session_index.enabled = on  # the store is shared: each session as its settings say
                times = stage_times[f"{kind} +index" if on else kind]
                stages = (lambda t=times: _stages(t)) if args.stages else _null
                with full_passes(res.gc_full_passes_ms), stages():
                    await _one_session(res, kind, store, retrievers[name], settings, batch,
                                       reference=settings is not None, vad=vad,
                                       peer=peer if name.startswith("Mem0") else None)  # fmt: skip
                res.wall_s += time.perf_counter() - t0
        forget_sessions(store)  # Mem0's pattern's rows, before the next mode's sessions
    store.session_index.enabled = False  # the stress scenarios' look-ups in SQL, as their baseline's
    for name, kind, settings, utts, ctx in stress_specs if args.stress_turns else []:
        forget_sessions(store)  # each scenario meets the preloaded store only
        print(f"running {name}: {len(utts)} turns ...", flush=True)
        if args.gc == "frozen":
            heap.settle()
        with ctx() if ctx else _null():
            results[name] = await run_scenario(
                name, kind, store, new_retriever(settings or base), settings, utts,
                session_turns=args.session_turns, reference=ctx is None and settings is not None, vad=vad,
            )  # fmt: skip
    scenarios = {}
    for kind, label in (("realtime", "streaming"), ("batch", "batch")):
        for mode in ("NORMAL", "GATED"):
            if f"{mode} {kind}" in results:
                scenarios[f"{mode.lower()}_{label}"] = summarise(results[f"{mode} {kind}"], results[f"off {kind}"])
            if f"{mode} +index {kind}" in results:
                scenarios[f"{mode.lower()}_index_{label}"] = summarise(
                    results[f"{mode} +index {kind}"], results[f"off {kind}"]
                )
        if f"Mem0 pattern {kind}" in results:
            peer_s = scenarios[f"mem0_pattern_{label}"] = summarise(
                results[f"Mem0 pattern {kind}"], results[f"off {kind}"]
            )
            times = results[f"Mem0 pattern {kind}"].peer_times or HookTimes()
            peer_s["hook_search_ms_p50"] = round(pct(times.search_ms, 50), 1) if times.search_ms else None
            peer_s["hook_add_ms_p50"] = round(pct(times.add_ms, 50), 1) if times.add_ms else None
            peer_s["hook_found_mean"] = round(sum(times.found) / len(times.found), 2) if times.found else None
            for mode in ("normal", "gated", "normal_index", "gated_index"):
                ours = scenarios.get(f"{mode}_{label}")
                if ours is not None:
                    peer_s[f"p95_ratio_to_{mode}"] = _ratio(
                        peer_s["added_first_audio_ms_p95"], ours["added_first_audio_ms_p95"]
                    )
        if f"off again {kind}" in results:
            scenarios[f"aa_noise_{label}"] = summarise(results[f"off again {kind}"], results[f"off {kind}"])
    stress_out = {
        key: summarise(results[name], results["off realtime (stress baseline)"])
        for key, name in (
            ("embedder_200ms", "NORMAL realtime, embedder 200 ms"),
            ("journal_backlog", "NORMAL realtime, 40 long turns waiting"),
            ("store_stall_5s", "NORMAL realtime, store stalls 5 s"),
        )
        if name in results
    }
    if args.stages:  # the look-up's stages in the pipeline, every look-up of the run (references too)
        gc_info["lookup_stages_ms"] = {
            kind: {k: {"n": len(v), "p50": round(pct(v, 50), 2), "p95": round(pct(v, 95), 2)} for k, v in t.items()}
            for kind, t in stage_times.items()
            if t
        }
    forget_sessions(store)
    rows, user_rows = store_size(store)
    store.close()
    network.close()
    return scenarios, stress_out, gc_info, {"rows": rows, "user_rows": user_rows, "database": network.describe()}


@dataclass
class _Network:
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


def _remote_database(args: argparse.Namespace, base: MemorySettings, env: dict[str, str]) -> _Network:
    """Start what stands between the worker and its database, as `args` ask."""
    from psycopg.conninfo import conninfo_to_dict

    from harness.netdelay import DelayProxy
    from harness.pgbouncer import PgBouncer
    from memory.storage.postgres import embedded_url

    net = _Network(args.db_rtt_ms, args.pgbouncer)
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


@contextmanager
def _null() -> Iterator[None]:
    yield


@contextmanager
def _stages(times: dict[str, list[float]]) -> Iterator[None]:
    """The look-up's stages and its statements timed (`bench.latency.lookup_floor`'s)."""
    with timed_stages(Retriever, times), timed_stages(MemoryStore, times, STORE_SQL):
        yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=24, help="turns per main scenario (default 24)")
    parser.add_argument("--session-turns", type=int, default=6, help="turns per session (default 6)")
    parser.add_argument("--stress-turns", type=int, default=12, help="turns per stress scenario (default 12; 0: none)")
    parser.add_argument("--stt", default="realtime,batch", help="STT modes: realtime, batch, or both (default)")
    parser.add_argument("--user-memories", type=int, default=10_000)
    parser.add_argument("--total-memories", type=int, default=100_000)
    parser.add_argument("--budget-ms", type=float, default=150.0)
    parser.add_argument(
        "--gc",
        choices=("frozen", "default"),
        default="frozen",
        help="frozen (as the worker's prewarm leaves it, default) or default (nothing frozen)",
    )
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_DATA_DIR", "/tmp/bench-latency"))
    parser.add_argument(
        "--db-rtt-ms",
        type=float,
        default=None,
        help="reach the database through a loopback TCP proxy adding this round trip (0: the proxy, no delay)",
    )
    parser.add_argument("--pgbouncer", action="store_true", help="PgBouncer (transaction mode) in front of Postgres")
    parser.add_argument(
        "--no-session-index",
        dest="session_index",
        action="store_false",
        help="leave out NORMAL/GATED +index (the look-up on the caller's memories held in the process)",
    )
    parser.add_argument(
        "--stages", action="store_true", help="time the look-up's stages (bench.latency.lookup_floor's)"
    )
    parser.add_argument(
        "--no-mem0-pattern",
        dest="mem0_pattern",
        action="store_false",
        help="leave out the peer: Mem0's documented LiveKit pattern on the same store (bench/latency/mem0_pattern.py)",
    )
    args = parser.parse_args()
    unknown = {g.strip() for g in args.stt.split(",")} - {"realtime", "batch"}
    if unknown:  # before minutes of preload, not after
        parser.error(f"--stt: unknown {', '.join(sorted(unknown))} (realtime, batch, or realtime,batch)")
    logging.basicConfig(level=logging.WARNING)
    scenarios, stress, gc_info, store_info = asyncio.run(amain(args))

    print()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"budget {args.budget_ms:g} ms; store {store_info['rows']:,} rows, {store_info['user_rows']:,} the user's; "
        f"sessions of {args.session_turns} turns; database: {store_info['database']}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    frozen = gc_info.get("full_pass_ms_frozen")
    print(
        f"garbage collector: {gc_info['mode']}; "
        f"one full pass {gc_info['full_pass_ms_unfrozen']:.1f} ms with nothing frozen"
        + (f", {frozen:.1f} ms with {gc_info['frozen_objects']:,} objects frozen" if frozen is not None else "")
    )
    header = (
        f"{'scenario':24} {'turns':>5} {'added p50':>10} {'added p95':>10} {'1st turn max':>12} {'wait p95':>9} "
        f"{'LLM req/turn':>12} {'own mem':>8} {'w/ mem':>7} {'missed':>7} {'reply p50':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, s in [*scenarios.items(), *stress.items()]:
        own = "-" if s["own_memory"] is None else f"{s['own_memory']:.3f}"
        first = "-" if s["first_turn_added_ms_max"] is None else f"{s['first_turn_added_ms_max']:.1f}ms"
        wait = "-" if s["memory_wait_ms_p95"] is None else f"{s['memory_wait_ms_p95']:.1f}ms"
        print(
            f"{name:24} {s['turns']:>5} {s['added_first_audio_ms_p50']:>8.1f}ms "
            f"{s['added_first_audio_ms_p95']:>8.1f}ms "
            f"{first:>12} {wait:>9} {s['llm_requests_per_turn']:>12.2f} {own:>8} {s['turns_with_memories']:>7} "
            f"{s['budget_missed']:>7} {s['first_audio_ms_p50']:>8.0f}ms"
        )
    print()
    for name, s in [*scenarios.items(), *stress.items()]:
        print(
            f"{name:24} added mean {s['added_first_audio_ms_mean']} ms {s['added_first_audio_ms_mean_ci95']}, "
            f"p50 CI {s['added_first_audio_ms_p50_ci95']}, p95 CI {s['added_first_audio_ms_p95_ci95']}, "
            f"first turns {s['first_turn_added_ms']}; memory work in the window: {s['work_in_window']}"
        )
    print(
        json.dumps(
            {
                "bench": "latency",
                "budget_ms": args.budget_ms,
                "db_rtt_ms": args.db_rtt_ms,
                "pgbouncer": args.pgbouncer,
                "load_average_1m": round(os.getloadavg()[0], 2),
                "gc": gc_info,
                "store": store_info,
                "session_turns": args.session_turns,
                "scenarios": scenarios,
                "stress": stress,
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
