"""LiveKit's token endpoint (memory/web/token_endpoint.py) at its documented values, in one
process and without a store: the body's checks (UTF-8, 16 levels of nesting, a JSON
object), each field's type and bound (the bound passes, one more is refused, with the
words the endpoint answers), the policy (identities matched whole, rooms by whole
segments, every room a configuration names), the new room's name, the CORS headers and
preflight, and the handler's statuses (503, 400, 403, 413, 201) with the token's claims
decoded."""

from __future__ import annotations

import re
from datetime import timedelta

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request
from livekit import api

from memory.settings import LiveKitCredentials
from memory.web import token_endpoint as te
from memory.web.token_endpoint import (
    CORS_ORIGINS,
    CREDENTIALS,
    POLICY,
    BadRequest,
    NotAllowed,
    TokenPolicy,
    nesting,
    parse_body,
    room_allowed,
    token_request,
)

CREDS = LiveKitCredentials("wss://lk.example", "APIkey123", "s" * 40)
FRONTEND = "http://localhost:3000"
ANY = TokenPolicy()  # no identity shape, no room prefix


def refused(body: object, policy: TokenPolicy = ANY) -> str:
    with pytest.raises((BadRequest, NotAllowed)) as info:
        token_request(body, policy)
    return str(info.value)


def test_the_documented_values() -> None:
    assert te.TOKEN_TTL == timedelta(minutes=15)
    assert (te.MAX_ROOM_NAME, te.MAX_NAME, te.MAX_METADATA) == (256, 256, 16_384)
    assert (te.MAX_ATTRIBUTES, te.MAX_ATTRIBUTE_CHARS, te.MAX_DEPTH) == (64, 1024, 16)
    assert te.ROOM_SEPARATORS == "-/_.:"


@pytest.mark.parametrize(("raw", "depth"), [
    (b"1", 0), (b"[]", 1), (b"{}", 1), (b'{"a": [1, {"b": 2}]}', 3), (b"[[]][[[]]]", 3),
    (b'["[[[{{{"]', 1), (b'["a\\"[[[", "]"]', 1), (b'{"k": "}}}"}', 1),
])  # fmt: skip
def test_nesting_counts_brackets_outside_strings(raw: bytes, depth: int) -> None:
    assert nesting(raw) == depth


def test_the_body_is_utf8_json_nested_at_most_16_levels() -> None:
    assert parse_body(b"[" * 16 + b"]" * 16) == eval("[" * 16 + "]" * 16)  # noqa: S307 - a literal
    with pytest.raises(BadRequest) as info:
        parse_body(b"[" * 17 + b"]" * 17)
    assert str(info.value) == "the body nests 17 levels deep; at most 16"
    with pytest.raises(BadRequest) as info:
        parse_body(b'{"participant_identity": "\xff"}')
    assert str(info.value) == "the body must be UTF-8 JSON"
    with pytest.raises(BadRequest) as info:
        parse_body(b'{"participant_identity": ')
    assert str(info.value) == "the body must be a JSON object"
    assert parse_body('{"participant_identity": "é"}'.encode()) == {"participant_identity": "é"}


def test_the_identity_is_required_and_checked() -> None:
    required = refused({})
    assert required == (
        "participant_identity is required: memory is kept per participant identity, and a token for an "
        "identity made up per connection would remember nobody"
    )
    assert refused({"participant_identity": ""}) == required
    assert refused([1, 2]) == "the body must be a JSON object"
    assert refused({"participant_identity": " alice"}) == (
        "participant_identity: user id must not start or end with spaces"
    )
    assert token_request({"participant_identity": "a" * 1024})["identity"] == "a" * 1024
    assert refused({"participant_identity": "a" * 1025}) == "participant_identity is over 1024 bytes"
    assert refused({"participant_identity": "é" * 513}) == "participant_identity is over 1024 bytes"  # bytes


def test_the_fields_as_they_are_given_and_absent_ones_as_none() -> None:
    got = token_request({"participant_identity": "alice", "room_name": "support-42", "participant_name": "Alice",
                         "participant_metadata": "m\u200bx", "participant_attributes": {"plan": "pro"}})  # fmt: skip
    assert got == {"identity": "alice", "room": "support-42", "name": "Alice", "metadata": "m\u200bx",
                   "attributes": {"plan": "pro"}, "room_config": None}  # fmt: skip
    bare = token_request({"participant_identity": "alice", "participant_name": "", "participant_attributes": {}})
    assert (bare["name"], bare["metadata"], bare["attributes"], bare["room_config"]) == (None, None, None, None)
    assert re.fullmatch(r"memory-[0-9a-f]{8}", bare["room"])  # a new room each time
    assert token_request({"participant_identity": "alice", "room_name": ""})["room"].startswith("memory-")


@pytest.mark.parametrize(("field", "limit"), [
    ("room_name", 256), ("participant_name", 256), ("participant_metadata", 16_384),
])  # fmt: skip
def test_each_text_field_passes_at_its_bound_and_is_refused_one_over(field: str, limit: int) -> None:
    key = {"room_name": "room", "participant_name": "name", "participant_metadata": "metadata"}[field]
    assert token_request({"participant_identity": "a", field: "x" * limit})[key] == "x" * limit
    assert refused({"participant_identity": "a", field: "x" * (limit + 1)}) == (
        f"{field} is {limit + 1} characters; at most {limit}"
    )
    assert refused({"participant_identity": "a", field: 7}) == f"{field} must be a string"


def test_hidden_characters_are_refused_in_names_not_in_metadata() -> None:
    assert refused({"participant_identity": "a", "room_name": "ro\u202eom"}) == (
        "room_name must not hold control, bidi or zero-width characters (U+202E at 2)"
    )
    assert refused({"participant_identity": "a", "participant_name": "A\x1b"}) == (
        "participant_name must not hold control, bidi or zero-width characters (U+001B at 1)"
    )


def test_attributes_are_strings_at_most_64_entries_of_1024_characters() -> None:
    def attrs(value: object) -> object:
        return token_request({"participant_identity": "a", "participant_attributes": value})["attributes"]

    assert attrs({f"k{i}": "v" for i in range(64)}) == {f"k{i}": "v" for i in range(64)}
    assert attrs({"k": "v" * 1023}) == {"k": "v" * 1023}
    for bad in ({"k": 1}, {"k": None}, ["k", "v"], "k=v", {"k": "v", "n": 2}):
        assert refused({"participant_identity": "a", "participant_attributes": bad}) == (
            "participant_attributes must be an object of strings"
        )
    assert refused({"participant_identity": "a", "participant_attributes": {f"k{i}": "v" for i in range(65)}}) == (
        "participant_attributes has 65 entries; at most 64"
    )
    assert refused({"participant_identity": "a", "participant_attributes": {"k": "v" * 1024}}) == (
        "participant_attributes: an entry is over 1024 characters"
    )
    assert refused({"participant_identity": "a", "participant_attributes": {"k" * 1024: "v"}}) == (
        "participant_attributes: an entry is over 1024 characters"
    )


def test_a_room_configuration_is_parsed_and_names_the_room() -> None:
    got = token_request({"participant_identity": "a", "room_config": {"name": "r-1", "agents": [{"agentName": "x"}]}})
    assert got["room"] == "r-1" and got["room_config"].agents[0].agent_name == "x"
    assert token_request({"participant_identity": "a", "room_name": "r-1", "room_config": {"name": "r-1"}})["room"] == (
        "r-1"
    )
    assert refused({"participant_identity": "a", "room_config": "agents"}) == (
        "room_config must be a RoomConfiguration object"
    )
    unknown = refused({"participant_identity": "a", "room_config": {"agents": [{"nme": "x"}]}})
    assert unknown.startswith("room_config is not a RoomConfiguration: ") and '"nme"' in unknown  # protobuf's why
    assert len(refused({"participant_identity": "a", "room_config": {"x" * 500: 1}})) == 40 + 200  # cut to 200
    assert refused({"participant_identity": "a", "room_name": "r-1", "room_config": {"name": "r-2"}}) == (
        "room_config.name names another room than room_name"
    )
    assert refused({"participant_identity": "a", "room_config": {"name": "r" * 257}}) == (
        "room_config.name is 257 characters; at most 256"
    )


def test_the_policy_matches_identities_whole() -> None:
    policy = TokenPolicy(identities=re.compile(r"user-[0-9a-f]{8}"))
    assert token_request({"participant_identity": "user-0123abcd"}, policy)["identity"] == "user-0123abcd"
    for identity in ("alice", "user-0123abcd9", "xuser-0123abcd"):
        assert refused({"participant_identity": identity}, policy) == (
            "participant_identity is not of the shape this endpoint mints tokens for"
        )


@pytest.mark.parametrize(("room", "prefix", "allowed"), [
    ("team-a", "team-a", True), ("team-a-1", "team-a", True), ("team-a/1", "team-a", True),
    ("team-a_1", "team-a", True), ("team-a.1", "team-a", True), ("team-a:1", "team-a", True),
    ("team-ab", "team-a", False), ("team-", "team-a", False), ("xteam-a", "team-a", False),
    ("support-1", "support-", True), ("support-", "support-", True), ("support", "support-", False),
    ("anything", "", True), ("", "", True),
])  # fmt: skip
def test_a_room_prefix_names_whole_segments(room: str, prefix: str, allowed: bool) -> None:
    assert room_allowed(room, prefix) is allowed


def test_every_room_the_request_names_is_checked_and_new_rooms_get_the_prefix() -> None:
    policy = TokenPolicy(room_prefix="team-a")
    who = {"participant_identity": "alice"}
    assert refused(who | {"room_name": "team-ab"}, policy) == (
        "room_name must be 'team-a' or begin with it as a whole segment"
    )
    assert refused(who | {"room_config": {"name": "team-ab"}}, policy) == (
        "room_config.name must be 'team-a' or begin with it as a whole segment"
    )
    egress = {"room_name": "team-a-1", "room_config": {"egress": {"room": {"room_name": "team-ab"}}}}
    assert refused(who | egress, policy) == (
        "room_config.egress.room.room_name must be 'team-a' or begin with it as a whole segment"
    )
    agents = {"agents": [{"agent_name": "x", "metadata": "team-zz"}], "egress": {"room": {"room_name": "team-a-1"}}}
    assert token_request(who | {"room_name": "team-a-1", "room_config": agents}, policy)["room"] == "team-a-1"
    assert re.fullmatch(r"team-a-[0-9a-f]{8}", token_request(who, policy)["room"])
    assert re.fullmatch(r"support-[0-9a-f]{8}", token_request(who, TokenPolicy(room_prefix="support-"))["room"])


def test_a_room_named_in_a_repeated_field_is_found_too() -> None:
    """Its docstring's "whatever a newer LiveKit adds under a field called `room_name`": in a list of
    messages as well (today's RoomConfiguration has none; another message stands in)."""
    listed = api.ListEgressResponse(items=[api.EgressInfo(room_name="team-a-1"), api.EgressInfo(room_name="b")])
    assert te._rooms_in(listed) == [("room_config.items.room_name", "team-a-1"), ("room_config.items.room_name", "b")]
    assert te._rooms_in(None) == []


def test_cors_headers_only_for_a_configured_origin() -> None:
    app = web.Application()
    app[CORS_ORIGINS] = frozenset({FRONTEND})

    def headers(origin: str | None) -> dict[str, str]:
        return te.cors_headers(make_mocked_request("POST", "/api/token", headers={"Origin": origin} if origin else {},
                                                  app=app))  # fmt: skip

    assert headers(FRONTEND) == {"Access-Control-Allow-Origin": FRONTEND, "Vary": "Origin"}
    assert headers("https://evil.example") == {} and headers(None) == {}


def make_app(creds: object = CREDS, policy: TokenPolicy = ANY) -> web.Application:
    app = web.Application(client_max_size=65_536)
    app[CREDENTIALS] = creds
    app[CORS_ORIGINS] = frozenset({FRONTEND})
    app[POLICY] = policy
    app.router.add_post("/api/token", te.token)
    app.router.add_options("/api/token", te.preflight)
    return app


async def test_the_preflight_of_a_configured_origin_and_of_another() -> None:
    async with TestClient(TestServer(make_app())) as client:
        resp = await client.options("/api/token", headers={"Origin": FRONTEND})
        assert resp.status == 204
        assert resp.headers["Access-Control-Allow-Origin"] == FRONTEND and resp.headers["Vary"] == "Origin"
        assert resp.headers["Access-Control-Allow-Methods"] == "POST"
        assert resp.headers["Access-Control-Allow-Headers"] == "Authorization, Content-Type"
        assert resp.headers["Access-Control-Max-Age"] == "600"
        resp = await client.options("/api/token", headers={"Origin": "https://evil.example"})
        assert resp.status == 403
        assert await resp.text() == "this origin may not call the token endpoint"
        assert "Access-Control-Allow-Origin" not in resp.headers


async def test_the_handler_answers_each_status_with_one_line() -> None:
    async with TestClient(TestServer(make_app())) as client:
        resp = await client.post("/api/token", json={"participant_identity": "a", "room_name": ["x"]})
        assert (resp.status, await resp.json()) == (400, {"error": "room_name must be a string"})
        resp = await client.post("/api/token", data=b'{"participant_identity": "a", "x": "' + b"y" * 70_000 + b'"}')
        assert (resp.status, await resp.json()) == (413, {"error": "the body is over 65536 bytes"})
    async with TestClient(TestServer(make_app(policy=TokenPolicy(room_prefix="support-")))) as client:
        resp = await client.post("/api/token", json={"participant_identity": "a", "room_name": "sales-1"})
        assert resp.status == 403
        assert await resp.json() == {"error": "room_name must be 'support-' or begin with it as a whole segment"}
    async with TestClient(TestServer(make_app(creds="LIVEKIT_API_KEY not set"))) as client:
        resp = await client.post("/api/token", json={"participant_identity": "a"})
        assert (resp.status, await resp.json()) == (
            503,
            {"error": "no LiveKit project to mint tokens for: LIVEKIT_API_KEY not set"},
        )


async def test_a_token_carries_every_field_and_lives_fifteen_minutes() -> None:
    body = {"participant_identity": "alice", "room_name": "support-42", "participant_name": "Alice",
            "participant_metadata": '{"lang": "zh"}', "participant_attributes": {"plan": "pro"},
            "room_config": {"agents": [{"agent_name": "memory-agent"}]}}  # fmt: skip
    async with TestClient(TestServer(make_app())) as client:
        resp = await client.post("/api/token", json=body)
        assert resp.status == 201
        doc = await resp.json()
    assert set(doc) == {"server_url", "participant_token"} and doc["server_url"] == "wss://lk.example"
    claims = jwt.decode(doc["participant_token"], "s" * 40, algorithms=["HS256"], options={"verify_aud": False})
    assert (claims["iss"], claims["sub"], claims["name"]) == ("APIkey123", "alice", "Alice")
    assert claims["metadata"] == '{"lang": "zh"}' and claims["attributes"] == {"plan": "pro"}
    assert claims["video"]["room"] == "support-42"
    assert claims["roomConfig"]["agents"] == [{"agentName": "memory-agent"}]
    assert claims["exp"] - claims["nbf"] == 900
