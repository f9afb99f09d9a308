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
import dataclasses
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT
from bench.privacy import hostile_surfaces
from bench.privacy.faults import RefusingJournalQueue, can_mount, fill, remount, tiny_tmpfs
from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.journal.queue import DurableWriteQueue, checkpoint, journal_rows
from memory.language import lexical
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession
from memory.ops import heap
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage import embedder as embedder_mod
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso

log = logging.getLogger("bench.privacy.hostile")
ROOT = REPO_ROOT
CHILD = ROOT / "tests" / "journal" / "hostile_child.py"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def service_for(store: MemoryStore, mode: MemoryMode, extraction: RecordingLLM | None = None) -> MemoryService:
    settings = dataclasses.replace(store.settings, mode=mode)
    return MemoryService(store, settings, gatekeeper=Gatekeeper(extraction))


def write_ids(store: MemoryStore, user_id: str) -> Counter[str]:
    return Counter(r.metadata.get("write_id") for r in store.list_user(user_id))


class LoopWatch:
    """The event loop's longest stall: a ticker that should wake every `tick_s`."""

    def __init__(self, tick_s: float = 0.001) -> None:
        self.tick_s = tick_s
        self.max_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(self.tick_s)
            now = loop.time()
            self.max_ms = max(self.max_ms, (now - last - self.tick_s) * 1000)
            last = now

    def __enter__(self) -> LoopWatch:
        self._task = asyncio.ensure_future(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def run_session(
    service: MemoryService,
    user_id: str,
    say: Callable[[VoiceHarness, MemorySession], Awaitable[None]],
    *,
    queue: DurableWriteQueue | None = None,
    llm: RecordingLLM | None = None,
) -> tuple[MemorySession, VoiceHarness]:
    memory_session = MemorySession(service, user_id=user_id, queue=queue)
    harness = VoiceHarness(MemoryAgent(memory_session), llm=llm, preflight=True, timeout=60.0)
    memory_session.attach(harness.session)
    await memory_session.wait_profile()
    async with harness:
        await say(harness, memory_session)
    await memory_session.drain(30.0)
    await memory_session.aclose(drain_timeout_s=5.0)
    return memory_session, harness


# ------------------------------------------------------------------ faults
async def faults(store: MemoryStore, work: Path, mountable: bool) -> list[dict[str, Any]]:
    normal = service_for(store, MemoryMode.NORMAL)
    rows: list[dict[str, Any]] = []
    spill = work / "spill"

    def turns_for(user: str, n: int) -> list[Turn]:
        return [Turn(user, f"Case note {i}: my locker number is {500 + i}", "s-fault", f"{user}-t{i}", now_iso())
                for i in range(n)]  # fmt: skip

    async def through(queue: DurableWriteQueue, turns: list[Turn], between: Callable[[], None] | None = None) -> int:
        half = len(turns) // 2
        acked = sum(queue.enqueue(t) for t in turns[:half])
        queue.start()
        await queue.drain(30.0)
        if between is not None:
            between()
        acked += sum(queue.enqueue(t) for t in turns[half:])
        await queue.drain(30.0)
        await queue.aclose(2.0)
        return acked

    def count(case: str, user: str, n: int, acked: int) -> None:
        got = write_ids(store, user)
        lost = sum(1 for i in range(n) if got.get(f"{user}-t{i}", 0) == 0)
        dup = sum(c - 1 for c in got.values() if c > 1)
        rows.append({"case": case, "turns": n, "acknowledged": acked, "lost": lost, "duplicated": dup})

    # 1. cannot be opened (its directory cannot be made)
    user = f"fault-open-{uuid.uuid4().hex[:6]}"
    (work / "blocked").write_text("a file where the journal's directory should be")
    q = DurableWriteQueue(work / "blocked" / "j.sqlite3", normal.remember, spill_dir=spill, base_backoff_s=0.05)
    count("journal cannot be opened", user, 30, await through(q, turns_for(user, 30)))

    if mountable:
        # 2. read-only file system, then writable again
        user = f"fault-ro-{uuid.uuid4().hex[:6]}"
        mnt = work / "ro"
        with tiny_tmpfs(mnt, 256):
            _make_journal(mnt / "j.sqlite3")
            remount(mnt, read_only=True)
            q = DurableWriteQueue(mnt / "j.sqlite3", normal.remember, spill_dir=spill, base_backoff_s=0.05)
            acked = await through(q, turns_for(user, 30), lambda: remount(mnt, read_only=False))
        count("journal read-only (then writable)", user, 30, acked)
        # 3. full, then space again
        user = f"fault-full-{uuid.uuid4().hex[:6]}"
        mnt = work / "full"
        with tiny_tmpfs(mnt, 4096):
            _make_journal(mnt / "j.sqlite3")
            filler = fill(mnt)
            q = DurableWriteQueue(mnt / "j.sqlite3", normal.remember, spill_dir=spill, base_backoff_s=0.05)
            acked = await through(q, turns_for(user, 60), filler.unlink)
        count("journal disk full (then freed)", user, 60, acked)
    else:
        user = f"fault-full-{uuid.uuid4().hex[:6]}"
        q = RefusingJournalQueue(work / "refusing.sqlite3", normal.remember, spill_dir=spill, base_backoff_s=0.05)
        q.refuse = True

        def freed() -> None:
            q.refuse = False

        count("journal refuses writes (then not)", user, 60, await through(q, turns_for(user, 60), freed))

    # 4. kill -9 while full
    user = f"fault-kill-{uuid.uuid4().hex[:6]}"
    n = 32
    mnt = work / "killfull"
    if mountable:
        with tiny_tmpfs(mnt, 256):
            _make_journal(mnt / "j.sqlite3")
            filler = fill(mnt)
            acked = _kill_child(mnt / "j.sqlite3", spill, user, n, refuse=False, cwd=work)
            filler.unlink()
            q = DurableWriteQueue(mnt / "j.sqlite3", normal.remember, spill_dir=spill)
            await through(q, [])
    else:
        acked = _kill_child(work / "kill.sqlite3", spill, user, n, refuse=True, cwd=work)
        q = DurableWriteQueue(work / "kill.sqlite3", normal.remember, spill_dir=spill)
        await through(q, [])
    # The child's turns are `<user>-t<i>`, as counted.
    count("kill -9 while the journal disk is full", user, n, acked)
    return rows


def _make_journal(path: Path) -> None:
    async def nothing(turn: Turn) -> None:
        return None

    q = DurableWriteQueue(path, nothing)
    if q._conn is not None:
        q._conn.close()
        q._conn = None


def _kill_child(journal: Path, spill: Path, user: str, n: int, *, refuse: bool, cwd: Path) -> int:
    args = [sys.executable, str(CHILD), str(journal), str(spill), user, str(n)] + (["refuse"] if refuse else [])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, cwd=cwd, text=True)
    try:
        line = proc.stdout.readline()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return int(line.split()[1]) if line.startswith("ready") else 0


# ------------------------------------------------------------------ long turns
async def long_turns(store: MemoryStore, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    normal = service_for(store, MemoryMode.NORMAL)

    # Loop stalls: one 5 MB typed message, then three of 100 KB.
    for label, sizes in (("5mb", [5_000_000]), ("100kb", [100_000] * 3)):
        user = f"long-{label}-{uuid.uuid4().hex[:6]}"
        watch = LoopWatch()

        async def say(h: VoiceHarness, m: MemorySession, sizes: list[int] = sizes, watch: LoopWatch = watch) -> None:
            await h.user_types("Hello, I have a question about my notes")  # warm: the first run has set-up costs
            with watch:
                for size in sizes:
                    await h.user_types(("I wrote this down for you. " * (size // 27 + 1))[:size])
                await m.drain(60.0)

        await run_session(normal, user, say)
        out[f"loop_block_ms_{label}"] = round(watch.max_ms, 1)

    # Journal bytes per text byte: turns held in a journal whose store never answers.
    for lang, unit in (("en", "My grandmother grew tomatoes in the garden behind the house. "),
                       ("zh", "我奶奶在房子后面的花园里种了西红柿，每年夏天都会做番茄酱。")):  # fmt: skip
        path = work / f"journal-{lang}.sqlite3"
        released = asyncio.Event()

        async def never(turn: Turn, released: asyncio.Event = released) -> None:
            await released.wait()

        queue = DurableWriteQueue(path, never, attempt_timeout_s=3600)
        user = f"journal-{lang}-{uuid.uuid4().hex[:6]}"
        journaled: list[str] = []

        async def say(
            h: VoiceHarness,
            m: MemorySession,
            unit: str = unit,
            path: Path = path,
            journaled: list[str] = journaled,
            lang: str = lang,
            released: asyncio.Event = released,
        ) -> None:
            for i in range(8):
                await h.user_types((unit * 600)[: 4000 + 2000 * i])
            await m._prepared(30.0)
            checkpoint(path)
            journaled.extend(row["text"] for row in journal_rows(path))
            out[f"journal_bytes_{lang}"] = path.stat().st_size
            released.set()

        empty = work / f"empty-{lang}.sqlite3"
        _make_journal(empty)
        await run_session(normal, user, say, queue=queue)
        text_bytes = sum(len(t.encode()) for t in journaled)
        out[f"journal_bytes_per_text_byte_{lang}"] = round(
            (out[f"journal_bytes_{lang}"] - empty.stat().st_size) / max(text_bytes, 1), 3
        )

    # GATED: what the extraction model is sent per character the user typed.
    sent: list[int] = []

    def extract(req: LLMRequest) -> str:
        sent.append(sum(len(t) for _, t in req.messages))
        return json.dumps({"facts": []})

    gated = service_for(store, MemoryMode.GATED, RecordingLLM(extract))
    typed = [("My job is interesting. I am a nurse and I work nights. " * 1000)[:50_000] for _ in range(2)]

    async def say_gated(h: VoiceHarness, m: MemorySession) -> None:
        for t in typed:
            await h.user_types(t)

    await run_session(gated, f"gated-long-{uuid.uuid4().hex[:6]}", say_gated)
    prompt_chars = len(gated.gatekeeper._prompt) * len(sent)
    out["extraction_chars_per_input_char"] = round((sum(sent) - prompt_chars) / sum(len(t) for t in typed), 3)
    out["extraction_calls"] = len(sent)
    return out


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
    from memory.livekit.session import MEMORY_ROLE

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--sessions", type=int, nargs="+", default=[20, 50], help="sessions per process")
    parser.add_argument("--capacity-seconds", type=float, default=20.0, help="how long each capacity run lasts")
    parser.add_argument("--data-dir", default=None, help="data directory (default: a new temporary one)")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in ("memory", "livekit", "bench"):
        logging.getLogger(name).setLevel(logging.ERROR)
    report(asyncio.run(amain(args)))


if __name__ == "__main__":
    main()
