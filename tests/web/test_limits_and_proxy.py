"""Issue 40: the page where it is really deployed. Behind a proxy (the public origin, or
X-Forwarded-* from trusted addresses only), wrong secrets limited per client without
locking the right one out (on a fake clock: what a client was made to wait is read from
it), and a store that is down answered with a page that says so."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from harness.pgbouncer import PgBouncer, pgbouncer_binary
from memory.ops import pacing
from memory.settings import load_settings, web_settings
from memory.storage.store import MemoryStore
from memory.web import security
from memory.web.context import WARMED
from tests.conftest import HANG_GUARD_S
from tests.web.conftest import AUTH, SECRET, Web, start_web

PUBLIC = "https://memory.example"
FROM_PROXY = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "memory.example", "Origin": PUBLIC}


@pytest.fixture
async def proxied(store: MemoryStore, tmp_path: Path) -> AsyncIterator[Web]:
    """The page behind a proxy on this machine (127.0.0.1 is the proxy's address)."""
    running = await start_web(store, tmp_path, trusted_proxies=("127.0.0.1/32",))
    yield running
    await running.runner.cleanup()


async def _login(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> tuple[int, dict]:
    async with http.post(f"{url}/login", data={"secret": SECRET, "next": "/"}, headers=headers,
                         allow_redirects=False) as resp:  # fmt: skip
        cookie = resp.cookies.get(security.SESSION_COOKIE)
        return resp.status, {**cookie, "value": cookie.value} if cookie is not None else {}


async def test_behind_a_trusted_proxy_the_forms_work_and_the_cookie_is_secure(
    proxied: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str
) -> None:
    # Issue 40: the forms post Origin https://host, the guard compared it with http://host: 403.
    status, cookie = await _login(http, proxied.url, FROM_PROXY)
    assert status == 303 and cookie["secure"] and cookie["httponly"] and cookie["samesite"] == "Strict"
    # The client here speaks plain HTTP to the page, as the proxy does: it sends the Secure cookie itself.
    browser = {**FROM_PROXY, "Cookie": f"{security.SESSION_COOKIE}={cookie['value']}"}
    store.add_raw(user_id, "I keep bees on the roof")
    async with http.get(f"{proxied.url}/forget", params={"id": user_id}, headers=browser) as resp:
        csrf = re.search(r'name="csrf" value="([^"]+)"', await resp.text()).group(1)
    async with http.post(f"{proxied.url}/forget", data={"id": user_id, "confirm": user_id, "csrf": csrf},
                         headers=browser) as resp:  # fmt: skip
        assert resp.status == 200
    assert store.list_user(user_id) == []
    async with http.post(f"{proxied.url}/logout", data={"csrf": csrf}, headers=browser,
                         allow_redirects=False) as resp:  # fmt: skip
        assert resp.status == 303


async def test_forwarded_headers_from_an_untrusted_address_change_nothing(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    running = await start_web(store, tmp_path, trusted_proxies=("10.0.0.0/8",))  # not this machine
    try:
        status, _ = await _login(http, running.url, FROM_PROXY)
        assert status == 403  # the page is http://127.0.0.1:...: a form from https://memory.example is another site
        status, cookie = await _login(http, running.url, {"X-Forwarded-Proto": "https"})
        assert status == 303 and not cookie["secure"]  # no Secure on a client's say-so
    finally:
        await running.runner.cleanup()


async def test_the_public_origin_setting_accepts_its_forms_and_makes_the_cookie_secure(
    store: MemoryStore, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    cfg = web_settings({"MEMORY_WEB_SECRET": SECRET, "MEMORY_WEB_PUBLIC_ORIGIN": "HTTPS://Memory.Example:443/"})
    assert cfg.public_origin == PUBLIC  # as a browser writes it in Origin
    running = await start_web(store, tmp_path, public_origin=cfg.public_origin)
    try:
        status, cookie = await _login(http, running.url, {"Origin": PUBLIC})
        assert status == 303 and cookie["secure"]
        status, _ = await _login(http, running.url, {"Origin": "https://evil.example"})
        assert status == 403
    finally:
        await running.runner.cleanup()


def test_cors_origins_are_kept_as_a_browser_sends_them() -> None:
    # Issue 40: an origin written with capitals or a default port was accepted and never matched.
    cfg = web_settings({"MEMORY_WEB_SECRET": SECRET,
                        "MEMORY_WEB_CORS_ORIGINS": "HTTP://LocalHost:3000/, https://app.example.com:443"})  # fmt: skip
    assert cfg.cors_origins == ("http://localhost:3000", "https://app.example.com")


# ---------------------------------------------------------------- wrong secrets
INTERVAL = pacing.LOGIN_WINDOW_S / pacing.LOGIN_ATTEMPTS


async def test_wrong_bearer_secrets_are_limited_like_logins_and_the_right_one_still_gets_in(
    gated_web: Web, http: aiohttp.ClientSession
) -> None:
    # Issue 40: 300 wrong `Authorization: Bearer` secrets were 300 x 401 at full speed.
    clock, guesses = gated_web.clock, 40
    start, slept = clock.now, len(clock.slept)
    for i in range(guesses):
        async with http.get(f"{gated_web.url}/store", headers={"Authorization": f"Bearer guess-{i:04d}-xxxxxxxx"}) as r:
            assert r.status == 401
    assert len(clock.slept) > slept  # past the first few, guesses wait their turn
    # A few at once, then one a turn: 40 guesses take at least (40 - 2 x 5) turns of 12 s (about 5 a minute).
    assert clock.now - start >= (guesses - 2 * pacing.LOGIN_ATTEMPTS) * INTERVAL
    before = clock.now
    async with http.get(f"{gated_web.url}/store", headers=AUTH) as resp:
        assert resp.status == 200  # never refused: it waited one turn at most
    assert clock.now - before <= INTERVAL
    async with http.post(f"{gated_web.url}/login", data={"secret": SECRET}, allow_redirects=False) as resp:
        assert resp.status == 303  # the form too (it answered 429 for a minute)


async def test_behind_a_proxy_one_clients_guesses_do_not_slow_another(
    proxied: Web, http: aiohttp.ClientSession
) -> None:
    # Issue 40: behind a proxy every client was one address, so one guesser locked all out.
    attacker = {"X-Forwarded-For": "203.0.113.7"}
    for i in range(pacing.LOGIN_ATTEMPTS + 3):
        async with http.post(f"{proxied.url}/login", data={"secret": f"guess-{i}-xxxxxxxxxxx"},
                             headers=attacker) as resp:  # fmt: skip
            assert resp.status == 401
    assert proxied.clock.slept  # the guesser waits
    waited = len(proxied.clock.slept)
    status, _ = await _login(http, proxied.url, {"X-Forwarded-For": "198.51.100.9"})
    assert status == 303 and len(proxied.clock.slept) == waited  # the operator does not
    # X-Forwarded-For is read from the right: what the client wrote before the proxy's entry is not its address.
    spoof = {"X-Forwarded-For": "198.51.100.9, 203.0.113.7"}
    async with http.post(f"{proxied.url}/login", data={"secret": "guess-again-xxxxxxxx"}, headers=spoof) as resp:
        assert resp.status == 401
    assert len(proxied.clock.slept) == waited + 1


async def test_an_address_with_too_many_tries_waiting_gets_429_and_others_are_not_held() -> None:
    release = asyncio.Event()
    now = [0.0]

    async def held(_seconds: float) -> None:
        await release.wait()

    limiter = security.SecretLimiter(clock=lambda: now[0], sleep=held)
    for _ in range(pacing.LOGIN_ATTEMPTS):
        assert await limiter.turn("a")
        limiter.failed("a")
    assert await limiter.turn("a")  # the first turn past the budget is now; the next ones wait
    waiting = [asyncio.create_task(limiter.turn("a")) for _ in range(pacing.LIMIT_QUEUE)]
    await asyncio.sleep(0)
    # (wait_for: were the queue not full, this would wait for `release` forever)
    # the queue is full: refused at once, nothing checked
    assert not await asyncio.wait_for(limiter.turn("a"), HANG_GUARD_S)
    assert await asyncio.wait_for(limiter.turn("b"), HANG_GUARD_S)  # another address is not held
    release.set()
    assert all(await asyncio.gather(*waiting))


# ---------------------------------------------------------------- a dead store
async def test_a_store_that_is_down_gives_a_page_saying_so_with_503(
    embedded_server_url: str, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    if pgbouncer_binary() is None:
        pytest.skip("PgBouncer is not installed (apt-get install -y pgbouncer)")
    bouncer = PgBouncer(embedded_server_url, pool_size=1).start()
    try:  # the page's store reaches Postgres through it, as a fleet's does; stopping it takes the database away
        settings = load_settings({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_DATABASE_URL": bouncer.url}, dotenv=False)
        dead = MemoryStore.open(settings, load_mem0=False)
    except BaseException:
        bouncer.stop()
        raise
    running = await start_web(dead, tmp_path / "journal")
    try:
        bouncer.stop()
        async with http.get(f"{running.url}/", headers=AUTH) as resp:
            body = await resp.text()
            assert resp.status == 503 and resp.headers["Retry-After"]
            assert "The memory store cannot be reached" in body and "Traceback" not in body
        async with http.get(
            f"{running.url}/user", params={"id": "alice"}, headers={**AUTH, "Accept-Language": "zh"}
        ) as r:
            assert r.status == 503 and "无法连接记忆存储" in await r.text()
    finally:
        await running.runner.cleanup()
        dead.close()


async def test_the_models_load_as_the_server_starts_not_on_the_first_recall(store: MemoryStore, tmp_path: Path) -> None:
    # Issue 40: the first "what would it recall" paid for loading the models (22 of its
    # 30 s for a user with 50,000 memories, at load 19; bench.ops.web_render).
    fresh = MemoryStore.open(store.settings, load_mem0=False)  # as `python -m memory.web` opens it
    try:
        assert fresh._mem0 is None and fresh._reader is None
        running = await start_web(fresh, tmp_path)
        try:
            await running.app[WARMED]
            assert fresh._reader is not None or fresh._mem0 is not None  # loaded, and no page was asked for
        finally:
            await running.runner.cleanup()
    finally:
        fresh.close()
