"""The model check against servers that answer oddly on OPENAI_BASE_URL: JSON that is not the
API's, a server that sends its answer a byte at a time, a URL that names an endpoint instead of
the API's base. Each is one line naming OPENAI_BASE_URL, in bounded time, without the body."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web

from memory.livekit import preflight
from memory.livekit.preflight import llm_problems
from tests.conftest import HANG_GUARD_S

MODELS = [("OPENAI_LLM_MODEL", "llama3.2")]


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]


async def test_json_that_is_not_the_apis_model_list_is_named() -> None:
    """Some other JSON service on the port (a health check answering every path): no `data` list."""

    async def health(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "secret": "private body"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", health)
    runner, url = await _serve(app)
    try:
        problems = await asyncio.to_thread(llm_problems, url + "/v1", "", MODELS)
        assert len(problems) == 1, problems
        (line,) = problems
        assert line.startswith(f"OPENAI_BASE_URL='{url}/v1': what answers at /models is not an OpenAI-compatible API")
        assert "HTTP 200, application/json" in line and "private body" not in line
    finally:
        await runner.cleanup()


async def test_a_server_that_trickles_its_answer_is_given_up_on_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Headers at once, then one byte every 50 ms for as long as the test lasts: each read is
    quick, so only a bound on the whole request stops the wait."""
    monkeypatch.setattr(preflight, "LLM_TIMEOUT_S", 0.5)
    stop = threading.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "1000000"})
        await response.prepare(request)
        while not stop.is_set():
            await response.write(b" ")
            await asyncio.sleep(0.05)
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", trickle)
    runner, url = await _serve(app)
    try:
        # 20 s is 40 times the bound: a check still waiting then is waiting for the server.
        problems = await asyncio.wait_for(asyncio.to_thread(llm_problems, url + "/v1", "", MODELS), HANG_GUARD_S)
        assert len(problems) == 1, problems
        assert problems[0].startswith(f"OPENAI_BASE_URL='{url}/v1': ") and "0.5 s" in problems[0]
    finally:
        stop.set()
        await runner.cleanup()


@pytest.mark.parametrize("endpoint", ["/chat/completions", "/models", "/completions"])
async def test_a_url_that_names_an_endpoint_is_named_as_the_url(endpoint: str) -> None:
    """OPENAI_BASE_URL copied from a curl example (…/v1/chat/completions): the API's own JSON
    404 comes back, which must not be blamed on the model."""

    async def not_found(_request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "not found"}}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", not_found)
    runner, url = await _serve(app)
    try:
        (line,) = await asyncio.to_thread(llm_problems, f"{url}/v1{endpoint}", "", MODELS)
        assert line.startswith(f"OPENAI_BASE_URL='{url}/v1{endpoint}': ")
        assert f"without {endpoint}" in line and not line.startswith("OPENAI_LLM_MODEL")
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_a_server_error_is_named_as_one_not_as_a_wrong_url(status: int) -> None:
    """A proxy in front of a model server that is down (502, 503), or the server failing (500):
    the URL may be right; the line says the server failed, never the page."""

    async def failing(_request: web.Request) -> web.Response:
        return web.Response(text="<html><title>Bad Gateway</title>upstream secret</html>", status=status,
                            content_type="text/html")  # fmt: skip

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", failing)
    runner, url = await _serve(app)
    try:
        (line,) = await asyncio.to_thread(llm_problems, url + "/v1", "", MODELS)
        assert line.startswith(f"OPENAI_BASE_URL='{url}/v1': the server answers with an error (HTTP {status}")
        assert "'Bad Gateway'" in line and "upstream secret" not in line and "not an OpenAI-compatible" not in line
    finally:
        await runner.cleanup()
