"""A forget or a redaction made by another process is never served by the next look-up
(issue 50): the session index holds the caller's rows, and another process (here a second
store on its own connection pool, with its own session index, as a `memory.admin` command
or another worker has) forgets or redacts them. The very next look-up, with no wait for a
refresh, has neither; and the check costs that look-up one small statement."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from memory.retrieval.retriever import Retriever
from memory.storage import session_index
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S

SECRET = "S3cretPa55"
DB_URL = f"postgres://admin:{SECRET}@db.internal:5432/app"


@pytest.fixture
def elsewhere(store: MemoryStore) -> Iterator[MemoryStore]:
    """Another process's store: its own pool, its own session index."""
    other = MemoryStore.open(store.settings)
    assert other.pool is not store.pool
    yield other
    other.close()


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    seen: list[str] = []
    lock = threading.Lock()
    real = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        text = query.as_string(self.connection) if hasattr(query, "as_string") else str(query)
        with lock:
            seen.append((threading.current_thread().name, " ".join(text.split())[:90]))
        return real(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    yield seen


def _texts(retriever: Retriever, user_id: str, query: str) -> list[str]:
    return [r.text for r in retriever.retrieve(user_id, query, top_k=10)]


def _held(store: MemoryStore, indexes: session_index.SessionIndexes, user_id: str) -> None:
    """The caller's rows held and current, as in a session after its first turn."""
    store.open_session_index(user_id)
    assert indexes.wait_idle(user_id)
    assert indexes.usable(user_id) is not None


def test_a_redaction_by_another_process_is_not_served_by_the_next_look_up(
    store: MemoryStore, elsewhere: MemoryStore, user_id: str, indexes
) -> None:
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.add_raw(user_id, f"the staging db is {DB_URL}")  # stored before a rule caught it
    store.add_raw(user_id, "I keep bees on the roof")
    _held(store, indexes, user_id)
    assert any(SECRET in t for t in _texts(retriever, user_id, "what is the staging db"))
    assert indexes.wait_idle(user_id)

    rewritten, _ = elsewhere.redact_stored(user_id)
    assert rewritten == 1

    got = _texts(retriever, user_id, "what is the staging db")  # at once: no refresh waited for
    assert got and not any(SECRET in t for t in got), got
    assert any("[redacted]" in t for t in got), got


def test_a_forget_by_another_process_is_not_served_by_the_next_look_up(
    store: MemoryStore, elsewhere: MemoryStore, user_id: str, indexes
) -> None:
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    for text in ("My sister Anna lives in Lisbon", "I keep bees on the roof", "我妹妹下个月要结婚了"):
        store.add_raw(user_id, text)
    _held(store, indexes, user_id)
    assert "My sister Anna lives in Lisbon" in _texts(retriever, user_id, "where does Anna live")
    assert indexes.wait_idle(user_id)

    assert elsewhere.delete_user(user_id) == 3

    for query in ("where does Anna live", "bees", "结婚"):
        assert _texts(retriever, user_id, query) == [], query


def test_the_check_is_one_small_statement_per_look_up(store: MemoryStore, user_id: str, indexes, statements) -> None:
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.add_raw(user_id, "My sister Anna lives in Lisbon")
    _held(store, indexes, user_id)
    retriever.retrieve(user_id, "where does Anna live")
    assert indexes.wait_idle(user_id)
    statements.clear()
    retriever.retrieve(user_id, "where does Anna live")
    # On the look-up's own threads (the index's refresh after it runs on its own thread).
    ours = [s for thread, s in statements if not thread.startswith("memory-index")]
    assert len(ours) == 1 and "_generations" in ours[0], ours


def test_a_forget_by_the_operators_command_in_another_process_is_not_served_by_the_next_look_up(
    store: MemoryStore, user_id: str, indexes
) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.add_raw(user_id, "My sister Anna lives in Lisbon")
    _held(store, indexes, user_id)
    assert "My sister Anna lives in Lisbon" in _texts(retriever, user_id, "where does Anna live")
    assert indexes.wait_idle(user_id)
    env = {**os.environ, "MEMORY_DATABASE_URL": store.url, "MEMORY_DATA_DIR": str(store.settings.data_dir),
           "MEMORY_COLLECTION": store.settings.collection}  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "memory.admin", "forget", user_id, "--yes"], env=env, cwd=root,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _texts(retriever, user_id, "where does Anna live") == []


def test_a_first_load_that_read_the_rows_before_a_forget_is_not_served_by_a_look_up_begun_after_it(
    store: MemoryStore, elsewhere: MemoryStore, user_id: str, indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session start loads the rows in the background while the first look-up runs: the
    load reads them, another process forgets the user, the look-up begins (nothing held
    yet, so its check reads nothing), and the load lands before the look-up's stages."""
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.add_raw(user_id, "My sister Anna lives in Lisbon")
    read, go = threading.Event(), threading.Event()
    real_rows = indexes.table.user_snapshot

    def rows_then_wait(*args, **kwargs):  # type: ignore[no-untyped-def]
        rows = real_rows(*args, **kwargs)
        read.set()
        assert go.wait(30)
        return rows

    monkeypatch.setattr(indexes.table, "user_snapshot", rows_then_wait)
    loading = threading.Thread(target=store.open_session_index, args=(user_id,))
    loading.start()
    assert read.wait(30)
    assert elsewhere.delete_user(user_id) == 1
    real_check = indexes.check

    def check_then_land(uid: str) -> None:
        real_check(uid)
        go.set()
        loading.join(30)
        assert indexes.held(uid) is not None  # the old rows are now held

    monkeypatch.setattr(indexes, "check", check_then_land)
    assert _texts(retriever, user_id, "where does Anna live") == []


def test_a_redaction_whose_last_step_failed_is_still_not_served_by_the_next_look_up(
    store: MemoryStore, elsewhere: MemoryStore, user_id: str, indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row is rewritten and committed; the step after it fails (the database went away
    between the two): another process's next look-up still has only the redacted text."""
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.add_raw(user_id, f"the staging db is {DB_URL}")
    _held(store, indexes, user_id)
    assert any(SECRET in t for t in _texts(retriever, user_id, "what is the staging db"))
    assert indexes.wait_idle(user_id)

    def gone(*_args: object) -> None:
        raise psycopg.OperationalError("the connection was lost")

    monkeypatch.setattr(session_index.generations, "bump_now", gone)
    with pytest.raises(psycopg.OperationalError):
        elsewhere.redact_stored(user_id)

    got = _texts(retriever, user_id, "what is the staging db")
    assert got and not any(SECRET in t for t in got), got


def test_rows_another_process_imported_are_in_the_next_look_up(
    store: MemoryStore, elsewhere: MemoryStore, user_id: str, indexes
) -> None:
    # An import writes its pages in transactions of its own, then marks the user changed for
    # every process (`changed_elsewhere_too`, as `memory.admin import` does after its pages).
    retriever = Retriever(store, store.settings.tuned(density=0.0))
    store.add_raw(user_id, "I keep bees on the roof")
    _held(store, indexes, user_id)
    assert "I keep bees on the roof" in _texts(retriever, user_id, "bees")
    assert indexes.wait_idle(user_id)

    elsewhere.add_raw(user_id, "My sister Anna lives in Lisbon")
    elsewhere.changed_elsewhere_too(user_id)

    assert "My sister Anna lives in Lisbon" in _texts(retriever, user_id, "where does Anna live")
