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


# --- docs/web.md's "Sessions", "Stored text is text" and "Bad input" bullets, at their values

from aiohttp import web  # noqa: E402

from memory.web import security  # noqa: E402
from memory.web.security import SESSION_COOKIE, Sessions, set_session_cookie  # noqa: E402


def test_every_page_carries_the_documented_security_headers() -> None:
    assert security.HEADERS == {
        "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": "no-store",
    }


def test_the_documented_bounds_and_names() -> None:
    assert security.MAX_BODY == 65_536  # "Bodies over 64 KiB answer 413"
    assert security.SESSION_TTL_S == 43_200  # "held in the server's memory for 12 hours"
    assert security.SAFE_METHODS == {"GET", "HEAD", "OPTIONS"}  # the only requests without a CSRF token
    assert security.TOKEN_PATH == "/api/token"
    assert (security.SESSION_COOKIE, security.LANG_COOKIE) == ("memory_session", "memory_lang")
    assert security.CSRF_FIELD == "csrf" and security.CSRF_HEADER.lower() == "x-csrf-token"


class MovedClock:
    def __init__(self) -> None:
        self.now = 5000.0

    def monotonic(self) -> float:
        return self.now


def test_a_session_lives_twelve_hours_to_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = MovedClock()
    monkeypatch.setattr(security, "time", clock)
    sessions = Sessions()
    s = sessions.create()
    assert s.expires == 5000.0 + 43_200
    assert s.id != s.csrf and len(s.id) == 43 and len(s.csrf) == 43  # 32 random bytes each, URL-safe base64
    clock.now += 43_199.9
    assert sessions.get(s.id) is s
    clock.now = 5000.0 + 43_200  # at its expiry: gone
    assert sessions.get(s.id) is None
    assert sessions.get(s.id) is None and sessions.get(None) is None and sessions.get("") is None


def test_an_expired_session_is_purged_when_another_logs_in_and_a_logout_revokes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = MovedClock()
    monkeypatch.setattr(security, "time", clock)
    sessions = Sessions(ttl_s=10.0)
    old = sessions.create()
    clock.now += 10.0
    new = sessions.create()
    assert list(sessions._by_id) == [new.id]  # the expired one held nothing any longer
    kept = sessions.create()
    sessions.drop(new.id)
    sessions.drop(None)
    assert sessions.get(new.id) is None and sessions.get(kept.id) is kept and sessions.get(old.id) is None


@pytest.mark.parametrize("secure", [True, False])
def test_the_session_cookie_is_httponly_strict_for_twelve_hours_and_secure_over_https(secure: bool) -> None:
    response = web.Response()
    request = make_mocked_request("POST", "/login", headers={"Host": "memory.local:8800"})
    set_session_cookie(response, request, security.Session("the-id", "the-csrf", 0.0), secure)
    cookie = response.cookies[SESSION_COOKIE]
    assert cookie.key == "memory_session" and cookie.value == "the-id"
    assert cookie["max-age"] == "43200" and cookie["path"] == "/" and cookie["httponly"] is True
    assert cookie["samesite"] == "Strict"
    assert bool(cookie["secure"]) is secure


@pytest.mark.parametrize(("header", "sent"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"), ("Bearer", ""),
    ("Basic abc", None), ("", None), ("Bearerabc", None),
])  # fmt: skip
def test_the_bearer_secret_is_what_follows_bearer(header: str, sent: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    assert Guard.bearer(make_mocked_request("GET", "/api/users", headers=headers)) == sent


def test_the_csrf_token_must_be_the_sessions_own() -> None:
    session = security.Session("id", "the-token", 0.0)
    assert Guard.csrf_ok(session, "the-token") is True
    assert Guard.csrf_ok(session, "the-toke") is False
    assert Guard.csrf_ok(session, None) is False
    assert Guard.csrf_ok(session, "") is False


def test_https_is_the_requests_scheme_or_an_https_public_origin() -> None:
    plain = make_mocked_request("GET", "/", headers={"Host": "memory.local"})
    assert Guard("s" * 32).https(plain) is False
    assert Guard("s" * 32, public_origin="https://memory.example").https(plain) is True
    assert Guard("s" * 32, public_origin="http://memory.example").https(plain) is False
    secure = make_mocked_request("GET", "/", headers={"Host": "memory.local"}, sslcontext=object())
    assert Guard("s" * 32).https(secure) is True


def test_a_session_is_found_by_its_cookie() -> None:
    guard = Guard("s" * 32)
    s = guard.sessions.create()
    assert guard.session(make_mocked_request("GET", "/", headers={"Cookie": f"memory_session={s.id}"})) is s
    assert guard.session(make_mocked_request("GET", "/", headers={"Cookie": f"memory_lang={s.id}"})) is None


@pytest.mark.parametrize(("target", "expected"), [
    ("/", "/"), ("/users/alice?page=2", "/users/alice?page=2"), ("/%2F%2Fx", "/%2F%2Fx"),
    ("/\t/evil.example", "/"), ("/\\evil.example", "/"), ("/a b", "/"), ("users", "/"), ("", "/"),
    ("/users/ü", "/"), ("/a\r\nb", "/"),
    ("///evil.example", "/"), ("////evil.example/x", "/"),  # a browser reads three slashes as "//": another site
])  # fmt: skip
def test_next_is_kept_only_as_a_path_of_this_server(target: str, expected: str) -> None:
    assert local_path(target) == expected


def test_a_request_from_another_origin_names_it_cut_to_80_characters() -> None:
    guard = Guard("s" * 32)
    origin = "https://" + "e" * 100 + ".example"
    assert refused(guard, "/login", {"Origin": origin}) == f"a request from another origin ({origin[:80]}) is refused"


def test_wrong_secrets_are_paced_with_or_without_a_limiter_given() -> None:
    own = SecretLimiter()
    assert Guard("s" * 32, limiter=own).limiter is own
    default = Guard("s" * 32).limiter  # the server's: 5 wrong secrets a minute, then one in turn
    assert isinstance(default, SecretLimiter) and default is not Guard("s" * 32).limiter
    assert (default.attempts, default.window_s) == (5, 60.0)


def test_a_path_of_every_url_character_is_kept() -> None:
    every = "/" + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%"
    assert local_path(every) == every
