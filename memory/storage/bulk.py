"""Many NORMAL turns of one user written at once: the import of a large user
(`memory.admin import`, `memory.import_user`).

One page at a time: the turns already stored (by their write ids) left out in one
statement, the rest embedded in one batch, their rows inserted in one transaction and
their Mem0 history entries in one SQLite transaction. A row is the one `MemoryStore.add_raw`
writes through Mem0 (the same payload, index form, lexical fields and write id), dated as
the import restores it (`restore_dates`). A forget that lands while a page is written takes
the page back, as `add_raw` takes back its one row.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from memory.language.lexical import lex_fields
from memory.storage.faults import store_faults
from memory.types import ForgottenTurn, WriteResult, validate_text, validate_user_id


@dataclass(frozen=True)
class RawTurn:
    """One turn of a page: what `add_raw` takes, and the dates the import restores."""

    text: str
    write_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    context: Sequence[str] = ()
    created_at: str | None = None
    updated_at: str | None = None
    said_at: str | None = None


def _stored_write_ids(store: Any, user_id: str, write_ids: Sequence[str]) -> set[str]:
    query = sql.SQL(
        "SELECT payload->>'write_id' FROM {} WHERE user_id = %s AND payload ? 'write_id' "
        "AND payload->>'write_id' = ANY(%s)"
    ).format(sql.Identifier(store.table))
    with store.pool.connection() as conn:
        return {r[0] for r in conn.execute(query, [user_id, list(write_ids)]).fetchall()}


def _lemmas(text: str) -> str:
    from mem0.utils.lemmatization import lemmatize_for_bm25

    return lemmatize_for_bm25(text)


def add_raw_page(
    store: Any, user_id: str, turns: Sequence[RawTurn], *, asked_at: str, cores: int = 1
) -> list[WriteResult]:
    """Write a page of one user's turns (see the module doc): one `WriteResult` a turn,
    "NOOP" for one already stored. `asked_at`: when the import was asked for; a forget
    after it takes the page back (`ForgottenTurn`). `cores`: the embedding's (more than
    one only in a process that serves no call)."""
    validate_user_id(user_id)
    texts = [validate_text(t.text) for t in turns]
    stored = _stored_write_ids(store, user_id, [t.write_id for t in turns])
    new = [(t, text) for t, text in zip(turns, texts, strict=True) if t.write_id not in stored]
    ids = [str(uuid.uuid4()) for _ in new]
    payloads: list[dict[str, Any]] = []
    forms = []
    now = datetime.now(UTC).isoformat()
    for turn, text in new:
        meta = dict(turn.metadata)
        form = store.index_form(text, turn.context, turn.said_at or meta.get("timestamp"))
        forms.append(form)
        meta.update(form.payload())
        meta.update(lex_fields(text, form.extra))
        created = turn.created_at or now
        meta.update({
            "write_id": turn.write_id,
            "user_id": user_id,
            "role": "user",
            "data": text,
            "hash": hashlib.md5(text.encode()).hexdigest(),
            "created_at": created,
            "updated_at": turn.updated_at or created,
            "text_lemmatized": _lemmas(text),
        })  # fmt: skip
        if turn.said_at:
            meta["timestamp"] = turn.said_at
        payloads.append(meta)
    if new:
        texts_in = [f.embed for f in forms]
        embed = store.passages.embed_batch
        vectors = embed(texts_in, "add", cores=cores) if cores > 1 else embed(texts_in, "add")
        with store_faults():
            store.mem0.vector_store.insert(vectors=vectors, payloads=payloads, ids=ids)  # one transaction
        _add_history(store, ids, payloads)
        store._wrote(user_id)  # noqa: SLF001 - the store's own bookkeeping of a write
        if store.forgotten(user_id, asked_at):  # a forget came while the page was written
            with store.pool.connection() as conn:
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE user_id = %s AND id = ANY(%s::uuid[])").format(
                        sql.Identifier(store.table)
                    ),
                    [user_id, ids],
                )
            store.mem0_history.purge(ids)
            store._wrote(user_id)  # noqa: SLF001
            raise ForgottenTurn(f"the user asked to be forgotten after this import was asked for ({asked_at})")
    written = dict(zip((t.write_id for t, _ in new), ids, strict=True))
    return [
        WriteResult("ADD", written[t.write_id], text) if t.write_id in written else WriteResult("NOOP", None, text)
        for t, text in zip(turns, texts, strict=True)
    ]


def _add_history(store: Any, ids: Sequence[str], payloads: Sequence[dict[str, Any]]) -> None:
    """Mem0's "ADD" history entry of each row, as `Memory.add` writes it, in one transaction."""
    db = store.mem0.db
    rows = [
        (str(uuid.uuid4()), mem_id, None, p["data"], "ADD", p["created_at"], p["updated_at"], 0, None, "user")
        for mem_id, p in zip(ids, payloads, strict=True)
    ]
    with db._lock:  # noqa: SLF001 - Mem0's own lock around its SQLite connection
        try:
            db.connection.execute("BEGIN")
            db.connection.executemany(
                "INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at, updated_at, "
                "is_deleted, actor_id, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            db.connection.execute("COMMIT")
        except Exception:
            db.connection.execute("ROLLBACK")
            raise
