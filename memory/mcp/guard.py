"""The MCP server's HTTP door, guarded as the web page's is.

- **A principal per key.** `KeyVerifier` gives each key a client id and subject of its own
  (a digest of the key, never the key): the SDK's rule that a session belongs to the
  credential that opened it then tells keys apart, so one key can neither use nor close
  another key's session (404, as for a session that does not exist).
- **Sessions per key.** A key may hold `MEMORY_MCP_SESSIONS_PER_KEY` sessions open at once;
  one more is refused (429) before it is opened, so the least trusted key cannot fill the
  server's own limit for every other. A session with no request for
  `MEMORY_MCP_SESSION_IDLE_S` is closed by the SDK.
- **Wrong keys are paced** per client address with the web page's rule
  (`memory.ops.pacing.SecretLimiter`): a few at once, then one every few seconds; the right
  key is never refused, only made to wait its turn.
- **Host and Origin** are checked on every listen address (the SDK's DNS-rebinding check,
  `transport_security`): loopback names and `MEMORY_MCP_ALLOWED_HOSTS`; an `Origin` header
  not in `MEMORY_MCP_ALLOWED_ORIGINS` is refused (MCP clients that are not browsers send none).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings

from memory.ops.pacing import SecretLimiter
from memory.settings import McpSettings

_LOOPBACK = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
_ANY = ("0.0.0.0", "::", "")


def key_digest(key: str) -> str:
    """A key's principal: a digest that names it in the SDK's session ownership and logs."""
    return "mcp-key-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class KeyVerifier:
    """The SDK's bearer check with MEMORY_MCP_KEYS: a key of this server, or no access."""

    def __init__(self, settings: McpSettings) -> None:
        self.settings = settings

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            who = self.settings.identities(token)
        except KeyError:
            return None
        principal = key_digest(token)
        return AccessToken(
            token=token,
            client_id=principal,
            subject=principal,
            scopes=[],
            claims={"identities": None if who is None else sorted(who)},
        )


def transport_security(settings: McpSettings) -> TransportSecuritySettings:
    """The SDK's Host/Origin check, on whatever address the server listens."""
    hosts = [*_LOOPBACK, *settings.allowed_hosts]
    if settings.host not in _ANY:
        shown = f"[{settings.host}]" if ":" in settings.host else settings.host
        hosts += [shown, f"{shown}:{settings.port}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=list(settings.allowed_origins)
    )


def _bearer(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            text = value.decode("latin-1")
            return text[7:] if text[:7].lower() == "bearer " else None
    return None


def _header(scope: dict[str, Any], wanted: bytes) -> bytes | None:
    return next((value for name, value in scope.get("headers") or [] if name == wanted), None)


async def _refuse(send: Any, status: int, message: str, retry_after: float | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(max(1, round(retry_after))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class KeyGuard:
    """ASGI middleware in front of the SDK's app: wrong keys paced per client address, and
    each key's open sessions capped. `owners` gives the principal of each open session (the
    SDK's session manager's, read only)."""

    def __init__(self, app: Any, settings: McpSettings, owners: Any, limiter: SecretLimiter | None = None) -> None:
        self.app = app
        self.settings = settings
        self.owners = owners
        self.limiter = limiter or SecretLimiter()
        self._opening: Counter[str] = Counter()

    def open_sessions(self, principal: str) -> int:
        """The sessions `principal` holds open, or is opening now."""
        held = sum(1 for owner in list(self.owners().values()) if owner.get("subject") == principal)
        return held + self._opening[principal]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = _bearer(scope)
        if key is None:  # no key: the SDK answers 401 (nothing was guessed)
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("?",))[0]
        if not await self.limiter.turn(address):
            wait = self.limiter.window_s / self.limiter.attempts
            await _refuse(send, 429, "too many wrong keys from this address: try again later", wait)
            return
        try:
            self.settings.identities(key)
        except KeyError:
            self.limiter.failed(address)  # before anything is awaited: tries at once cannot pass together
            await self.app(scope, receive, send)  # the SDK's own 401
            return
        if scope["method"] != "POST" or _header(scope, b"mcp-session-id") is not None:
            await self.app(scope, receive, send)
            return
        principal = key_digest(key)
        if self.open_sessions(principal) >= self.settings.sessions_per_key:
            await _refuse(
                send,
                429,
                f"this key holds {self.settings.sessions_per_key} open sessions, the most it may "
                "(MEMORY_MCP_SESSIONS_PER_KEY): close one (DELETE) or let one idle out",
                self.settings.session_idle_s,
            )
            return
        self._opening[principal] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._opening[principal] -= 1
