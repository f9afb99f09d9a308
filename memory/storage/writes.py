"""The store's write path: a turn or a fact into Mem0, under the rules that keep it right.

`WritePath` is `MemoryStore`'s half that writes (the store is the class that uses it): a
raw turn (`add_raw`, NORMAL) or a canonical fact (`upsert_fact`, GATED: supersede the slot,
keep the old value for the past, under the per-user lock with its fence), the index form
each is written under (`index_form`: context, resolved dates, the lexical form), a write
said before a forget refused or taken back, and the rewrites of what is stored (imported
dates, the lexical index after an upgrade, today's redaction rules). Every write ends in
`_wrote`, which the look-ups' freshness rests on (`session_index.py`, `replicas.py`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from psycopg import sql
from psycopg_pool import ConnectionPool

from memory.language.indexing import IndexForm, index_form
from memory.language.lexical import LEX_VERSION, lex_fields
from memory.language.redact import redact_secrets
from memory.settings import MemorySettings
from memory.storage import embedder as embedder_mod
from memory.storage.faults import store_faults
from memory.storage.history import Mem0History
from memory.storage.locks import Fence, LeaseLost, RowLocks, fenced
from memory.storage.mem0_table import Mem0Table, for_user
from memory.storage.postgres import forgets_table
from memory.types import (
    ForgottenTurn,
    InvalidMemoryText,
    MemoryRecord,
    WriteResult,
    canonical_key,
    parse_time,
    text_hash,
    validate_text,
    validate_user_id,
)

logger = logging.getLogger(__name__)

# A fact write refused because its writer's lock ran out (`locks.LeaseLost`) is tried once
# more under the lock taken again; refused again, the journal retries it.
FENCED_ATTEMPTS = 2


def _said_before(said_at: str | None, other: object) -> bool:
    """Was `said_at` strictly earlier than `other` (ISO times; False when either is unknown)?"""
    if said_at is None or not isinstance(other, str):
        return False
    try:
        return datetime.fromisoformat(said_at) < datetime.fromisoformat(other)
    except (TypeError, ValueError):  # naive against aware, or not a time: no claim
        return False


class WritePath:
    """The writes of `MemoryStore`, which sets the attributes below."""

    settings: MemorySettings
    pool: ConnectionPool
    table: str
    rows: Mem0Table
    locks: RowLocks
    mem0_history: Mem0History
    _zone: ZoneInfo
    _mem0_lock: threading.Lock

    # ... and these, defined by `MemoryStore`:
    mem0: Any  # Mem0's `Memory`
    passages: Any  # the embedder of the text written
    _wrote: Callable[[str], None]  # a write of the user committed: the look-ups' freshness
    list_user: Callable[..., list[MemoryRecord]]
    find_slot: Callable[[str, str | None], MemoryRecord | None]
    changed_elsewhere_too: Callable[[str], None]

    def add_raw(
        self,
        user_id: str,
        text: str,
        *,
        metadata: dict[str, Any] | None = None,
        write_id: str | None = None,
        said_at: str | None = None,
        context: Sequence[str] = (),
    ) -> WriteResult:
        """Store text as it is (NORMAL turns). With `write_id`, a replay is a NOOP; with
        `said_at`, a turn said before the user asked to be forgotten is `ForgottenTurn`.
        `context`: the session's items before the turn, oldest first; the last one is
        what the turn answers, and indexes it (`index_form`), the shown text unchanged."""
        text = validate_text(text)
        validate_user_id(user_id)
        self._refuse_if_forgotten(user_id, said_at, write_id)
        if write_id and (existing := self._find_by_write_id(user_id, write_id)):
            return WriteResult("NOOP", existing, text)
        meta = dict(metadata or {})
        form = self.index_form(text, context, said_at or meta.get("timestamp"))
        meta.update(form.payload())
        meta.update(lex_fields(text, form.extra))  # normalised, segmented form for full-text recall
        if write_id:
            meta["write_id"] = write_id
        with store_faults(), self._write_vector(text, form):
            out = self.mem0.add(text, user_id=user_id, metadata=meta, infer=False)
        self._wrote(user_id)
        results = out.get("results") or []
        mem_id = results[0]["id"] if results else None
        self._undo_if_forgotten(user_id, said_at, mem_id)
        return WriteResult("ADD", mem_id, text)

    def upsert_fact(
        self,
        user_id: str,
        text: str,
        *,
        category: str,
        slot: str | None = None,
        metadata: dict[str, Any] | None = None,
        write_id: str | None = None,
        said_at: str | None = None,
        valid_from: str | None = None,
        correction: Callable[[str], bool] | None = None,
    ) -> WriteResult:
        """Store a canonical fact: skip a restatement, supersede the same slot.

        A fact whose text is already stored for the user (as a value that holds now) is
        a NOOP. A fact for a slot that already holds another value UPDATEs that row in
        place (Mem0's history keeps the old value), and the old value is kept as a row
        of its own, searchable for questions about the past: `valid_from` (ISO day) to
        `valid_until` (the new value's `valid_from`), `was_slot`, `superseded_by` (the
        row that holds the slot now). Unless `correction(old text)` says the new value
        corrects a mistake ("no, I said Berlin, not Bern"): the old one never held, and
        the new one holds from when the old one did.

        The look-ups and the write run under a per-user lock in Postgres: two writers
        of one user (two sessions at once, on any workers) would otherwise both find
        the slot empty and both add, leaving "Anna" and "Maria" as the sister. Raises
        `StoreBusy` when another writer keeps it for `locks.WAIT_S` (the journal retries).
        A writer that stalled past the lock's lease is refused by the database when it
        writes (`locks.Fence`): it takes the lock again and looks again, and an older value
        then gives way to the newer one another writer stored meanwhile.
        """
        text = validate_text(text, what="fact text")
        validate_user_id(user_id)
        self._refuse_if_forgotten(user_id, said_at, write_id)
        if category not in self.settings.durable_categories:
            raise InvalidMemoryText(
                f"category {category!r} is not one of {', '.join(self.settings.durable_categories)}"
            )
        # A row lock (memory/storage/locks.py), not a transaction's: it holds no connection
        # while the look-ups and Mem0's writes take theirs, so writers behind a pooler
        # cannot take every server connection and wait on each other.
        refused = 0
        while True:
            try:
                with self.locks.hold(f"memory-facts:{user_id}") as fence:
                    return self._upsert_fact_locked(
                        user_id, text, category, slot, metadata, write_id, said_at, fence, valid_from, correction
                    )
            except LeaseLost as exc:
                refused += 1
                if refused >= FENCED_ATTEMPTS:
                    raise
                logger.warning("a fact write of user %s was refused (%s): looked at again under the lock", user_id, exc)

    def _upsert_fact_locked(
        self,
        user_id: str,
        text: str,
        category: str,
        slot: str | None,
        metadata: dict[str, Any] | None,
        write_id: str | None,
        said_at: str | None,
        fence: Fence,
        valid_from: str | None = None,
        correction: Callable[[str], bool] | None = None,
    ) -> WriteResult:
        key = canonical_key(text)
        if write_id and (earlier := self._record_by_write_id(user_id, write_id)) is not None:
            # A turn replayed (a killed worker's journal, a retry after an outage): its
            # extraction ran again. The same fact, or one for the same slot, is written
            # already; another one (the model listed the facts in another order, or
            # dropped one) must not be lost: it is written under an id of its own.
            if canonical_key(earlier.text) == key or (slot and earlier.slot == slot):
                return WriteResult("NOOP", earlier.id, text)
            write_id = f"{write_id}~{text_hash(key)[:8]}"
            if (again := self._find_by_write_id(user_id, write_id)) is not None:
                return WriteResult("NOOP", again, text)
        for rec in self.list_user(user_id, categories=[category], past=False):
            if canonical_key(rec.text) == key:
                return WriteResult("NOOP", rec.id, text)
        meta = dict(metadata or {})
        meta.update(category=category)
        said_on = self._said_on(said_at or meta.get("timestamp"))
        if valid_from or said_on:  # from the day the turn names, else the day it was said
            meta["valid_from"] = valid_from or said_on.isoformat()  # type: ignore[union-attr]
        # A fact is canonical (no turn before it to index with), but its relative dates
        # are resolved as a turn's are: "has a dentist appointment tomorrow".
        form = self.index_form(text, (), said_at or meta.get("timestamp"), use_context=False)
        meta.update(form.payload())
        meta.update(lex_fields(text, form.extra))  # both the ADD and the UPDATE path below
        if slot:
            meta["slot"] = slot
        if write_id:
            meta["write_id"] = write_id
        current = self.find_slot(user_id, slot) if slot else None
        if current is not None and _said_before(said_at, current.metadata.get("timestamp")):
            # An older statement arriving late (a journal replayed after a newer session
            # wrote): "my sister is Anna" must not undo the later "she is Maria".
            return WriteResult("NOOP", current.id, text)
        past = None
        if current is not None and correction is not None and correction(current.text):
            meta["valid_from"] = current.metadata.get("valid_from") or valid_from  # it held all along
        elif current is not None:
            past = self._keep_past(user_id, current, meta.get("valid_from"), write_id, said_at, fence)
        meta.update(fence.payload())  # checked by the database as it writes, then taken off
        try:
            with store_faults(), fenced(fence), self._write_vector(text, form):
                if current is not None:
                    with for_user(user_id):  # Mem0 reads and updates the row by id: named with its user
                        self.mem0.update(current.id, text, metadata=meta)
                    self._wrote(user_id)
                    self._undo_if_forgotten(user_id, said_at, current.id)
                    return WriteResult("UPDATE", current.id, text)
                out = self.mem0.add(text, user_id=user_id, metadata=meta, infer=False)
        except LeaseLost:
            if past is not None:  # the refused change's past value goes with it
                self._removed(self.rows.delete_row(user_id, past))
            raise
        self._wrote(user_id)
        results = out.get("results") or []
        mem_id = results[0]["id"] if results else None
        self._undo_if_forgotten(user_id, said_at, mem_id)
        return WriteResult("ADD", mem_id, text)

    def _keep_past(
        self,
        user_id: str,
        current: MemoryRecord,
        until: object,
        write_id: str | None,
        said_at: str | None,
        fence: Fence,
    ) -> str | None:
        """Keep the value a change replaces as a row of its own, with the span it held; the
        new row's id (None when a replay finds it kept already).

        Written before the current row is updated: a worker killed between the two leaves
        a past row whose write id its replay finds (no second copy), never an update whose
        old value is gone. A forget that came meanwhile takes it back, as any write. Fenced
        as the change is: a writer past its lease keeps no past value either."""
        past_id = f"{write_id}:was" if write_id else None
        if past_id and self._find_by_write_id(user_id, past_id) is not None:
            return None
        keep = ("session_id", "turn_id", "timestamp", "valid_from")
        meta: dict[str, Any] = {k: current.metadata[k] for k in keep if current.metadata.get(k) is not None}
        if "valid_from" not in meta and (said := self._said_on(current.metadata.get("timestamp"))) is not None:
            meta["valid_from"] = said.isoformat()
        until_day = str(until) if until else datetime.now(self._zone).date().isoformat()
        meta.update(category=current.category, was_slot=current.slot, superseded_by=current.id,
                    valid_until=until_day)  # fmt: skip
        form = self.index_form(current.text, (), current.metadata.get("timestamp"), use_context=False)
        meta.update(form.payload())
        meta.update(lex_fields(current.text, form.extra))
        if past_id:
            meta["write_id"] = past_id
        meta.update(fence.payload())
        with store_faults(), fenced(fence), self._write_vector(current.text, form):
            out = self.mem0.add(current.text, user_id=user_id, metadata=meta, infer=False)
        results = out.get("results") or []
        kept = results[0]["id"] if results else None
        self._undo_if_forgotten(user_id, said_at, kept)
        return kept

    def index_form(
        self, text: str, context: Sequence[str], said_at: object, *, use_context: bool | None = None
    ) -> IndexForm:
        """What the memory is indexed under (MEMORY_RETRIEVAL_INDEX_CONTEXT / _INDEX_DATES),
        its relative dates read on the day it was said, in the users' time zone."""
        r = self.settings.retrieval
        return index_form(
            text,
            context=context,
            said_on=self._said_on(said_at),
            use_context=r.index_context if use_context is None else use_context and r.index_context,
            use_dates=r.index_dates,
        )

    def _said_on(self, said_at: object) -> date | None:
        when = parse_time(said_at)
        return when.astimezone(self._zone).date() if when is not None else None

    @contextmanager
    def _write_vector(self, text: str, form: IndexForm) -> Iterator[None]:
        """While Mem0 writes `text`, the vector it stores is that of the index form."""
        model = self.mem0.embedding_model
        if not isinstance(model, embedder_mod.PresetVectors):
            yield
            return
        with model.preset(text, self.passages.embed(form.embed, "add")):
            yield

    def restore_dates(
        self,
        user_id: str,
        memory_id: str,
        *,
        created_at: str | None = None,
        updated_at: str | None = None,
        said_at: str | None = None,
    ) -> None:
        """Give an imported memory the dates it was exported with (`memory.admin import`):
        Mem0 dates every write "now". The row's `created_at`, `updated_at` and `timestamp`
        (when it was said), and the date Mem0's history gives each of its entries (Mem0
        dates them all with the memory's `created_at`)."""
        fields = {k: v for k, v in (("created_at", created_at), ("updated_at", updated_at), ("timestamp", said_at))
                  if v}  # fmt: skip
        if fields:
            self.rows.set_fields(user_id, memory_id, fields)
            self._wrote(user_id)
        if created_at:
            self.mem0_history.restore_created(memory_id, created_at)

    def _removed(self, ids: list[str]) -> list[str]:
        """Purge Mem0's history of rows just deleted by SQL (one statement; `Memory.delete`
        would log each text once more). Returns their ids."""
        self.mem0_history.purge(ids)
        return ids

    def forgotten_at(self, user_id: str) -> datetime | None:
        """When the user last asked to be forgotten, if ever (one primary-key read)."""
        query = sql.SQL("SELECT forgotten_at FROM {} WHERE user_id = %s").format(
            sql.Identifier(forgets_table(self.table))
        )
        with self.pool.connection() as conn:
            row = conn.execute(query, [user_id]).fetchone()
        return row[0] if row else None

    def forgotten(self, user_id: str, said_at: str | None) -> bool:
        """Did the user ask to be forgotten at or after `said_at` (an ISO time)?"""
        if said_at is None:
            return False
        said = parse_time(said_at)
        if said is None:
            raise InvalidMemoryText(f"the time the turn was said is no ISO time: {said_at[:40]!r}")
        forgotten = self.forgotten_at(user_id)
        return forgotten is not None and forgotten >= said

    def _refuse_if_forgotten(self, user_id: str, said_at: str | None, write_id: str | None) -> None:
        """Refuse a turn said before a forget. An earlier attempt of the same write that
        landed after the forget and then failed before it could undo itself (a lost
        connection, a killed worker) left its row: it goes now."""
        if not self.forgotten(user_id, said_at):
            return
        if write_id:
            self._removed(self.rows.delete_turn_writes(user_id, write_id))  # and the turn's other facts
            self._wrote(user_id)
        raise ForgottenTurn(f"the user asked to be forgotten after this was said ({said_at})")

    def _undo_if_forgotten(self, user_id: str, said_at: str | None, mem_id: str | None) -> None:
        """A forget that came between the check and the write: take the write back.

        Its history goes even when the forget already took the row: Mem0 writes the
        history entry after the row, so it can land after the forget purged history."""
        if mem_id and self.forgotten(user_id, said_at):
            if mem_id not in self._removed(self.rows.delete_row(user_id, mem_id)):
                self.mem0_history.purge([mem_id])
            self._wrote(user_id)
            raise ForgottenTurn(f"the user asked to be forgotten after this was said ({said_at})")

    def reindex_lex(self, user_id: str, *, limit: int = 20_000, batch: int = 100, pause_s: float = 0.02) -> int:
        """Rewrite the lexical index (`lex`) of the user's rows that an older version of
        memory/language/lexical.py wrote, or that have none; at most `limit` rows. Returns how many.

        After an upgrade that changes the index (numbers as words of their own, Chinese
        numerals as digits, ...), old rows would otherwise be found by full text only
        through the words the old index happened to share with the new one. `lex` is
        derived from the stored text, so this touches neither the text, nor the vector,
        nor Mem0's history, and a row whose text changed meanwhile is left to its writer.
        Batches with a pause between them: segmenting is pure Python, and the event loop
        of the session that runs this must keep the GIL often.
        """
        # In id order from where the last batch ended: a row that cannot be indexed
        # (lex_fields gives up on it) is passed once, not fetched again and again.
        done, after = 0, uuid.UUID(int=0)
        while done < limit:
            rows = self.rows.stale_lex(user_id, str(LEX_VERSION), after, min(batch, limit - done))
            if not rows:
                break
            after = rows[-1][0]
            self.rows.merge_payloads(
                user_id, [(lex_fields(text, extra), row_id, text) for row_id, text, extra in rows if text]
            )
            done += len(rows)
            self._wrote(user_id)
            time.sleep(pause_s)
        return done

    def redact_stored(self, user_id: str | None = None, *, batch: int = 200) -> tuple[int, int]:
        """Today's redaction rules over what is stored already (one user's, or everyone's):
        rows written before a rule caught their secret keep it otherwise, and so does Mem0's
        history of them on this machine. Returns (rows rewritten, history entries rewritten).

        A row that holds a secret gets its text, context, lexical index and vector anew
        (the vector of the old text still encodes it), in place: not through Mem0's
        `update`, which would log the old text into the history once more. Then every
        history entry of those memories, current and superseded values alike, is redacted
        too, with SQLite's `secure_delete` on so the old text does not stay in free pages."""
        rewritten, ids, after = 0, [], uuid.UUID(int=0)
        while rows := self.rows.rows_after(user_id, after, batch):
            after = rows[-1][0]
            ids += [str(r[0]) for r in rows]
            for row_id, payload in rows:
                text, ctx = str(payload.get("data") or ""), str(payload.get("ctx") or "")
                clean, found = redact_secrets(text)
                clean_ctx, in_ctx = redact_secrets(ctx)
                if not found and not in_ctx:
                    continue
                form = self.index_form(clean, [clean_ctx] if clean_ctx else [], payload.get("timestamp"))
                fields = {"data": clean, "hash": hashlib.md5(clean.encode()).hexdigest(), **form.payload(),
                          **lex_fields(clean, form.extra), **({"ctx": clean_ctx} if ctx else {})}  # fmt: skip
                vector = self.passages.embed(form.embed, "add")
                owner = str(payload.get("user_id") or "")
                rewritten += self.rows.rewrite(owner, row_id, text, fields, vector)
                self.changed_elsewhere_too(owner)
        return rewritten, self.mem0_history.redact(None if user_id is None else ids)

    def _record_by_write_id(self, user_id: str, write_id: str) -> MemoryRecord | None:
        row = self.rows.by_write_id(user_id, write_id)
        return MemoryRecord.from_payload(*row) if row else None

    def _find_by_write_id(self, user_id: str, write_id: str) -> str | None:
        record = self._record_by_write_id(user_id, write_id)
        return record.id if record else None


__all__ = ["FENCED_ATTEMPTS", "WritePath"]
