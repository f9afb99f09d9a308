"""A latency scenario: sessions of spoken turns through agent.py's entrypoint, memory off,
on (NORMAL or GATED) or Mem0's pattern, each turn's timings and own-turn memory recorded;
and the stress conditions (a stalled store, a slow embedder, a journal backlog)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.common.pipeline import Caught, memory_off, null
from bench.latency.mem0_pattern import HookTimes, mem0_pattern
from bench.latency.stores import BENCH_USER, memory_texts
from bench.latency.work_window import Work, in_window, record_work
from harness import LLMRequest, PipelineHarness, Utterance, scripted_llm
from memory.journal.queue import DurableWriteQueue
from memory.language import lexical
from memory.livekit.blocks import fit_recalled
from memory.livekit.session import MemorySession
from memory.retrieval.retriever import Retriever
from memory.settings import MemorySettings
from memory.storage import embedder as embedder_mod
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, Turn, now_iso


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
    texts = memory_texts(4 * turns)
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

        from memory.journal.operator import purge_user

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
            await one_session(result, stt_kind, store, retriever, settings, utterances[start : start + session_turns],
                               reference=reference, vad=vad)  # fmt: skip
    result.wall_s = time.perf_counter() - t0
    return result


async def one_session(
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
        wiring = null() if settings is not None else memory_off()
    with Caught(MemorySession) as sessions, wiring, record_work() as work:
        async with h.entrypoint(userdata, user_id=BENCH_USER, job_id=job_id):
            memory = sessions.made[0] if settings is not None else None
            await _turns(h, utterances, result, memory, refs, own_ids, pending, work)
            if memory is not None:
                result.budget_missed += sum(1 for t in memory.turns if t.recall and t.recall.missed_budget)


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
