"""Can this LiveKit project work at all? Asked once, before the worker starts.

LiveKit's worker retries its connection 16 times over about two and a half minutes, then
prints the same traceback twice: right for a server that is down for a while, useless for
a URL whose host does not exist or for a key the server refuses, which no retry fixes.
Two questions, each bounded in time:

- does the host of `LIVEKIT_URL` resolve? A name the resolver says does not exist
  (NXDOMAIN) stops the worker; no answer, or a temporary failure, does not;
- does the server take the credentials? The worker's own handshake (`/agent` with an
  agent token from `LIVEKIT_API_KEY` and `LIVEKIT_API_SECRET`), closed before it
  registers: HTTP 401 or 403 stops the worker.
Anything else (refused, timed out, a 5xx from a proxy) is an outage, and LiveKit's
retries are the right answer. Uses LiveKit's token library, never the agents framework.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from memory.bodies import page_title

DNS_TIMEOUT_S = 6.0  # the system resolver's own timeout is 5 s a try
HANDSHAKE_TIMEOUT_S = 6.0
# What getaddrinfo says for a name that does not exist (glibc: EAI_NONAME; EAI_NODATA: a
# name with no address). EAI_AGAIN (no answer, a resolver down) is an outage.
_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
REJECTED = (401, 403)


def _host_problem(url: str) -> str | None:
    """LIVEKIT_URL's host, if the resolver says it does not exist."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme in ("wss", "https") else 80)
    found: list[BaseException | None] = []

    def resolve() -> None:
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            found.append(None)
        except OSError as exc:
            found.append(exc)

    thread = threading.Thread(target=resolve, name="livekit-dns-check", daemon=True)
    thread.start()
    thread.join(DNS_TIMEOUT_S)
    if not found:  # no answer in time: an outage, LiveKit retries
        return None
    exc = found[0]
    if isinstance(exc, socket.gaierror) and exc.errno in _NO_SUCH_HOST:
        return f"LIVEKIT_URL={url!r}: the host {host!r} does not exist ({exc.strerror}): check your project's URL"
    return None


async def _handshake_problem(url: str, api_key: str, api_secret: str) -> str | None:
    """The worker's handshake with these credentials; a problem only when the server refuses them."""
    import aiohttp  # imported by `livekit_problems` before the clock starts
    from livekit import api

    token = api.AccessToken(api_key, api_secret).with_grants(api.VideoGrants(agent=True)).to_jwt()
    parts = urlsplit(url)
    scheme = parts.scheme.replace("http", "ws") if parts.scheme.startswith("http") else parts.scheme
    agent_url = f"{scheme}://{parts.netloc}{parts.path}".rstrip("/") + "/agent"
    timeout = aiohttp.ClientTimeout(total=HANDSHAKE_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.ws_connect(agent_url, headers={"Authorization": f"Bearer {token}"}) as ws:
                await ws.close()
    except aiohttp.WSServerHandshakeError as exc:
        if exc.status in REJECTED:
            reason = f"HTTP {exc.status}" + (f" {exc.message}" if exc.message else "")
            return (
                f"LIVEKIT_API_KEY / LIVEKIT_API_SECRET: the LiveKit server at {url} does not accept them ({reason}): "
                "copy both from your project's settings (Cloud: Settings -> API keys)"
            )
    except (aiohttp.ClientError, OSError, TimeoutError):
        pass  # refused, unreachable, timed out: an outage, LiveKit retries
    return None


def livekit_problems(url: str, api_key: str, api_secret: str) -> list[str]:
    """Lines naming the variable when this LiveKit project cannot work; [] otherwise
    (also when it merely cannot be reached now). At most about 12 s."""
    host = _host_problem(url)
    if host is not None:
        return [host]
    # The bound is for the server's answer: the modules the handshake needs are loaded before
    # the clock starts (on a busy machine their import alone outlasted it, and a refused key
    # passed the check as an outage).
    import aiohttp  # noqa: F401
    from livekit import api  # noqa: F401

    try:
        rejected = asyncio.run(asyncio.wait_for(_handshake_problem(url, api_key, api_secret), HANDSHAKE_TIMEOUT_S + 1))
    except TimeoutError:
        return []
    return [rejected] if rejected else []


# ---------------------------------------------------------------- the LLM server

LLM_TIMEOUT_S = 6.0
OPENAI_API = "https://api.openai.com/v1"


def _served(wanted: str, models: list[str]) -> bool:
    """Is `wanted` among a server's models? Ollama lists "llama3.2:latest" for "llama3.2"."""
    return wanted in models or f"{wanted}:latest" in models or any(m.split("/")[-1] == wanted for m in models)


class _Answer:
    """What an HTTP server said to one request: status, content type, and at most 64 KB of body."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status, self.content_type, self.body = status, content_type, body

    def json(self) -> Any:
        """The body as JSON when it is the API's JSON (an object), else None."""
        import json

        try:
            doc = json.loads(self.body or b"null")
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def described(self) -> str:
        """Status, content type and the first words of an HTML title: never the body itself."""
        kind = self.content_type.split(";")[0].strip() or "no content type"
        said = f"HTTP {self.status}, {kind}"
        title = page_title(self.body.decode("utf-8", "replace"))
        return said + (f", a page titled {title!r}" if title else "")


_BODY_CAP = 65_536
_ENDPOINTS = ("/chat/completions", "/completions", "/models", "/embeddings", "/responses")


def _ask(url: str, api_key: str, payload: dict[str, Any] | None = None) -> _Answer:
    """One request (GET, or POST with a JSON payload) whose whole answer comes within
    `LLM_TIMEOUT_S` (a socket timeout bounds each read, not a server that sends a byte at a
    time): else TimeoutError. An HTTP error is an answer too."""
    done: list[_Answer | BaseException] = []

    def ask() -> None:
        try:
            done.append(_ask_once(url, api_key, payload))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done.append(exc)

    thread = threading.Thread(target=ask, name="llm-check", daemon=True)
    thread.start()
    thread.join(LLM_TIMEOUT_S)
    if not done:
        raise TimeoutError(f"no whole answer in {LLM_TIMEOUT_S:g} s")
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


def _ask_once(url: str, api_key: str, payload: dict[str, Any] | None) -> _Answer:
    import json
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    data = None
    if payload is not None:
        data, headers = json.dumps(payload).encode(), {**headers, "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=LLM_TIMEOUT_S) as response:  # noqa: S310 - the configured URL
            return _Answer(response.status, response.headers.get("Content-Type", ""), response.read(_BODY_CAP))
    except urllib.error.HTTPError as exc:
        return _Answer(exc.code, exc.headers.get("Content-Type", "") if exc.headers else "", exc.read(_BODY_CAP))


def _not_the_api(where: str, path: str, answer: _Answer) -> str:
    """The line for a server that answers, but not as an OpenAI-compatible API."""
    return (
        f"{where}: what answers at {path} is not an OpenAI-compatible API ({answer.described()}): "
        "correct OPENAI_BASE_URL (the port, and the path: most servers end in /v1)"
    )


def llm_problems(base_url: str, api_key: str, models: list[tuple[str, str]]) -> list[str]:
    """Does the OpenAI-compatible server answer as the API, take the key and know each model?
    `models`: (variable, model name). One small request, bounded: the model list, which must
    parse as the API's JSON; a server without one (404, 405) is asked for a one-token
    completion instead. A line naming the variable for a server that does not answer, answers
    as something else (an HTML page: a wrong port, a missing /v1; the line says its status,
    content type and title, never its body), refuses the key or lacks a model; else []."""
    import urllib.error

    where = f"OPENAI_BASE_URL={base_url!r}" if base_url else f"{OPENAI_API} (OPENAI_BASE_URL is not set)"
    root = (base_url or OPENAI_API).rstrip("/")
    endpoint = next((e for e in _ENDPOINTS if root.endswith(e)), None)
    if endpoint is not None:  # copied from a request example: the client adds the endpoint itself
        return [f"{where}: this names an endpoint, not the API's base: give the URL without {endpoint} "
                f"(e.g. {root[: -len(endpoint)]})"]  # fmt: skip
    try:
        listing = _ask(root + "/models", api_key)
        if listing.status in REJECTED:
            return [f"OPENAI_API_KEY: the LLM server at {where} does not accept it (HTTP {listing.status})"]
        if listing.status in (404, 405):  # no model list here: one token instead
            return _completion_problems(root, api_key, where, models)
        if listing.status >= 500:  # the URL may be right: the server (or a proxy's upstream) failed
            return [f"{where}: the server answers with an error ({listing.described()}): is the model server "
                    "behind it running? (Ollama: `ollama serve`)"]  # fmt: skip
        body = listing.json()
        if listing.status != 200 or body is None or not isinstance(body.get("data"), list):
            return [_not_the_api(where, "/models", listing)]
    except (urllib.error.URLError, OSError, TimeoutError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        hint = "start it (Ollama: `ollama serve`) or correct the URL" if base_url else "check this machine's network"
        return [f"{where}: no LLM server answers ({reason}): {hint}"]
    served = [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]
    if not served:
        return []
    problems = []
    for variable, model in models:
        if not _served(model, served):
            shown = ", ".join(sorted(served)[:8]) + (", ..." if len(served) > 8 else "")
            problems.append(
                f"{variable}={model!r}: the LLM server at {where} does not have this model (it has: {shown})"
            )
    return problems


def _completion_problems(root: str, api_key: str, where: str, models: list[tuple[str, str]]) -> list[str]:
    """A server without a model list: one one-token completion of the first model, which must
    answer as the API does (JSON with `choices`)."""
    variable, model = models[0]
    payload = {"model": model, "messages": [{"role": "user", "content": "ok"}], "max_tokens": 1}
    answer = _ask(root + "/chat/completions", api_key, payload)
    body = answer.json()
    if answer.status in REJECTED:
        return [f"OPENAI_API_KEY: the LLM server at {where} does not accept it (HTTP {answer.status})"]
    if answer.status == 200 and body is not None and isinstance(body.get("choices"), list):
        return []
    if body is not None and isinstance(body.get("error"), dict | str):  # the API's own error: about the model
        return [f"{variable}={model!r}: the LLM server at {where} refuses a one-token request (HTTP {answer.status})"]
    return [_not_the_api(where, "/models and /chat/completions", answer)]
