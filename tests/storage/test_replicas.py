"""Look-ups on a real streaming replica (MEMORY_DATABASE_READ_URLS), through PgBouncer.

One hot standby of the session's embedded server, made once for this module with the
embedded wheel's `pg_basebackup -R` (harness/replica.py), and a PgBouncer in transaction
mode in front of each server, as a fleet reaches them. The tests pause the replica's WAL
replay (`pg_wal_replay_pause()`) to make it lag as far as they need, and kill it mid-call.
The replica is made once per test process that runs them (an xdist worker has its own
embedded server to copy: at most two in a run of `-n 2`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from harness.pgbouncer import PgBouncer
from harness.replica import StreamingReplica, primary_position
from memory.settings import MemoryMode, load_settings
from memory.storage.lookup import Scope
from memory.storage.postgres import open_replica_pool
from memory.storage.replicas import ReadRouter
from memory.storage.store import MemoryStore
from tests.conftest import scripted_extraction
from tests.livekit.sessions import recalled_text, voice_session
from tests.storage.test_pgbouncer import _need_pgbouncer

LUCKY = "Please remember that my lucky word is amber falcon"
LUCKY_FACT = {"text": "User's lucky word is amber falcon", "category": "personal_facts", "slot": "lucky_word"}


@pytest.fixture(scope="module")
def replica(embedded_server_url: str, data_dir: Path) -> Iterator[StreamingReplica]:
    with StreamingReplica(embedded_server_url, data_dir / "replica") as running:
        yield running


@pytest.fixture
def live_replica(replica: StreamingReplica) -> StreamingReplica:
    """The module's replica, started again if a test killed it, replaying."""
    if replica.postmaster_pid() is None or not _answers(replica):
        replica.restart()
    replica.resume()
    return replica


def _answers(replica: StreamingReplica) -> bool:
    try:
        with replica.connect():
            return True
    except psycopg.OperationalError:
        return False


@pytest.fixture(scope="module")
def bouncers(embedded_server_url: str, replica: StreamingReplica) -> Iterator[tuple[PgBouncer, PgBouncer]]:
    _need_pgbouncer()
    with PgBouncer(embedded_server_url, pool_size=4) as primary, PgBouncer(replica.url, pool_size=4) as standby:
        yield primary, standby


@pytest.fixture(scope="module")
def routed(bouncers: tuple[PgBouncer, PgBouncer]) -> Iterator[MemoryStore]:
    """A job process's store: writes to the primary, look-ups to the replica, both
    through PgBouncer. The lag bound is far off: what keeps a caller's own words is the
    position of their last write, not the replica's lag."""
    primary, standby = bouncers
    data = tempfile.mkdtemp(prefix="memory-tests-replica-")
    env = {"MEMORY_DATA_DIR": data, "MEMORY_DATABASE_URL": primary.url, "MEMORY_DATABASE_READ_URLS": standby.url,
           "MEMORY_REPLICA_MAX_LAG_MS": "600000",
           # Which path a look-up takes with the session index on follows timings measured on this
           # machine (storage/session_index.py); these tests are about where SQL reads go.
           "MEMORY_SESSION_INDEX": "off"}  # fmt: skip
    st = MemoryStore.open(load_settings(env, dotenv=False))
    yield st
    st.close()
    shutil.rmtree(data, ignore_errors=True)


def _profile_or_recalled(request) -> str:
    return recalled_text(request) + "\n".join(t for _, t in request.messages if t.startswith("<user_profile>"))


async def test_a_fact_said_in_one_turn_is_recalled_in_the_next_while_the_replica_replays_nothing(
    routed: MemoryStore, store: MemoryStore, live_replica: StreamingReplica, user_id: str
) -> None:
    reads = routed.rows.reads
    assert reads is not None
    other = f"{user_id}-other"
    store.add_raw(other, "My neighbour's dog is called Biscuit")  # said on another worker, replicated
    live_replica.wait_replayed(primary_position(store.url))
    live_replica.pause()
    on_replica = reads.stats.replica
    # The replica serves this process's look-ups: another caller's memory is read there.
    assert [r[2]["data"] for r in routed.lookup.nearest_and_ids(Scope(other), _vector(routed, "dog"), 5, [])] == [
        "My neighbour's dog is called Biscuit"
    ]
    assert reads.stats.replica > on_replica
    extraction = scripted_extraction({LUCKY: [LUCKY_FACT]})
    async with voice_session(routed, MemoryMode.GATED, user_id, extraction=extraction) as run:
        await run.harness.user_says(LUCKY)
        assert await run.memory.drain(30.0)
        await run.harness.user_says("Do you remember my lucky word?")
        assert "amber falcon" in _profile_or_recalled(run.requests[-1])
    # The caller's next call, in this process: the look-up and the profile of a new session.
    async with voice_session(routed, MemoryMode.GATED, user_id) as run:
        await run.harness.user_says("Do you remember my lucky word?")
        assert "amber falcon" in _profile_or_recalled(run.requests[-1])
    # The replica never had it: the reads that found it ran on the primary.
    with live_replica.connect() as conn:
        assert conn.execute("SELECT count(*) FROM memories WHERE user_id = %s", [user_id]).fetchone() == (0,)
    assert reads.stats.reasons["the replica is behind the user's last write"] > 0


async def test_a_replica_killed_mid_call_skipped_with_one_warning_and_the_look_ups_still_find_the_memories(
    routed: MemoryStore,
    store: MemoryStore,
    live_replica: StreamingReplica,
    user_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reads = routed.rows.reads
    assert reads is not None
    store.add_raw(user_id, "My sister Anna lives in Lisbon")  # said in an earlier call, on another worker
    live_replica.wait_replayed(primary_position(store.url))
    with caplog.at_level(logging.WARNING, logger="memory.storage.replicas"):
        async with voice_session(routed, MemoryMode.NORMAL, user_id) as run:
            on_replica = reads.stats.replica
            await run.harness.user_says("Where does my sister live?")
            assert "Lisbon" in recalled_text(run.requests[-1])
            assert reads.stats.replica > on_replica
            live_replica.kill()
            await run.harness.user_says("Tell me again where my sister lives")
            assert "Lisbon" in recalled_text(run.requests[-1])
            assert not run.memory.turns[-1].recall.missed_budget
            await run.harness.user_says("And my sister, where was that?")
            assert "Lisbon" in recalled_text(run.requests[-1])
    said = [r.getMessage() for r in caplog.records if r.name == "memory.storage.replicas"]
    assert len(said) == 1 and "skipped" in said[0], said


def test_a_lagging_replica_is_skipped_with_one_line_and_used_again_once_it_has_caught_up(
    embedded_server_url: str, store: MemoryStore, live_replica: StreamingReplica, caplog: pytest.LogCaptureFixture
) -> None:
    from memory.storage.postgres import open_pool

    primary = open_pool(embedded_server_url, max_size=2)
    reads = ReadRouter.open(primary, [live_replica.url], max_lag_s=0.05, wait_s=1.0,
                            pool_factory=lambda url: open_replica_pool(url, max_size=2))  # fmt: skip
    reads.status_ttl_s = 0.0  # read the status at every look-up (production: once a second)
    where = "SELECT pg_is_in_recovery()"
    try:
        with caplog.at_level(logging.WARNING, logger="memory.storage.replicas"):
            assert reads.read("anyone", lambda c: c.execute(where).fetchone()) == (True,)
            live_replica.pause()
            store.add_raw("someone-else", "A write the replica receives but does not replay")
            # Until the replica is behind by more than the bound, by its own clock.
            _until(lambda: _lag_s(live_replica) > 0.05, "the replica to lag")
            assert reads.read("anyone", lambda c: c.execute(where).fetchone()) == (False,)
            assert reads.read("anyone", lambda c: c.execute(where).fetchone()) == (False,)
            live_replica.resume()
            live_replica.wait_replayed(primary_position(embedded_server_url))
            assert reads.read("anyone", lambda c: c.execute(where).fetchone()) == (True,)
        said = [r.getMessage() for r in caplog.records if r.name == "memory.storage.replicas"]
        assert len(said) == 2, said
        assert "lags" in said[0] and "MEMORY_REPLICA_MAX_LAG_MS=50" in said[0]
        assert "used again" in said[1]
    finally:
        reads.close()
        primary.close()


def _lag_s(replica: StreamingReplica) -> float:
    from memory.storage.replicas import _STATUS

    with replica.connect() as conn:
        lag = conn.execute(_STATUS).fetchone()[2]
    # None: behind what it received, with no transaction replayed since it started (after
    # a restart) to date the lag by: the router counts that as past any bound too.
    return float("inf") if lag is None else lag


def _until(predicate, what: str, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _vector(store: MemoryStore, text: str) -> list[float]:
    return store.embedder.embed(text, "search")


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"MEMORY_DATABASE_READ_URLS": "postgresql://r1/memory"}, "needs MEMORY_DATABASE_URL"),
        ({"MEMORY_DATABASE_URL": "postgresql://p/memory", "MEMORY_DATABASE_READ_URLS": "postgresql://r1/m, r2:5432/m"},
         "URL 2 of 2 is not a postgresql:// URL"),
        ({"MEMORY_DATABASE_URL": "postgresql://p/memory", "MEMORY_REPLICA_MAX_LAG_MS": "-1"},
         "MEMORY_REPLICA_MAX_LAG_MS"),
    ],
)  # fmt: skip
def test_read_replica_settings_that_cannot_work_are_refused_naming_the_variable(env: dict, problem: str) -> None:
    from memory.settings import ConfigError

    with pytest.raises(ConfigError, match=problem):
        load_settings(env, dotenv=False)


def test_read_urls_are_read_separated_by_commas_or_spaces() -> None:
    urls = "postgresql://r1/memory, postgresql://r2/memory  postgres://r3/memory"
    env = {"MEMORY_DATABASE_URL": "postgresql://p/memory", "MEMORY_DATABASE_READ_URLS": urls}
    settings = load_settings(env, dotenv=False)
    assert settings.database_read_urls == ("postgresql://r1/memory", "postgresql://r2/memory", "postgres://r3/memory")
    assert settings.replica_max_lag_ms == 1000.0
