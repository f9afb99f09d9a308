"""Local models end to end: `dev` and `console` take OPENAI_BASE_URL without a key, as the chat
does; the LLM server is asked once before the first prompt (reachable, key taken, model known)
and a problem is one line naming the variable; a LiveKit server that refuses connections is
named in one line at the first failure while LiveKit's retries go on quietly."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest
from aiohttp import web

from bench.common.local_llm_server import start as start_llm
from memory.livekit.preflight import llm_problems
from memory.livekit.startup import HandledConditions
from memory.settings import startup_problems

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when this returns: nothing listens


@pytest.mark.parametrize("command", ["dev", "console", "start"])
def test_a_local_server_needs_no_key_and_a_missing_model_server_is_named(command: str) -> None:
    livekit = {"LIVEKIT_URL": "ws://127.0.0.1:7880", "LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "s"}
    local = {**livekit, "OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_LLM_MODEL": "llama3.2"}
    assert startup_problems(command, local) == []
    (missing,) = startup_problems(command, livekit)
    assert "OPENAI_API_KEY (or OPENAI_BASE_URL" in missing


async def test_the_llm_server_is_asked_once_and_each_problem_names_its_variable() -> None:
    runner, url = await start_llm()  # lists gpt-4.1-mini, gpt-4o-mini, llama3.2:latest
    try:
        ok = await asyncio.to_thread(llm_problems, url, "", [("OPENAI_LLM_MODEL", "llama3.2")])
        assert ok == []  # Ollama's ":latest" is the same model
        (unknown,) = await asyncio.to_thread(llm_problems, url, "", [("OPENAI_LLM_MODEL", "llama3.3")])
        assert (
            unknown.startswith("OPENAI_LLM_MODEL='llama3.3': the LLM server at OPENAI_BASE_URL=")
            and "\n" not in unknown
        )
        assert "llama3.2:latest" in unknown  # what it has instead
        two = [("OPENAI_LLM_MODEL", "gpt-4.1-mini"), ("MEMORY_LLM_MODEL", "qwen")]
        (extraction,) = await asyncio.to_thread(llm_problems, url, "", two)
        assert extraction.startswith("MEMORY_LLM_MODEL='qwen'")
    finally:
        await runner.cleanup()

    down = f"http://127.0.0.1:{_closed_port()}/v1"
    (refused,) = await asyncio.to_thread(llm_problems, down, "", [("OPENAI_LLM_MODEL", "llama3.2")])
    assert refused.startswith(f"OPENAI_BASE_URL={down!r}: no LLM server answers") and "ollama serve" in refused


async def test_a_key_the_llm_server_refuses_is_named() -> None:
    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "Incorrect API key provided"}}, status=401)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        url = f"http://127.0.0.1:{port}/v1"
        (line,) = await asyncio.to_thread(llm_problems, url, "sk-wrong", [("OPENAI_LLM_MODEL", "gpt-4.1-mini")])
        assert line.startswith("OPENAI_API_KEY: the LLM server at") and "HTTP 401" in line
    finally:
        await runner.cleanup()


def test_a_livekit_server_that_refuses_connections_is_named_once_and_the_retries_go_on_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lk = logging.getLogger("livekit.agents")
    handled = HandledConditions("ws://127.0.0.1:7880")
    lk.addFilter(handled)

    def retry(n: int) -> None:  # as LiveKit's worker logs each retry (livekit/agents/worker.py)
        refused = ConnectionRefusedError(111, "Connect call failed")
        extra = {"retry_count": n, "max_retry": 16, "error": refused}
        lk.warning(f"failed to connect to livekit, retrying in {min(n * 2, 10)}s", extra=extra)

    try:
        with caplog.at_level(logging.INFO, logger="livekit.agents"):
            for n in range(1, 17):  # LiveKit's 16 retries
                retry(n)
            handled.registered()  # connected: a later outage is said again
            retry(1)
            retry(2)
    finally:
        lk.removeFilter(handled)
    said = [r.getMessage() for r in caplog.records if r.name == "livekit.agents"]
    assert len(said) == 2, said
    assert said[0] == said[1]
    assert said[0].startswith("LIVEKIT_URL='ws://127.0.0.1:7880': the LiveKit server cannot be reached (")
    assert "Connect call failed" in said[0] and "livekit-server --dev" in said[0]


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]


PAGE = "<html><head><title>Welcome to the Router Admin Panel</title></head><body>" + "<p>secret body</p>" * 200


async def test_a_web_page_on_the_models_url_is_named_in_one_line_without_its_body() -> None:
    """A wrong port (some other web server answers every path with a page) and a missing /v1
    (the root answers 404 pages): the check asks, sees no API JSON, and says what answered."""

    async def page(_request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def missing(_request: web.Request) -> web.Response:
        return web.Response(text="<html><title>404 Not Found</title>nothing here</html>", status=404,
                            content_type="text/html")  # fmt: skip

    wrong_port = web.Application()
    wrong_port.router.add_route("*", "/{tail:.*}", page)
    no_v1 = web.Application()
    no_v1.router.add_route("*", "/{tail:.*}", missing)
    runner, url = await _serve(wrong_port)
    runner2, url2 = await _serve(no_v1)
    try:
        (line,) = await asyncio.to_thread(llm_problems, url + "/v1", "", [("OPENAI_LLM_MODEL", "llama3.2")])
        assert line.startswith(f"OPENAI_BASE_URL='{url}/v1': what answers at /models is not an OpenAI-compatible API")
        assert "HTTP 200, text/html, a page titled 'Welcome to the Router Admin Panel'" in line
        assert "secret body" not in line and "\n" not in line and "correct OPENAI_BASE_URL" in line
        (line2,) = await asyncio.to_thread(llm_problems, url2, "", [("OPENAI_LLM_MODEL", "llama3.2")])
        assert "HTTP 404, text/html, a page titled '404 Not Found'" in line2 and "nothing here" not in line2
        assert "/v1" in line2
    finally:
        await runner.cleanup()
        await runner2.cleanup()


async def test_a_server_without_a_model_list_is_asked_for_one_token() -> None:
    asked: list[dict[str, object]] = []

    async def complete(request: web.Request) -> web.Response:
        asked.append(await request.json())
        if asked[-1]["model"] != "llama3.2":
            return web.json_response({"error": {"message": "model not found"}}, status=404)
        return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": "o"}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    runner, url = await _serve(app)
    try:
        assert await asyncio.to_thread(llm_problems, url + "/v1", "", [("OPENAI_LLM_MODEL", "llama3.2")]) == []
        assert asked[-1]["max_tokens"] == 1
        (line,) = await asyncio.to_thread(llm_problems, url + "/v1", "", [("OPENAI_LLM_MODEL", "qwen")])
        assert line.startswith("OPENAI_LLM_MODEL='qwen': the LLM server at") and "HTTP 404" in line
    finally:
        await runner.cleanup()
