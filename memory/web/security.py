"""Who may use the operator's pages, and what a browser may do with them.

- **The secret.** Every page and action needs `MEMORY_WEB_SECRET`: a browser logs in once
  through a form and gets a session cookie; a script sends `Authorization: Bearer <secret>`.
  `POST /api/token` takes a key of its own (`MEMORY_WEB_TOKEN_KEY`, held by a frontend's
  token server), which opens nothing else; the operator's secret mints tokens only when
  `MEMORY_WEB_TOKEN_OPERATOR` says so. Compared in constant time.
- **Wrong secrets** (login form or header) are limited per client address: a few at once,
  then one every few seconds, checked in turn. The right secret is never refused: it
  waits its turn at most, and an address that guesses does not slow another (behind a
  proxy the client's address comes from its X-Forwarded-For, `proxy.py`).
- **Sessions** are an unguessable id in a cookie that scripts cannot read (HttpOnly),
  that no other site's request carries (SameSite=Strict), over HTTPS only when served
  over HTTPS (Secure: the request's scheme, as a trusted proxy forwards it, or the public
  origin's). Held in this process: logging out revokes at once, a restart logs everyone
  out. Each has its own CSRF token.
- **Cross-site requests.** A state-changing request (any method but GET/HEAD/OPTIONS) is
  refused when the browser says it came from another origin than the page's own (the
  address it was reached at, or `MEMORY_WEB_PUBLIC_ORIGIN`) (`Origin`, or
  `Sec-Fetch-Site: cross-site`/`same-site`). SameSite alone is not enough on localhost:
  a page of another local server (another port) is the *same site*, and its forms carry
  the cookie. A form posted with the cookie must also carry the session's CSRF token.
  Only `POST /api/token` may be called from the origins in `MEMORY_WEB_CORS_ORIGINS`.
- **Headers.** A Content-Security-Policy that allows no script at all (the pages have
  none), styles from this server only, no framing; no caching of pages that hold
  personal data; no referrer to other sites. Stored text is escaped by the templates (Jinja2 with
  autoescape): the policy is the second wall, not the first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from aiohttp import web

# Wrong secrets from one address are paced by `memory.ops.pacing` (the MCP server's keys too).
from memory.ops.pacing import SecretLimiter

SESSION_COOKIE = "memory_session"
LANG_COOKIE = "memory_lang"
SESSION_TTL_S = 12 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY = 64 * 1024  # bytes of a request's body: forms and token requests are small
TOKEN_PATH = "/api/token"

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Not "no-referrer": with it a browser sends `Origin: null` on the pages' own forms,
    # which the cross-site check must refuse. Links to other sites carry no referrer.
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass
class Session:
    id: str
    csrf: str
    expires: float


class Sessions:
    """The logged-in browsers of this process."""

    def __init__(self, ttl_s: float = SESSION_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._by_id: dict[str, Session] = {}

    def create(self) -> Session:
        now = time.monotonic()
        for sid in [s.id for s in self._by_id.values() if s.expires <= now]:
            del self._by_id[sid]
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now + self.ttl_s)
        self._by_id[session.id] = session
        return session

    def get(self, sid: str | None) -> Session | None:
        session = self._by_id.get(sid or "")
        if session is None:
            return None
        if session.expires <= time.monotonic():
            del self._by_id[session.id]
            return None
        return session

    def drop(self, sid: str | None) -> None:
        self._by_id.pop(sid or "", None)


Credential = Literal["operator", "token"]


class Guard:
    """The checks every request passes (`app.guard_middleware` applies them)."""

    def __init__(
        self,
        secret: str,
        cors_origins: tuple[str, ...] = (),
        *,
        token_key: str | None = None,
        public_origin: str | None = None,
        limiter: SecretLimiter | None = None,
    ) -> None:
        self._digest = hashlib.sha256(secret.encode()).digest()
        self._token_digest = hashlib.sha256(token_key.encode()).digest() if token_key else None
        self.cors_origins = frozenset(cors_origins)
        self.public_origin = public_origin
        self.sessions = Sessions()
        self.limiter = limiter or SecretLimiter()

    def is_secret(self, candidate: str) -> bool:
        """The operator's secret? Constant time (digests of equal length, whatever the candidate's)."""
        return hmac.compare_digest(hashlib.sha256(candidate.encode()).digest(), self._digest)

    def credential(self, candidate: str) -> Credential | None:
        """Which secret `candidate` is, if any: both compared, each in constant time."""
        digest = hashlib.sha256(candidate.encode()).digest()
        operator = hmac.compare_digest(digest, self._digest)
        token = self._token_digest is not None and hmac.compare_digest(digest, self._token_digest)
        return "operator" if operator else "token" if token else None

    @staticmethod
    def bearer(request: web.Request) -> str | None:
        """What a request sends as `Authorization: Bearer`, or None when it sends no such header."""
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None

    def session(self, request: web.Request) -> Session | None:
        return self.sessions.get(request.cookies.get(SESSION_COOKIE))

    def https(self, request: web.Request) -> bool:
        """Is the page served over HTTPS as the browser sees it: the request's scheme (a
        trusted proxy's X-Forwarded-Proto, `proxy.py`), or the public origin's."""
        return request.secure or (self.public_origin or "").startswith("https://")

    def cross_site(self, request: web.Request) -> str | None:
        """Why a state-changing request must be refused as coming from another origin, if it must."""
        origin = request.headers.get("Origin")
        own = {f"{request.scheme}://{request.host}"} | ({self.public_origin} if self.public_origin else set())
        allowed = own | (self.cors_origins if request.path == TOKEN_PATH else set())
        if origin is not None:
            return None if origin in allowed else f"a request from another origin ({origin[:80]}) is refused"
        fetch_site = request.headers.get("Sec-Fetch-Site")
        if fetch_site not in (None, "same-origin", "none"):
            return f"a {fetch_site} request is refused"
        return None

    @staticmethod
    def csrf_ok(session: Session, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), session.csrf.encode())


def set_session_cookie(response: web.StreamResponse, request: web.Request, session: Session, secure: bool) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session.id,
        max_age=int(SESSION_TTL_S),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=secure,
    )


# What a path on this server may hold, as it reaches us (the server's own `next` links are
# percent-encoded): the printable ASCII of RFC 3986, nothing a browser strips or reads as
# "/" (tabs, CR, LF, spaces, backslashes) and so nothing that could make "//" out of it.
_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%")


def local_path(target: str | None) -> str:
    """`target` if it is a path on this server, else "/": a login's `next` never sends the
    browser to another site. Checked as it is, with nothing removed or normalised that a
    browser would read otherwise: one "/" first and not two, only URL characters (a tab, CR
    or LF a browser drops, a backslash it reads as "/", refuse the whole value), and parsed
    it has no scheme and no host."""
    if not target or target[0] != "/" or target[1:2] == "/" or not set(target) <= _PATH_CHARS:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        return "/"
    return target
