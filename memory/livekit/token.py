"""Mint a LiveKit access token for a chosen, stable participant identity.

Memory is keyed by the participant identity. Starter frontends and token servers often
make one up per connection, which gives nobody a memory across sessions; this command
lets a developer join their own LiveKit project as the same person every time.

    uv run python -m memory.livekit.token alice
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from datetime import timedelta
from urllib.parse import urlencode

from livekit import api

from memory.errors import InvalidIdentity
from memory.progname import program_name
from memory.settings import ConfigError, LiveKitCredentials, livekit_credentials
from memory.types import memory_user_id

MEET_URL = "https://meet.livekit.io/custom"
DEFAULT_TTL_HOURS = 24.0


def identity_problem(identity: object) -> str | None:
    """Why `identity` cannot be a participant identity memory is kept under, if it cannot:
    what the one identity rule refuses (`memory_user_id`, in its words), or padded with
    spaces (a token minted for " alice" would be another user than "alice")."""
    try:
        memory_user_id(identity)
    except InvalidIdentity as exc:
        return str(exc)
    if isinstance(identity, str) and identity != identity.strip():
        return "user id must not start or end with spaces"
    return None


def new_room(prefix: str = "memory-") -> str:
    """A fresh room name: a new room is a new session."""
    return f"{prefix}{secrets.token_hex(4)}"


def mint(
    creds: LiveKitCredentials,
    identity: str,
    room: str,
    *,
    ttl: timedelta,
    name: str | None = None,
    metadata: str | None = None,
    attributes: dict[str, str] | None = None,
    room_config: api.RoomConfiguration | None = None,
) -> str:
    """A token that joins `room` as `identity`, with what a starter frontend needs: publish
    (the microphone), subscribe (the agent's voice), data (chat, RPC such as forms). The
    worker uses automatic dispatch, so the agent joins any new room of the project;
    `room_config` carries an explicit agent dispatch when the frontend asks for one."""
    grants = api.VideoGrants(room_join=True, room=room, can_publish=True, can_subscribe=True, can_publish_data=True)
    token = api.AccessToken(creds.api_key, creds.api_secret).with_identity(identity).with_grants(grants).with_ttl(ttl)
    token = token.with_name(name or identity)
    if metadata:
        token = token.with_metadata(metadata)
    if attributes:
        token = token.with_attributes(attributes)
    if room_config is not None:
        token = token.with_room_config(room_config)
    return token.to_jwt()


def join_url(creds: LiveKitCredentials, token: str) -> str:
    """LiveKit Meet's custom-connection page, which takes a server URL and a token."""
    return f"{MEET_URL}?{urlencode({'liveKitUrl': creds.url, 'token': token})}"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=program_name("memory-token", "memory.livekit.token"), description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("identity", help="the participant identity: the user id memory is kept under")
    parser.add_argument("--room", help="room to join (default: a new room each time, so a new session)")
    parser.add_argument("--name", help="display name (default: the identity)")
    parser.add_argument("--ttl-hours", type=float, default=DEFAULT_TTL_HOURS, help="validity (default: 24)")
    parser.add_argument("--json", action="store_true", help="print url, room, identity and token as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    identity = args.identity
    if problem := identity_problem(identity):
        print(f"identity: {problem}", file=sys.stderr)
        return 2
    if not args.ttl_hours > 0:
        print("--ttl-hours: must be a positive number of hours", file=sys.stderr)
        return 2
    try:
        creds = livekit_credentials()
    except ConfigError as exc:
        print(f"memory.livekit.token: {exc}", file=sys.stderr)
        return 2
    room = args.room or new_room()
    token = mint(creds, identity, room, ttl=timedelta(hours=args.ttl_hours), name=args.name)
    if args.json:
        print(json.dumps({"url": creds.url, "room": room, "identity": identity, "token": token}))
        return 0
    print(f"identity: {identity}\nroom:     {room}\nurl:      {creds.url}\ntoken:    {token}\n")
    print(f"Open in a browser (LiveKit Meet, custom connection):\n  {join_url(creds, token)}")
    print("Or paste the url and token into the Agents Playground or your own frontend.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
