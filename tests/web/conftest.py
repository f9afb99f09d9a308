"""The operator's web server over the tests' real store, and one headless Chromium.

The server is the one `python -m memory.web` runs (`build_app` + `serve`, port 0 on
127.0.0.1), with a journal of its own. The browser is Debian's `chromium` driven by
Playwright's Python package (Playwright's own browser download cannot work here); one
per test run, a fresh context (cookies) per test module.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from memory.settings import LiveKitCredentials, MemoryMode, MemorySettings, WebSettings
from memory.storage.store import MemoryStore
from memory.web.app import build_app
from memory.web.security import SecretLimiter
from memory.web.server import serve
from memory.web.views import Operator

SECRET = "test-operator-secret-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}
TOKEN_KEY = "test-token-key-of-a-frontend-0123"
TOKEN_AUTH = {"Authorization": f"Bearer {TOKEN_KEY}"}
LIVEKIT = LiveKitCredentials("wss://example.livekit.cloud", "APIkey", "s" * 40)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """The wrong-secret limiter's time: it moves only when the limiter waits, at once, and
    every wait is recorded (`slept`), so a test reads how long a client was made to wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@dataclass
class Web:
    """A running server: its URL, app, settings, the operator behind its pages, and the
    clock its limit on wrong secrets runs on."""

    url: str
    app: web.Application
    settings: MemorySettings
    operator: Operator
    runner: web.AppRunner
    clock: FakeClock


async def start_web(
    store: MemoryStore, journal_dir: Path, *, mode: MemoryMode = MemoryMode.GATED, **web_kw: Any
) -> Web:
    settings = dataclasses.replace(store.settings, mode=mode, data_dir=journal_dir)  # a journal of its own
    operator = Operator(store, settings)
    livekit = web_kw.pop("livekit", LIVEKIT)
    clock = FakeClock()
    app = build_app(operator, settings, WebSettings(secret=SECRET, **web_kw), livekit=livekit,
                    limiter=SecretLimiter(clock=clock, sleep=clock.sleep))  # fmt: skip
    runner, url = await serve(app, "127.0.0.1", 0)
    return Web(url, app, settings, operator, runner, clock)


@pytest.fixture(scope="module")
async def gated_web(store: MemoryStore, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Web]:
    server = await start_web(store, tmp_path_factory.mktemp("web-journal"))
    yield server
    await server.runner.cleanup()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A client that follows no redirect by itself and keeps its own cookies."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        yield session


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    """Debian's Chromium, headless. Missing: skipped on a developer's machine, a failure
    in CI (`.ci/run` installs it and sets TESTS_REQUIRE_BROWSER)."""
    path = chromium_path()
    if path is None:
        if os.environ.get("TESTS_REQUIRE_BROWSER"):
            pytest.fail("no chromium: `apt-get install -y chromium` (.ci/run does)")
        pytest.skip("no chromium on this machine (apt-get install -y chromium)")
    from playwright.async_api import async_playwright

    pw = await async_playwright().start()
    chromium = await pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
    yield chromium
    await chromium.close()
    await pw.stop()


async def logged_in_context(browser: Any, server: Web, **kw: Any) -> Any:
    """A browser context that logged in through the login form."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, **kw)
    page = await context.new_page()
    await page.goto(f"{server.url}/")
    assert page.url.startswith(f"{server.url}/login"), page.url  # no secret: the login form
    await page.fill("input[name=secret]", SECRET)
    await follow(page, "form.login button[type=submit]")
    assert page.url == f"{server.url}/", (page.url, await page.content())
    await page.close()
    return context


async def follow(page: Any, selector: str) -> None:
    """Click what loads another page, and wait until that page has loaded."""
    async with page.expect_navigation():
        await page.click(selector)
