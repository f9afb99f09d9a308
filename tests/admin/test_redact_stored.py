"""Issue 40: secrets kept before a rule caught them leave the store and Mem0's history
when the operator runs `python -m memory.admin redact`: the row's text, its lexical index,
its vector, and every history entry, the superseded values included."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import numpy as np

from memory.admin.cli import main as admin_main
from memory.storage.store import MemoryStore


def _history_texts(store: MemoryStore) -> str:
    with closing(sqlite3.connect(store.settings.mem0_dir / "history.db")) as db:
        rows = db.execute("SELECT coalesce(old_memory, ''), coalesce(new_memory, '') FROM history").fetchall()
    return "\n".join(a + "\n" + b for a, b in rows)


def _row(store: MemoryStore, mem_id: str) -> tuple[dict, np.ndarray]:
    with store.pool.connection() as conn:
        payload, vector = conn.execute(
            f'SELECT payload, vector::text FROM "{store.table}" WHERE id = %s', [mem_id]
        ).fetchone()
    return payload, np.array([float(x) for x in vector.strip("[]").split(",")])


def test_redact_rewrites_stored_rows_and_their_history_and_leaves_other_users(
    store: MemoryStore, user_id: str, monkeypatch
) -> None:
    other = user_id + "-other"
    url = "postgres://admin:S3cretPa55@db.internal:5432/app"
    # Stored as they were before the rules caught them (add_raw and upsert_fact store what they are given).
    raw = store.add_raw(user_id, f"the staging db is {url}").id
    fact = store.upsert_fact(user_id, "User's Gmail password is Sunflower#7", category="personal_facts",
                             slot="gmail_password").id  # fmt: skip
    store.upsert_fact(user_id, "User's Gmail password was changed", category="personal_facts",
                      slot="gmail_password")  # fmt: skip  # the secret is now only in the history
    kept = store.add_raw(other, "my routing number is on the cheque").id
    plain = store.add_raw(user_id, "I keep bees on the roof").id
    before_vector = _row(store, raw)[1]
    assert "S3cretPa55" in _history_texts(store) and "Sunflower#7" in _history_texts(store)

    monkeypatch.setenv("MEMORY_DATABASE_URL", store.url)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    assert admin_main(["--json", "redact", user_id]) == 0

    payload, vector = _row(store, raw)
    assert payload["data"] == "the staging db is postgres://admin:[redacted]@db.internal:5432/app"
    assert "S3cretPa55".lower() not in payload["lex"].lower()
    assert not np.allclose(vector, before_vector)  # the old vector encoded the secret
    texts = _history_texts(store)
    assert "S3cretPa55" not in texts and "Sunflower#7" not in texts
    assert "[redacted]" in texts
    assert [r.text for r in store.list_user(user_id) if r.id == fact] == ["User's Gmail password was changed"]
    assert _row(store, plain)[0]["data"] == "I keep bees on the roof"
    assert _row(store, kept)[0]["data"] == "my routing number is on the cheque"
    # Found by what it says now, not by the secret.
    assert store.search(user_id, "staging database", top_k=3)[0].id == raw
