"""Behind a TLS proxy (memory/web/proxy.py, docs/web.md): X-Forwarded-Proto, -Host and -For
are believed only from the addresses of MEMORY_WEB_TRUSTED_PROXIES; the value the nearest
proxy set (the last) counts; the client is X-Forwarded-For read from the right, past every
trusted proxy; a value no proxy writes is not believed. Requests made in memory, no server."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from memory.web.proxy import client_address, forwarded_middleware

TRUSTED = ("10.0.0.0/8", "fd00::/8")


def request(peer: str, headers: list[tuple[str, str]] | None = None, host: str = "127.0.0.1:8080") -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (peer, 40000) if name == "peername" else default
    return make_mocked_request("GET", "/", headers=CIMultiDict([("Host", host), *(headers or [])]),
                               transport=transport)  # fmt: skip


async def seen(req: web.Request, trusted: tuple[str, ...] = TRUSTED) -> dict[str, Any]:
    got: dict[str, Any] = {}

    async def handler(r: web.Request) -> web.StreamResponse:
        got.update(scheme=r.scheme, host=r.host, remote=r.remote, secure=r.secure, same=r is req)
        return web.Response()

    await forwarded_middleware(trusted)(req, handler)
    return got


FROM_PROXY = [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "memory.example"),
              ("X-Forwarded-For", "203.0.113.7")]  # fmt: skip


async def test_a_trusted_proxys_word_is_taken_for_scheme_host_and_client() -> None:
    got = await seen(request("10.1.2.3", FROM_PROXY))
    assert got == {"scheme": "https", "host": "memory.example", "remote": "203.0.113.7", "secure": True,
                   "same": False}  # fmt: skip


@pytest.mark.parametrize("peer", ["192.0.2.10", "11.0.0.1", "fe80::1"])
async def test_the_same_headers_from_any_other_address_change_nothing(peer: str) -> None:
    got = await seen(request(peer, FROM_PROXY))
    assert got == {"scheme": "http", "host": "127.0.0.1:8080", "remote": peer, "secure": False, "same": True}


async def test_without_trusted_proxies_nobody_is_believed() -> None:
    got = await seen(request("10.1.2.3", FROM_PROXY), trusted=())
    assert got == {"scheme": "http", "host": "127.0.0.1:8080", "remote": "10.1.2.3", "secure": False, "same": True}


async def test_an_ipv6_proxy_in_a_trusted_network_is_believed() -> None:
    got = await seen(request("fd12::7", FROM_PROXY))
    assert (got["scheme"], got["host"], got["remote"]) == ("https", "memory.example", "203.0.113.7")


@pytest.mark.parametrize(("proto", "scheme"), [
    ("https", "https"), ("HTTPS", "https"), ("http", "http"), ("http, https", "https"),  # the nearest proxy's: last
    ("https, http", "http"), ("ftp", "http"), ("", "http"), ("https ,", "https"),
])  # fmt: skip
async def test_the_scheme_is_the_last_forwarded_proto_when_it_is_http_or_https(proto: str, scheme: str) -> None:
    assert (await seen(request("10.1.2.3", [("X-Forwarded-Proto", proto)])))["scheme"] == scheme


async def test_two_forwarded_proto_lines_take_the_last_value() -> None:
    req = request("10.1.2.3", [("X-Forwarded-Proto", "http"), ("X-Forwarded-Proto", "https")])
    assert (await seen(req))["scheme"] == "https"


@pytest.mark.parametrize(("forwarded", "host"), [
    ("memory.example", "memory.example"),
    ("memory.example:8443", "memory.example:8443"),
    ("memory.example.", "memory.example."),
    ("[2001:db8::1]:443", "[2001:db8::1]:443"),
    ("evil.example, memory.example", "memory.example"),
    ("memory.example/path", "127.0.0.1:8080"),  # not a host: kept as it was
    ("memory example", "127.0.0.1:8080"),
    ("memory.example:123456", "127.0.0.1:8080"),  # a port has at most 5 digits
    ("user@memory.example", "127.0.0.1:8080"),
    ("Memory.Example:8443", "Memory.Example:8443"),  # a host's letters in either case
    ("[2001:DB8::A]", "[2001:DB8::A]"),
])  # fmt: skip
async def test_the_host_is_taken_only_when_it_is_a_host(forwarded: str, host: str) -> None:
    assert (await seen(request("10.1.2.3", [("X-Forwarded-Host", forwarded)])))["host"] == host


@pytest.mark.parametrize(("hops", "client"), [
    ("203.0.113.7", "203.0.113.7"),
    ("198.51.100.9, 203.0.113.7", "203.0.113.7"),  # what the client wrote before its proxy's entry is not it
    ("203.0.113.7, 10.0.0.9", "203.0.113.7"),  # past a trusted proxy
    ("203.0.113.7, 10.0.0.9, 10.2.2.2", "203.0.113.7"),
    ("10.0.0.1, 10.0.0.2", "10.0.0.1"),  # every hop trusted: the first
    ("[2001:db8::7]", "2001:db8::7"),
    (" 203.0.113.7 ", "203.0.113.7"),
    ("203.0.113.7, unknown", None),  # a value no proxy writes: believe none of it
    ("X203.0.113.7", None),  # an address with something before or after it is not one
    ("203.0.113.7X", None),
    ("unknown, 203.0.113.7", "203.0.113.7"),  # read from the right: the client is found first
    ("", None),
])  # fmt: skip
def test_the_client_is_x_forwarded_for_read_from_the_right_past_every_trusted_proxy(
    hops: str, client: str | None
) -> None:
    import ipaddress

    networks = tuple(ipaddress.ip_network(n) for n in TRUSTED)
    assert client_address(request("10.1.2.3", [("X-Forwarded-For", hops)]), networks) == client


def test_no_x_forwarded_for_is_no_client() -> None:
    import ipaddress

    assert client_address(request("10.1.2.3"), (ipaddress.ip_network("10.0.0.0/8"),)) is None


async def test_x_forwarded_for_over_two_lines_reads_as_one_list() -> None:
    req = request("10.1.2.3", [("X-Forwarded-For", "198.51.100.9"), ("X-Forwarded-For", "203.0.113.7, 10.0.0.9")])
    assert (await seen(req))["remote"] == "203.0.113.7"


async def test_an_unbelievable_x_forwarded_for_leaves_the_proxys_address() -> None:
    got = await seen(request("10.1.2.3", [("X-Forwarded-For", "203.0.113.7, garbage")]))
    assert got["remote"] == "10.1.2.3" and got["same"] is True


async def test_a_trusted_network_given_with_host_bits_is_the_network() -> None:
    got = await seen(request("10.9.9.9", FROM_PROXY), trusted=("10.1.2.3/8",))
    assert got["remote"] == "203.0.113.7"
