"""The summary swap on the reply path: `python -m bench.latency.summary_swap`.

bench.latency.run's sessions (6 turns) never reach `MEMORY_SUMMARY_AFTER` (20 messages), so
they never make a summary. This one runs sessions long enough to make several, in the
same pipeline and with the same machinery (bench/latency/run.py: agent.entrypoint in
LiveKit's fake job, real speech into the real Silero VAD, the realtime STT, preemptive
generation, the real store and embedder), and compares in one run, turn by turn:

- memory off (the baseline the added delay is measured against),
- NORMAL with the archive off,
- NORMAL with the archive and summaries on (`--modes NORMAL,GATED`: GATED with the archive
  off and on as well).

The summary model (`MEMORY_LLM_MODEL`: the worker's `memory_llm`) is a scripted LLM with
a 0.5 s first token, so summaries come back while the session goes on, as they would.

Per scenario it reports the added first-audio delay (memory on minus off, paired by turn)
for all turns and for the turns whose request carried a summary (after the swap), LLM
requests per turn, preemptive replies discarded (speech handles the session created
and interrupted without the user interrupting) and those LiveKit invalidated because
the context changed under them (its "preemptive generation invalidated" warning), and
the size of the LLM request (messages and characters) at the last turn and at its
largest, against the archive-off scenario's. Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import platform
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memory  # noqa: F401  (Mem0 telemetry off before mem0 is imported)
from bench.common.pipeline import Caught, memory_off, null
from bench.latency.report import pct
from bench.latency.scenario import full_passes, warm_like_prewarm
from bench.latency.stores import BENCH_USER, bench_utterances, forget_sessions, preload, store_size
from harness import LLMRequest, PipelineHarness, Utterance, scripted_llm
from memory.livekit.archive import ArchiveSession
from memory.livekit.blocks import SUMMARY_ID
from memory.livekit.session import MemorySession
from memory.ops import heap
from memory.retrieval.retriever import Retriever
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage.store import MemoryStore

SUMMARY_TTFT_S = 0.5
SUMMARY_TEXT = (
    "The user talked about family, cooking and travel: an aunt's phone number, learning to cook "
    "(red-braised pork yesterday), spicy ramen as a favourite food, a sister's wedding next month, "
    "events in Guangzhou and a tournament Nate won. No decisions yet; the user wants reminders."
)
INVALIDATED = "preemptive generation invalidated"
USED = "using preemptive generation"


@dataclass
class SwapTurn:
    first_audio_s: float | None
    requests: int
    messages: int  # in the turn's last LLM request
    chars: int
    conversation_chars: int  # of those, the conversation's: user and agent messages, and the summary
    summary: bool  # the request carried a summary in place of older messages
    speeches: int  # speech handles the session created for the turn
    discarded: int  # of those, interrupted (the user never interrupts here)
    summarised: bool = False  # a summary was made (came back from the model) during this turn


@dataclass
class SwapResult:
    name: str
    turns: list[SwapTurn] = field(default_factory=list)
    invalidated: int = 0  # LiveKit's "preemptive generation invalidated" warnings
    preemptive_used: int = 0  # its "using preemptive generation": a preemptive reply became the reply
    summaries: int = 0
    swaps: int = 0
    swap_ms_max: float = 0.0
    archived: int = 0
    budget_missed: int = 0
    wall_s: float = 0.0
    gc_full_passes_ms: list[float] = field(default_factory=list)


class _Preemptive(logging.Handler):
    """Counts what LiveKit says of each preemptive reply at the end of the turn: used as
    the reply (debug), or thrown away because the transcript, chat context or tools
    changed under it (warning)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0
        self.used = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if INVALIDATED in message:
            self.count += 1
        elif message.startswith(USED):
            self.used += 1


@contextmanager
def counting_invalidations() -> Iterator[_Preemptive]:
    handler = _Preemptive()
    log = logging.getLogger("livekit.agents")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)  # the root handler stays at ERROR: nothing more is printed
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _conversation(role: str, text: str) -> bool:
    """A message of the conversation itself (or the summary standing for its older part),
    not a memory block (those go in the assistant's role too, as tagged data)."""
    return text.startswith("<conversation_summary>") or (role in ("user", "assistant") and not text.startswith("<"))


def _summary_or_facts(request: LLMRequest) -> str:
    """The memory model: a summary for the summary prompt, no facts for GATED's gatekeeper."""
    system = request.messages[0][1] if request.messages else ""
    return SUMMARY_TEXT if system.startswith("You summarise a conversation") else json.dumps({"facts": []})


async def one_session(
    result: SwapResult, store: MemoryStore, retriever: Retriever, settings: MemorySettings | None,
    utterances: list[Utterance], *, vad: Any,
) -> None:  # fmt: skip
    reply = scripted_llm(lambda _req: "Sure, I will keep that in mind.")
    h = PipelineHarness("realtime", vad=vad, llm=reply, timeout=60.0)
    h.plugins.memory_llm = scripted_llm(_summary_or_facts, ttft=SUMMARY_TTFT_S)
    userdata = {"settings": settings or store.settings, "store": store, "retriever": retriever}
    speeches: list[Any] = []
    with Caught(MemorySession) as sessions, Caught(ArchiveSession) as archives, counting_invalidations() as invalid, \
            (null() if settings is not None else memory_off()):  # fmt: skip
        async with h.entrypoint(userdata, user_id=BENCH_USER, job_id=f"bench-swap-{uuid.uuid4().hex[:8]}"):
            assert h.session is not None
            h.session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))
            await h.greeted()
            for utt in utterances:
                n = len(speeches)
                made = archives.made[0].stats.summaries if archives.made else 0
                turn = await h.say(utt)
                last = turn.requests[-1] if turn.requests else None
                mine = speeches[n:]
                result.turns.append(SwapTurn(
                    first_audio_s=turn.first_audio_s,
                    requests=len(turn.requests),
                    messages=len(last.messages) if last else 0,
                    chars=sum(len(t) for _, t in last.messages) if last else 0,
                    conversation_chars=sum(len(t) for r, t in last.messages if _conversation(r, t)) if last else 0,
                    summary=bool(last and any(t.startswith("<conversation_summary>") for _, t in last.messages)),
                    speeches=len(mine),
                    discarded=sum(1 for s in mine if s.interrupted),
                    summarised=bool(archives.made) and archives.made[0].stats.summaries > made,
                ))  # fmt: skip
            memory = sessions.made[0] if sessions.made else None
            if memory is not None:
                result.budget_missed += sum(1 for t in memory.turns if t.recall and t.recall.missed_budget)
                # The door's edit of each request that carried the summary (memory/livekit/blocks.py).
                swaps = [t.placed.took_s for t in memory.turns if t.placed and SUMMARY_ID in t.placed.ids]
                result.swap_ms_max = max([result.swap_ms_max, *(s * 1000 for s in swaps)])
            if archives.made:
                stats = archives.made[0].stats
                result.summaries += stats.summaries
                result.swaps += stats.swaps
                result.archived += stats.archived
        result.invalidated += invalid.count
        result.preemptive_used += invalid.used


def summarise(res: SwapResult, baseline: SwapResult, archive_off: SwapResult | None) -> dict[str, Any]:
    pairs = [(t, (t.first_audio_s - b.first_audio_s) * 1000) for t, b in zip(res.turns, baseline.turns, strict=False)
             if t.first_audio_s is not None and b.first_audio_s is not None]  # fmt: skip
    added = [a for _, a in pairs]
    after = [a for t, a in pairs if t.summary]
    before = [a for t, a in pairs if not t.summary]
    swapped = [t for t in res.turns if t.summary]
    out: dict[str, Any] = {
        "turns": len(res.turns),
        "added_first_audio_ms_p50": round(pct(added, 50), 2),
        "added_first_audio_ms_p95": round(pct(added, 95), 2),
        "turns_after_swap": len(after),
        "added_first_audio_ms_p50_after_swap": round(pct(after, 50), 2) if after else None,
        "added_first_audio_ms_p95_after_swap": round(pct(after, 95), 2) if after else None,
        "added_first_audio_ms_max_after_swap": round(max(after), 2) if after else None,
        "added_first_audio_ms_top5": [round(a, 1) for a in sorted(added, reverse=True)[:5]],
        "added_first_audio_ms_turns_with_a_summary_made": [round(a, 1) for t, a in pairs if t.summarised],
        "added_first_audio_ms_p95_turns_without": round(pct([a for t, a in pairs if not t.summarised], 95), 2),
        "added_first_audio_ms_p50_before_swap": round(pct(before, 50), 2) if before else None,
        "first_audio_ms_p50": round(pct([t.first_audio_s * 1000 for t in res.turns if t.first_audio_s], 50), 1),
        "llm_requests_per_turn": round(sum(t.requests for t in res.turns) / max(1, len(res.turns)), 3),
        "llm_requests_per_turn_after_swap": (
            round(sum(t.requests for t in swapped) / len(swapped), 3) if swapped else None
        ),
        "turns_with_two_requests": sum(1 for t in res.turns if t.requests > 1),
        "preemptive_discarded": sum(t.discarded for t in res.turns),
        "preemptive_invalidated_by_context": res.invalidated,
        "preemptive_used": res.preemptive_used,
        "speech_handles_per_turn": round(sum(t.speeches for t in res.turns) / max(1, len(res.turns)), 3),
        "context_messages_last": res.turns[-1].messages if res.turns else None,
        "context_chars_last": res.turns[-1].chars if res.turns else None,
        "context_messages_max": max((t.messages for t in res.turns), default=None),
        "context_chars_max": max((t.chars for t in res.turns), default=None),
        "context_chars_max_before_swap": max((t.chars for t in res.turns if not t.summary), default=None),
        "context_chars_max_after_swap": max((t.chars for t in swapped), default=None),
        "conversation_chars_last": res.turns[-1].conversation_chars if res.turns else None,
        "conversation_chars_max": max((t.conversation_chars for t in res.turns), default=None),
        "summaries": res.summaries,
        "requests_with_summary": res.swaps,
        "swap_ms_max": round(res.swap_ms_max, 3),
        "archived_messages": res.archived,
        "budget_missed": res.budget_missed,
        "wall_s": round(res.wall_s, 1),
    }
    if archive_off is not None and archive_off.turns and res.turns:
        out["context_chars_last_archive_off"] = archive_off.turns[-1].chars
        out["context_messages_last_archive_off"] = archive_off.turns[-1].messages
        out["conversation_chars_last_archive_off"] = archive_off.turns[-1].conversation_chars
    return out


async def amain(args: argparse.Namespace) -> dict[str, Any]:

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {"MEMORY_DATA_DIR": str(data_dir), "MEMORY_COLLECTION": "bench_summary_swap",
           "MEMORY_BUDGET_MS": str(args.budget_ms), "MEMORY_SUMMARY_AFTER": str(args.summary_after)}  # fmt: skip
    base = load_settings(env, dotenv=False)
    store = MemoryStore.open(base)
    preload(store, args.user_memories, args.total_memories)
    vad = warm_like_prewarm(base)
    heap.settle()

    normal = dataclasses.replace(base, mode=MemoryMode.NORMAL)
    specs: list[tuple[str, MemorySettings | None]] = [
        ("off", None),
        ("NORMAL, archive off", dataclasses.replace(normal, archive=False)),
    ]
    for mode in [m.strip().upper() for m in args.modes.split(",") if m.strip()]:
        if mode == "GATED":  # its own archive-off baseline (the gatekeeper's work is GATED's, not the archive's)
            specs.append(("GATED, archive off", dataclasses.replace(base, mode=MemoryMode.GATED, archive=False)))
        specs.append((f"{mode}, archive + summaries", dataclasses.replace(base, mode=MemoryMode[mode], archive=True)))
    utterances = bench_utterances(args.session_turns)
    results: dict[str, SwapResult] = {name: SwapResult(name) for name, _ in specs}
    # Sessions round-robin over the scenarios: a slow minute of the shared machine falls
    # on all of them, not on one.
    for round_no in range(args.sessions):
        for name, settings in specs:
            forget_sessions(store)
            print(f"session {round_no + 1}/{args.sessions}: {name}, {len(utterances)} turns ...", flush=True)
            heap.settle()
            res = results[name]
            t0 = time.perf_counter()
            with full_passes(res.gc_full_passes_ms):
                await one_session(res, store, Retriever(store, settings or base), settings, utterances, vad=vad)
            res.wall_s += time.perf_counter() - t0
    forget_sessions(store)
    rows, user_rows = store_size(store)
    store.close()
    off, archive_off = results["off"], results["NORMAL, archive off"]
    return {
        "store": {"rows": rows, "user_rows": user_rows},
        "scenarios": {name: summarise(res, off, archive_off) for name, res in results.items() if name != "off"},
        "baseline": {
            "first_audio_ms_p50": round(pct([t.first_audio_s * 1000 for t in off.turns if t.first_audio_s], 50), 1),
            "llm_requests_per_turn": round(sum(t.requests for t in off.turns) / max(1, len(off.turns)), 3),
            "preemptive_discarded": sum(t.discarded for t in off.turns),
            "preemptive_invalidated_by_context": off.invalidated,
            "preemptive_used": off.preemptive_used,
            "speech_handles_per_turn": round(sum(t.speeches for t in off.turns) / max(1, len(off.turns)), 3),
            "context_messages_last": off.turns[-1].messages if off.turns else None,
            "context_chars_last": off.turns[-1].chars if off.turns else None,
        },  # fmt: skip
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session-turns", type=int, default=32, help="turns per session (default 32: 65 messages)")
    parser.add_argument("--sessions", type=int, default=1, help="sessions per scenario (default 1)")
    parser.add_argument("--modes", default="NORMAL", help="modes with the archive on: NORMAL, GATED or NORMAL,GATED")
    parser.add_argument("--summary-after", type=int, default=20, help="MEMORY_SUMMARY_AFTER (default 20)")
    parser.add_argument("--user-memories", type=int, default=1_000)
    parser.add_argument("--total-memories", type=int, default=10_000)
    parser.add_argument("--budget-ms", type=float, default=150.0)
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_DATA_DIR", "/tmp/bench-summary-swap"))
    args = parser.parse_args(argv)
    bad = {m.strip().upper() for m in args.modes.split(",") if m.strip()} - {"NORMAL", "GATED"}
    if bad:
        parser.error(f"--modes: unknown {', '.join(sorted(bad))} (NORMAL, GATED)")
    logging.basicConfig(level=logging.ERROR)
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.ERROR)
    out = asyncio.run(amain(args))

    print()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"sessions of {args.session_turns} turns x {args.sessions}; MEMORY_SUMMARY_AFTER={args.summary_after}; "
        f"summary model first token {SUMMARY_TTFT_S:g} s; store {out['store']['rows']:,} rows"
    )
    b = out["baseline"]
    print(
        f"memory off: first audio p50 {b['first_audio_ms_p50']:.0f} ms, "
        f"{b['llm_requests_per_turn']:.2f} LLM requests/turn, "
        f"{b['preemptive_used']} preemptive replies used, {b['preemptive_discarded']} discarded "
        f"({b['preemptive_invalidated_by_context']} for a changed context), "
        f"last request {b['context_messages_last']} messages / {b['context_chars_last']} chars"
    )
    header = (
        f"{'scenario':30} {'added p50':>9} {'p95':>7} {'after swap: n':>13} {'p50':>7} {'p95':>7} "
        f"{'req/turn':>8} "
        f"{'preempt. used':>13} {'discarded':>9} {'invalid.':>8} {'last req msgs/chars':>19} "
        f"{'conv. chars last/max':>20} {'summaries':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, s in out["scenarios"].items():

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"

        print(f"{name:30} {ms(s['added_first_audio_ms_p50']):>9} {ms(s['added_first_audio_ms_p95']):>7} "
              f"{s['turns_after_swap']:>13} {ms(s['added_first_audio_ms_p50_after_swap']):>7} "
              f"{ms(s['added_first_audio_ms_p95_after_swap']):>7} {s['llm_requests_per_turn']:>8.2f} "
              f"{s['preemptive_used']:>13} {s['preemptive_discarded']:>9} {s['preemptive_invalidated_by_context']:>8} "
              f"{str(s['context_messages_last']) + ' / ' + str(s['context_chars_last']):>19} "
              f"{str(s['conversation_chars_last']) + ' / ' + str(s['conversation_chars_max']):>20} "
              f"{s['summaries']:>9}")  # fmt: skip
    print(json.dumps({"bench": "summary_swap", "session_turns": args.session_turns, "sessions": args.sessions,
                      "summary_after": args.summary_after, **out}))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
