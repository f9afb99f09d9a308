"""The aiohttp application: routes, the guard every request passes, the pages' handlers.

Pages are server-rendered by Jinja2 with autoescape on (stored text is written by callers:
it is shown as text, never as markup) and carry no script. Store calls block, so they
run on a small thread pool of the server's own, never on its event loop. A store that
cannot be reached answers a page that says so (503), any other failure one line (500);
neither shows a traceback.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import jinja2
import psycopg
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from yarl import URL

from memory.errors import InvalidIdentity, Unavailable
from memory.language import lexical
from memory.ops.threads import run_in, web_pool
from memory.settings import LiveKitCredentials, MemorySettings, WebSettings
from memory.types import describe_error, memory_user_id
from memory.userdata import UnknownUser
from memory.web import chart, proxy, security, token_endpoint
from memory.web.i18n import category_name, pick_lang, translator
from memory.web.views import Operator

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")

OPERATOR = web.AppKey("operator", Operator)
SETTINGS = web.AppKey("settings", MemorySettings)
GUARD = web.AppKey("guard", security.Guard)
EXECUTOR = web.AppKey("executor", ThreadPoolExecutor)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
STYLE = web.AppKey("style", bytes)
TOKEN_OPERATOR = web.AppKey("token_operator", bool)  # the operator's secret may mint tokens
WARMED = web.AppKey("warmed", asyncio.Future)  # done when `load_models` has run
SESSION = web.RequestKey("session", object)  # security.Session, or None for a script's header
AUTHED = web.RequestKey("authed", bool)
# The store cannot be reached: a database down or gone, connections refused or timed out
# (as the store's boundary puts it, `Unavailable`, or as psycopg raises it where none does).
STORE_DOWN = (psycopg.OperationalError, psycopg.InterfaceError, Unavailable)


def public(handler: Handler) -> Handler:
    """A handler anyone may reach: the login form, the style sheet, a CORS preflight."""
    handler.public = True  # type: ignore[attr-defined]
    return handler


async def blocking(request: web.Request, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    return await run_in(request.app[EXECUTOR], fn, *args, **kwargs)


# --------------------------------------------------------------------------- rendering
def _lang(request: web.Request) -> str:
    return pick_lang(request.query.get("lang"), request.cookies.get(security.LANG_COOKIE),
                     request.headers.get("Accept-Language"))  # fmt: skip


def render(request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
    lang = _lang(request)
    session = request.get(SESSION)

    def url(path: str, **params: object) -> str:
        """A link on this server with these query parameters (None or "" left out)."""
        return str(URL(path).with_query({k: str(v) for k, v in params.items() if v not in (None, "")}))

    def with_params(**params: object) -> str:
        """This page with these parameters changed (a page that answered a form: the users page)."""
        if request.method not in ("GET", "HEAD"):
            return url("/", **params)
        query = dict(request.query)
        query.update({k: str(v) for k, v in params.items()})
        return str(request.rel_url.with_query(query))

    html = (
        request.app[TEMPLATES]
        .get_template(template)
        .render(
            t=translator(lang),
            category_name=functools.partial(category_name, lang),
            lang=lang,
            mode=request.app[SETTINGS].mode.value,
            csrf=session.csrf if session is not None else None,
            authed=request.get(AUTHED, False),
            url=url,
            with_params=with_params,
            **context,
        )
    )
    response = web.Response(text=html, content_type="text/html", charset="utf-8", status=status)
    if request.query.get("lang") in ("en", "zh"):
        response.set_cookie(security.LANG_COOKIE, request.query["lang"], max_age=365 * 86400, path="/",
                            httponly=True, samesite="Lax", secure=request.app[GUARD].https(request))  # fmt: skip
    return response


def _page(request: web.Request, name: str) -> int:
    try:
        return max(1, int(request.query.get(name, "1")))
    except ValueError:
        return 1


def _user_param(request: web.Request, value: str | None) -> str:
    """The stored user id a page is about (`?id=`), checked as the store checks it."""
    if not value:
        raise web.HTTPBadRequest(text="id: the stored user id is required (see the users page)")
    try:
        return memory_user_id(value, stored=True)
    except InvalidIdentity as exc:
        raise web.HTTPBadRequest(text=f"id: {exc}") from None


def _unknown(request: web.Request, user_id: str) -> web.Response:
    return render(request, "message.html", status=404, title=user_id, message_key="unknown_user", user=user_id)


# ------------------------------------------------------------------------------ errors
def _failure(request: web.Request, status: int, key: str) -> web.Response:
    """One line saying what failed: a page for a browser, JSON for the API."""
    headers = {"Retry-After": "30"} if status == 503 else {}
    if request.path.startswith("/api/") or request.method not in ("GET", "HEAD"):
        text = translator("en")(key)
        return web.json_response({"error": text}, status=status, headers=headers)
    response = render(request, "message.html", status=status, title=str(status), message_key=key, user="")
    response.headers.update(headers)
    return response


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A store that cannot be reached is named (503); anything else is one line (500),
    logged here with its traceback, never shown."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except STORE_DOWN as exc:
        logger.warning("%s %s: the memory store cannot be reached: %s", request.method, request.path,
                       describe_error(exc))  # fmt: skip
        return _failure(request, 503, "store_down")
    except Exception:
        logger.exception("%s %s failed", request.method, request.path)
        return _failure(request, 500, "server_error")


# ------------------------------------------------------------------------------ guard
def _refused(status: int, error: str, **headers: str) -> web.Response:
    return web.json_response({"error": error}, status=status, headers=headers)


async def _secret_turn(request: web.Request) -> web.Response | None:
    """Wait for this client's turn to have a secret checked (`security.SecretLimiter`);
    the answer when it has too many waiting already."""
    if await request.app[GUARD].limiter.turn(request.remote or "?"):
        return None
    return _refused(429, "too many wrong secrets from this address: wait a minute", **{"Retry-After": "60"})


@web.middleware
async def guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The secret on every request but the public ones (the token key on `POST /api/token`
    only); cross-site refusal and the CSRF token on every state-changing one (`security.py`
    says why each)."""
    guard = request.app[GUARD]
    unsafe = request.method not in security.SAFE_METHODS
    if unsafe and (why := guard.cross_site(request)):
        return web.Response(status=403, text=f"Forbidden: {why}")
    if getattr(handler, "public", False):
        return await handler(request)
    minting = request.path == security.TOKEN_PATH
    mint_as_operator = request.app[TOKEN_OPERATOR]
    sent = guard.bearer(request)
    session = None if sent is not None else guard.session(request)
    if sent is not None:
        if busy := await _secret_turn(request):
            return busy
        which = guard.credential(sent)
        if which is None:
            guard.limiter.failed(request.remote or "?")
        elif which == "token" and not minting:
            return _refused(403, "the token key opens POST /api/token only")
        elif which == "operator" and minting and not mint_as_operator:
            return _refused(403, "the operator's secret does not mint tokens: give the frontend's token server "
                                 "MEMORY_WEB_TOKEN_KEY (or set MEMORY_WEB_TOKEN_OPERATOR=on)")  # fmt: skip
    if (sent is None or which is None) and session is None:
        wants_page = request.method in ("GET", "HEAD") and not request.path.startswith("/api/")
        if wants_page and sent is None:
            raise web.HTTPSeeOther(f"/login?next={quote(request.path_qs, safe='')}")
        needed = "the token endpoint's key" if minting else "the operator's secret"
        return _refused(401, f"{needed} is required", **{"WWW-Authenticate": 'Bearer realm="memory"'})
    if session is not None and minting and not mint_as_operator:
        return _refused(403, "an operator's session does not mint tokens (MEMORY_WEB_TOKEN_OPERATOR is off)")
    if session is not None and unsafe:
        sent = request.headers.get(security.CSRF_HEADER)
        if sent is None and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            sent = (await request.post()).get(security.CSRF_FIELD)
        if not guard.csrf_ok(session, sent if isinstance(sent, str) else None):
            return web.Response(status=403, text="Forbidden: the form's CSRF token is missing or wrong (reload)")
    request[SESSION] = session
    request[AUTHED] = True
    return await handler(request)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in security.HEADERS.items():
        response.headers.setdefault(name, value)
    if request.path == security.TOKEN_PATH:  # its 401s too, or a browser sees no answer at all
        response.headers.update(token_endpoint.cors_headers(request))


class PathOnlyAccessLogger(AbstractAccessLogger):
    """Requests logged without their query string: `?q=` holds what an operator searched
    for and `?id=` a user's identity, and logs outlive a "forget me"."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info("%s %s %s %d %.3fs", request.remote, request.method, request.path, response.status, time)


# ------------------------------------------------------------------------------ login
@public
async def login_form(request: web.Request) -> web.Response:
    return render(request, "login.html", title="login", next=security.local_path(request.query.get("next")), error=None)


@public
async def login(request: web.Request) -> web.StreamResponse:
    guard = request.app[GUARD]
    form = await request.post()
    target = security.local_path(str(form.get("next") or "/"))
    if not await guard.limiter.turn(request.remote or "?"):
        return render(request, "login.html", status=429, title="login", next=target, error="too_many")
    if not guard.is_secret(str(form.get("secret") or "")):
        guard.limiter.failed(request.remote or "?")
        return render(request, "login.html", status=401, title="login", next=target, error="wrong_secret")
    session = guard.sessions.create()
    response = web.HTTPSeeOther(target)
    security.set_session_cookie(response, request, session, secure=guard.https(request))
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    request.app[GUARD].sessions.drop(request.cookies.get(security.SESSION_COOKIE))
    response = web.HTTPSeeOther("/login")
    response.del_cookie(security.SESSION_COOKIE, path="/")
    raise response


@public
async def style(request: web.Request) -> web.Response:
    return web.Response(body=request.app[STYLE], content_type="text/css", charset="utf-8")


# ------------------------------------------------------------------------------ pages
async def users(request: web.Request) -> web.Response:
    doc = await blocking(request, request.app[OPERATOR].users, request.query.get("q", ""), _page(request, "page"))
    return render(request, "users.html", title="users", **doc)


async def user(request: web.Request) -> web.Response:
    user_id = _user_param(request, request.query.get("id"))
    try:
        doc = await blocking(request, request.app[OPERATOR].user, user_id, facts_page=_page(request, "fp"),
                             turns_page=_page(request, "tp"), calls_page=_page(request, "cp"))  # fmt: skip
    except UnknownUser:
        return _unknown(request, user_id)
    return render(request, "user.html", title=user_id, **doc)


async def recall(request: web.Request) -> web.Response:
    user_id = _user_param(request, request.query.get("id"))
    query = request.query.get("q", "").strip()
    doc = None
    if query:
        try:
            doc = await blocking(request, request.app[OPERATOR].recall, user_id, query)
        except UnknownUser:
            return _unknown(request, user_id)
    return render(request, "recall.html", title=user_id, user_id=user_id, query=query, doc=doc)


async def export(request: web.Request) -> web.StreamResponse:
    """`memory.admin export USER` as a download, streamed as it is read: a thread writes
    it a chunk at a time into a short queue that this handler sends on (a user with
    50,000 memories is never held whole, and no connection waits on a slow client)."""
    user_id = _user_param(request, request.query.get("id"))
    operator = request.app[OPERATOR]
    try:
        await blocking(request, operator.require_known, user_id)
    except UnknownUser:
        return _unknown(request, user_id)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", user_id)[:60]
    disposition = f"attachment; filename=\"memory-export-{safe}.json\"; filename*=UTF-8''{quote(user_id[:200])}.json"
    response = web.StreamResponse(headers={"Content-Disposition": disposition})
    response.content_type, response.charset = "application/json", "utf-8"
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[str | None] = asyncio.Queue(maxsize=4)
    stopped = threading.Event()  # the client went away: the writer stops at its next chunk

    def send(chunk: str) -> None:
        if stopped.is_set():
            raise ConnectionResetError("the client went away")
        asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()

    def produce() -> None:
        try:
            operator.write_export(user_id, send)
        finally:
            if not stopped.is_set():
                asyncio.run_coroutine_threadsafe(chunks.put(None), loop).result()

    writer = asyncio.ensure_future(blocking(request, produce))
    try:
        await response.prepare(request)
        while (chunk := await chunks.get()) is not None:
            await response.write(chunk.encode("utf-8"))
        await writer
        await response.write_eof()
    finally:
        stopped.set()
        while not writer.done():  # a writer blocked on the full queue: take a chunk, it sees `stopped`
            taken = asyncio.ensure_future(chunks.get())
            await asyncio.wait({writer, taken}, return_when=asyncio.FIRST_COMPLETED)
            taken.cancel()
    return response


async def forget_form(request: web.Request) -> web.Response:
    user_id = _user_param(request, request.query.get("id"))
    holdings = await blocking(request, request.app[OPERATOR].holdings, user_id)
    return render(request, "forget.html", title=user_id, user_id=user_id, holdings=holdings, mismatch=False)


async def forget(request: web.Request) -> web.Response:
    form = await request.post()
    user_id = _user_param(request, str(form.get("id") or ""))
    operator = request.app[OPERATOR]
    if str(form.get("confirm") or "") != user_id:
        holdings = await blocking(request, operator.holdings, user_id)
        return render(request, "forget.html", status=400, title=user_id, user_id=user_id, holdings=holdings,
                      mismatch=True)  # fmt: skip
    result = await blocking(request, operator.forget, user_id)
    logger.info("forgot a user through the web page")  # not the id: logs outlive a forget
    return render(request, "forgotten.html", title=user_id, **result)


async def dead_letters(request: web.Request) -> web.Response:
    rows = await blocking(request, request.app[OPERATOR].dead_letters)
    replayed = request.query.get("replayed")
    return render(request, "dead_letters.html", title="dead letters", rows=rows,
                  replayed=int(replayed) if replayed and replayed.isdigit() else None)  # fmt: skip


async def replay(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    ids = None if form.get("all") else [str(v) for v in form.getall("turn_id", [])]
    count = await blocking(request, request.app[OPERATOR].replay, ids) if ids is None or ids else 0
    raise web.HTTPSeeOther(f"/dead-letters?replayed={count}")


async def store(request: web.Request) -> web.Response:
    doc = await blocking(request, request.app[OPERATOR].overview)
    days = doc["days"]
    charts = [
        (key, chart.bars([(d.isoformat(), v[field]) for d, v in days]))
        for key, field in (("new_turns", "raw"), ("new_facts", "facts"), ("recalls", "recalls"),
                           ("archived", "messages"))
    ]  # fmt: skip
    return render(request, "store.html", title="store", charts=charts, width=chart.WIDTH, height=chart.HEIGHT,
                  **doc)  # fmt: skip


async def root(request: web.Request) -> web.StreamResponse:
    return await users(request)


# ------------------------------------------------------------------------------- app
def load_models(operator: Operator) -> None:
    """The query embedder (the local model, or Mem0's when it is loaded) and the segmenter,
    loaded on a thread as the server starts, not by the first "what would it recall",
    which took 14 s when it paid for them (issue 40). The other pages need neither and
    answer meanwhile."""
    try:
        operator.store.embedder.embed("warm up", "search")
        lexical.warm_up()
    except Exception as exc:  # noqa: BLE001 - the page that needs them loads them again and says what failed
        logger.warning("loading the models at start failed: %s", describe_error(exc))


def build_app(
    operator: Operator,
    settings: MemorySettings,
    web_settings: WebSettings,
    *,
    livekit: LiveKitCredentials | str,
    threads: int = 4,
    limiter: security.SecretLimiter | None = None,
) -> web.Application:
    """The server over an opened store. `livekit`: the project tokens are minted for, or
    why there is none (the token endpoint then answers 503 saying so). `limiter`: the
    limit on wrong secrets (its own clock in the tests)."""
    app = web.Application(
        middlewares=[proxy.forwarded_middleware(web_settings.trusted_proxies), errors_middleware, guard_middleware],
        client_max_size=security.MAX_BODY,
    )
    app[OPERATOR] = operator
    app[SETTINGS] = settings
    app[GUARD] = security.Guard(web_settings.secret, web_settings.cors_origins, token_key=web_settings.token_key,
                                public_origin=web_settings.public_origin, limiter=limiter)  # fmt: skip
    app[TOKEN_OPERATOR] = web_settings.token_operator
    app[token_endpoint.POLICY] = token_endpoint.TokenPolicy(
        re.compile(web_settings.token_identities) if web_settings.token_identities else None,
        web_settings.token_room_prefix,
    )
    app[EXECUTOR] = web_pool(threads)
    app[TEMPLATES] = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, every value: stored text is text
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    app[STYLE] = (HERE / "static" / "style.css").read_bytes()
    app[token_endpoint.CREDENTIALS] = livekit
    app[token_endpoint.CORS_ORIGINS] = frozenset(web_settings.cors_origins)
    app.on_response_prepare.append(_security_headers)

    async def warm_up(_app: web.Application) -> None:
        _app[WARMED] = asyncio.ensure_future(run_in(_app[EXECUTOR], load_models, _app[OPERATOR]))

    async def stop_threads(_app: web.Application) -> None:
        _app[EXECUTOR].shutdown(wait=False, cancel_futures=True)

    app.on_startup.append(warm_up)
    app.on_cleanup.append(stop_threads)
    r = app.router
    r.add_get("/", root, name="root")
    r.add_get("/login", login_form)
    r.add_post("/login", login)
    r.add_post("/logout", logout)
    r.add_get("/static/style.css", style)
    r.add_get("/user", user)
    r.add_get("/recall", recall)
    r.add_get("/export", export)
    r.add_get("/forget", forget_form)
    r.add_post("/forget", forget)
    r.add_get("/dead-letters", dead_letters)
    r.add_post("/dead-letters/replay", replay)
    r.add_get("/store", store)
    r.add_post(security.TOKEN_PATH, token_endpoint.token)
    r.add_route("OPTIONS", security.TOKEN_PATH, public(token_endpoint.preflight))
    return app


__all__ = ["PathOnlyAccessLogger", "build_app"]
