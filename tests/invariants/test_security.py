"""The web page's checks (memory/web/security.py) at their documented values: an origin in
MEMORY_WEB_CORS_ORIGINS passes the cross-site check on `POST /api/token` only; the
limiter checks 5 wrong secrets of an address at once and the 6th waits its turn (a fake
clock); 8 tries wait at most and the 9th is refused; a secret is told by its value."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from memory.web.security import Guard, SecretLimiter, local_path

APP = "https://app.example"


def refused(guard: Guard, path: str, headers: dict[str, str]) -> str | None:
    request = make_mocked_request("POST", path, headers={"Host": "memory.local:8800", **headers})
    return guard.cross_site(request)


def test_a_configured_origin_passes_the_cross_site_check_on_the_token_endpoint_only() -> None:
    guard = Guard("s" * 32, (APP,))
    assert refused(guard, "/api/token", {"Origin": APP}) is None
    for path in ("/api/forget/alice", "/login", "/api/token/", "/api/tokens", "/users/alice/forget"):
        assert refused(guard, path, {"Origin": APP}) == f"a request from another origin ({APP}) is refused", path


def test_an_origin_not_configured_is_refused_even_on_the_token_endpoint() -> None:
    guard = Guard("s" * 32, (APP,))
    assert refused(guard, "/api/token", {"Origin": "https://evil.example"}) is not None
    assert refused(Guard("s" * 32), "/api/token", {"Origin": APP}) is not None  # none configured
    assert refused(guard, "/api/token", {"Origin": "null"}) is not None


def test_the_pages_own_origin_and_a_same_origin_fetch_pass_everywhere() -> None:
    guard = Guard("s" * 32, (APP,), public_origin="https://memory.example")
    for path in ("/api/token", "/api/forget/alice"):
        assert refused(guard, path, {"Origin": "http://memory.local:8800"}) is None
        assert refused(guard, path, {"Origin": "https://memory.example"}) is None
        assert refused(guard, path, {}) is None
        assert refused(guard, path, {"Sec-Fetch-Site": "same-origin"}) is None
        assert refused(guard, path, {"Sec-Fetch-Site": "none"}) is None
        assert refused(guard, path, {"Sec-Fetch-Site": "cross-site"}) == "a cross-site request is refused"
        assert refused(guard, path, {"Sec-Fetch-Site": "same-site"}) == "a same-site request is refused"


def test_each_secret_is_told_by_its_value() -> None:
    guard = Guard("operator-secret", token_key="token-key")
    assert guard.credential("operator-secret") == "operator"
    assert guard.credential("token-key") == "token"
    assert guard.credential("operator-secre") is None and guard.credential("") is None
    assert Guard("operator-secret").credential("token-key") is None
    assert guard.is_secret("operator-secret") and not guard.is_secret("token-key")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_five_wrong_secrets_are_checked_at_once_and_then_one_every_twelve_seconds() -> None:
    clock = Clock()
    limiter = SecretLimiter(clock=clock, sleep=clock.sleep)  # the defaults: 5 a 60 s window, 8 waiting
    for _ in range(5):
        assert await limiter.turn("10.0.0.1") is True
        limiter.failed("10.0.0.1")
    assert clock.slept == []
    assert await limiter.turn("10.0.0.1") is True  # the 6th: its turn is now
    assert await limiter.turn("10.0.0.1") is True  # the 7th: 60 / 5 = 12 s later
    assert clock.slept == [12.0]
    assert await limiter.turn("10.0.0.2") is True and clock.slept == [12.0]  # another address: not slowed
    clock.now += 60.0  # the window passed: checked at once again
    assert await limiter.turn("10.0.0.1") is True and clock.slept == [12.0]


async def test_eight_tries_wait_at_most_and_the_ninth_waiting_is_refused() -> None:
    clock = Clock()
    release = asyncio.Event()

    async def sleep(seconds: float) -> None:
        clock.slept.append(seconds)
        await release.wait()

    limiter = SecretLimiter(clock=clock, sleep=sleep)
    for _ in range(5):
        limiter.failed("10.0.0.1")
    assert await limiter.turn("10.0.0.1") is True  # its turn is now: no wait
    waiting = [asyncio.ensure_future(limiter.turn("10.0.0.1")) for _ in range(8)]
    for _ in range(100):  # each reaches its sleep within a few turns of the loop
        if len(clock.slept) == 8:
            break
        await asyncio.sleep(0)
    assert clock.slept == [12.0 * n for n in range(1, 9)]
    assert await limiter.turn("10.0.0.1") is False  # a 9th would wait: refused (429)
    release.set()
    assert await asyncio.gather(*waiting) == [True] * 8


@pytest.mark.parametrize(
    ("target", "expected"),
    [("/users/alice", "/users/alice"), ("//evil.example/x", "/"), ("https://evil.example", "/"), (None, "/")],
)
def test_a_return_address_stays_on_the_page(target: str | None, expected: str) -> None:
    assert local_path(target) == expected
