"""Every page and action needs the operator's secret; state-changing requests from another
origin, or without the session's CSRF token, are refused; pages carry a policy that runs no
script. Over HTTP (no browser): each guard alone, the others satisfied."""

from __future__ import annotations

import logging
import re

import aiohttp
import pytest

from memory.storage.store import MemoryStore
from memory.web import security, views
from memory.web.app import PathOnlyAccessLogger
from tests.web.conftest import AUTH, SECRET, Web

PUBLIC = {("GET", "/login"), ("HEAD", "/login"), ("POST", "/login"), ("GET", "/static/style.css"),
          ("HEAD", "/static/style.css"), ("OPTIONS", "/api/token")}  # fmt: skip


def routes(web: Web) -> set[tuple[str, str]]:
    return {(r.method, r.resource.canonical) for r in web.app.router.routes()}  # type: ignore[union-attr]


async def login(http: aiohttp.ClientSession, web: Web) -> str:
    """Log in through the form; the session's CSRF token, as the pages' forms carry it."""
    async with http.post(f"{web.url}/login", data={"secret": SECRET, "next": "/"}, allow_redirects=False) as resp:
        assert resp.status == 303 and resp.headers["Location"] == "/"
        cookie = resp.cookies[security.SESSION_COOKIE]
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
    async with http.get(f"{web.url}/dead-letters") as resp:
        match = re.search(r'name="csrf" value="([^"]+)"', await resp.text())
    assert match
    return match.group(1)


def seed(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "I keep bees on the roof")


async def test_every_page_and_action_answers_401_or_sends_to_the_login_without_the_secret(
    gated_web: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str
) -> None:
    seed(store, user_id)
    guarded = routes(gated_web) - PUBLIC
    assert len(guarded) >= 13 and routes(gated_web) >= PUBLIC  # every route is here, whatever is added later
    for method, path in sorted(guarded):
        url = f"{gated_web.url}{path}?id={user_id}"
        for headers in ({}, {"Authorization": "Bearer not-the-secret-at-all"},
                        {"Cookie": f"{security.SESSION_COOKIE}=forged"}):  # fmt: skip
            async with http.request(method, url, headers=headers, data={"id": user_id, "confirm": user_id},
                                    allow_redirects=False) as resp:  # fmt: skip
                body = await resp.text()
                if method in ("GET", "HEAD") and "Authorization" not in headers and path != "/api/token":
                    assert resp.status == 303, (method, path, headers, resp.status)
                    assert resp.headers["Location"].startswith("/login?next="), resp.headers["Location"]
                else:
                    assert resp.status == 401, (method, path, headers, resp.status)
                assert "bees" not in body
    assert [r.text for r in store.list_user(user_id)] == ["I keep bees on the roof"]  # no action went through


async def test_the_login_form_opens_the_pages_and_logging_out_closes_them(
    gated_web: Web, http: aiohttp.ClientSession
) -> None:
    async with http.post(f"{gated_web.url}/login", data={"secret": "wrong-secret-123456"}, allow_redirects=False) as r:
        assert r.status == 401 and security.SESSION_COOKIE not in r.cookies
    csrf = await login(http, gated_web)
    async with http.get(f"{gated_web.url}/store", allow_redirects=False) as resp:
        assert resp.status == 200
    async with http.post(f"{gated_web.url}/logout", data={"csrf": csrf}, allow_redirects=False) as resp:
        assert resp.status == 303
    async with http.get(f"{gated_web.url}/store", allow_redirects=False) as resp:
        assert resp.status == 303  # the session is revoked, not only the cookie dropped


async def test_a_post_with_the_session_but_without_its_csrf_token_is_refused(
    gated_web: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str
) -> None:
    seed(store, user_id)
    csrf = await login(http, gated_web)
    for token in (None, "not-the-token"):
        data = {"id": user_id, "confirm": user_id} | ({"csrf": token} if token else {})
        async with http.post(f"{gated_web.url}/forget", data=data, allow_redirects=False) as resp:
            assert resp.status == 403 and "CSRF" in await resp.text()
    assert store.list_user(user_id)
    async with http.post(f"{gated_web.url}/forget", data={"id": user_id, "confirm": user_id, "csrf": csrf}) as resp:
        assert resp.status == 200  # the same form with its token goes through
    assert not store.list_user(user_id)


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.1:1"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "cross-site"},
    ],  # fmt: skip
    ids=["other-port", "opaque", "same-site", "cross-site"],
)
async def test_a_cross_origin_post_is_refused_even_with_the_session_and_its_token(
    gated_web: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str, headers: dict[str, str]
) -> None:
    seed(store, user_id)
    csrf = await login(http, gated_web)
    async with http.post(f"{gated_web.url}/forget", data={"id": user_id, "confirm": user_id, "csrf": csrf},
                         headers=headers, allow_redirects=False) as resp:  # fmt: skip
        assert resp.status == 403 and "refused" in await resp.text()
    async with http.post(f"{gated_web.url}/login", data={"secret": SECRET}, headers=headers,
                         allow_redirects=False) as resp:  # fmt: skip
        assert resp.status == 403  # no login from another origin either
    assert store.list_user(user_id)


async def test_pages_allow_no_script_no_framing_and_no_caching(gated_web: Web, http: aiohttp.ClientSession) -> None:
    for path in ("/", "/login", "/store", "/static/style.css"):
        async with http.get(f"{gated_web.url}{path}", headers=AUTH) as resp:
            assert resp.status == 200, path
            csp = resp.headers["Content-Security-Policy"]
            policy = dict(part.strip().split(" ", 1) for part in csp.split(";"))
            assert policy["default-src"] == "'none'" and "script-src" not in policy  # so: no script at all
            assert policy["style-src"] == "'self'" and policy["frame-ancestors"] == "'none'"
            assert "unsafe" not in csp
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            assert resp.headers["Cache-Control"] == "no-store"


# (next, where the login sends the browser): a browser drops tabs, CR and LF from a URL and
# reads "\\" as "/", so "/\t/evil.example" is "//evil.example" to it: another site.
NEXT = [
    ("/user?id=alice", "/user?id=alice"),
    ("/recall?id=%E5%BC%A0%E4%B8%89&q=my+sister", "/recall?id=%E5%BC%A0%E4%B8%89&q=my+sister"),
    ("/%2F%2Fevil.example", "/%2F%2Fevil.example"),  # encoded: a path of this server (a browser decodes nothing)
    ("/%09/evil.example", "/%09/evil.example"),  # the same: a tab written as %09 stays in the path
    ("/\t/evil.example/phish", "/"),
    ("/\r/evil.example", "/"),
    ("/\n/evil.example", "/"),
    ("/\r\n/evil.example", "/"),
    ("\t//evil.example", "/"),
    (" //evil.example", "/"),
    ("/ /evil.example", "/"),
    ("//evil.example/x", "/"),
    ("///evil.example", "/"),
    ("/\\evil.example", "/"),
    ("/\\/evil.example", "/"),
    ("\\\\evil.example", "/"),
    ("/x\\y", "/"),
    ("%2F%2Fevil.example", "/"),
    ("https://evil.example", "/"),
    ("HTTPS://evil.example/", "/"),
    ("javascript:alert(1)", "/"),
    ("data:text/html,<b>x</b>", "/"),
    ("/\u200b/evil.example", "/"),  # zero-width space
    ("/\u3000/evil.example", "/"),  # ideographic space
    ("/evil\x00", "/"),
    ("", "/"),
    (None, "/"),
]


@pytest.mark.parametrize(("target", "expected"), NEXT)
def test_a_login_goes_back_only_to_a_page_of_this_server(target: str | None, expected: str) -> None:
    assert security.local_path(target) == expected


async def test_a_login_with_a_tab_in_next_lands_on_this_server(gated_web: Web, http: aiohttp.ClientSession) -> None:
    # Issue 40: `next=/\t/evil.example/phish` answered `Location: //evil.example/phish`.
    async with http.post(f"{gated_web.url}/login", data={"secret": SECRET, "next": "/\t/evil.example/phish"},
                         allow_redirects=False) as resp:  # fmt: skip
        assert resp.status == 303 and resp.headers["Location"] == "/"
    async with http.get(f"{gated_web.url}/login?next=/%09/evil.example/phish") as resp:  # the link, decoded
        assert 'name="next" value="/"' in await resp.text()


def test_the_access_log_leaves_out_queries(caplog: pytest.LogCaptureFixture) -> None:
    from aiohttp.test_utils import make_mocked_request
    from aiohttp.web import Response

    logger = logging.getLogger("test.access")
    with caplog.at_level(logging.INFO, logger="test.access"):
        PathOnlyAccessLogger(logger, "").log(make_mocked_request("GET", "/recall?id=alice&q=my+sister"), Response(),
                                             0.01)  # fmt: skip
    assert "/recall" in caplog.text and "alice" not in caplog.text and "sister" not in caplog.text


async def test_a_long_list_is_paged_and_every_page_is_reachable(
    gated_web: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "TURNS_PER_PAGE", 2)
    for text in ("first turn", "second turn", "third turn"):
        store.add_raw(user_id, text, metadata={"session_id": "call-p"})
    async with http.get(f"{gated_web.url}/user", params={"id": user_id}, headers=AUTH) as resp:
        html = await resp.text()
    assert "third turn" in html and "second turn" in html and "first turn" not in html  # newest first
    assert "Page 1 of 2" in html
    link = re.search(r'href="([^"]*tp=2[^"]*)" rel="next"', html)
    assert link, html
    async with http.get(gated_web.url + link.group(1).replace("&amp;", "&"), headers=AUTH) as resp:
        html = await resp.text()
    assert "first turn" in html and "third turn" not in html and "Page 2 of 2" in html
