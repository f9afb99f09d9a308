"""`bench.privacy.hostile`'s sections for every way in beside the spoken turn (issue 30).

- forms: forms with secrets (every probe sentence typed into a free-text field, and
  bare values under secret field names: a password, a PIN, a card typed in four boxes,
  an SSN, a security answer, an IBAN, 密码, 卡号) submitted through LiveKit's RPC chain to
  the worker's agent in GATED, titled as preferences so that each is offered to the
  gatekeeper; the extraction model answers with the whole offered text as a fact (the
  worst model). Counted: secrets in what was journaled, sent to the model, stored, shown.
- contexts: every probe sentence as a note through the agents' tool path; secrets in
  the table's rows; and the bound measured on what is shown (notes that NFKC expands).
- forget: "forget me" (`python -m memory.forget`, in process) for a user with memories,
  archived messages, a shared context, a dead worker's journal rows and a dead worker's
  spill lines (real processes killed with -9), on a full journal disk (a real tmpfs) and
  with a journal that cannot be opened, and for a user whose only trace is a dead worker's
  spill file. Counted: what is left (rows + journal rows + spill lines), exit status.
- escapes: the operator's tools (`memory.admin show/search/export/--json`, `memory.working
  export`) on stored text with terminal escapes; raw control characters printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from psycopg import sql

from bench.common.paths import ROOT as REPO_ROOT
from bench.privacy.faults import can_mount, fill, tiny_tmpfs
from bench.privacy.hostile_probes import SECRETS, SECRETS_HELD_OUT, SECRETS_ISSUE30, SECRETS_SAID
from harness.room import FakeRoom
from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.journal.codec import encode_turn
from memory.journal.queue import DurableWriteQueue
from memory.livekit.session import MemorySession
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.contexts import ContextStore, contexts_table
from memory.storage.store import MemoryStore
from memory.types import Turn
from memory.userdata import UserData
from memory.working import SUBMIT_FORM, first_agent
from memory.working.agents import context_block

ROOT = REPO_ROOT
ALL_SECRETS = SECRETS + SECRETS_ISSUE30 + SECRETS_SAID + SECRETS_HELD_OUT
# Values that only their field's name says are secrets.
BARE_FIELDS: list[tuple[str, object, str]] = [
    ("password", "Quokka88!", "Quokka88!"),
    ("PIN", 4711, "4711"),
    ("card", ["4111", "1111", "1111", "1111"], "4111"),
    ("SSN", "078-05-1120", "078-05-1120"),
    ("security answer", "Fluffy", "Fluffy"),
    ("IBAN", "DE89 3704 0044 0532 0130 00", "3704 0044"),
    ("CVV", "737", "737"),
    ("passcode", "hunter2", "hunter2"),
    ("api_key", "abc123def456", "abc123def456"),
    ("登录密码", "Tiger_99", "Tiger_99"),
    ("银行卡号", "6222 0210 0112 3456 789", "0210 0112"),
    ("door code", "9317", "9317"),
]


class RecordingQueue(DurableWriteQueue):
    """The real journal, keeping a copy of every payload it writes (what is journaled)."""

    journaled: list[str]

    def _insert(self, turn: Turn) -> bool:
        self.journaled.append(encode_turn(turn))
        return super()._insert(turn)


def text_of(payload: str) -> str:
    """A journal row's words: the turn's text and context (not its ids and times)."""
    turn = json.loads(payload)
    return "\n".join([turn["text"], *turn.get("context", ())])


def found(secrets: list[str], texts: list[str]) -> int:
    blob = "\n".join(texts)
    return sum(1 for s in secrets if s in blob)


# ------------------------------------------------------------------ forms
async def forms(store: MemoryStore, work: Path) -> dict[str, Any]:
    sent: list[str] = []

    def extract(req: LLMRequest) -> str:
        # What the user's words became in the request (not its ids and times, where a
        # short digit secret could appear by chance).
        payload = json.loads(req.messages[-1][1])
        sent.append(json.dumps({k: v for k, v in payload.items() if not k.endswith(("_at", "_id", "date"))},
                               ensure_ascii=False))  # fmt: skip
        said = payload["latest_user_message"]
        return json.dumps({"facts": [{"text": said, "category": "personal_facts", "slot": None}]}, ensure_ascii=False)

    settings = dataclasses.replace(store.settings, mode=MemoryMode.GATED)
    service = MemoryService(store, settings, gatekeeper=Gatekeeper(RecordingLLM(extract)))
    user = f"forms-{uuid.uuid4().hex[:6]}"
    journal = work / "forms-journal.sqlite3"
    queue = RecordingQueue(journal, service.remember, mode="GATED")
    queue.journaled = []
    memory = MemorySession(service, user_id=user, queue=queue, budget_s=10.0)
    room = FakeRoom()
    agent = first_agent(room, memory, store, user)
    harness = VoiceHarness(agent, llm=RecordingLLM(lambda req: "ok"), preflight=True)
    memory.attach(harness.session)
    payloads = []
    sentences = [t for t, _ in ALL_SECRETS]
    for i in range(0, len(sentences), 5):
        payloads.append({"title": f"Profile settings {i // 5}",
                         "fields": {f"note {k}": t for k, t in enumerate(sentences[i : i + 5])}})  # fmt: skip
    payloads.append({"title": "Account preferences", "fields": {name: value for name, value, _ in BARE_FIELDS}})
    shown: list[str] = []
    refused = 0
    async with harness:
        for payload in payloads:
            try:
                await room.local_participant.invoke(SUBMIT_FORM, json.dumps(payload, ensure_ascii=False), caller=user)
            except Exception:  # noqa: BLE001 - counted: a form refused is not a secret kept
                refused += 1
            shown.append("\n".join(line.line for line in agent.workspace.forms.lines()))  # what a request carries
        await memory.drain(120.0)
    await memory.aclose(drain_timeout_s=10.0)
    on_disk = b"".join(p.read_bytes() for p in (journal, journal.with_name(journal.name + "-wal")) if p.exists())
    secrets = [s for _, s in ALL_SECRETS] + [s for _, _, s in BARE_FIELDS]
    stored = [m.text for m in store.list_user(memory.user_id)]
    long_secrets = [s for s in secrets if len(s) >= 6]  # short digits could be in a row's binary parts by chance
    return {
        "form_secrets_tried": len(secrets),
        "forms_submitted": len(payloads),
        "forms_refused": refused,
        "form_secrets_journaled": found(secrets, [text_of(p) for p in queue.journaled])
        + sum(1 for s in long_secrets if s.encode() in on_disk),
        "form_secrets_sent": found(secrets, sent),
        "form_secrets_stored": found(secrets, stored),
        "form_secrets_shown": found(secrets, shown),
        "form_facts_stored": len(stored),
    }


# ------------------------------------------------------------------ contexts
async def contexts(store: MemoryStore) -> dict[str, Any]:
    from memory.working.workspace import Workspace

    settings = store.settings
    memory = MemorySession(MemoryService(store, settings), user_id=f"contexts-{uuid.uuid4().hex[:6]}")
    ws = Workspace(memory, store, identity=memory.user_id)
    ctx_ids = [await ws.create_context("receptionist")]
    for text, _ in ALL_SECRETS:
        try:
            await ws.update_context(ctx_ids[-1], "specialist", text)
        except Exception:  # noqa: BLE001 - full: a new context, as an agent would
            ctx_ids.append(await ws.create_context("receptionist", text))
    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL("SELECT created_by || ' ' || entries::text FROM {} WHERE user_id = %s").format(
                sql.Identifier(contexts_table(settings.collection))
            ),
            [memory.user_id],
        ).fetchall()
    stored = [r[0] for r in rows]
    # The bound on what is shown: notes that NFKC expands ("ﷺ" is 18 characters shown).
    bound = settings.context_max_chars
    expanding = await ws.create_context("receptionist")
    for _ in range(100):
        try:
            await ws.update_context(expanding, "specialist", "ﷺ" * 40)
        except Exception:  # noqa: BLE001 - full
            break
    block = context_block(await ws.fetch_context(expanding))
    notes_shown = sum(len(note) for note in _notes(block))
    await memory.aclose(drain_timeout_s=1.0)
    return {
        "context_secrets_tried": len(ALL_SECRETS),
        "context_secrets_stored": found([s for _, s in ALL_SECRETS], stored),
        "contexts_made": len(ctx_ids),
        "context_bound": bound,
        "context_notes_shown_chars": notes_shown,
    }


def _notes(block: str) -> list[str]:
    """The notes' texts in a context as the tools return it (one quoted JSON line each)."""
    notes = []
    for line in block.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("note"), str):
            notes.append(item["note"])
    return notes


# ------------------------------------------------------------------ forget
@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _kill_child(args: list[str], cwd: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                            env=env, text=True)  # fmt: skip
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("ready"):
            raise RuntimeError(f"child did not get ready: {line!r}")
    finally:
        proc.kill()
        proc.wait()


def _left(store: MemoryStore, settings: MemorySettings, user: str) -> dict[str, int]:
    rows = len(store.list_user(user)) + len(archive_for(store).messages(user))
    rows += len(ContextStore(store.pool, store.table, 4000).export_user(user))
    data = UserData(store, settings)  # the places' own count: an unreadable journal is said, not raised
    journal = data.counts(user)["journal"]
    if data.unreadable:
        print(f"# not read while counting what is left: {data.unreadable}", file=sys.stderr)
    lines = 0
    if settings.spill_dir is not None and settings.spill_dir.exists():
        for f in settings.spill_dir.rglob("*"):
            if f.is_file():
                lines += f.read_text(errors="replace").count(json.dumps({"user_id": user})[1:-1])
    return {"rows": rows, "journal_rows": journal, "spill_lines": lines}


def _keep(store: MemoryStore, user: str) -> None:
    store.add_raw(user, "My sister is called Anna and she lives in Porto")
    archive_for(store).add([ArchivedMessage(uuid.uuid4().hex, "chat-1", user, "I moved to Porto last year", "user",
                                            datetime.now(UTC))])  # fmt: skip
    ContextStore(store.pool, store.table, 4000).create(user, "receptionist", "Caller's card was blocked")


def _forget(identity: str) -> tuple[int, str]:
    from memory.forget import main as forget_main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = forget_main([identity, "--yes"])  # a script: no terminal to type the identity on
    return status, err.getvalue().strip()


def forget(store: MemoryStore, work: Path) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    tests = ROOT / "tests" / "journal"  # the journal tests' child processes (run, not imported)
    mountable = can_mount()

    def place(name: str, data: Path) -> tuple[MemorySettings, dict[str, str]]:
        env = {"MEMORY_DATA_DIR": str(data), "MEMORY_DATABASE_URL": store.url, "MEMORY_SPILL_DIR": str(work / name)}
        with environment(**env):
            settings = load_settings(dotenv=False)
        return settings, env

    def record(case: str, user: str, settings: MemorySettings, status: int, said: str) -> None:
        left = _left(store, settings, user)
        rows.append({"case": case, "exit": status, **left, "left": sum(left.values()),
                     "one_line": len(said.splitlines()) <= 1})  # fmt: skip

    # 1. the journal's disk is full: a dead worker's journal rows, then its spill lines
    user = f"forget-full-{uuid.uuid4().hex[:6]}"
    disk = work / "forget-disk"
    with tiny_tmpfs(disk, 4096) if mountable else contextlib.nullcontext(disk.mkdir() or disk):
        settings, env = place("spill-full", disk / "data")
        with environment(**env):
            MemoryStore.open(settings).close()
            _keep(store, user)
            _kill_child([str(tests / "write_queue_child.py"), str(settings.journal_path), user, "8"], work)
            filler = fill(disk) if mountable else None
            _kill_child([str(tests / "hostile_child.py"), str(settings.journal_path), str(settings.spill_dir),
                         f"{user}", "6"] + ([] if mountable else ["refuse"]), work)  # fmt: skip
            status, said = _forget(user)
            if filler is not None:
                filler.unlink()
            record("journal disk full" if mountable else "journal refuses writes", user, settings, status, said)

    # 2. the journal cannot be opened (something in its place): turns only in spill files
    user = f"forget-unopenable-{uuid.uuid4().hex[:6]}"
    settings, env = place("spill-unopenable", work / "forget-unopenable")
    with environment(**env):
        MemoryStore.open(settings).close()
        settings.journal_path.mkdir(parents=True)
        _keep(store, user)
        _kill_child([str(tests / "hostile_child.py"), str(settings.journal_path), str(settings.spill_dir), user,
                     "6"], work)  # fmt: skip
        status, said = _forget(user)
        record("journal cannot be opened", user, settings, status, said)

    # 3. the spill file: a dead worker's spilled turns are the user's only trace
    user = f"forget-spill-{uuid.uuid4().hex[:6]}"
    settings, env = place("spill-only", work / "forget-spill")
    with environment(**env):
        MemoryStore.open(settings).close()
        _kill_child([str(tests / "hostile_child.py"), str(settings.journal_path), str(settings.spill_dir), user,
                     "6", "refuse"], work)  # fmt: skip
        status, said = _forget(user)
        record("a dead worker's spill file only", user, settings, status, said)
        again, _ = _forget(user)
        rows[-1]["exit_again"] = again
    return {
        "forget_rows": rows,
        "forget_left_behind": sum(r["left"] for r in rows),
        "forget_exit_codes": [r["exit"] for r in rows],
        "forget_one_line": all(r["one_line"] for r in rows),
    }


# ------------------------------------------------------------------ escapes
HOSTILE_TEXT = "I like red \x1b]0;owned\x07\x1b[2J\x9b31m and \u202egnp.exe\u200b the end"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\u200b")


def escapes(store: MemoryStore, work: Path) -> dict[str, Any]:
    from memory.admin.cli import main as admin_main
    from memory.working.__main__ import main as working_main

    user = f"escapes-{uuid.uuid4().hex[:6]}"
    store.add_raw(user, HOSTILE_TEXT)
    ctx_id = ContextStore(store.pool, store.table, 4000).create(user, "receptionist", "a note")
    with store.pool.connection() as conn:  # text written raw by an older version
        conn.execute(sql.SQL("UPDATE {} SET created_by = %s WHERE id = %s").format(
            sql.Identifier(contexts_table(store.settings.collection))), [HOSTILE_TEXT, ctx_id])  # fmt: skip
    env = {"MEMORY_DATA_DIR": str(work / "escapes"), "MEMORY_DATABASE_URL": store.url, "MEMORY_SPILL_DIR": "off"}
    printed = 0
    commands = [["show", user], ["search", user, "red"], ["export", user], ["--json", "show", user], ["users"]]
    with environment(**env):
        for argv in commands:
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                admin_main(argv)
            printed += sum(out.getvalue().count(ch) for ch in RAW_CONTROLS)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            working_main(["export", user])
        printed += sum(out.getvalue().count(ch) for ch in RAW_CONTROLS)
    return {"escapes_printed": printed, "escape_commands": len(commands) + 1}


async def run(store: MemoryStore, work: Path, only: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "forms" in only:
        out.update(await forms(store, work))
    if "contexts" in only:
        out.update(await contexts(store))
    if "forget" in only:
        out.update(await asyncio.to_thread(forget, store, work))
    if "escapes" in only:
        out.update(await asyncio.to_thread(escapes, store, work))
    return out
