"""Contexts shared between agents: notes that every agent of a user's calls can read
and extend, kept in Postgres beside the memories (every worker of a fleet sees them).

A context has an unguessable id and belongs to one user: every query is by id *and*
user, so another user's id reads as "not found", never as its content. A note is stored
as it will be shown (NFKC, no control characters: `shown_form`) and with its secrets
replaced (`redact_secrets`, as a spoken turn), and counted as stored. Notes are
appended with the writing agent's name and the time, in one statement that also checks
the bound (`MEMORY_CONTEXT_MAX_CHARS` over all notes of a context), so two agents
writing at once can never pass it. A user keeps at most `MAX_CONTEXTS_PER_USER`
contexts: creating one more removes the least recently updated. Contexts not updated
for `MEMORY_CONTEXT_RETENTION_DAYS` are deleted (`delete_older_than`, run with the
archive's retention). "Forget me" removes a user's contexts (`delete_user`), and
`export_user` gives them for a data-access request.

All methods are blocking (psycopg); the tools call them on a small pool of their own.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

from memory.errors import InvalidInput
from memory.language.redact import redact_secrets
from memory.language.shown_form import shown_form

MAX_NOTE_CHARS = 1000
MAX_AGENT_CHARS = 64
MAX_CONTEXTS_PER_USER = 100
ID_PREFIX = "ctx_"


class ContextError(InvalidInput):
    """A request the store refuses; the message is meant for the model (a tool error)."""


class ContextNotFound(ContextError):
    """No context with this id for this user (it may exist for another: not said)."""


class ContextFull(ContextError):
    """The note would take the context past its bound."""


# A note's time as UTC ISO text, whatever the database session's TimeZone (a fleet's may not be UTC).
_UTC_NOW = sql.SQL("""to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')""")


def contexts_table(table: str) -> str:
    """The table of shared contexts kept beside a memory table."""
    return f"{table}_contexts"


def ensure_context_schema(conn: Connection[Any], table: str) -> None:
    """Create the contexts table (idempotent). Called by `postgres.ensure_schema` inside its
    transaction, under its lock, so job processes starting together do not race."""
    t = sql.Identifier(contexts_table(table))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, "
            "created_by TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
            "updated_at TIMESTAMPTZ NOT NULL DEFAULT now(), chars INTEGER NOT NULL DEFAULT 0, "
            "entries JSONB NOT NULL DEFAULT '[]')"
        ).format(t)
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, updated_at)").format(
            sql.Identifier(f"{contexts_table(table)}_user_idx"), t
        )
    )


@dataclass(frozen=True)
class Note:
    agent: str
    at: str  # ISO time
    text: str


@dataclass(frozen=True)
class SharedContext:
    id: str
    created_by: str
    created_at: str
    updated_at: str
    chars: int
    notes: list[Note]


@dataclass(frozen=True)
class Appended:
    """A context after a note was added: its id, characters used, and notes."""

    id: str
    chars: int
    notes: int


def _note_text(note: str) -> str:
    """The note as it is stored and shown: normalised, secrets replaced, within its bound."""
    if not isinstance(note, str) or not note.strip():
        raise ContextError("the note is empty: give the key points in a sentence or two")
    if len(note) > 4 * MAX_NOTE_CHARS:  # refused before the work of normalising it
        raise ContextError(f"the note is {len(note)} characters; a note holds at most {MAX_NOTE_CHARS}: shorten it")
    text, _ = redact_secrets(shown_form(note))
    if not text:
        raise ContextError("the note is empty: give the key points in a sentence or two")
    if len(text) > MAX_NOTE_CHARS:
        raise ContextError(f"the note is {len(text)} characters; a note holds at most {MAX_NOTE_CHARS}: shorten it")
    return text


def _agent(agent: str) -> str:
    return (shown_form(agent[: 4 * MAX_AGENT_CHARS]) or "agent")[:MAX_AGENT_CHARS]


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def _context(row: tuple[Any, ...]) -> SharedContext:
    ctx_id, created_by, created_at, updated_at, chars, entries = row
    notes = [Note(str(e.get("agent", "")), str(e.get("at", "")), str(e.get("note", ""))) for e in entries]
    return SharedContext(ctx_id, created_by, _iso(created_at), _iso(updated_at), chars, notes)


class ContextStore:
    """Shared contexts over the memory store's connection pool and table name."""

    def __init__(self, pool: ConnectionPool, table: str, max_chars: int) -> None:
        self.pool = pool
        self.table = sql.Identifier(contexts_table(table))
        self.max_chars = max_chars

    def create(self, user_id: str, agent: str, note: str | None = None) -> str:
        """A new context of the user's, with a first note if given; returns its id."""
        first = [] if note is None else [_note_text(note)]
        if first and len(first[0]) > self.max_chars:
            raise ContextFull(f"the note is over the context's bound of {self.max_chars} characters")
        ctx_id = ID_PREFIX + secrets.token_urlsafe(12)
        with self.pool.connection() as conn:
            row = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, user_id, created_by, chars, entries) VALUES (%s, %s, %s, %s, "
                    "CASE WHEN %s::text IS NULL THEN '[]'::jsonb "
                    "ELSE jsonb_build_array("
                    "jsonb_build_object('agent', %s::text, 'at', {utc_now}, 'note', %s::text)) END) "
                    "RETURNING id"
                ).format(self.table, utc_now=_UTC_NOW),
                [
                    ctx_id,
                    user_id,
                    _agent(agent),
                    len(first[0]) if first else 0,
                    first[0] if first else None,
                    _agent(agent),
                    first[0] if first else None,
                ],  # fmt: skip
            ).fetchone()
            # The user's oldest beyond the bound go (least recently updated first).
            conn.execute(
                sql.SQL(
                    "DELETE FROM {t} WHERE user_id = %s AND id IN (SELECT id FROM {t} WHERE user_id = %s "
                    "ORDER BY updated_at DESC, id OFFSET %s)"
                ).format(t=self.table),
                [user_id, user_id, MAX_CONTEXTS_PER_USER],
            )
        assert row is not None
        return str(row[0])

    def fetch(self, user_id: str, ctx_id: str) -> SharedContext:
        """The user's context with this id, or `ContextNotFound`."""
        with self.pool.connection() as conn:
            row = conn.execute(
                sql.SQL(
                    "SELECT id, created_by, created_at, updated_at, chars, entries FROM {} "
                    "WHERE id = %s AND user_id = %s"
                ).format(self.table),
                [str(ctx_id).strip(), user_id],
            ).fetchone()
        if row is None:
            raise ContextNotFound(f"no shared context {str(ctx_id)[:40]!r} was found for this caller")
        return _context(row)

    def append(self, user_id: str, ctx_id: str, agent: str, note: str) -> Appended:
        """Append a note, stamped with `agent` and the database's time; the bound is
        checked in the same statement. `ContextNotFound` or `ContextFull` otherwise.
        Returns the size only, not the notes: parsing a long context's JSON here held the
        GIL (and so the session's event loop) for milliseconds per note."""
        text = _note_text(note)
        with self.pool.connection() as conn:
            row = conn.execute(
                sql.SQL(
                    "UPDATE {} SET entries = entries || jsonb_build_array(jsonb_build_object("
                    "'agent', %s::text, 'at', {utc_now}, 'note', %s::text)), chars = chars + %s, updated_at = now() "
                    "WHERE id = %s AND user_id = %s AND chars + %s <= %s "
                    "RETURNING id, chars, jsonb_array_length(entries)"
                ).format(self.table, utc_now=_UTC_NOW),
                [_agent(agent), text, len(text), str(ctx_id).strip(), user_id, len(text), self.max_chars],
            ).fetchone()
        if row is not None:
            return Appended(str(row[0]), int(row[1]), int(row[2]))
        current = self.fetch(user_id, ctx_id)  # raises ContextNotFound for an unknown (or foreign) id
        raise ContextFull(
            f"shared context {current.id} is full: it holds {current.chars} of {self.max_chars} characters "
            f"and the note has {len(text)}; create a new context for further notes"
        )

    def delete_user(self, user_id: str) -> int:
        """ "Forget me": every context of the user; returns how many."""
        with self.pool.connection() as conn:
            rows = conn.execute(sql.SQL("DELETE FROM {} WHERE user_id = %s RETURNING id").format(self.table), [user_id])
            return len(rows.fetchall())

    def delete_older_than(self, cutoff: datetime, *, dry_run: bool = False, batch: int = 5000) -> int:
        """Retention: the contexts not updated since `cutoff`, of every user; how many."""
        with self.pool.connection() as conn:
            if dry_run:
                query = sql.SQL("SELECT count(*) FROM {} WHERE updated_at < %s").format(self.table)
                return int(conn.execute(query, [cutoff]).fetchone()[0])
            total = 0
            while True:
                n = conn.execute(
                    sql.SQL("DELETE FROM {t} WHERE id IN (SELECT id FROM {t} WHERE updated_at < %s LIMIT %s)").format(
                        t=self.table
                    ),
                    [cutoff, batch],
                ).rowcount
                conn.commit()
                total += n
                if n < batch:
                    return total

    def count_user(self, user_id: str) -> int:
        """How many contexts the user has."""
        with self.pool.connection() as conn:
            query = sql.SQL("SELECT count(*) FROM {} WHERE user_id = %s").format(self.table)
            return int(conn.execute(query, [user_id]).fetchone()[0])

    def export_user(self, user_id: str) -> list[dict[str, Any]]:
        """Every context of the user with its notes, oldest first (JSON-able)."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT id, created_by, created_at, updated_at, chars, entries FROM {} WHERE user_id = %s "
                    "ORDER BY created_at, id"
                ).format(self.table),
                [user_id],
            ).fetchall()
        return [
            {
                "id": c.id,
                "created_by": c.created_by,
                "created_at": c.created_at,
                "updated_at": c.updated_at,
                "notes": [{"agent": n.agent, "at": n.at, "note": n.text} for n in c.notes],
            }
            for c in map(_context, rows)
        ]
