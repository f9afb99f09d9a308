"""MCP edges a client meets: a retried `remember` stores once (the same call within the
window gets the first answer, "repeated"); a wrong or missing key is told to the client in
words it shows, not `Server returned an error response`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client.session import ClientSession

from memory.mcp.refusals import NO_KEY, WRONG_KEY
from memory.mcp.repeats import Repeats
from tests.conftest import HANG_GUARD_S
from tests.mcp.serving import served

KEY = "k-" + "a" * 30


def _served(store: Any, keys: str) -> contextlib.AbstractAsyncContextManager[str]:
    return served(store, {"MEMORY_MCP_KEYS": keys})  # what `memory-mcp --http` serves


@contextlib.asynccontextmanager
async def _client(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def test_a_retried_remember_stores_once_and_says_it_was_a_repeat(store: Any, user_id: str) -> None:
    async with _served(store, f"{KEY}:{user_id}") as url, _client(url, {"Authorization": f"Bearer {KEY}"}) as client:
        said = "My sister is called Anna."
        first = await client.call_tool("remember", {"user_id": user_id, "text": said})
        retried = await client.call_tool("remember", {"user_id": user_id, "text": said})
        assert not first.is_error and not retried.is_error, _text(first) + _text(retried)
        assert json.loads(_text(first))["turns"] == 1 and "repeated" not in json.loads(_text(first))
        assert json.loads(_text(retried)) == {**json.loads(_text(first)), "repeated": True}
        listed = await client.call_tool("list_memories", {"user_id": user_id})
        assert len(_text(listed).splitlines()) == 1, _text(listed)  # stored once
        other = await client.call_tool("remember", {"user_id": user_id, "text": "I keep bees."})
        assert "repeated" not in json.loads(_text(other))  # another text is another call


async def test_a_wrong_or_missing_key_is_told_to_the_client(store: Any, user_id: str) -> None:
    from mcp.shared.exceptions import MCPError

    async with _served(store, f"{KEY}:{user_id}") as url:
        for headers, expected in (({"Authorization": "Bearer not-a-key-of-this-server"}, WRONG_KEY), ({}, NO_KEY)):
            with pytest.raises(BaseException) as refused:  # the client's task group wraps it
                async with _client(url, headers):
                    pass
            (error,) = _leaves(refused.value)
            assert isinstance(error, MCPError) and str(error) == expected, repr(error)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_repeats_within_the_window_run_once_and_failures_are_not_remembered() -> None:
    clock, runs = _Clock(), []
    repeats = Repeats(window_s=600.0, clock=clock)

    async def call() -> dict[str, int]:
        runs.append(1)
        return {"turns": 1}

    key = Repeats.key("stdio", "alice", "My sister is called Anna.", None)
    assert await repeats.once(key, call) == ({"turns": 1}, False)
    assert Repeats.key("stdio", "alice", "My sister is called Anna. ", None) == key  # the ends trimmed
    clock.now += 600.0  # the window's end: still a repeat
    assert await repeats.once(key, call) == ({"turns": 1}, True) and len(runs) == 1
    clock.now += 0.5  # past it: a new call
    assert await repeats.once(key, call) == ({"turns": 1}, False) and len(runs) == 2
    # the client's own key: the same words twice on purpose
    assert Repeats.key("stdio", "alice", "hi", "r1") != Repeats.key("stdio", "alice", "hi", "r2")
    # another principal or identity is another call
    assert len({Repeats.key(p, u, "hi", None) for p in ("stdio", "key:a") for u in ("alice", "bob")}) == 4

    async def fails() -> dict[str, int]:
        runs.append(1)
        raise RuntimeError("store down")

    failing = Repeats.key("stdio", "bob", "hello", None)
    with pytest.raises(RuntimeError):
        await repeats.once(failing, fails)
    assert await repeats.once(failing, call) == ({"turns": 1}, False)  # the retry ran

    gate = asyncio.Event()

    async def slow() -> dict[str, int]:
        runs.append(1)
        await gate.wait()
        return {"turns": 1}

    before = len(runs)
    inflight = Repeats.key("stdio", "carol", "hello", None)
    first = asyncio.create_task(repeats.once(inflight, slow))
    second = asyncio.create_task(repeats.once(inflight, slow))
    await asyncio.sleep(0)
    gate.set()
    assert await first == ({"turns": 1}, False) and await second == ({"turns": 1}, True)
    assert len(runs) == before + 1  # the retry that came while the first ran did not store again


HIDE_MCP = "import sys; sys.modules['mcp'] = None  # as if the extra were not installed\n"


def test_without_the_extra_the_command_and_an_import_name_it_in_one_line(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(root)}
    command = subprocess.run(
        [sys.executable, "-c", HIDE_MCP + "from memory.mcp import main; raise SystemExit(main([]))"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert command.returncode == 2 and command.stderr.splitlines() == [
        "memory-mcp: cannot start: memory-mcp needs the MCP SDK, an extra: pip install "
        "'livekit-agent-memory[mcp]' (uv: uv add 'livekit-agent-memory[mcp]')"
    ], command.stderr
    imported = subprocess.run(
        [sys.executable, "-c", HIDE_MCP + "import memory.mcp.server"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=HANG_GUARD_S,
    )  # fmt: skip
    last = imported.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "ImportError: memory-mcp needs the MCP SDK, an extra: pip install 'livekit-agent-memory[mcp]'"
    )
