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
from urllib.parse import urlsplit

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
    import aiohttp
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


def llm_problems(base_url: str, api_key: str, models: list[tuple[str, str]]) -> list[str]:
    """Does the OpenAI-compatible server answer, take the key and know each model? `models`:
    (variable, model name). One request (`GET /models`, bounded): a line naming the variable
    for a server that does not answer, a key it refuses, or a model it does not have; [] when
    it cannot tell (a server without a model list)."""
    import json
    import urllib.error
    import urllib.request

    where = f"OPENAI_BASE_URL={base_url!r}" if base_url else f"{OPENAI_API} (OPENAI_BASE_URL is not set)"
    request = urllib.request.Request(
        (base_url or OPENAI_API).rstrip("/") + "/models",
        headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=LLM_TIMEOUT_S) as response:  # noqa: S310 - the configured URL
            body = json.loads(response.read(2_000_000) or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code in REJECTED:
            return [f"OPENAI_API_KEY: the LLM server at {where} does not accept it (HTTP {exc.code})"]
        if exc.code in (404, 405):  # no model list here: the first reply tells
            return []
        return [f"{where}: the LLM server answers HTTP {exc.code} ({exc.reason})"]
    except (urllib.error.URLError, OSError, TimeoutError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        hint = "start it (Ollama: `ollama serve`) or correct the URL" if base_url else "check this machine's network"
        return [f"{where}: no LLM server answers ({reason}): {hint}"]
    served = [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)] if isinstance(body, dict) else []
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
