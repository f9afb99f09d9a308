"""LiveKit's standard token endpoint: `POST /api/token`, as LiveKit's docs define it for an
endpoint `TokenSource` (docs.livekit.io, "Endpoint token generation").

Request: a JSON object with any of `room_name`, `participant_identity`, `participant_name`,
`participant_metadata`, `participant_attributes` and `room_config` (a `RoomConfiguration`:
agent dispatch, in protobuf JSON, snake_case or camelCase). Answer: 201 with `server_url`
and `participant_token`. Unknown fields are ignored, as an older endpoint ignores a newer
client's.

One difference from a plain token server, on purpose: `participant_identity` is required.
Memory is kept per identity, and a token for an identity made up per connection gives
nobody a memory (the README's first pitfall); a frontend that sends none gets a 400 that
says so.

Authorisation is a key of its own, `MEMORY_WEB_TOKEN_KEY`, as `Authorization: Bearer`
(`security.py`, `app.guard_middleware`): the frontend's token server holds it, and it
opens no page or action of the operator's. It can be narrowed to identities of a shape
(`MEMORY_WEB_TOKEN_IDENTITIES`) and rooms with a prefix (`MEMORY_WEB_TOKEN_ROOM_PREFIX`).
Browsers of `MEMORY_WEB_CORS_ORIGINS` may call it directly (CORS).

The body is checked before it is parsed deeply: at most `client_max_size` bytes (64 KiB),
UTF-8, nested at most `MAX_DEPTH` levels (2,000 levels would reach `json.loads`'s
recursion limit), then each field's type and length. Every refusal is one line of JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from livekit import api

from memory.errors import InvalidInput
from memory.livekit.token import identity_problem, mint, new_room
from memory.settings import LiveKitCredentials
from memory.types import hidden_character
from memory.web.security import MAX_BODY

# LiveKit checks a token's expiry when a participant connects, not later in the call; a
# frontend's TokenSource fetches a new one when its cached token is about to expire.
TOKEN_TTL = timedelta(minutes=15)
MAX_ROOM_NAME = 256
MAX_NAME = 256
MAX_METADATA = 16_384
MAX_ATTRIBUTES = 64
MAX_ATTRIBUTE_CHARS = 1024
MAX_DEPTH = 16  # a RoomConfiguration with its agent dispatch is 4 levels deep
ROOM_SEPARATORS = "-/_.:"  # what ends a segment of a room name
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


@dataclass(frozen=True)
class TokenPolicy:
    """Whom tokens may be minted for: identities that match `identities` whole (any, when
    None) and rooms `room_prefix` names by whole segments (`room_allowed`; new rooms get it)."""

    identities: re.Pattern[str] | None = None
    room_prefix: str = ""


CREDENTIALS = web.AppKey("livekit_credentials", object)  # LiveKitCredentials, or why there are none
CORS_ORIGINS = web.AppKey("cors_origins", frozenset)
POLICY = web.AppKey("token_policy", TokenPolicy)


class BadRequest(InvalidInput):
    """A field of the request is wrong; the message names it."""


class NotAllowed(InvalidInput):
    """The request is well formed, but this endpoint's policy does not mint it."""


def nesting(raw: bytes) -> int:
    """How deeply the JSON text `raw` nests arrays and objects, counted without parsing it
    (strings, which may hold brackets, are left out first)."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub(b"", raw)):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_body(raw: bytes) -> object:
    """The request's JSON, once its size is known (the server caps it) and its nesting is
    within `MAX_DEPTH`; `BadRequest` says what was wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body must be UTF-8 JSON") from None
    if (depth := nesting(raw)) > MAX_DEPTH:
        raise BadRequest(f"the body nests {depth} levels deep; at most {MAX_DEPTH}")
    try:
        return json.loads(text)
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None


def _text(body: dict[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    if len(value) > limit:
        raise BadRequest(f"{name} is {len(value)} characters; at most {limit}")
    if name != "participant_metadata" and (where := hidden_character(value)):
        raise BadRequest(f"{name} must not hold control, bidi or zero-width characters ({where})")
    return value


def token_request(body: object, policy: TokenPolicy = TokenPolicy()) -> dict[str, Any]:
    """The fields of a token request, checked; `BadRequest` names the first wrong one,
    `NotAllowed` says which the policy refuses."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    identity = body.get("participant_identity")
    if identity is None or identity == "":
        raise BadRequest(
            "participant_identity is required: memory is kept per participant identity, and a token for an "
            "identity made up per connection would remember nobody"
        )
    if problem := identity_problem(identity):
        raise BadRequest(f"participant_identity: {problem}")  # the words every door uses for it
    if len(identity.encode()) > 1024:
        raise BadRequest("participant_identity is over 1024 bytes")
    attributes = body.get("participant_attributes")
    if attributes is not None:
        if not isinstance(attributes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in attributes.items()
        ):
            raise BadRequest("participant_attributes must be an object of strings")
        if len(attributes) > MAX_ATTRIBUTES:
            raise BadRequest(f"participant_attributes has {len(attributes)} entries; at most {MAX_ATTRIBUTES}")
        if any(len(k) + len(v) > MAX_ATTRIBUTE_CHARS for k, v in attributes.items()):
            raise BadRequest(f"participant_attributes: an entry is over {MAX_ATTRIBUTE_CHARS} characters")
    room_config = body.get("room_config")
    config = None
    if room_config is not None:
        if not isinstance(room_config, dict):
            raise BadRequest("room_config must be a RoomConfiguration object")
        try:
            config = json_format.ParseDict(room_config, api.RoomConfiguration())
        except json_format.ParseError as exc:
            raise BadRequest(f"room_config is not a RoomConfiguration: {str(exc)[:200]}") from None
    if policy.identities is not None and not policy.identities.fullmatch(identity):
        raise NotAllowed("participant_identity is not of the shape this endpoint mints tokens for")
    room = asked = _text(body, "room_name", MAX_ROOM_NAME)
    if config is not None and config.name:
        _text({"room_config.name": config.name}, "room_config.name", MAX_ROOM_NAME)
        if room is not None and config.name != room:
            raise BadRequest("room_config.name names another room than room_name")
        room = config.name
    for where, named in [("room_name", asked), *_rooms_in(config)]:
        if named is not None and not room_allowed(named, policy.room_prefix):
            raise NotAllowed(f"{where} must be {policy.room_prefix!r} or begin with it as a whole segment")
    return {
        "identity": identity,
        "room": room or new_room(_segment(policy.room_prefix) if policy.room_prefix else "memory-"),
        "name": _text(body, "participant_name", MAX_NAME),
        "metadata": _text(body, "participant_metadata", MAX_METADATA),
        "attributes": attributes or None,
        "room_config": config,
    }


def room_allowed(room: str, prefix: str) -> bool:
    """Whether `room` is in the rooms `prefix` names, by whole segments: "team-a" allows
    "team-a", "team-a-1" and "team-a/1", never "team-ab" (a prefix that ends in a separator,
    "support-", already ends a segment). No prefix: every room."""
    if not prefix or prefix[-1] in ROOM_SEPARATORS:
        return room.startswith(prefix)
    return room == prefix or (room.startswith(prefix) and room[len(prefix)] in ROOM_SEPARATORS)


def _segment(prefix: str) -> str:
    """The prefix of a new room's name: `prefix` ending a segment."""
    return prefix if prefix[-1] in ROOM_SEPARATORS else prefix + "-"


def _rooms_in(config: api.RoomConfiguration | None) -> list[tuple[str, str]]:
    """Every room a room configuration names, anywhere in it (its `name`; an egress's
    `room_name`; whatever a newer LiveKit adds under a field called `room_name`), with
    where: each is checked against the room rule, not copied into the token unchecked."""
    if config is None:
        return []
    found: list[tuple[str, str]] = []

    def walk(message: Any, path: str) -> None:
        for field, value in message.ListFields():
            where = f"{path}.{field.name}"
            if field.message_type is not None:
                for item in value if field.is_repeated else [value]:
                    if hasattr(item, "ListFields"):
                        walk(item, where)
            elif isinstance(value, str) and (field.name == "room_name" or where == "room_config.name"):
                found.append((where, value))

    walk(config, "room_config")
    return found


def cors_headers(request: web.Request) -> dict[str, str]:
    """The CORS headers for a browser on an allowed origin (every answer of the endpoint
    carries them: `app._security_headers`), else none."""
    origin = request.headers.get("Origin")
    if origin and origin in request.app[CORS_ORIGINS]:
        return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
    return {}


async def token(request: web.Request) -> web.Response:
    """`POST /api/token` (the guard has checked the token key)."""
    creds = request.app[CREDENTIALS]
    if not isinstance(creds, LiveKitCredentials):
        return web.json_response({"error": f"no LiveKit project to mint tokens for: {creds}"}, status=503)
    try:
        fields = token_request(parse_body(await request.read()), request.app[POLICY])
    except BadRequest as exc:
        return web.json_response({"error": str(exc)}, status=400)
    except NotAllowed as exc:
        return web.json_response({"error": str(exc)}, status=403)
    except web.HTTPRequestEntityTooLarge:
        return web.json_response({"error": f"the body is over {MAX_BODY} bytes"}, status=413)
    jwt = mint(creds, fields["identity"], fields["room"], ttl=TOKEN_TTL, name=fields["name"],
               metadata=fields["metadata"], attributes=fields["attributes"],
               room_config=fields["room_config"])  # fmt: skip
    return web.json_response({"server_url": creds.url, "participant_token": jwt}, status=201)


async def preflight(request: web.Request) -> web.Response:
    """CORS preflight of a browser on another origin: allowed only for `MEMORY_WEB_CORS_ORIGINS`
    (a preflight carries no credentials, so it needs no secret and reveals nothing)."""
    headers = cors_headers(request)
    if not headers:
        return web.Response(status=403, text="this origin may not call the token endpoint")
    headers |= {
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "Authorization, Content-Type",
        "Access-Control-Max-Age": "600",
    }
    return web.Response(status=204, headers=headers)
