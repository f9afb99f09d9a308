"""Who may use the operator's pages, and what a browser may do with them.

- **The secret.** Every page and action needs `MEMORY_WEB_SECRET`: a browser logs in once
  through a form and gets a session cookie; a script sends `Authorization: Bearer <secret>`
  (so does a frontend's server calling `POST /api/token`). Compared in constant time;
  wrong guesses from one address are slowed to a handful a minute.
- **Sessions** are an unguessable id in a cookie that scripts cannot read (HttpOnly),
  that no other site's request carries (SameSite=Strict), over HTTPS only when served
  over HTTPS (Secure). Held in this process: logging out revokes at once, a restart logs
  everyone out. Each has its own CSRF token.
- **Cross-site requests.** A state-changing request (any method but GET/HEAD/OPTIONS) is
  refused when the browser says it came from another origin (`Origin`, or
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
from collections import deque
from dataclasses import dataclass

from aiohttp import web

SESSION_COOKIE = "memory_session"
LANG_COOKIE = "memory_lang"
SESSION_TTL_S = 12 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
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

# Wrong secrets from one address: this many within the window, then 429 until it passes.
LOGIN_ATTEMPTS = 5
LOGIN_WINDOW_S = 60.0


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


class LoginLimiter:
    """Wrong secrets per address in a sliding window."""

    def __init__(self, attempts: int = LOGIN_ATTEMPTS, window_s: float = LOGIN_WINDOW_S) -> None:
        self.attempts = attempts
        self.window_s = window_s
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, address: str) -> deque[float]:
        now = time.monotonic()
        failures = self._failures.setdefault(address, deque())
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures

    def blocked(self, address: str) -> bool:
        return len(self._recent(address)) >= self.attempts

    def failed(self, address: str) -> None:
        self._recent(address).append(time.monotonic())


class Guard:
    """The checks every request passes (`app.guard_middleware` applies them)."""

    def __init__(self, secret: str, cors_origins: tuple[str, ...] = ()) -> None:
        self._digest = hashlib.sha256(secret.encode()).digest()
        self.cors_origins = frozenset(cors_origins)
        self.sessions = Sessions()
        self.logins = LoginLimiter()

    def is_secret(self, candidate: str) -> bool:
        """Constant time (digests of equal length, whatever the candidate's)."""
        return hmac.compare_digest(hashlib.sha256(candidate.encode()).digest(), self._digest)

    def bearer(self, request: web.Request) -> bool | None:
        """True/False for a request that sends `Authorization: Bearer`, None for one that does not."""
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.is_secret(value.strip())

    def session(self, request: web.Request) -> Session | None:
        return self.sessions.get(request.cookies.get(SESSION_COOKIE))

    def cross_site(self, request: web.Request) -> str | None:
        """Why a state-changing request must be refused as coming from another origin, if it must."""
        origin = request.headers.get("Origin")
        own = f"{request.scheme}://{request.host}"
        allowed = {own} | (self.cors_origins if request.path == TOKEN_PATH else set())
        if origin is not None:
            return None if origin in allowed else f"a request from another origin ({origin[:80]}) is refused"
        fetch_site = request.headers.get("Sec-Fetch-Site")
        if fetch_site not in (None, "same-origin", "none"):
            return f"a {fetch_site} request is refused"
        return None

    @staticmethod
    def csrf_ok(session: Session, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), session.csrf.encode())


def set_session_cookie(response: web.StreamResponse, request: web.Request, session: Session) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session.id,
        max_age=int(SESSION_TTL_S),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )


def local_path(target: str | None) -> str:
    """`target` if it is a path on this server, else "/": a login's `next` never sends the
    browser to another site ("//evil.example", "https://...", "/\\evil")."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")) or "\\" in target:
        return "/"
    return target
