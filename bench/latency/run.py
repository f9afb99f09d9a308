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
import json
import logging
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common.pipeline import null
from bench.latency.lookup_floor import STORE_SQL, timed_stages
from bench.latency.mem0_pattern import HookTimes, async_memory
from bench.latency.report import pct, ratio, summarise
from bench.latency.scenario import (
    ScenarioResult,
    full_passes,
    journal_backlog,
    one_session,
    run_scenario,
    slow_embedder,
    stalled_store,
    warm_like_prewarm,
)
from bench.latency.stores import bench_utterances, forget_sessions, preload, remote_database, store_size
from harness import Utterance
from memory.ops import heap
from memory.retrieval.retriever import Retriever
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage.session_index import RoutedSource
from memory.storage.store import MemoryStore

log = logging.getLogger("bench.latency")


async def amain(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, int]]:

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "MEMORY_DATA_DIR": str(data_dir),
        "MEMORY_COLLECTION": "bench_latency",
        "MEMORY_BUDGET_MS": str(args.budget_ms),
    }
    base = load_settings(env, dotenv=False)
    network = remote_database(args, base, env)
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
                stages = (lambda t=times: _stages(t)) if args.stages else null
                with full_passes(res.gc_full_passes_ms), stages():
                    await one_session(res, kind, store, retrievers[name], settings, batch,
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
        with ctx() if ctx else null():
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
                    peer_s[f"p95_ratio_to_{mode}"] = ratio(
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


@contextmanager
def _stages(times: dict[str, list[float]]) -> Iterator[None]:
    """The look-up's stages and its statements timed (`bench.latency.lookup_floor`'s)."""
    with timed_stages(Retriever, times), timed_stages(RoutedSource, times, STORE_SQL):
        yield


def main(argv: list[str] | None = None) -> None:
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
    args = parser.parse_args(argv)
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
