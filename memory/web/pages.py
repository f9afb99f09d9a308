"""The pages' handlers: login, the users, one user, what a query would recall, the
export, forget, the dead letters and the store's overview.

Each reads through the operator (`views.Operator`) on the pages' own threads, never on
the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from urllib.parse import quote

from aiohttp import web

from memory.userdata import UnknownUser
from memory.web import chart, security
from memory.web.context import GUARD, OPERATOR, STYLE, blocking, public
from memory.web.rendering import page_number, render, unknown_user, user_param

logger = logging.getLogger(__name__)


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
    doc = await blocking(request, request.app[OPERATOR].users, request.query.get("q", ""), page_number(request, "page"))
    return render(request, "users.html", title="users", **doc)


async def user(request: web.Request) -> web.Response:
    user_id = user_param(request, request.query.get("id"))
    try:
        doc = await blocking(request, request.app[OPERATOR].user, user_id, facts_page=page_number(request, "fp"),
                             turns_page=page_number(request, "tp"), calls_page=page_number(request, "cp"))  # fmt: skip
    except UnknownUser:
        return unknown_user(request, user_id)
    return render(request, "user.html", title=user_id, **doc)


async def recall(request: web.Request) -> web.Response:
    user_id = user_param(request, request.query.get("id"))
    query = request.query.get("q", "").strip()
    doc = None
    if query:
        try:
            doc = await blocking(request, request.app[OPERATOR].recall, user_id, query)
        except UnknownUser:
            return unknown_user(request, user_id)
    return render(request, "recall.html", title=user_id, user_id=user_id, query=query, doc=doc)


async def export(request: web.Request) -> web.StreamResponse:
    """`memory.admin export USER` as a download, streamed as it is read: a thread writes
    it a chunk at a time into a short queue that this handler sends on (a user with
    50,000 memories is never held whole, and no connection waits on a slow client)."""
    user_id = user_param(request, request.query.get("id"))
    operator = request.app[OPERATOR]
    try:
        await blocking(request, operator.require_known, user_id)
    except UnknownUser:
        return unknown_user(request, user_id)
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
    user_id = user_param(request, request.query.get("id"))
    holdings = await blocking(request, request.app[OPERATOR].holdings, user_id)
    return render(request, "forget.html", title=user_id, user_id=user_id, holdings=holdings, mismatch=False)


async def forget(request: web.Request) -> web.Response:
    form = await request.post()
    user_id = user_param(request, str(form.get("id") or ""))
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
