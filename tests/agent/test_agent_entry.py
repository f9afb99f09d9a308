"""The worker's per-process prewarm works offline and shares one store."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import memory_parts
from memory import api
from memory.api import lifecycle
from tests.conftest import HANG_GUARD_S


@pytest.fixture(autouse=True)
def _unfreeze_after() -> Iterator[None]:
    """prewarm freezes the whole heap (memory/ops/heap.py); in a test process that would
    keep every later test's leftovers from the collector, so undo it. Each test's prewarm
    makes the process's memory anew (memory.warm_up keeps the first it made)."""
    api.forget_runtime()
    yield
    api.forget_runtime()
    gc.unfreeze()


def test_prewarm_loads_vad_embedder_and_store_once_per_process(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess
    import sys

    import agent
    from memory.storage.store import MemoryStore

    monkeypatch.setenv("MEMORY_DATA_DIR", str(data_dir))
    monkeypatch.setenv("MEM0_SETTING", "gated")
    # A job process killed earlier left its live gauge in the metrics directory.
    metrics_dir = tmp_path
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = metrics_dir / f"gauge_livesum_{int(dead.stdout)}.db"
    left.write_bytes(b"")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(metrics_dir))
    proc = SimpleNamespace(userdata={})
    agent.prewarm(proc)
    proc.userdata.update(memory_parts())
    store = proc.userdata["store"]
    try:
        assert not left.exists()  # swept as this job process started
        assert isinstance(store, MemoryStore)
        assert proc.userdata["settings"].mode.value == "GATED"
        assert proc.userdata["vad"] is not None
        # one retriever per process over that store: sessions share its per-user densities
        assert proc.userdata["retriever"].store is store
        # the store is usable at once: a write and a search, offline
        store.add_raw("prewarm-user", "I keep bees on my roof")
        assert store.search("prewarm-user", "bees")[0].text == "I keep bees on my roof"
    finally:
        store.close()


def test_prewarm_takes_what_it_loaded_out_of_full_garbage_collections(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full collection holds the GIL while it scans every tracked object. After
    prewarm, the worker's long-lived objects (LiveKit, Mem0, jieba, the embedder, the
    store) must not be among them: scanning them stalled replies by ~130 ms a pass
    (bench/latency/run.py)."""
    import agent
    from memory.language import lexical

    monkeypatch.setenv("MEMORY_DATA_DIR", str(data_dir))
    monkeypatch.setattr(lexical, "_jieba_ready", False)
    gc.unfreeze()  # start from a process where nothing is frozen
    proc = SimpleNamespace(userdata={})
    try:
        agent.prewarm(proc)
        proc.userdata.update(memory_parts())
        frozen, scanned = gc.get_freeze_count(), len(gc.get_objects())
        assert scanned < frozen / 20, (scanned, frozen)
        # the segmenter is loaded (and frozen) by prewarm, not by the first session
        assert lexical._jieba_ready
    finally:
        if "store" in proc.userdata:
            proc.userdata["store"].close()


async def test_with_the_database_down_a_session_still_gets_an_agent_and_memory_comes_back_with_it(
    tmp_path: Path, store, embedded_server_url: str, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """A fleet database down while a job process starts: prewarm used to fail (after
    9 s), and LiveKit gives up on the job after three processes, so the caller got no
    agent. Now the session runs without memory, its turns wait in the journal, and the
    process opens its store once the database is back."""
    import logging
    import os

    from psycopg.conninfo import conninfo_to_dict

    import agent
    from harness.scripted import VoiceHarness
    from memory.livekit.agent import MemoryAgent
    from memory.livekit.session import MemorySession
    from memory.service import MemoryService
    from memory.storage.store import UnavailableStore
    from memory.types import StoreUnavailable
    from tests.conftest import wait_until

    socket_dir = tmp_path / "socket"  # where the database will listen: nothing there yet
    socket_dir.mkdir()
    real = conninfo_to_dict(embedded_server_url)  # its Unix socket (the store may be behind PgBouncer)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "worker"))
    port = real.get("port", "5432")
    monkeypatch.setenv(
        "MEMORY_DATABASE_URL", f"postgresql://{real['user']}@/{real['dbname']}?host={socket_dir}&port={port}"
    )
    proc = SimpleNamespace(userdata={})
    with caplog.at_level(logging.ERROR, logger="agent"):
        agent.prewarm(proc)
        proc.userdata.update(memory_parts())
    down, settings = proc.userdata["store"], proc.userdata["settings"]
    assert isinstance(down, UnavailableStore) and not down.available
    assert "memory store unavailable" in caplog.text

    async def talk(text: str) -> MemorySession:
        service = MemoryService(down, settings, retriever=proc.userdata["retriever"])
        memory = MemorySession(service, user_id=user_id, budget_s=10.0)  # what is recalled, not how fast
        harness = VoiceHarness(MemoryAgent(memory), preflight=True)
        memory.attach(harness.session)
        async with harness:
            if down.available:  # turns left waiting are taken over and written first
                assert await memory.drain(10.0)
            turn = await harness.user_says(text)
            assert turn.reply  # the agent answered
            await memory.drain(10.0 if down.available else 0.2)
        await memory.aclose(drain_timeout_s=0.2)
        return memory

    first = await talk("My sister's name is Anna")
    assert first.turns[-1].recall is not None and first.turns[-1].recall.records == []  # no memory this turn

    os.symlink(Path(real["host"]) / f".s.PGSQL.{port}", socket_dir / f".s.PGSQL.{port}")  # the database is back
    down._next_try = 0.0  # the next attempt, due 10 s after the last, now
    with pytest.raises(StoreUnavailable):
        down.pool  # noqa: B018 - a use starts the attempt, in the background
    await wait_until(lambda: down.available, what="the store to be opened again")

    second = await talk("What is my sister's name?")
    assert sorted(m.text for m in store.list_user(second.user_id)) == [
        "My sister's name is Anna",
        "What is my sister's name?",
    ]
    assert "My sister's name is Anna" in [r.text for r in second.turns[-1].recall.records]


def test_a_table_made_for_another_embedder_still_stops_the_process(store) -> None:
    import dataclasses

    from memory.settings import ConfigError, EmbedderKind

    wrong = dataclasses.replace(store.settings, embedder=EmbedderKind.OPENAI)  # 1536-d, the table holds 384-d
    with pytest.raises(ConfigError, match="MEMORY_EMBEDDER"):
        lifecycle.open_store(wrong)


async def test_a_store_that_comes_back_wrongly_configured_is_reported_once_not_retried(
    store, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from memory.settings import ConfigError
    from memory.storage.store import UnavailableStore
    from memory.types import StoreUnavailable
    from tests.conftest import wait_until

    calls: list[int] = []

    def opener(_settings):
        calls.append(1)
        raise ConfigError("MEMORY_COLLECTION='memories' holds 384-d vectors but MEMORY_EMBEDDER=openai ...")

    stand_in = UnavailableStore(store.settings, "down at start", opener=opener, retry_s=0.0)
    with caplog.at_level(logging.ERROR, logger="memory.storage.store"):
        for _ in range(3):
            with pytest.raises(StoreUnavailable):
                stand_in.pool  # noqa: B018 - a use starts an attempt
            await wait_until(lambda: not stand_in._trying, what="the attempt to end")
    assert len(calls) == 1 and not stand_in.available
    assert "MEMORY_EMBEDDER" in caplog.text and "MEMORY_EMBEDDER" in stand_in.reason


_METRICS_FROM_A_JOB_PROCESS = """
import multiprocessing, os, sys
sys.path.insert(0, os.getcwd())
import agent  # noqa: F401  (the worker's module, as LiveKit's main process imports it)


def job() -> None:
    from memory.ops import metrics
    metrics.WRITE_RETRIES.inc(3)


if __name__ == "__main__":
    proc = multiprocessing.get_context("forkserver").Process(target=job)
    proc.start()
    proc.join()
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # what LiveKit's /metrics serves in this mode
    print(generate_latest(registry).decode())
    print("DIR", os.environ["PROMETHEUS_MULTIPROC_DIR"])
"""


def test_memory_metrics_counted_in_a_job_process_reach_the_workers_metrics_page(tmp_path: Path) -> None:
    # They were counted in the job processes' own registries, and LiveKit's /metrics on
    # PROMETHEUS_PORT serves the main process's: every memory_* series stayed at 0.
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "probe.py"
    script.write_text(_METRICS_FROM_A_JOB_PROCESS)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PROMETHEUS_PORT": "9477", "PYTHONPATH": str(root),
           "MEMORY_DATA_DIR": str(tmp_path / "data")}  # fmt: skip
    for given in ({}, {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "not-yet")}):  # made if missing
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env={**env, **given},
                              capture_output=True, text=True, timeout=HANG_GUARD_S)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-1500:]
        assert "memory_write_retries_total 3.0" in proc.stdout
        shutil.rmtree(proc.stdout.rsplit("DIR ", 1)[1].strip())  # LiveKit empties it at a worker's start


_A_KILLED_JOB_PROCESS_BACKLOG = """
import multiprocessing, os, signal, sys, time
sys.path.insert(0, os.getcwd())
import agent  # noqa: F401 - importing agent.py is what is tested


def job(ready) -> None:
    from memory.ops import metrics
    metrics.QUEUE_PENDING.set(7)  # seven turns waiting, then the OOM killer
    ready.set()
    time.sleep(600)


def pending() -> str:
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return [ln for ln in generate_latest(registry).decode().splitlines() if ln.startswith("memory_write_queue_pending")]


if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    ready = ctx.Event()
    proc = ctx.Process(target=job, args=(ready,))
    proc.start()
    ready.wait(60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    print("BEFORE", pending())
    from memory.ops import metrics
    from memory.settings import prometheus_multiproc_dir
    sweep = getattr(metrics, "forget_dead_processes", lambda directory: [])  # what the next job process's prewarm does
    print("SWEPT", sweep(prometheus_multiproc_dir()) == [proc.pid])
    print("AFTER", pending())
"""


def test_a_killed_job_processs_backlog_leaves_the_metrics_page_when_the_next_one_starts(tmp_path: Path) -> None:
    # Its memory_write_queue_pending stayed in the sum for ever, beside the process that
    # took its turns over: a backlog alert never cleared.
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "probe.py"
    script.write_text(_A_KILLED_JOB_PROCESS_BACKLOG)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(root),
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    lines = dict(
        line.split(" ", 1) for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in ("BEFORE", "SWEPT", "AFTER")
    )
    assert "memory_write_queue_pending 7.0" in lines["BEFORE"]
    assert "7.0" not in lines["AFTER"]
    assert lines["SWEPT"] == "True"


def test_the_worker_has_livekits_forkserver_load_memory_once_for_every_job_process() -> None:
    """Mem0, jieba's dictionary and the embedder are shared copy-on-write by the job
    processes only when the worker names `memory.preload` for LiveKit's forkserver
    (docs/scaling.md: about 40 MB less per call); without it each job process loads its own."""
    import agent

    assert agent.server._mp_ctx_str == "forkserver"  # LiveKit preloads only there
    assert "memory.preload" in agent.server._preload_modules
