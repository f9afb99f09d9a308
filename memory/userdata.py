"""Every place that holds a user's data, in one list (`PLACES`), and what is done over it.

Each place has one name, used everywhere (the commands' words and JSON, the pages, the
export document, the docs), and says how to count, export and delete one user's rows in
it. Forget, export, the import's checks, `memory.admin show` and the operator's pages all
loop over the list: a place added here is forgotten, exported and counted everywhere, and
no second list exists to forget it in (`tests/admin/test_places.py` adds a stand-in).

The order is the forget's: the memories first (that records the request, so a turn said
before it and still on its way is refused wherever it arrives), Mem0's history of them,
the archive and the shared contexts, then this machine's spill files and its journal
(after the spill files: a turn moved from one to the other meanwhile is caught).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory.errors import AgentMemoryError, Unfinished
from memory.journal.operator import count_user as journal_count
from memory.journal.operator import damaged_journals, journal_rows, purge_user
from memory.journal.reserve import is_disk_full, no_room, release_reserve
from memory.journal.spill import purge_user as purge_spilled
from memory.journal.spill import read_user as spilled_turns
from memory.ops.printable import terminal_json
from memory.settings import MemorySettings
from memory.storage.archive import ArchiveStore, archive_for
from memory.storage.contexts import ContextStore
from memory.storage.densities import DensityStore
from memory.storage.locate import where
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, describe_error, parse_time

logger = logging.getLogger(__name__)

# Rows an export reads a page at a time (no connection is held between pages).
PAGE_SIZE = 1000

Counts = dict[str, int]
Row = dict[str, Any]


class UnknownUser(AgentMemoryError, LookupError):
    """Nothing is stored under this user, in any place."""


@dataclass(frozen=True)
class Place:
    """One place that holds users' data."""

    name: str
    about: str  # what its rows are, in words (docs and help)
    rows: Callable[[UserData, str], Iterator[Row]]  # every row of the user, streamed (the export)
    delete: Callable[[UserData, str], int]  # the user's rows gone; how many
    count: Callable[[UserData, str], int] | None = None  # how many rows (default: the rows counted)
    parts: tuple[str, ...] = ()  # what the rows are made of, counted beside them
    part_of: Callable[[Row], str] | None = None  # the part a row counts in
    groups: tuple[str, Callable[[Row], str]] | None = None  # a part counted as distinct values (calls)
    detail: Callable[[UserData, str | None], dict[str, tuple[Counts, datetime | None]]] | None = None
    # `detail`: the place's counts with their parts by user (of one user, or every user:
    # the users list) and the newest row's time, from one query; places without it are
    # counted by `count`.
    local: bool = False  # on this machine's disk, beside the journal: a full disk frees the reserve

    def zero(self) -> Counts:
        return dict.fromkeys((self.name, *self.parts), 0)


# ------------------------------------------------------------------ the places


# A GATED fact's span: when its value held, and the row that replaced it (a past value).
SPAN_KEYS = ("valid_from", "valid_until", "superseded_by")


def _memory_row(rec: MemoryRecord) -> Row:
    row = {
        "id": rec.id,
        "text": rec.text,
        "category": rec.category,
        "slot": rec.slot,
        # The mode it was stored under: a fact is GATED's, a raw turn NORMAL's (whatever
        # the mode of the worker or the command that shows it).
        "mode": "GATED" if rec.category else "NORMAL",
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "session_id": rec.metadata.get("session_id"),
        "seq": rec.metadata.get("seq"),
    }
    row.update({key: rec.metadata[key] for key in SPAN_KEYS if rec.metadata.get(key)})
    return row


def _memories(data: UserData, user_id: str) -> Iterator[Row]:
    after = None
    while page := data.store.rows.user_rows_after(user_id, after, data.page_size):
        for mem_id, payload in page:
            yield _memory_row(MemoryRecord.from_payload(mem_id, payload))
        after = page[-1][0]


def _memory_detail(data: UserData, user_id: str | None) -> dict[str, tuple[Counts, datetime | None]]:
    return {
        user: ({"memories": raw + facts, "raw_turns": raw, "facts": facts}, _aware(newest))
        for user, (raw, facts, newest) in data.store.rows.user_counts(user_id).items()
    }


def _delete_memories(data: UserData, user_id: str) -> int:
    # Records the request first; Mem0's history of the rows is the next place's.
    return data.store.delete_user(user_id, purge_history=False)


def _history(data: UserData, user_id: str) -> Iterator[Row]:
    for entry in data.store.mem0_history.of(data.store.mem0_history.ids_of_user(user_id)):
        yield {
            "memory_id": entry["memory_id"],
            "event": entry["event"],
            "old": entry["old_memory"],
            "new": entry["new_memory"],
            "at": entry["created_at"],
            "updated_at": entry["updated_at"],
        }


def _archive_detail(data: UserData, user_id: str | None) -> dict[str, tuple[Counts, datetime | None]]:
    return {
        user: ({"archive": c.rows, "calls": c.calls, "messages": c.messages, "summaries": c.summaries}, c.newest)
        for user, c in data.archive.user_counts(user_id).items()
    }


def _archived(data: UserData, user_id: str) -> Iterator[Row]:
    after = None
    while page := data.archive.rows_after(user_id, after, data.page_size):
        yield from page
        after = (page[-1]["created_at"], page[-1]["id"])


def _spilled(data: UserData, user_id: str) -> Iterator[Row]:
    if data.settings.spill_dir is None:
        return
    for t in spilled_turns(data.settings.spill_dir, data.settings.journal_path, user_id):
        yield {"turn_id": t.turn_id, "kind": t.kind, "text": t.text, "session_id": t.session_id,
               "said_at": t.created_at}  # fmt: skip


def _delete_spilled(data: UserData, user_id: str) -> int:
    if data.settings.spill_dir is None:
        return 0
    return purge_spilled(data.settings.spill_dir, data.settings.journal_path, user_id)


def _journals(data: UserData) -> list[Any]:
    """This machine's journal and any damaged one set aside beside it (they hold turns too)."""
    journal = data.settings.journal_path
    return [journal, *damaged_journals(journal)]


def _journaled(data: UserData, user_id: str) -> Iterator[Row]:
    for path in _journals(data):
        for row in journal_rows(path, user_id):
            yield row if path == data.settings.journal_path else {**row, "journal": path.name}


def _delete_journaled(data: UserData, user_id: str) -> int:
    """Every journal's rows of the user; each journal is tried whatever the others did."""
    removed, problems = 0, []
    for path in _journals(data):
        try:
            removed += purge_user(path, user_id)
        except Exception as exc:  # noqa: BLE001 - said below, with the file
            full = is_disk_full(exc) or no_room(path)
            problems.append(f"{describe_error(exc)}{'; its disk is full' if full else ''} at {path}")
    if problems:
        raise Unfinished("; ".join(problems), removed=removed)
    return removed


PLACES: list[Place] = [
    Place(
        "memories",
        "the user's memories in Postgres: NORMAL's raw turns and GATED's facts",
        _memories,
        _delete_memories,
        parts=("raw_turns", "facts"),
        part_of=lambda row: "facts" if row.get("category") else "raw_turns",
        detail=_memory_detail,
    ),
    Place(
        "mem0_history",
        "this machine's Mem0 history file: every earlier and later text of the user's memories",
        _history,
        lambda data, user_id: data.store.mem0_history.purge(data.store.mem0_history.ids_of_user(user_id)),
        count=lambda data, user_id: data.store.mem0_history.count(data.store.mem0_history.ids_of_user(user_id)),
        local=True,
    ),
    Place(
        "archive",
        "the conversation archive: every message of the user's calls, both sides, and their summaries",
        _archived,
        lambda data, user_id: data.archive.delete_user(user_id),
        parts=("calls", "messages", "summaries"),
        part_of=lambda row: "summaries" if row.get("message_type") == "summary" else "messages",
        groups=("calls", lambda row: str(row.get("chat_id"))),
        detail=_archive_detail,
    ),
    Place(
        "shared_contexts",
        "contexts shared between the user's agents, with their notes",
        lambda data, user_id: iter(data.contexts.export_user(user_id)),
        lambda data, user_id: data.contexts.delete_user(user_id),
        count=lambda data, user_id: data.contexts.count_user(user_id),
    ),
    Place(
        "densities",
        "the user's memory densities (how crowded each memory's neighbourhood is), computed from the memories",
        lambda data, user_id: iter(data.densities.rows(user_id)),
        lambda data, user_id: data.densities.delete_user(user_id),
    ),
    Place(
        "spilled",
        "this machine's spill files: turns a full journal disk refused, on their way to the store",
        _spilled,
        _delete_spilled,
        local=True,
    ),
    Place(
        "journal",
        "this machine's write journal (and any damaged one set aside): turns waiting to be written, dead letters",
        _journaled,
        _delete_journaled,
        count=lambda data, user_id: sum(journal_count(p, user_id) for p in _journals(data)),
        local=True,
    ),
]


def place_names() -> list[str]:
    """The places' names, in the list's order."""
    return [p.name for p in PLACES]


def count_names() -> list[str]:
    """Every count a user's data is shown with: each place's, then its parts."""
    return [name for p in PLACES for name in (p.name, *p.parts)]


def counts_line(counts: Counts) -> str:
    """The counts in one line, each place by its name with its parts beside it:
    "memories 22 (raw_turns 20, facts 2), mem0_history 3, archive 4 (calls 1, ...)"."""
    out = []
    for place in PLACES:
        if place.name not in counts:
            continue
        parts = [f"{part} {counts[part]}" for part in place.parts if part in counts]
        out.append(f"{place.name} {counts[place.name]}" + (f" ({', '.join(parts)})" if parts else ""))
    return ", ".join(out)


# ------------------------------------------------------------------ what is done over them


@dataclass(frozen=True)
class Forgotten:
    """What a forget removed, per place (by the places' names), and what it could not do
    (`failed`: place -> why). The one result the commands and pages show; run the forget
    again to finish: it can be repeated."""

    removed: dict[str, int]
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.failed

    @property
    def total(self) -> int:
        return sum(self.removed.values())

    @property
    def nothing_stored(self) -> bool:
        """True only when every place was searched and none held anything of the user."""
        return self.complete and not self.total

    # The names code was written against before the places had one name each.
    memories = property(lambda self: self.removed.get("memories", 0))
    archived = property(lambda self: self.removed.get("archive", 0))
    contexts = property(lambda self: self.removed.get("shared_contexts", 0))
    spilled = property(lambda self: self.removed.get("spilled", 0))
    waiting_turns = property(lambda self: self.removed.get("journal", 0))

    def as_dict(self) -> dict[str, Any]:
        return {**self.removed, "failed": dict(self.failed), "complete": self.complete}

    def counts(self) -> str:
        return ", ".join(f"{name} {n}" for name, n in self.removed.items())

    def problem(self, identity: str) -> str:
        """One line: what could not be done, and what was."""
        what = "; ".join(f"{place}: {why}" for place, why in self.failed.items())
        return (
            f"could not finish forgetting {identity!r}: {what}. Removed so far: {self.counts()}. "
            "Fix that and run it again: a forget can be repeated"
        )


class UserData:
    """The places over one opened store and this machine's files (the settings')."""

    def __init__(self, store: MemoryStore, settings: MemorySettings, *, page_size: int = PAGE_SIZE) -> None:
        self.store = store
        self.settings = settings
        self.page_size = page_size
        # This machine's files the last count could not read (place -> why), counted 0
        # there: one unreadable file (a journal with something else in its place) leaves the
        # others' counts standing, and the views say which one was not read. The store's
        # errors are raised as they are (an outage is not an empty place).
        self.unreadable: dict[str, str] = {}

    @functools.cached_property
    def archive(self) -> ArchiveStore:
        return archive_for(self.store)

    @functools.cached_property
    def densities(self) -> DensityStore:
        return DensityStore(self.store.pool, self.store.table)

    @functools.cached_property
    def contexts(self) -> ContextStore:
        return ContextStore(self.store.pool, self.store.table, self.settings.context_max_chars)

    @property
    def places(self) -> list[Place]:
        return list(PLACES)

    def place_rows(self, name: str, user_id: str) -> list[Row]:
        """The user's rows in the place of that name (a page's section)."""
        place = next(p for p in self.places if p.name == name)
        return list(place.rows(self, user_id))

    # ------------------------------------------------------------------ counting
    def counts(self, user_id: str) -> Counts:
        """Every place's rows of the user and what they are made of (`count_names`)."""
        out: Counts = {}
        for place in self.places:
            out.update(self._count(place, user_id))
        return out

    def _count(self, place: Place, user_id: str) -> Counts:
        counts = place.zero()
        self.unreadable.pop(place.name, None)
        try:
            if place.detail is not None:
                counts.update(place.detail(self, user_id).get(user_id, ({}, None))[0])
            elif place.count is not None:
                counts[place.name] = place.count(self, user_id)
            else:
                counts[place.name] = sum(1 for _ in place.rows(self, user_id))
        except (sqlite3.Error, OSError) as exc:
            if not place.local:
                raise  # the store: an outage, said as one (a page's 503), not a count of 0
            self.unreadable[place.name] = describe_error(exc)
            logger.warning("the place %s could not be read to count a user's rows: %s", place.name, describe_error(exc))
            return place.zero()
        return counts

    def known(self, user_id: str) -> bool:
        """Does any place hold anything of the user?"""
        return any(self._count(place, user_id)[place.name] for place in self.places)

    def require_known(self, user_id: str) -> None:
        if not self.known(user_id):
            raise UnknownUser(user_id)

    def users(self) -> list[dict[str, Any]]:
        """Every user the places that can list users know, with their counts there and
        their last activity, newest first."""
        listed = [p for p in self.places if p.detail is not None]
        merged: dict[str, dict[str, Any]] = {}
        for place in listed:
            for user, (counts, newest) in place.detail(self, None).items():
                row = merged.setdefault(user, {"user_id": user, **{k: 0 for p in listed for k in p.zero()},
                                               "last_activity": None})  # fmt: skip
                row.update(counts)
                if newest is not None and (row["last_activity"] is None or newest > row["last_activity"]):
                    row["last_activity"] = newest
        oldest = datetime.min.replace(tzinfo=UTC)
        return sorted(merged.values(), key=lambda u: (u["last_activity"] or oldest, u["user_id"]), reverse=True)

    # ------------------------------------------------------------------ export
    def write_export(self, user_id: str, write: Callable[[str], object], *, chunk_chars: int = 1 << 16) -> Counts:
        """Everything kept about the user as one JSON document, written as it is read (a
        page of rows at a time, whatever their number): a header, each place's rows under
        its name, one row a line, and the counts of what was written. Returns them."""
        self.require_known(user_id)
        out: list[str] = []
        size = 0

        def emit(text: str) -> None:
            nonlocal size
            out.append(text)
            size += len(text)
            if size >= chunk_chars:
                write("".join(out))
                out.clear()
                size = 0

        header = {
            "user_id": user_id,
            "exported_at": datetime.now(UTC),
            "store": where(self.settings),
            "forgotten_at": self.store.forgotten_at(user_id),
        }
        emit(_json(header)[:-1] + ",\n")
        counts: Counts = {}
        for place in self.places:
            tally = _Tally(place)
            emit(f"{_json(place.name)}: [")
            for row in place.rows(self, user_id):
                emit(("\n" if not tally.rows else ",\n") + _json(row))
                tally.add(row)
            emit("\n],\n" if tally.rows else "],\n")
            counts.update(tally.counts())
        emit(f'"counts": {_json(counts)}\n}}\n')
        write("".join(out))
        return counts

    def export(self, user_id: str) -> dict[str, Any]:
        """The export as one object (for a small user: tests, scripts in Python)."""
        import json

        chunks: list[str] = []
        self.write_export(user_id, chunks.append)
        return json.loads("".join(chunks))

    # ------------------------------------------------------------------ forget
    def forget(self, user_id: str) -> Forgotten:
        """ "Forget me": the user's rows in every place, in the list's order. Every place is
        tried even when one fails; the result says how many went from each and what could
        not be done (run it again once that is fixed). A place on the journal's disk that
        meets a full disk releases the journal's reserve (`reserve.py`) and is tried again."""
        journal = self.settings.journal_path
        removed: Counts = {}
        failed: dict[str, str] = {}
        for place in self.places:
            try:
                removed[place.name] = place.delete(self, user_id)
                continue
            except Exception as exc:  # noqa: BLE001 - said per place; the others are still tried
                error: BaseException = exc
                removed[place.name] = getattr(exc, "removed", 0)
            full = place.local and (is_disk_full(error) or no_room(journal))
            if full and release_reserve(journal):
                try:
                    removed[place.name] += place.delete(self, user_id)
                    continue
                except Exception as exc:  # noqa: BLE001 - said below
                    error = exc
            said = str(error) if isinstance(error, Unfinished) else describe_error(error)
            failed[place.name] = f"{said}{'; its disk is full' if full and 'full' not in said else ''}"
        gone = Forgotten(removed, failed)
        # Not whom: logs outlive a forget.
        logger.info("forgot a user: %s%s", gone.counts(), f"; could not: {', '.join(failed)}" if failed else "")
        return gone


class _Tally:
    """One place's rows as an export writes them, counted with their parts."""

    def __init__(self, place: Place) -> None:
        self.place = place
        self.rows = 0
        self.parts = dict.fromkeys(place.parts, 0)
        self.groups: set[str] = set()

    def add(self, row: Row) -> None:
        self.rows += 1
        if self.place.part_of is not None:
            part = self.place.part_of(row)
            self.parts[part] = self.parts.get(part, 0) + 1
        if self.place.groups is not None:
            self.groups.add(self.place.groups[1](row))

    def counts(self) -> Counts:
        out = {self.place.name: self.rows, **self.parts}
        if self.place.groups is not None:
            out[self.place.groups[0]] = len(self.groups)
        return {k: out[k] for k in (self.place.name, *self.place.parts) if k in out}


def _json(value: Any) -> str:
    return terminal_json(value, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def _aware(value: str | datetime | None) -> datetime | None:
    return value if isinstance(value, datetime) or value is None else parse_time(value)
