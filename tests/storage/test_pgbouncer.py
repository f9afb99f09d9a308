"""The store behind PgBouncer in transaction mode, as a fleet reaches its shared Postgres.

Every transaction may run on another server connection: a session's SET, advisory lock
or prepared statement does not follow the client. These tests run the parts that rely on
the database for coordination through a PgBouncer whose server pool (2) is smaller than
the clients, so server connections are shared: prepared statements, the per-user fact
lock, the archive's chat lock, retention once per fleet, schema creation by processes
starting at once, forget and the admin commands; and a database that refuses connections.
The whole suite runs this way with `uv run pytest --through-pgbouncer` (docs/scaling.md).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from harness.pgbouncer import INSTALL_HINT, PgBouncer, pgbouncer_binary
from memory.settings import MemorySettings, load_settings
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S, wait_until
from tests.storage.fact_writers import stale_writer_gives_way, two_writers_at_once
from tests.storage.schema_at_once import create_schema_at_once


@pytest.fixture(scope="module")
def bouncer(embedded_server_url: str) -> Iterator[PgBouncer]:
    _need_pgbouncer()
    with PgBouncer(embedded_server_url, pool_size=2, query_wait_timeout=15) as running:
        yield running


def _need_pgbouncer() -> None:
    """Skipped on a developer's machine without it; CI (.ci/run installs it) fails instead."""
    if pgbouncer_binary() is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)


def _settings(url: str, **env: str) -> MemorySettings:
    data = tempfile.mkdtemp(prefix="memory-tests-bouncer-")
    return load_settings({"MEMORY_DATA_DIR": data, "MEMORY_DATABASE_URL": url, **env}, dotenv=False)


@pytest.fixture(scope="module")
def bounced(bouncer: PgBouncer) -> Iterator[MemoryStore]:
    """A job process's store, connected through PgBouncer."""
    st = MemoryStore.open(_settings(bouncer.url))
    yield st
    st.close()
    shutil.rmtree(st.settings.data_dir, ignore_errors=True)


def _waiting_on_advisory_lock(direct_url: str) -> int:
    """Backends of the server waiting for an advisory lock now."""
    with psycopg.connect(direct_url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0]


def test_repeated_queries_on_shared_server_connections_need_no_prepared_statements(
    bounced: MemoryStore, user_id: str
) -> None:
    # psycopg prepares a query after its 5th run on a connection; behind transaction
    # pooling the next run may land on a server connection that never saw it
    # ("prepared statement _pg3_0 does not exist").
    from memory.retrieval.retriever import Retriever

    bounced.add_raw(user_id, "My sister Anna lives in Lisbon")
    retriever = Retriever(bounced, bounced.settings)

    def look(_: int) -> tuple[list[str], list[str]]:
        return [m.text for m in bounced.list_user(user_id)], [m.text for m in retriever.retrieve(user_id, "Anna")]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(look, range(24)))
    assert all(r == (["My sister Anna lives in Lisbon"], ["My sister Anna lives in Lisbon"]) for r in results)


def test_the_per_user_fact_lock_holds_across_processes_and_outlives_no_dead_holder(
    bounced: MemoryStore, user_id: str
) -> None:
    # Another job process of the fleet holds the user's fact lock: this one's write waits
    # for it, then supersedes instead of adding a second value.
    from memory.storage.locks import locks_table

    bounced.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister")
    key, table = f"memory-facts:{user_id}", locks_table(bounced.table)
    with bounced.pool.connection() as conn:
        conn.execute(f"INSERT INTO {table} (key, holder, until) VALUES (%s, 'another', now() + interval '1 hour')",
                     [key])  # fmt: skip
    tried = bounced.locks.attempts
    with ThreadPoolExecutor(max_workers=1) as pool:
        write = pool.submit(bounced.upsert_fact, user_id, "User's sister is Maria", category="relationships",
                            slot="sister")  # fmt: skip
        _wait_sync(lambda: bounced.locks.attempts >= tried + 3, "the write to find the lock taken")
        assert not write.done()
        with bounced.pool.connection() as conn:  # the other process is done
            conn.execute(f"DELETE FROM {table} WHERE key = %s", [key])
        assert write.result(timeout=HANG_GUARD_S).event == "UPDATE"
    assert [m.text for m in bounced.list_user(user_id, past=False)] == ["User's sister is Maria"]
    # A holder killed mid-write leaves its row: once its lease has run out, writers go on.
    with bounced.pool.connection() as conn:
        conn.execute(f"INSERT INTO {table} (key, holder, until) VALUES (%s, 'killed', now() - interval '1 second')",
                     [key])  # fmt: skip
    assert bounced.upsert_fact(user_id, "User's sister is Lena", category="relationships", slot="sister").event == (
        "UPDATE"
    )


def test_two_writers_of_one_slot_through_pgbouncer_leave_one_value(bounced: MemoryStore, user_id: str) -> None:
    # With a transaction-level lock this hung until PgBouncer gave up: the holder kept one
    # of the two server connections for its lock, the waiter the other, and the holder's
    # own look-up waited for a third (memory/storage/locks.py). The writers meet by events
    # (tests/storage/fact_writers.py), never by a barrier's time-out.
    results, most_inside = two_writers_at_once(bounced, user_id, ("Anna", "Maria"))
    assert most_inside == 1
    assert sorted(r.event for r in results) == ["ADD", "UPDATE"]
    assert len(bounced.list_user(user_id, past=False)) == 1


def test_a_writer_stalled_past_its_lease_through_pgbouncer_never_overwrites_a_newer_fact(
    bounced: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fence is checked in the write's own transaction: no session state for a pooler
    # in transaction mode to lose between statements.
    anna, maria, now, past = stale_writer_gives_way(bounced, user_id, monkeypatch, slot_held=True)
    assert (now, past) == (["User's sister is Maria"], ["User's sister is Sofia"])
    assert (anna.event, maria.event) == ("NOOP", "UPDATE")


def test_the_archive_chat_lock_holds_across_server_connections(
    bounced: MemoryStore, embedded_server_url: str, bouncer: PgBouncer, user_id: str
) -> None:
    from memory.storage.archive import ArchivedMessage, archive_for
    from memory.types import now_iso

    archive = archive_for(bounced)
    chat = f"{user_id}-chat"
    holder = psycopg.connect(bouncer.url, prepare_threshold=None)  # another worker writing this chat
    holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-archive-chat:' || %s, 0))", [chat])
    with ThreadPoolExecutor(max_workers=1) as pool:
        write = pool.submit(archive.add, [ArchivedMessage(f"{chat}:m0", chat, user_id, "roses", "user", now_iso())])
        try:
            _wait_sync(lambda: _waiting_on_advisory_lock(embedded_server_url) >= 1, "the archive write to wait")
            assert not write.done()
        finally:
            holder.rollback()
            holder.close()
        assert write.result(timeout=HANG_GUARD_S) == 1
    assert [r["id"] for r in archive.messages(user_id)] == [f"{chat}:m0"]


def test_retention_runs_once_for_processes_that_find_it_due_at_once(bounced: MemoryStore) -> None:
    from memory.archive import retention

    retention.ensure_maintenance_table(bounced)
    with bounced.pool.connection() as conn:  # due: never run
        conn.execute("UPDATE memory_maintenance SET ran_at = '-infinity', lease_until = NULL, holder = NULL "
                     "WHERE name = 'memory-retention'")  # fmt: skip
    before = retention.runs(bounced)
    start = threading.Barrier(3)

    def job_process(_: int) -> bool:
        start.wait(timeout=HANG_GUARD_S)
        return retention.run_retention(bounced, every_s=3600.0).ran

    with ThreadPoolExecutor(max_workers=3) as pool:
        ran = list(pool.map(job_process, range(3)))
    assert sorted(ran) == [False, False, True]
    assert retention.runs(bounced) == before + 1
    assert retention.run_retention(bounced, every_s=3600.0).ran is False  # not due again for an hour


def test_job_processes_creating_the_schema_at_once_through_pgbouncer_all_succeed(
    bouncer: PgBouncer, embedded_server_url: str
) -> None:

    name = f"race_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(embedded_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(**{**conninfo_to_dict(bouncer.url), "dbname": name})
    try:
        assert create_schema_at_once(url, "memories") == []
    finally:
        with psycopg.connect(embedded_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_forget_and_the_admin_commands_work_through_pgbouncer(
    bounced: MemoryStore, bouncer: PgBouncer, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import json

    from memory.admin.cli import main as admin_main
    from memory.forget import main as forget_main

    bounced.add_raw(user_id, "I keep bees on the roof")
    bounced.upsert_fact(user_id, "User keeps bees", category="personal_facts", slot="hobby")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(bounced.settings.data_dir))
    monkeypatch.setenv("MEMORY_DATABASE_URL", bouncer.url)
    assert admin_main(["--json", "show", user_id]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert sorted(m["text"] for m in shown["memories"]) == ["I keep bees on the roof", "User keeps bees"]
    assert forget_main(["--yes", user_id]) == 0
    assert bounced.list_user(user_id) == []
    assert admin_main(["show", user_id]) == 1  # nothing stored under the user any more


async def test_a_database_refusing_connections_means_no_memory_this_turn_and_the_turn_is_kept(
    embedded_server_url: str, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The fleet's pooler is full (max_client_conn) as a job process starts: the session
    answers without memory, one line says why, and the turn is written once it has room."""
    import agent
    from harness import memory_parts
    from harness.scripted import VoiceHarness
    from memory import api
    from memory.livekit.agent import MemoryAgent
    from memory.livekit.session import MemorySession
    from memory.service import MemoryService
    from memory.storage.store import UnavailableStore
    from memory.types import StoreUnavailable

    _need_pgbouncer()
    with PgBouncer(embedded_server_url, pool_size=2, max_client_conn=2) as full:
        others = [psycopg.connect(full.url) for _ in range(2)]  # the rest of the fleet took every slot
        data = tempfile.mkdtemp(prefix="memory-tests-refused-")
        monkeypatch.setenv("MEMORY_DATA_DIR", data)
        monkeypatch.setenv("MEMORY_DATABASE_URL", full.url)
        proc = SimpleNamespace(userdata={})
        api.forget_runtime()  # this job process's memory, made by its prewarm
        try:
            with caplog.at_level(logging.WARNING):
                agent.prewarm(proc)  # as LiveKit starts a job process: it must not fail
            proc.userdata.update(memory_parts())
            store, settings = proc.userdata["store"], proc.userdata["settings"]
            assert isinstance(store, UnavailableStore)
            said = [r for r in caplog.records if r.levelno >= logging.WARNING]
            ours = [r for r in said if r.name == "memory"]
            assert len(ours) == 1 and ours[0].exc_info is None, [r.getMessage() for r in said]
            line = ours[0].getMessage()
            assert "no more connections allowed (max_client_conn)" in line and "\n" not in line, line
            assert len(said) <= 2, [r.getMessage() for r in said]  # and at most one of psycopg's pool
            store._retry_s = 0.2  # the next attempt soon (10 s in production)

            memory = MemorySession(MemoryService(store, settings, retriever=proc.userdata["retriever"]),
                                   user_id=user_id, budget_s=0.5)  # fmt: skip
            harness = VoiceHarness(MemoryAgent(memory), preflight=True)
            memory.attach(harness.session)
            async with harness:
                turn = await harness.user_says("My sister lives in Porto")
                assert turn.reply  # answered, not stuck
                assert memory.turns[-1].recall is not None and memory.turns[-1].recall.records == []
                for conn in others:  # room again
                    conn.close()
                others = []
                store._next_try = 0.0
                with pytest.raises(StoreUnavailable):
                    store.pool  # noqa: B018 - a use starts the attempt to open it, in the background
                await wait_until(lambda: store.available, timeout=HANG_GUARD_S, what="the store to open")
                assert await memory.drain(20.0)  # the journal writes the turn it kept
            await memory.aclose(drain_timeout_s=1.0)
            assert [m.text for m in store.list_user(user_id)] == ["My sister lives in Porto"]
        finally:
            for conn in others:
                conn.close()
            if isinstance(proc.userdata.get("store"), UnavailableStore):
                proc.userdata["store"].close()
            shutil.rmtree(data, ignore_errors=True)
            api.forget_runtime()


def _wait_sync(predicate, what: str, timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
