"""A request the HTTP transport refuses for its key gets a reason the client can show.

The SDK's bearer check answers 401 with an OAuth error body, which the SDK's own client
does not read: the user saw only `MCPError: Server returned an error response`. The 401
(and its WWW-Authenticate header) stays; its body becomes a JSON-RPC error, which the
client surfaces as the error's message."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

NO_KEY = "memory-mcp: no key sent: send `Authorization: Bearer KEY` with a key of the server's MEMORY_MCP_KEYS"
WRONG_KEY = "memory-mcp: this key is not one of the server's MEMORY_MCP_KEYS (check the client's Authorization header)"
CODE = -32001  # a server-defined JSON-RPC error: not authorised


def reason(scope: Scope) -> str:
    """Why a 401: no Authorization header, or a key the server does not have."""
    sent = any(name.lower() == b"authorization" for name, _ in scope.get("headers", []))
    return WRONG_KEY if sent else NO_KEY


def clear_refusals(app: ASGIApp) -> ASGIApp:
    """`app` with every 401's body replaced by a JSON-RPC error naming what to fix."""

    async def wrapped(
        scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        refused = False

        async def sending(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message.get("status") == 401:
                refused = True
                body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": CODE, "message": reason(scope)}})
                kept = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"content-type", b"content-length")
                ]
                headers = [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({**message, "headers": headers})
                await send({"type": "http.response.body", "body": body.encode(), "more_body": False})
            elif not (refused and message["type"] == "http.response.body"):  # the OAuth body is dropped
                await send(message)

        await app(scope, receive, sending)

    return wrapped
