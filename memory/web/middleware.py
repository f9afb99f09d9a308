"""What every request passes: the guard (secret, session, CSRF, cross-site refusal),
the error answer, the security headers, and an access log without query strings.

In one place so no handler can be reached around it; `security.py` says why each check
is there.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from memory.types import describe_error
from memory.web import security, token_endpoint
from memory.web.context import AUTHED, GUARD, SESSION, STORE_DOWN, TOKEN_OPERATOR, Handler
from memory.web.rendering import failure

logger = logging.getLogger(__name__)


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
        return failure(request, 503, "store_down")
    except Exception:
        logger.exception("%s %s failed", request.method, request.path)
        return failure(request, 500, "server_error")


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


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in security.HEADERS.items():
        response.headers.setdefault(name, value)
    if request.path == security.TOKEN_PATH:  # its 401s too, or a browser sees no answer at all
        response.headers.update(token_endpoint.cors_headers(request))


class PathOnlyAccessLogger(AbstractAccessLogger):
    """Requests logged without their query string: `?q=` holds what an operator searched
    for and `?id=` a user's identity, and logs outlive a "forget me"."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info("%s %s %s %d %.3fs", request.remote, request.method, request.path, response.status, time)
