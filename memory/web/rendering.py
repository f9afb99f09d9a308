"""A page rendered from its template in the reader's language, and the few answers
every page gives the same way (an unknown user, a failure, a bad `?id=`).

Autoescape is on for every template and value: stored text is written by callers and is
shown as text, never as markup.
"""

from __future__ import annotations

import functools
from typing import Any

from aiohttp import web
from yarl import URL

from memory.errors import InvalidIdentity
from memory.types import memory_user_id
from memory.web import security
from memory.web.context import AUTHED, GUARD, SESSION, SETTINGS, TEMPLATES
from memory.web.i18n import category_name, pick_lang, translator


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


def page_number(request: web.Request, name: str) -> int:
    try:
        return max(1, int(request.query.get(name, "1")))
    except ValueError:
        return 1


def user_param(request: web.Request, value: str | None) -> str:
    """The stored user id a page is about (`?id=`), checked as the store checks it."""
    if not value:
        raise web.HTTPBadRequest(text="id: the stored user id is required (see the users page)")
    try:
        return memory_user_id(value, stored=True)
    except InvalidIdentity as exc:
        raise web.HTTPBadRequest(text=f"id: {exc}") from None


def unknown_user(request: web.Request, user_id: str) -> web.Response:
    return render(request, "message.html", status=404, title=user_id, message_key="unknown_user", user=user_id)


# ------------------------------------------------------------------------------ errors
def failure(request: web.Request, status: int, key: str) -> web.Response:
    """One line saying what failed: a page for a browser, JSON for the API."""
    headers = {"Retry-After": "30"} if status == 503 else {}
    if request.path.startswith("/api/") or request.method not in ("GET", "HEAD"):
        text = translator("en")(key)
        return web.json_response({"error": text}, status=status, headers=headers)
    response = render(request, "message.html", status=status, title=str(status), message_key=key, user="")
    response.headers.update(headers)
    return response
