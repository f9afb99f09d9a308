"""What every handler of the operator's pages shares: the application's keys, the mark
of a public handler, and store calls run off the event loop.

Its own module so the middleware, the pages and the app's assembly name them without
importing one another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import jinja2
import psycopg
from aiohttp import web

from memory.errors import Unavailable
from memory.ops.threads import run_in
from memory.settings import MemorySettings
from memory.web import security
from memory.web.views import Operator

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
