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
says so. Authorisation is the operator's secret (`security.py`), as `Authorization:
Bearer`; browsers of `MEMORY_WEB_CORS_ORIGINS` may call it directly (CORS).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from livekit import api

from memory.errors import InvalidInput
from memory.livekit.token import identity_problem, mint, new_room
from memory.settings import LiveKitCredentials

# LiveKit checks a token's expiry when a participant connects, not later in the call; a
# frontend's TokenSource fetches a new one when its cached token is about to expire.
TOKEN_TTL = timedelta(minutes=15)
MAX_ROOM_NAME = 256
MAX_NAME = 256
MAX_METADATA = 16_384
MAX_ATTRIBUTES = 64

CREDENTIALS = web.AppKey("livekit_credentials", object)  # LiveKitCredentials, or why there are none
CORS_ORIGINS = web.AppKey("cors_origins", frozenset)


class BadRequest(InvalidInput):
    """A field of the request is wrong; the message names it."""


def _text(body: dict[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    if len(value) > limit:
        raise BadRequest(f"{name} is {len(value)} characters; at most {limit}")
    return value


def token_request(body: object) -> dict[str, Any]:
    """The fields of a token request, checked; `BadRequest` names the first wrong one."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    identity = body.get("participant_identity")
    if identity is None or identity == "":
        raise BadRequest(
            "participant_identity is required: memory is kept per participant identity, and a token for an "
            "identity made up per connection would remember nobody"
        )
    if problem := identity_problem(identity):
        raise BadRequest(f"participant_identity {problem}")
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
    room_config = body.get("room_config")
    config = None
    if room_config is not None:
        if not isinstance(room_config, dict):
            raise BadRequest("room_config must be a RoomConfiguration object")
        try:
            config = json_format.ParseDict(room_config, api.RoomConfiguration())
        except json_format.ParseError as exc:
            raise BadRequest(f"room_config is not a RoomConfiguration: {str(exc)[:200]}") from None
    return {
        "identity": identity,
        "room": _text(body, "room_name", MAX_ROOM_NAME) or new_room(),
        "name": _text(body, "participant_name", MAX_NAME),
        "metadata": _text(body, "participant_metadata", MAX_METADATA),
        "attributes": attributes or None,
        "room_config": config,
    }


def cors_headers(request: web.Request) -> dict[str, str]:
    """The CORS headers for a browser on an allowed origin (every answer of the endpoint
    carries them: `app._security_headers`), else none."""
    origin = request.headers.get("Origin")
    if origin and origin in request.app[CORS_ORIGINS]:
        return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
    return {}


async def token(request: web.Request) -> web.Response:
    """`POST /api/token` (the guard has checked the secret)."""
    creds = request.app[CREDENTIALS]
    if not isinstance(creds, LiveKitCredentials):
        return web.json_response({"error": f"no LiveKit project to mint tokens for: {creds}"}, status=503)
    try:
        fields = token_request(await request.json())
    except ValueError as exc:  # BadRequest, or a body that is not JSON
        message = str(exc) if isinstance(exc, BadRequest) else "the body must be a JSON object"
        return web.json_response({"error": message}, status=400)
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
