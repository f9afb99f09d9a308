"""How a variable's text becomes a value: the readers every settings module shares. Each
takes the mapping it reads from and raises `ConfigError` naming the variable; none reads
the process's environment or touches anything else."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from enum import Enum
from urllib.parse import urlsplit

from memory.errors import InvalidInput


class ConfigError(InvalidInput):
    """A configuration problem; the message names the variable(s) and the fix."""


def choice(env: Mapping[str, str], name: str, enum: type[Enum], default: Enum) -> Enum:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    for member in enum:
        if raw.lower() == str(member.value).lower():
            return member
    allowed = ", ".join(str(m.value) for m in enum)
    raise ConfigError(f"{name}={raw!r} is not valid; allowed values: {allowed} (any case)")


def number(env: Mapping[str, str], name: str, default: float, *, lo: float, hi: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={raw!r} is out of range [{lo:g}, {hi:g}]")
    return value


TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def integer(env: Mapping[str, str], name: str, default: int, *, lo: int, hi: int) -> int:
    """A whole number in [lo, hi]; "2.7" is refused rather than quietly made 2."""
    value = number(env, name, default, lo=lo, hi=hi)
    if value != int(value):
        raise ConfigError(f"{name}={env.get(name, '').strip()!r} is not a whole number")
    return int(value)


def flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a switch; use one of {', '.join(TRUE + FALSE)}")


def origin(name: str, raw: str) -> str:
    """An origin as a browser sends it in `Origin`: scheme and host in lower case, no
    default port, no path ("HTTPS://App.example.com:443/" is https://app.example.com);
    written otherwise it would never match, and no browser would be let in."""

    value = raw.strip().rstrip("/")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname or value.count("/") != 2 \
            or parts.username is not None or parts.query or parts.fragment:  # fmt: skip
        raise ConfigError(
            f"{name}: {raw.strip()!r} is not an origin (scheme, host and port only: http://localhost:3000)"
        )
    scheme, host = parts.scheme.lower(), parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def networks(name: str, raw: str) -> tuple[str, ...]:
    """Addresses or networks ("127.0.0.1, 10.0.0.0/8, ::1"), checked; as strings."""

    out = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        try:
            out.append(str(ipaddress.ip_network(part, strict=False)))
        except ValueError:
            raise ConfigError(f"{name}: {part!r} is not an address or a network (127.0.0.1, 10.0.0.0/8)") from None
    return tuple(out)


def listen(raw: str, variable: str = "MEMORY_WEB_LISTEN") -> tuple[str, int]:
    """MEMORY_WEB_LISTEN as (host, port): "127.0.0.1:8765", "0.0.0.0:80", "[::1]:8765", ":0".
    One variable, not a host and a port: Kubernetes sets MEMORY_WEB_PORT=tcp://... itself
    in every pod of a namespace with a service named memory-web."""
    host, sep, port = raw.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{variable}={raw!r} is not HOST:PORT (127.0.0.1:8765; port 0 = any free port)")
    return host, int(port)


def has_url_form(url: str, schemes: tuple[str, ...]) -> bool:
    """Is `url` one of `schemes` with a host? Without them the clients start and then fail
    on every call with a bare "Connection error" (or, for LiveKit, retry for minutes)."""

    try:
        parts = urlsplit(url)
        return parts.hostname is not None and parts.scheme in schemes
    except ValueError:  # "ws://[::1:7880"
        return False
