"""The MCP server's HTTP door hardened as the web page's is (issue 50): each key its own
principal (another key's session is not found, and cannot be closed), a cap on each key's
open sessions, wrong keys paced per client address with the web page's rule, and the
Host/Origin check on every listen address (loopback and all interfaces)."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx
import pytest

from memory.ops.pacing import LOGIN_ATTEMPTS, LOGIN_WINDOW_S, SecretLimiter
from memory.settings import ConfigError, mcp_settings
from tests.conftest import HANG_GUARD_S
from tests.mcp.serving import served

WIDE_KEY = "wide-key-0123456789abcdef"
NARROW_KEY = "narrow-key-0123456789abcd"
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _serving(
    store: Any, env: dict[str, str], *, bind: str = "127.0.0.1", limiter: Any = None
) -> contextlib.AbstractAsyncContextManager[str]:
    return served(store, {"MEMORY_MCP_KEYS": f"{WIDE_KEY}:* {NARROW_KEY}:alice", **env}, bind=bind, limiter=limiter)


async def _open(http: httpx.AsyncClient, url: str, key: str, **headers: str) -> httpx.Response:
    return await http.post(url, json=HELLO, headers={**ACCEPT, "Authorization": f"Bearer {key}", **headers})


async def test_each_key_is_its_own_principal_and_cannot_use_or_close_another_keys_session(store: Any) -> None:
    async with _serving(store, {}) as url, httpx.AsyncClient(timeout=HANG_GUARD_S) as http:
        opened = await _open(http, url, WIDE_KEY)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        theirs = {**ACCEPT, "Authorization": f"Bearer {NARROW_KEY}", "mcp-session-id": sid}
        used = await http.post(url, json=listing, headers=theirs)
        assert used.status_code == 404  # as if the session did not exist
        closed = await http.delete(url, headers=theirs)
        assert closed.status_code == 404
        own = {**ACCEPT, "Authorization": f"Bearer {WIDE_KEY}", "mcp-session-id": sid}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=own)
        still = await http.post(url, json=listing, headers=own)
        assert still.status_code == 200 and "recall" in still.text  # the owner's session was not closed


async def test_a_key_holds_at_most_its_cap_of_sessions_and_another_key_is_not_crowded_out(store: Any) -> None:
    async with (
        _serving(store, {"MEMORY_MCP_SESSIONS_PER_KEY": "3"}) as url,
        httpx.AsyncClient(timeout=HANG_GUARD_S) as http,
    ):
        sids = []
        for _ in range(3):  # the cap
            opened = await _open(http, url, NARROW_KEY)
            assert opened.status_code == 200, opened.text
            sids.append(opened.headers["mcp-session-id"])
        over = await _open(http, url, NARROW_KEY)  # the cap + 1
        assert over.status_code == 429 and "MEMORY_MCP_SESSIONS_PER_KEY" in over.text
        assert (await _open(http, url, WIDE_KEY)).status_code == 200  # another key: its own count
        own = {**ACCEPT, "Authorization": f"Bearer {NARROW_KEY}", "mcp-session-id": sids[0]}
        assert (await http.delete(url, headers=own)).status_code == 200
        assert (await _open(http, url, NARROW_KEY)).status_code == 200  # one closed: one may open


async def test_wrong_keys_are_paced_per_address_as_the_web_page_paces_secrets(store: Any) -> None:
    slept: list[float] = []
    now = [1000.0]

    async def sleep(seconds: float) -> None:  # a fake clock: the wait is counted, not waited
        slept.append(seconds)
        now[0] += seconds

    limiter = SecretLimiter(clock=lambda: now[0], sleep=sleep)
    async with _serving(store, {}, limiter=limiter) as url, httpx.AsyncClient(timeout=HANG_GUARD_S) as http:
        for i in range(LOGIN_ATTEMPTS + 3):
            wrong = await _open(http, url, f"not-a-key-of-this-server-{i:04d}")
            assert wrong.status_code == 401
        # LOGIN_ATTEMPTS checked at once; past them one every window / attempts: the next
        # at once, each after it one interval later.
        assert slept == [pytest.approx(LOGIN_WINDOW_S / LOGIN_ATTEMPTS)] * 2
        right = await _open(http, url, WIDE_KEY)  # the right key is never refused: it waits its turn
        assert right.status_code == 200 and len(slept) == 3


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
async def test_a_foreign_host_or_origin_is_refused_on_every_listen_address(store: Any, bind: str) -> None:
    env = {"MEMORY_MCP_ALLOWED_HOSTS": "mcp.internal:*", "MEMORY_MCP_ALLOWED_ORIGINS": "https://app.example.com"}
    async with _serving(store, env, bind=bind) as url, httpx.AsyncClient(timeout=HANG_GUARD_S) as http:
        port = url.split(":")[2].split("/")[0]
        assert (await _open(http, url, WIDE_KEY, Host="evil.example")).status_code == 421
        assert (await _open(http, url, WIDE_KEY, Origin="http://evil.example")).status_code == 403
        assert (await _open(http, url, WIDE_KEY, Origin=f"http://127.0.0.1:{port}")).status_code == 403
        assert (await _open(http, url, WIDE_KEY, Host=f"mcp.internal:{port}")).status_code == 200
        assert (await _open(http, url, WIDE_KEY, Origin="https://app.example.com")).status_code == 200
        assert (await _open(http, url, WIDE_KEY)).status_code == 200  # a client that is no browser: no Origin


def test_listening_beyond_loopback_needs_the_hosts_named() -> None:
    with pytest.raises(ConfigError, match="MEMORY_MCP_ALLOWED_HOSTS"):
        mcp_settings({"MEMORY_MCP_KEYS": f"{WIDE_KEY}:*", "MEMORY_MCP_LISTEN": "0.0.0.0:8766"})
    assert mcp_settings({"MEMORY_MCP_KEYS": f"{WIDE_KEY}:*", "MEMORY_MCP_LISTEN": "127.0.0.1:8766"}).loopback
