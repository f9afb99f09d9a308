"""`bench.privacy.hostile`'s fault and long-turn sections: the journal refusing writes, a full or
read-only disk, a worker killed mid-write, and turns far longer than a caller's."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT
from bench.privacy.faults import RefusingJournalQueue, fill, remount, tiny_tmpfs
from bench.privacy.session import LoopWatch, run_session, service_for, write_ids
from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.journal.operator import checkpoint, journal_rows
from memory.journal.queue import DurableWriteQueue
from memory.livekit.session import MemorySession
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso

ROOT = REPO_ROOT
CHILD = ROOT / "tests" / "journal" / "hostile_child.py"


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
