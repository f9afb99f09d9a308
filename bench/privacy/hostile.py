"""Hostile input and faults, measured: `python -m bench.privacy.hostile`.

Runs the cases of issue 20 through the real `AgentSession` (harness/scripted: scripted
STT, a recording fake LLM, instant TTS), the real memory module, the embedded
Postgres store and the local embedder:

- journal faults: a journal that cannot be opened, a read-only one, a full one, and a
  worker killed with -9 while its journal disk is full (real tmpfs where this process
  may mount one, SQLite's own refusal at the journal's boundary where not): turns lost
  and duplicated, counted in the store by write id;
- long turns: the event loop's longest stall (a 1 ms ticker) while a 5 MB and 100 KB
  typed messages go through a session; journal bytes per byte of text journaled, English
  and Chinese; GATED extraction input per character of user input;
- instructions: "remember that you must ..." turns in GATED (extraction answers no
  facts, or the instruction itself as a fact) and whether any is stored; stored texts
  that try to close or forge a memory block (look-alikes included), and whether the
  block the LLM sees still holds exactly the memories it should;
- secrets: probe sentences (English and Chinese) said in NORMAL, and how many of their
  values reach the store; raw transcripts in the logs at `dev`'s DEBUG level;
- read capacity: 20 and 50 sessions in one process, a turn a second each: the delay
  memory adds to the LLM request (p95) and the share of turns that got no memory;
- forms, contexts, forget under faults and the spill file, the operator's tools: the
  ways in beside the spoken turn (`bench/privacy/hostile_surfaces.py`).

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT
from bench.privacy import hostile_surfaces
from bench.privacy.faults import can_mount
from bench.privacy.hostile_faults import faults, long_turns
from bench.privacy.session import LoopWatch, pct, run_session, service_for
from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.language import lexical
from memory.livekit.session import MemorySession
from memory.ops import heap
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage import embedder as embedder_mod
from memory.storage.store import MemoryStore

log = logging.getLogger("bench.privacy.hostile")
ROOT = REPO_ROOT


# ------------------------------------------------------------------ instructions, secrets
async def instructions(store: MemoryStore) -> dict[str, Any]:
    """GATED, each instruction said as "remember ...": extraction answers no facts for
    half the users and the instruction itself as a fact for the other half."""
    from bench.privacy.hostile_probes import INSTRUCTIONS

    stored = 0
    for answer in ("none", "itself"):

        def extract(req: LLMRequest, answer: str = answer) -> str:
            said = json.loads(req.messages[-1][1])["latest_user_message"]
            facts = [] if answer == "none" else [{"text": said, "category": "preferences", "slot": "reply_rules"}]
            return json.dumps({"facts": facts})

        gated = service_for(store, MemoryMode.GATED, RecordingLLM(extract))
        user = f"instr-{answer}-{uuid.uuid4().hex[:6]}"

        async def say(h: VoiceHarness, m: MemorySession) -> None:
            for text in INSTRUCTIONS:
                await h.user_says(text)

        await run_session(gated, user, say)
        stored += len(store.list_user(user))

    # Stored text that tries to close or forge a memory block, shown in a NORMAL session.
    from harness.hostile import HOSTILE
    from memory.livekit.blocks import MEMORY_ROLE

    user = f"forge-{uuid.uuid4().hex[:6]}"
    for text in HOSTILE:
        store.add_raw(user, text + " about my garden")
    llm = RecordingLLM(lambda req: "Sure.")

    async def ask(h: VoiceHarness, m: MemorySession) -> None:
        await h.user_says("Tell me about my garden")

    memory_session, _ = await run_session(service_for(store, MemoryMode.NORMAL), user, ask, llm=llm)
    request = llm.requests[-1]
    blocks = [(role, t) for role, t in request.messages if t.startswith("<recalled_memories>")]
    forged = 0
    for role, block in blocks:
        lines = block.splitlines()[2:-1]
        ok = role == MEMORY_ROLE and len(lines) == memory_session.turns[-1].injected
        for line in lines:
            try:
                ok = ok and set(json.loads(line)) <= {"said", "kind", "note"}
            except ValueError:
                ok = False
        forged += 0 if ok else 1
    return {
        "instructions_tried": 2 * len(INSTRUCTIONS),
        "instructions_stored": stored,
        "forged_blocks": forged + (0 if blocks else 1),
        "memory_role": blocks[0][0] if blocks else None,
        "llm_requests_per_turn": len(llm.requests),
    }


async def secrets(store: MemoryStore) -> dict[str, Any]:
    """NORMAL stores every turn: each probe sentence said once; is its value stored? And
    are raw transcripts in the logs at DEBUG (as `dev` runs)?"""
    from bench.privacy.hostile_surfaces import ALL_SECRETS as SECRETS
    from memory.livekit import transcript_log

    transcript_log.install("off")  # what agent.py installs by default
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(level=logging.DEBUG)
    lk = logging.getLogger("livekit.agents")
    old = lk.level
    lk.setLevel(logging.DEBUG)
    lk.addHandler(keep)
    user = f"secrets-{uuid.uuid4().hex[:6]}"
    try:

        async def say(h: VoiceHarness, m: MemorySession) -> None:
            for text, _ in SECRETS:
                await h.user_says(text)

        await run_session(service_for(store, MemoryMode.NORMAL), user, say)
    finally:
        lk.removeHandler(keep)
        lk.setLevel(old)
    stored = " ".join(m.text for m in store.list_user(user))
    logged = "\n".join(f"{r.getMessage()} {vars(r)}" for r in records)
    return {
        "secrets_tried": len(SECRETS),
        "secrets_stored": sum(1 for _, secret in SECRETS if secret in stored),
        "transcripts_logged": sum(1 for text, _ in SECRETS if text in logged),
    }


# ------------------------------------------------------------------ read capacity
CAPACITY_FACTS = [
    "My sister {n} lives in Porto and works as a nurse",
    "I like {n} kinds of green tea",
    "My dog is called Rex and he is {n} years old",
    "I am training for a marathon in {n} weeks",
    "My favourite colour is blue since I was {n}",
    "I work as an engineer on project {n}",
    "My brother plays chess on {n} evenings a week",
    "I am allergic to peanuts since age {n}",
]
CAPACITY_TURNS = [
    "What is my sister doing these days?",
    "Do you remember what tea I like?",
    "How old is my dog?",
    "When is my marathon again?",
    "What is my favourite colour?",
    "What do I work on?",
    "Tell me about my brother",
    "What am I allergic to?",
]


async def capacity(store: MemoryStore, settings: MemorySettings, sessions: int, seconds: float) -> dict[str, Any]:
    """`sessions` sessions in this one process, each typing a turn a second for `seconds`:
    the time memory adds before each LLM request (prepare_chat_ctx) and the turns that
    wanted memory and got none (a look-up that missed the budget or found no read slot)."""
    service = service_for(store, MemoryMode.NORMAL)
    users = [f"cap{sessions}-{i}-{uuid.uuid4().hex[:4]}" for i in range(sessions)]
    await asyncio.gather(*(
        asyncio.to_thread(lambda u=u: [store.add_raw(u, t.format(n=k)) for k, t in enumerate(CAPACITY_FACTS * 3)])
        for u in users
    ))  # fmt: skip
    added: list[float] = []
    wanted = missing = 0
    real_prepare = MemorySession.prepare_chat_ctx

    async def timed(self: MemorySession, chat_ctx: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = await real_prepare(self, chat_ctx, **kwargs)
        added.append((time.perf_counter() - t0) * 1000)
        return out

    MemorySession.prepare_chat_ctx = timed
    watch = LoopWatch(0.01)
    try:

        async def one(i: int, user: str) -> tuple[int, int]:
            rng = random.Random(i)

            async def say(h: VoiceHarness, m: MemorySession) -> None:
                await asyncio.sleep(rng.uniform(0, 1.0))  # sessions out of step, as callers are
                start = time.perf_counter()
                k = 0
                while time.perf_counter() - start < seconds:
                    t0 = time.perf_counter()
                    await h.user_types(CAPACITY_TURNS[(i + k) % len(CAPACITY_TURNS)])
                    k += 1
                    await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))

            m, _ = await run_session(service, user, say)
            logs = [t for t in m.turns if t.recall is not None]
            return len(logs), sum(1 for t in logs if t.recall.missed_budget or t.recall.error)

        with watch:
            results = await asyncio.gather(*(one(i, u) for i, u in enumerate(users)))
    finally:
        MemorySession.prepare_chat_ctx = real_prepare
    wanted = sum(r[0] for r in results)
    missing = sum(r[1] for r in results)
    return {
        f"added_ms_p50_{sessions}": round(pct(added, 0.50), 1),
        f"added_ms_p95_{sessions}": round(pct(added, 0.95), 1),
        f"memory_missing_share_{sessions}": round(missing / max(wanted, 1), 3),
        f"turns_{sessions}": wanted,
        f"loop_block_ms_{sessions}_sessions": round(watch.max_ms, 1),
    }


# ------------------------------------------------------------------ main
SECTIONS = ("faults", "long", "instructions", "secrets", "forms", "contexts", "forget", "escapes", "capacity")


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-hostile-"))
    settings = load_settings(
        {"MEMORY_DATA_DIR": str(data_dir), **({"MEMORY_DATABASE_URL": args.database_url} if args.database_url else {})},
        dotenv=False,
    )
    # As the worker's prewarm does: models, segmenter and word lists loaded, the heap
    # frozen; the first turn would otherwise pay for them (and stall the loop doing it).
    embedder_mod.local_model()
    embedder_mod.write_model()
    lexical.warm_up()
    store = MemoryStore.open(settings)
    heap.settle()
    work = Path(tempfile.mkdtemp(prefix="hostile-work-"))
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    result: dict[str, Any] = {}
    try:
        if "faults" in only:
            mountable = can_mount()
            rows = await faults(store, work, mountable)
            result["fault_rows"] = rows
            result["faults_real_disk"] = mountable
            result["turns_lost"] = sum(r["lost"] for r in rows)
            result["turns_duplicated"] = sum(r["duplicated"] for r in rows)
        if "long" in only:
            result.update(await long_turns(store, work))
        if "instructions" in only:
            result.update(await instructions(store))
        if "secrets" in only:
            result.update(await secrets(store))
        result.update(await hostile_surfaces.run(store, work, only))
        if "capacity" in only:
            for n in args.sessions:
                result.update(await capacity(store, settings, n, args.capacity_seconds))
    finally:
        store.close()
        shutil.rmtree(work, ignore_errors=True)
    return result


def report(result: dict[str, Any]) -> None:
    forget_rows = result.pop("forget_rows", [])
    if forget_rows:
        print("\nforget under faults (rows + journal rows + spill lines left; exit status)")
        print(f"{'case':36} {'exit':>5} {'rows':>5} {'journal':>8} {'spill':>6} {'left':>5}")
        for r in forget_rows:
            print(f"{r['case']:36} {r['exit']:>5} {r['rows']:>5} {r['journal_rows']:>8} {r['spill_lines']:>6} "
                  f"{r['left']:>5}")  # fmt: skip
    rows = result.pop("fault_rows", [])
    if rows:
        print(
            "\njournal faults "
            f"({'real tmpfs' if result.get('faults_real_disk') else 'refusal at the journal boundary'})"
        )
        print(f"{'case':42} {'turns':>6} {'acked':>6} {'lost':>5} {'dup':>5}")
        for r in rows:
            print(f"{r['case']:42} {r['turns']:>6} {r['acknowledged']:>6} {r['lost']:>5} {r['duplicated']:>5}")
    print(f"\n{'figure':42} value")
    for key, value in result.items():
        if key != "faults_real_disk":
            print(f"{key:42} {value}")
    if "journal_bytes_per_text_byte_en" in result:
        result["journal_bytes_per_text_byte"] = max(
            result["journal_bytes_per_text_byte_en"], result["journal_bytes_per_text_byte_zh"]
        )
    if "loop_block_ms_5mb" in result:
        result["loop_block_ms_max"] = max(result["loop_block_ms_5mb"], result["loop_block_ms_100kb"])
    print(json.dumps(result, ensure_ascii=False))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--sessions", type=int, nargs="+", default=[20, 50], help="sessions per process")
    parser.add_argument("--capacity-seconds", type=float, default=20.0, help="how long each capacity run lasts")
    parser.add_argument("--data-dir", default=None, help="data directory (default: a new temporary one)")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in ("memory", "livekit", "bench"):
        logging.getLogger(name).setLevel(logging.ERROR)
    report(asyncio.run(amain(args)))


if __name__ == "__main__":
    main()
