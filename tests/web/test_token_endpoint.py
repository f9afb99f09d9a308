"""LiveKit's standard token endpoint: what a starter frontend's TokenSource sends, and the
token it gets back, decoded with LiveKit's own verifier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import jwt
import pytest
from aiohttp import web
from livekit import api

from memory.settings import ConfigError, web_settings
from memory.storage.store import MemoryStore
from memory.web.server import serve
from tests.web.conftest import AUTH, LIVEKIT, SECRET, Web, start_web

FRONTEND = "http://localhost:3000"


@pytest.fixture(scope="module")
async def server(store: MemoryStore, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Web]:
    running = await start_web(store, tmp_path_factory.mktemp("token-journal"), cors_origins=(FRONTEND,))
    yield running
    await running.runner.cleanup()


def claims(token: str) -> api.Claims:
    return api.TokenVerifier(LIVEKIT.api_key, LIVEKIT.api_secret).verify(token)


@pytest.mark.parametrize("agent_key", ["agent_name", "agentName"])  # protobuf JSON: either spelling
async def test_the_token_carries_the_identity_room_dispatch_and_the_grants_a_starter_frontend_needs(
    server: Web, http: aiohttp.ClientSession, agent_key: str
) -> None:
    body = {
        "room_name": "support-42",
        "participant_identity": "alice",
        "participant_name": "Alice",
        "participant_attributes": {"plan": "pro"},
        "room_config": {"agents": [{agent_key: "memory-agent", "metadata": '{"lang": "zh"}'}]},
        "some_future_field": 1,  # ignored, as an older endpoint ignores a newer client's fields
    }
    async with http.post(f"{server.url}/api/token", json=body, headers=AUTH) as resp:
        assert resp.status == 201
        doc = await resp.json()
    assert set(doc) == {"server_url", "participant_token"}
    assert doc["server_url"] == LIVEKIT.url
    got = claims(doc["participant_token"])
    assert (got.identity, got.name, got.attributes) == ("alice", "Alice", {"plan": "pro"})
    # The grants as LiveKit's server reads them from the token (the SDK's defaults would hide
    # a missing one): join this room, publish the microphone, hear the agent, chat and RPC.
    raw = jwt.decode(doc["participant_token"], options={"verify_signature": False})
    assert raw["video"] == {"roomJoin": True, "room": "support-42", "canPublish": True, "canSubscribe": True,
                            "canPublishData": True}  # fmt: skip
    assert got.video.room == "support-42" and got.video.room_join
    assert [(a.agent_name, a.metadata) for a in got.room_config.agents] == [("memory-agent", '{"lang": "zh"}')]


async def test_without_a_room_each_token_is_a_new_room_for_the_same_identity_and_expires_soon(
    server: Web, http: aiohttp.ClientSession
) -> None:
    rooms = []
    for _ in range(2):
        async with http.post(f"{server.url}/api/token", json={"participant_identity": "bob"}, headers=AUTH) as resp:
            assert resp.status == 201
            token = (await resp.json())["participant_token"]
        got = claims(token)
        assert got.identity == "bob" and got.name == "bob" and got.room_config is None
        rooms.append(got.video.room)
    assert rooms[0] != rooms[1] and all(r.startswith("memory-") for r in rooms)
    raw = jwt.decode(token, options={"verify_signature": False})
    assert raw["exp"] - raw["nbf"] == 15 * 60  # docs/web.md: a token lasts 15 minutes


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-secret-0123456789"}, {"Authorization": f"Basic {SECRET}"}],
    ids=["none", "wrong", "not-bearer"],
)
async def test_no_token_without_the_operators_secret(server: Web, http: aiohttp.ClientSession, headers: dict) -> None:
    async with http.post(f"{server.url}/api/token", json={"participant_identity": "alice"}, headers=headers) as resp:
        assert resp.status == 401
        assert "participant_token" not in await resp.text()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({}, "participant_identity is required"),
        ({"participant_identity": " alice"}, "participant_identity must not start or end with spaces"),
        ({"participant_identity": 7}, "participant_identity must be a non-empty string"),
        ({"participant_identity": "a", "room_name": ["x"]}, "room_name must be a string"),
        ({"participant_identity": "a", "room_config": "agents"}, "room_config must be a RoomConfiguration"),
        ({"participant_identity": "a", "room_config": {"agents": [{"nme": "x"}]}}, "room_config is not a"),
        ({"participant_identity": "a", "participant_attributes": {"k": 1}}, "participant_attributes must be"),
        ([1, 2], "the body must be a JSON object"),
    ],
)
async def test_a_bad_request_gets_a_400_naming_the_field(
    server: Web, http: aiohttp.ClientSession, body: object, named: str
) -> None:
    async with http.post(f"{server.url}/api/token", json=body, headers=AUTH) as resp:
        assert resp.status == 400
        assert named in (await resp.json())["error"]


async def test_without_livekit_credentials_the_endpoint_names_the_variables(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    running = await start_web(store, tmp_path, livekit="LIVEKIT_API_KEY, LIVEKIT_API_SECRET not set")
    try:
        async with http.post(f"{running.url}/api/token", json={"participant_identity": "a"}, headers=AUTH) as resp:
            assert resp.status == 503
            assert "LIVEKIT_API_KEY, LIVEKIT_API_SECRET" in (await resp.json())["error"]
    finally:
        await running.runner.cleanup()


async def test_a_browser_frontend_of_an_allowed_origin_may_call_it_and_no_other(
    server: Web, http: aiohttp.ClientSession
) -> None:
    url = f"{server.url}/api/token"
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    async with http.options(url, headers={"Origin": FRONTEND, **preflight}) as resp:
        assert resp.status == 204
        assert resp.headers["Access-Control-Allow-Origin"] == FRONTEND
        assert "Authorization" in resp.headers["Access-Control-Allow-Headers"]
    async with http.post(url, json={"participant_identity": "a"}, headers={"Origin": FRONTEND, **AUTH}) as resp:
        assert resp.status == 201 and resp.headers["Access-Control-Allow-Origin"] == FRONTEND
    async with http.post(url, json={"participant_identity": "a"}, headers={"Origin": FRONTEND}) as resp:
        assert resp.status == 401 and resp.headers["Access-Control-Allow-Origin"] == FRONTEND  # readable: no secret
    other = "http://localhost:4000"
    async with http.options(url, headers={"Origin": other, **preflight}) as resp:
        assert resp.status == 403 and "Access-Control-Allow-Origin" not in resp.headers
    async with http.post(url, json={"participant_identity": "a"}, headers={"Origin": other, **AUTH}) as resp:
        assert resp.status == 403  # even with the secret: a page of that origin may not mint tokens


async def test_it_listens_on_localhost_unless_told_otherwise_and_never_without_a_secret(
    server: Web,
) -> None:
    cfg = web_settings({"MEMORY_WEB_SECRET": SECRET})
    assert (cfg.host, cfg.port, cfg.loopback) == ("127.0.0.1", 8765, True)
    runner, url = await serve(web.Application(), cfg.host, 0)  # the same start as `python -m memory.web`
    try:
        assert runner.addresses[0][0] == "127.0.0.1" and url.startswith("http://127.0.0.1:")
    finally:
        await runner.cleanup()
    wide = web_settings({"MEMORY_WEB_SECRET": SECRET, "MEMORY_WEB_LISTEN": "0.0.0.0:80"})
    assert (wide.host, wide.port, wide.loopback) == ("0.0.0.0", 80, False)
    assert web_settings({"MEMORY_WEB_SECRET": SECRET, "MEMORY_WEB_LISTEN": "[::1]:0"}).loopback
    for env, named in (
        ({}, "MEMORY_WEB_SECRET is not set"),
        ({"MEMORY_WEB_SECRET": "short"}, "MEMORY_WEB_SECRET is only 5 characters"),
        ({"MEMORY_WEB_SECRET": SECRET, "MEMORY_WEB_CORS_ORIGINS": "http://x:3000/path"}, "MEMORY_WEB_CORS_ORIGINS"),
        ({"MEMORY_WEB_SECRET": SECRET, "MEMORY_WEB_LISTEN": "8765"}, "MEMORY_WEB_LISTEN"),
        ({"MEMORY_WEB_SECRET": SECRET, "MEMORY_WEB_LISTEN": "tcp://10.0.0.3:http"}, "MEMORY_WEB_LISTEN"),
    ):
        with pytest.raises(ConfigError, match=named):
            web_settings(env)
