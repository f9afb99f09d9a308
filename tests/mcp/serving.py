"""`memory-mcp --http` as it ships (`server.http_app`: the SDK's app behind the key guard, its
refusals made readable), served by uvicorn in the test's process on the test's store."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from memory import api
from memory.mcp.server import http_app
from memory.settings import mcp_settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def served(
    store: Any, env: dict[str, str], *, bind: str = "127.0.0.1", limiter: Any = None
) -> AsyncIterator[str]:
    """The server on `bind` with the settings `env` names (MEMORY_MCP_KEYS, ...); yields its URL."""
    port = free_port()
    settings = mcp_settings({"MEMORY_MCP_LISTEN": f"{bind}:{port}", **env})
    before = api.runtime()
    api.use(store.settings, store)
    app = http_app(settings, limiter=limiter)
    server = uvicorn.Server(uvicorn.Config(app, host=bind, port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task
        if before is not None:
            api.use(before.settings, before.store, before.retriever)
        else:
            api.forget_runtime()
