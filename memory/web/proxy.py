"""Behind a TLS proxy: the scheme, host and client address as the browser sent them.

A proxy that ends TLS speaks plain HTTP to us, from its own address, so without help the
page would see `http://` (and refuse its own forms as coming from `https://`), would never
mark its cookie `Secure`, and would count every client's wrong secrets as one address's.
The proxy says what it saw in `X-Forwarded-Proto`, `X-Forwarded-Host` and
`X-Forwarded-For`; anyone can send those headers, so they are believed only from the
addresses of `MEMORY_WEB_TRUSTED_PROXIES`, and the request is then cloned with them
(aiohttp's way: `request.scheme`, `.host`, `.secure` and `.remote` follow). The proxy
must set the first two (nginx: `proxy_set_header`), not append to what the client sent.

Hand-written (about 40 lines): `aiohttp-remotes` does this, but would be a dependency for
one middleware, and its trusted hops are a list per hop rather than networks.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_HOST = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?")


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None


def _trusted(value: str | None, networks: tuple[Network, ...]) -> bool:
    address = _address(value or "")
    return address is not None and any(address in n for n in networks)


def _last(request: web.Request, name: str) -> str | None:
    """The value the nearest proxy set: the last of the header's comma-separated values."""
    values = [v.strip() for h in request.headers.getall(name, []) for v in h.split(",") if v.strip()]
    return values[-1] if values else None


def client_address(request: web.Request, networks: tuple[Network, ...]) -> str | None:
    """The client as the trusted proxies saw it: X-Forwarded-For read from the right,
    past every trusted proxy; the first address no trusted proxy has is the client's."""
    hops = [v.strip() for h in request.headers.getall("X-Forwarded-For", []) for v in h.split(",")]
    for hop in reversed(hops):
        if _address(hop) is None:
            return None  # a value no proxy writes: believe none of it
        if not _trusted(hop, networks):
            return str(_address(hop))
    return str(_address(hops[0])) if hops else None


def forwarded_middleware(trusted: Iterable[str]) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """A middleware that takes a trusted proxy's word for the scheme, host and client."""
    networks = tuple(ipaddress.ip_network(n, strict=False) for n in trusted)

    @web.middleware
    async def forwarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not networks or not _trusted(request.remote, networks):
            return await handler(request)
        changes: dict[str, str] = {}
        if (proto := (_last(request, "X-Forwarded-Proto") or "").lower()) in ("http", "https"):
            changes["scheme"] = proto
        if (host := _last(request, "X-Forwarded-Host")) and _HOST.fullmatch(host):
            changes["host"] = host
        if client := client_address(request, networks):
            changes["remote"] = client
        return await handler(request.clone(**changes) if changes else request)

    return forwarded


__all__ = ["client_address", "forwarded_middleware"]
