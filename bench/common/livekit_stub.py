"""A stand-in LiveKit server for benchmarks that start the worker (`agent.py start` or `dev`)
on machines with no LiveKit server: a websocket at `/agent` that answers LiveKit's
`RegisterWorkerRequest` and reads the worker's status updates (the livekit-protocol
messages). No job is ever assigned. Used by `bench.ops.start_soak`, `bench.ops.startup` and
`bench.fleet.job_memory`."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Soak:
    prewarm_s: list[float] = field(default_factory=list)
    init_timeouts: int = 0
    init_errors: int = 0
    recycled: int = 0
    registered: bool = False
    status_updates: int = 0
    errors: list[str] = field(default_factory=list)


async def fake_livekit(soak: Soak, port: int, *, api_key: str | None = None, api_secret: str | None = None) -> Any:
    """The stand-in server: register the worker, then read what it sends. With `api_secret`
    it checks the worker's token as LiveKit does (HS256 with the key's secret, the key as
    issuer) and refuses a bad one with HTTP 401 before the handshake."""
    import jwt
    from aiohttp import WSMsgType, web
    from livekit.protocol import agent as agent_pb

    async def ws_agent(request: web.Request) -> web.StreamResponse:
        if api_secret is not None:
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            try:
                claims = jwt.decode(token, api_secret, algorithms=["HS256"], options={"verify_aud": False})
                if api_key is not None and claims.get("iss") != api_key:
                    raise jwt.InvalidTokenError("unknown API key")
            except jwt.InvalidTokenError as exc:
                soak.errors.append(f"refused a token: {exc}")
                return web.Response(status=401, text="invalid authorization token")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                continue
            incoming = agent_pb.WorkerMessage()
            incoming.ParseFromString(msg.data)
            if incoming.HasField("register"):
                reply = agent_pb.ServerMessage()
                reply.register.worker_id = "W_soak"
                await ws.send_bytes(reply.SerializeToString())
                soak.registered = True
            elif incoming.HasField("update_worker"):
                soak.status_updates += 1
        return ws

    app = web.Application()
    app.router.add_get("/agent", ws_agent)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner
