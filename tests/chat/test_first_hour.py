"""A developer's first hour with the typed chat: a model URL that reaches a web page is
named in one line (never the page); with no model at all the refusal names the stand-in;
`memory-chat --agent` talks to the integrator's own agent (its instructions) with memory
attached, saying when memory is loading and when it is ready; GATED's profile note is
explained once; what a developer prints reads in one line."""

from __future__ import annotations

import asyncio
import io
import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import web

from bench.common.local_llm_server import _rules
from bench.common.local_llm_server import start as start_llm
from memory.bodies import NoResponseBodies
from memory.chat.terminal import PROFILE_NOTE, _memory_note
from memory.livekit.reader import TurnLog
from memory.retrieval.prefetch import RecallResult
from memory.types import MemoryRecord, describe_error
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
PAGE = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>" + "<p>page text</p>\n" * 120


async def _html_server(status: int) -> tuple[web.AppRunner, str]:
    async def page(_request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html", status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]


async def _chat(args: list[str], lines: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memory.chat", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate("".join(f"{line}\n" for line in lines).encode()), HANG_GUARD_S)
    return proc.returncode or 0, out.decode(), err.decode()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **extra}


async def test_a_model_url_that_reaches_a_web_page_stops_the_chat_in_one_line_without_the_page(
    tmp_path: Path, data_dir: Path
) -> None:
    runner, url = await _html_server(404)  # a missing /v1: the server's root answers 404 pages
    try:
        env = _env(tmp_path, OPENAI_BASE_URL=url, MEMORY_DATA_DIR=str(data_dir))
        code, out, err = await _chat(["alice"], ["Hello"], env, tmp_path)
    finally:
        await runner.cleanup()
    said = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(said) == 1, err[-2000:]
    assert said[0].startswith(f"memory-chat: cannot start: OPENAI_BASE_URL={url!r}: what answers at"), said
    assert "HTTP 404, text/html, a page titled 'Welcome to nginx!'" in said[0]
    assert "page text" not in out + err and "agent:" not in out


def test_a_response_body_in_a_log_record_or_an_error_is_left_out() -> None:
    """As the OpenAI plugin's error carries it (`body=<html>...`), in a log's message and traceback."""
    error = RuntimeError(f"message='Error code: 404', status_code=404, retryable=False, body={PAGE}")
    assert describe_error(error) == (
        "RuntimeError: message='Error code: 404', status_code=404, retryable=False, "
        "body=[an HTML page titled 'Welcome to nginx!', not shown]"
    )
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger(f"test-bodies-{uuid.uuid4().hex}")
    logger.addHandler(handler)
    logger.addFilter(NoResponseBodies())
    logger.warning("summary failed: %r", error)
    try:
        raise error
    except RuntimeError:
        logger.exception("Error in _llm_inference_task")
    printed = out.getvalue()
    assert "page text" not in printed and "<html" not in printed.lower(), printed
    assert printed.count("[an HTML page titled 'Welcome to nginx!', not shown]") == 2, printed
    assert "Traceback" in printed  # the traceback stays, the page does not


def test_with_neither_a_key_nor_a_server_the_refusal_names_the_stand_in(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memory.chat", "alice"], cwd=tmp_path, env=_env(tmp_path),
        capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    (line,) = proc.stderr.splitlines()
    assert proc.returncode == 2
    assert (
        "uv run python -m bench.common.local_llm_server" in line and "OPENAI_BASE_URL=http://127.0.0.1:8089/v1" in line
    )
    helped = subprocess.run([sys.executable, "-m", "bench.common.local_llm_server", "--help"], capture_output=True,
                            text=True, cwd=ROOT, timeout=HANG_GUARD_S)  # fmt: skip
    assert helped.stdout.startswith("usage: python -m bench.common.local_llm_server ")
    with socket.socket() as taken:  # a stand-in still running from before: one line, not a traceback
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        again = subprocess.run([sys.executable, "-m", "bench.common.local_llm_server", "--port", str(port)],
                               capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD_S)  # fmt: skip
    assert again.returncode == 1 and again.stderr.startswith(
        f"python -m bench.common.local_llm_server: cannot listen on 127.0.0.1:{port}: "
    ), again.stderr
    assert len(again.stderr.splitlines()) == 1 and "Traceback" not in again.stderr


OWN_AGENT = '''
from livekit.agents import Agent, function_tool


class Concierge(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the Hotel Quokka concierge.")

    @function_tool
    async def room_service_hours(self) -> str:
        """When room service is open."""
        return "7 to 23"
'''


async def test_the_chat_runs_an_integrators_own_agent_with_memory_attached(tmp_path: Path) -> None:
    (tmp_path / "concierge.py").write_text(OWN_AGENT)
    requests: list[dict[str, Any]] = []

    async def answer(body: dict[str, Any]) -> str:
        requests.append(body)
        return await _rules(body)

    data_dir = Path(tempfile.mkdtemp(prefix="memory-chat-agent-"))
    data_dir.chmod(0o755)  # the embedded server runs as its own system user
    runner, url = await start_llm(answer=answer)
    try:
        env = _env(tmp_path, OPENAI_BASE_URL=url, MEMORY_DATA_DIR=str(data_dir), MEMORY_BUDGET_MS="10000")
        user = f"guest-{uuid.uuid4().hex[:8]}"
        code, out, err = await _chat([user, "--agent", "concierge.py"], ["My sister is called Anna.", "/quit"],
                                     env, tmp_path)  # fmt: skip
    finally:
        await runner.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)  # its server stopped with the chat
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert f"· chatting with your Concierge as {user!r}" in out, out
    lines = out.splitlines()
    loading = lines.index("· memory is loading (the embedder, Mem0, a first look-up); a message sent now waits for it")
    ready = next(i for i, line in enumerate(lines) if line.startswith("· memory is ready ("))
    replies = [i for i, line in enumerate(lines) if line.startswith("agent: ")]
    assert loading < ready < replies[-1], out  # the reply to the typed line came after memory was ready
    assert "· memory: 1 added" in out, out  # the typed turn, stored as a spoken one is
    system = [m["content"] for r in requests for m in r["messages"] if m["role"] in ("system", "developer")]
    assert any("Hotel Quokka concierge" in str(c) for c in system), system  # the agent's own instructions
    tools = [t["function"]["name"] for r in requests for t in r.get("tools") or []]
    assert "room_service_hours" in tools, tools  # and its own tools


async def test_an_agent_that_is_not_there_is_named_in_one_line(tmp_path: Path, data_dir: Path) -> None:
    runner, url = await start_llm()
    try:
        env = _env(tmp_path, OPENAI_BASE_URL=url, MEMORY_DATA_DIR=str(data_dir))
        code, _, err = await _chat(["alice", "--agent", "nowhere.py"], [], env, tmp_path)
        (tmp_path / "two.py").write_text(OWN_AGENT + "\n\nclass Other(Concierge):\n    pass\n")
        code2, _, err2 = await _chat(["alice", "--agent", "two.py"], [], env, tmp_path)
    finally:
        await runner.cleanup()
    (said,) = [line for line in err.splitlines() if line.startswith("memory-chat")]
    assert code == 2 and "--agent 'nowhere.py': there is no file 'nowhere.py'" in said
    (said2,) = [line for line in err2.splitlines() if line.startswith("memory-chat")]
    assert code2 == 2 and "defines 2 Agent classes (Concierge, Other)" in said2
    assert "Traceback" not in err + err2


def _turn(injected: int = 0, profile: bool = False) -> SimpleNamespace:
    return SimpleNamespace(injected=injected, profile_injected=profile)


def test_gateds_profile_note_is_explained_once() -> None:
    mem = SimpleNamespace(turns=[_turn(profile=True), _turn(injected=1, profile=True), _turn(profile=True)])
    first = _memory_note(mem, 0, profile_said=False)
    assert first == f"· memory: recalled 1, {PROFILE_NOTE}"
    assert "GATED gives every reply" in first
    assert _memory_note(mem, 2, profile_said=True) is None  # an ordinary turn after it: nothing to say
    assert _memory_note(mem, 1, profile_said=True) == "· memory: recalled 1"


def test_what_a_developer_prints_reads_in_one_short_line() -> None:
    record = MemoryRecord(id="3f2a9c1e-0000-4000-8000-000000000000", text="My sister is called Anna.", user_id="alice",
                          score=0.8312, metadata={"embedding_model": "x" * 500, "lang": "en"})  # fmt: skip
    turn = TurnLog(text="What's my sister's name?", injected=1,
                   recall=RecallResult(records=[record], waited_s=0.012))  # fmt: skip
    for printed in (repr(record), repr(turn)):
        assert "\n" not in printed and len(printed) < 160, printed
        assert "xxxx" not in printed  # no metadata
    assert repr(record) == "MemoryRecord(text='My sister is called Anna.', score=0.83, id='3f2a9c1e')"
    assert repr(turn) == (
        "TurnLog(text=\"What's my sister's name?\", injected=1, profile=False, recall=(1 found, waited 12 ms))"
    )


async def test_a_job_process_with_memory_logs_a_model_servers_page_by_its_title(
    store: Any, user_id: str, caplog: Any
) -> None:
    """A worker's job process (where the LLM's errors happen): `memory.attach` puts the filter
    on LiveKit's loggers, so LiveKit's retry warnings and errors carry the page's title only."""
    import dataclasses

    from livekit.agents import Agent, APIStatusError

    import memory
    from harness.scripted import RecordingLLM, VoiceHarness
    from memory import api

    before = api.runtime()
    api.use(dataclasses.replace(store.settings), store)
    try:
        harness = VoiceHarness(Agent(instructions="You are an assistant."), llm=RecordingLLM(lambda _r: "ok"))
        mem = memory.attach(harness.session, user_id=user_id)
        error = APIStatusError("Error code: 404", status_code=404, body=PAGE)
        with caplog.at_level(logging.WARNING, logger="livekit.agents"):
            logging.getLogger("livekit.agents").warning("failed to generate LLM completion: %s", error)
            try:
                raise error
            except APIStatusError:
                logging.getLogger("livekit.agents").exception("Error in _llm_inference_task")
        await mem.aclose()
    finally:
        if before is not None:
            api.use(before.settings, before.store, before.retriever)
        else:
            api.forget_runtime()
    said = caplog.text
    assert "page text" not in said and "<html" not in said.lower(), said[-2000:]
    assert said.count("[an HTML page titled 'Welcome to nginx!', not shown]") == 2, said[-2000:]
