"""LiveKit's standard token endpoint: what a starter frontend's TokenSource sends, and the
token it gets back, decoded with LiveKit's own verifier; its key of its own, which opens
nothing else (issue 40), and the identities, rooms and bodies it refuses."""

from __future__ import annotations

import json
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
from tests.web.conftest import AUTH, LIVEKIT, SECRET, TOKEN_AUTH, TOKEN_KEY, Web, start_web

FRONTEND = "http://localhost:3000"


@pytest.fixture(scope="module")
async def server(store: MemoryStore, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Web]:
    running = await start_web(store, tmp_path_factory.mktemp("token-journal"), cors_origins=(FRONTEND,),
                              token_key=TOKEN_KEY)  # fmt: skip
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
    async with http.post(f"{server.url}/api/token", json=body, headers=TOKEN_AUTH) as resp:
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
        async with http.post(
            f"{server.url}/api/token", json={"participant_identity": "bob"}, headers=TOKEN_AUTH
        ) as resp:
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
    [{}, {"Authorization": "Bearer wrong-secret-0123456789"}, {"Authorization": f"Basic {TOKEN_KEY}"}, AUTH],
    ids=["none", "wrong", "not-bearer", "operators-secret"],
)
async def test_no_token_without_the_endpoints_key(server: Web, http: aiohttp.ClientSession, headers: dict) -> None:
    async with http.post(f"{server.url}/api/token", json={"participant_identity": "alice"}, headers=headers) as resp:
        assert resp.status == (403 if headers == AUTH else 401)
        text = await resp.text()
        assert "participant_token" not in text
    if headers == AUTH:  # issue 40: the operator's secret minted tokens; now only when configured to
        assert "MEMORY_WEB_TOKEN_KEY" in text


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({}, "participant_identity is required"),
        ({"participant_identity": " alice"}, "participant_identity: user id must not start or end with spaces"),
        ({"participant_identity": 7}, "participant_identity: user id is empty"),
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
    async with http.post(f"{server.url}/api/token", json=body, headers=TOKEN_AUTH) as resp:
        assert resp.status == 400
        assert named in (await resp.json())["error"]


async def test_without_livekit_credentials_the_endpoint_names_the_variables(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    running = await start_web(
        store, tmp_path, livekit="LIVEKIT_API_KEY, LIVEKIT_API_SECRET not set", token_key=TOKEN_KEY
    )
    try:
        async with http.post(
            f"{running.url}/api/token", json={"participant_identity": "a"}, headers=TOKEN_AUTH
        ) as resp:
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
    async with http.post(url, json={"participant_identity": "a"}, headers={"Origin": FRONTEND, **TOKEN_AUTH}) as resp:
        assert resp.status == 201 and resp.headers["Access-Control-Allow-Origin"] == FRONTEND
    async with http.post(url, json={"participant_identity": "a"}, headers={"Origin": FRONTEND}) as resp:
        assert resp.status == 401 and resp.headers["Access-Control-Allow-Origin"] == FRONTEND  # readable: no secret
    other = "http://localhost:4000"
    async with http.options(url, headers={"Origin": other, **preflight}) as resp:
        assert resp.status == 403 and "Access-Control-Allow-Origin" not in resp.headers
    async with http.post(url, json={"participant_identity": "a"}, headers={"Origin": other, **TOKEN_AUTH}) as resp:
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


# ------------------------------------------------------------------ issue 40
async def test_the_token_key_opens_no_page_and_no_action(
    server: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str
) -> None:
    store.add_raw(user_id, "I keep bees on the roof")
    for method, path in (("GET", "/"), ("GET", "/user"), ("GET", "/export"), ("GET", "/recall"), ("GET", "/store"),
                         ("GET", "/dead-letters"), ("POST", "/forget"), ("POST", "/dead-letters/replay")):  # fmt: skip
        async with http.request(method, f"{server.url}{path}", params={"id": user_id, "q": "bees"},
                                data={"id": user_id, "confirm": user_id, "all": "1"}, headers=TOKEN_AUTH,
                                allow_redirects=False) as resp:  # fmt: skip
            assert resp.status == 403, (method, path, resp.status)
            assert "bees" not in await resp.text()
    assert [r.text for r in store.list_user(user_id)] == ["I keep bees on the roof"]  # nothing forgotten


async def test_the_operators_secret_mints_only_when_configured_to(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    running = await start_web(store, tmp_path, token_operator=True)
    try:
        async with http.post(f"{running.url}/api/token", json={"participant_identity": "a"}, headers=AUTH) as resp:
            assert resp.status == 201
    finally:
        await running.runner.cleanup()


@pytest.mark.parametrize(
    ("identity", "code"),
    [
        ("\x1b[31malice", "U+001B at 0"),  # an escape sequence
        ("ali\nce", "U+000A at 3"),
        ("ali\x00ce", "U+0000 at 3"),
        ("\u202eecila", "U+202E at 0"),  # right-to-left override: shows as "alice"
        ("ali\u2066ce", "U+2066 at 3"),  # left-to-right isolate
        ("al\u200bice", "U+200B at 2"),  # zero-width space
        ("al\u200dice", "U+200D at 2"),  # zero-width joiner
        ("a\ufeffb", "U+FEFF at 1"),
        ("ali\u2028ce", "U+2028 at 3"),  # line separator
    ],
)
async def test_identities_with_control_bidi_or_zero_width_characters_are_refused(
    server: Web, http: aiohttp.ClientSession, identity: str, code: str
) -> None:
    async with http.post(f"{server.url}/api/token", json={"participant_identity": identity}, headers=TOKEN_AUTH) as r:
        assert r.status == 400
        assert (
            f"participant_identity: user id must not hold control, bidi or zero-width characters ({code})"
            == (await r.json())["error"]
        )


async def test_the_key_can_be_limited_to_identities_of_a_shape_and_rooms_with_a_prefix(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    running = await start_web(store, tmp_path, token_key=TOKEN_KEY, token_identities=r"user-[0-9a-f]{8}",
                              token_room_prefix="support-")  # fmt: skip
    url = f"{running.url}/api/token"
    try:
        for body, status in (
            ({"participant_identity": "alice"}, 403),
            ({"participant_identity": "user-0123abcd9"}, 403),  # whole match only
            ({"participant_identity": "user-0123abcd", "room_name": "sales-1"}, 403),
            ({"participant_identity": "user-0123abcd", "room_name": "support-1"}, 201),
            ({"participant_identity": "user-0123abcd"}, 201),
        ):
            async with http.post(url, json=body, headers=TOKEN_AUTH) as resp:
                assert resp.status == status, (body, await resp.text())
                doc = await resp.json()
            if status == 201:
                assert claims(doc["participant_token"]).video.room.startswith("support-")
            else:
                assert set(doc) == {"error"} and ("shape" in doc["error"] or "support-" in doc["error"])
    finally:
        await running.runner.cleanup()


async def test_the_room_prefix_matches_whole_segments_in_every_room_the_request_names(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    running = await start_web(store, tmp_path, token_key=TOKEN_KEY, token_room_prefix="team-a")
    url = f"{running.url}/api/token"
    who = {"participant_identity": "alice"}
    EGRESS = {"room": {"room_name": "team-a-1"}}  # noqa: N806
    try:
        for extra, status, room in (
            ({"room_name": "team-a"}, 201, "team-a"),
            ({"room_name": "team-a-7"}, 201, "team-a-7"),
            ({"room_name": "team-a/7"}, 201, "team-a/7"),
            ({"room_name": "team-ab"}, 403, None),  # a string prefix, not a segment
            ({"room_name": "team-"}, 403, None),
            ({"room_config": {"name": "team-ab"}}, 403, None),
            ({"room_config": {"name": "team-a-2"}}, 201, "team-a-2"),
            ({"room_name": "team-a-1", "room_config": {"name": "team-ab"}}, 400, None),
            ({"room_name": "team-a-1", "room_config": {"egress": {"room": {"room_name": "team-ab"}}}}, 403, None),
            (
                {"room_name": "team-a-1", "room_config": {"agents": [{"agent_name": "x"}], "egress": EGRESS}},
                201,
                "team-a-1",
            ),
            ({}, 201, "team-a-"),  # a new room: the prefix as a segment of its own
        ):
            async with http.post(url, json=who | extra, headers=TOKEN_AUTH) as resp:
                assert resp.status == status, (extra, await resp.text())
                doc = await resp.json()
            if room is not None:
                granted = claims(doc["participant_token"]).video.room
                assert granted == room or (room.endswith("-") and granted.startswith(room)), (extra, granted)
    finally:
        await running.runner.cleanup()


async def test_deep_nesting_non_utf8_and_oversized_bodies_get_one_line_not_a_500(
    server: Web, http: aiohttp.ClientSession
) -> None:
    # Issue 40: 2,000 levels of nesting (under the size limit) answered 500 with a RecursionError.
    deep = b'{"participant_identity": "a", "room_config": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    headers = {**TOKEN_AUTH, "Content-Type": "application/json"}
    for body, status, says in (
        (deep, 400, "the body nests 2001 levels deep; at most 16"),
        (b'{"participant_identity": "\xff"}', 400, "the body must be UTF-8 JSON"),
        (b'{"participant_identity": "a", "x": "' + b"y" * 70_000 + b'"}', 413, "the body is over 65536 bytes"),
        (b'{"participant_identity": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', 201, None),  # brackets in a string
    ):
        async with http.post(f"{server.url}/api/token", data=body, headers=headers) as resp:
            text = await resp.text()
            assert resp.status == status, text[:200]
            if says:
                assert json.loads(text) == {"error": says} and "\n" not in text


# The documented bounds (docs/web.md), as literals: the limit passes, the limit + 1 is refused
# with a 400 naming the field.
@pytest.mark.parametrize(
    ("field", "at_limit", "over", "named"),
    [
        ("room_name", "r" * 256, "r" * 257, "room_name is 257 characters; at most 256"),
        ("participant_name", "n" * 256, "n" * 257, "participant_name is 257 characters; at most 256"),
        ("participant_metadata", "m" * 16_384, "m" * 16_385, "participant_metadata is 16385 characters"),
        (
            "participant_attributes",
            {f"k{i}": "v" for i in range(64)},
            {f"k{i}": "v" for i in range(65)},
            "participant_attributes has 65 entries; at most 64",
        ),
        (
            "participant_attributes",
            {"k": "v" * 1023},
            {"k": "v" * 1024},
            "an entry is over 1024 characters",
        ),
    ],
)
async def test_each_documented_bound_passes_at_the_limit_and_refuses_one_more(
    server: Web, http: aiohttp.ClientSession, field: str, at_limit: object, over: object, named: str
) -> None:
    async with http.post(
        f"{server.url}/api/token", json={"participant_identity": "alice", field: at_limit}, headers=TOKEN_AUTH
    ) as resp:
        assert resp.status == 201, await resp.text()
    async with http.post(
        f"{server.url}/api/token", json={"participant_identity": "alice", field: over}, headers=TOKEN_AUTH
    ) as resp:
        assert resp.status == 400
        assert named in (await resp.json())["error"]
