"""Issue 30, finding 3: a shared context's notes are redacted before they are stored, its
bound counts the characters as stored and shown (after NFKC: one character can become
eighteen), and contexts expire after MEMORY_CONTEXT_RETENTION_DAYS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from psycopg import sql

from memory.archive.retention import run_retention
from memory.settings import ConfigError, load_settings
from memory.storage.contexts import ContextError, ContextFull, ContextStore, contexts_table
from memory.storage.store import MemoryStore
from memory.working.agents import context_block


def contexts(store: MemoryStore, max_chars: int = 4000) -> ContextStore:
    return ContextStore(store.pool, store.settings.collection, max_chars)


def raw_rows(store: MemoryStore, user_id: str) -> str:
    """Everything the table holds for the user, as Postgres has it."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL("SELECT entries::text FROM {} WHERE user_id = %s").format(
                sql.Identifier(contexts_table(store.settings.collection))
            ),
            [user_id],
        ).fetchall()
    return " ".join(r[0] for r in rows)


def test_a_notes_secrets_are_never_stored(store: MemoryStore, user_id: str) -> None:
    # Before: 4 of 4 secrets were stored raw.
    ctx = contexts(store)
    ctx_id = ctx.create(user_id, "receptionist", "Caller's card number is 4111 1111 1111 1111, locked out")
    ctx.append(user_id, ctx_id, "specialist", "He gave his password as Quokka88 and his PIN is 4711")
    ctx.append(user_id, ctx_id, "specialist", "客户说银行卡密码是839201，已提醒他不要说出来")
    ctx.append(user_id, ctx_id, "specialist", "SSN 123-45-6789 on file; IBAN DE89 3704 0044 0532 0130 00")
    stored = raw_rows(store, user_id)
    for secret in ("4111 1111", "Quokka88", "4711", "839201", "123-45-6789", "3704 0044"):
        assert secret not in stored, secret
    notes = [n.text for n in ctx.fetch(user_id, ctx_id).notes]
    assert notes[0] == "Caller's card number is [redacted], locked out"  # the rest of the note is kept
    assert "已提醒他不要说出来" in notes[2]


def test_the_bound_counts_what_is_stored_and_shown_after_nfkc(store: MemoryStore, user_id: str) -> None:
    # Before: "ﷺ" counted one character and became 18 when shown: 4,000 stored characters
    # became 72,328 in the model's context.
    ctx = contexts(store, max_chars=500)
    ctx_id = ctx.create(user_id, "receptionist", "first note")
    with pytest.raises(ContextFull):
        ctx.append(user_id, ctx_id, "specialist", "ﷺ" * 50)  # 50 typed, 900 once normalised
    with pytest.raises(ContextFull):
        ctx.create(user_id, "receptionist", "ﷺ" * 30)
    with pytest.raises(ContextError, match="1800 characters"):  # a note's own bound, counted the same way
        ctx.append(user_id, ctx_id, "specialist", "ﷺ" * 100)
    ctx.append(user_id, ctx_id, "specialist", "ﷺ" * 25)  # 450: fits beside the first note
    stored = ctx.fetch(user_id, ctx_id)
    shown = context_block(stored)
    assert stored.chars == sum(len(n.text) for n in stored.notes) == len("first note") + 450 <= 500
    assert shown.count("صلى الله عليه وسلم") == 25 and len(shown) < 500 + 400  # the bound plus the block's own words


def test_contexts_expire_after_their_retention(store: MemoryStore, user_id: str) -> None:
    ctx = contexts(store)
    old, new = ctx.create(user_id, "receptionist", "old case"), ctx.create(user_id, "receptionist", "new case")
    with store.pool.connection() as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET updated_at = now() - interval '40 days' WHERE id = %s").format(
                sql.Identifier(contexts_table(store.settings.collection))
            ),
            [old],
        )
    assert store.settings.context_retention_days == 30
    report = run_retention(store, dry_run=True, now=datetime.now(UTC) + timedelta(seconds=1))
    assert report.contexts >= 1 and [c["id"] for c in ctx.export_user(user_id)] == [old, new]  # counted only
    report = run_retention(store)
    assert report.contexts >= 1
    assert [c["id"] for c in ctx.export_user(user_id)] == [new]


def test_the_contexts_retention_is_read_from_the_environment() -> None:
    assert load_settings({"MEMORY_CONTEXT_RETENTION_DAYS": "7"}, dotenv=False).context_retention_days == 7
    assert load_settings({"MEMORY_CONTEXT_RETENTION_DAYS": "0"}, dotenv=False).context_retention_days == 0
    with pytest.raises(ConfigError, match="MEMORY_CONTEXT_RETENTION_DAYS"):
        load_settings({"MEMORY_CONTEXT_RETENTION_DAYS": "-1"}, dotenv=False)
