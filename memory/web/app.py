"""The aiohttp application over an opened store: its routes, middleware and threads; the guard
every request passes is in `middleware.py`, the pages' handlers in `pages.py`.

Pages are server-rendered by Jinja2 with autoescape on (stored text is written by callers:
it is shown as text, never as markup) and carry no script. Store calls block, so they
run on a small thread pool of the server's own, never on its event loop. A store that
cannot be reached answers a page that says so (503), any other failure one line (500);
neither shows a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import jinja2
from aiohttp import web

from memory.language import lexical
from memory.ops.threads import run_in, web_pool
from memory.settings import LiveKitCredentials, MemorySettings, WebSettings
from memory.types import describe_error
from memory.web import proxy, security, token_endpoint
from memory.web.context import EXECUTOR, GUARD, OPERATOR, SETTINGS, STYLE, TEMPLATES, TOKEN_OPERATOR, WARMED, public
from memory.web.middleware import PathOnlyAccessLogger, errors_middleware, guard_middleware, security_headers
from memory.web.pages import (
    dead_letters,
    export,
    forget,
    forget_form,
    login,
    login_form,
    logout,
    recall,
    replay,
    root,
    store,
    style,
    user,
)
from memory.web.views import Operator

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent


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
    app.on_response_prepare.append(security_headers)

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
