"""The client's address behind trusted proxies (`trusted_proxies`, `client_address_header`).

A request's client is the TCP peer unless the peer is one of the trusted proxies; then it
is read from the header those proxies write, `X-Forwarded-For` or RFC 7239's `Forwarded`
(its `for=`), as nginx's `real_ip_recursive`, Go's rightmost-trusted strategy and Rails do:
the right-most address that is not itself a trusted proxy. Each proxy appends the address
it received the request from, so what stands left of the first untrusted hop was written by
someone nobody vouches for, the client included, and is never read. An element that names
no address there (`unknown`, an obfuscated `_identifier`, garbage) leaves the client
unknown: never a guess, never the address left of it. The chain is read from the right and
only as far as the client: what a client wrote left of its proxy is never parsed as
addresses (a 64 KiB head of elements that are none held the event loop 0.12 s when every
one was).

Only the one header the proxies are said to write is read: a proxy that sets
X-Forwarded-For passes a client's own `Forwarded` through untouched (nginx, Caddy and
HAProxy's `option forwardfor` all do), so believing whichever header is present would let
any client choose its address.

This is the only place that reads those headers: Uvicorn's own proxy-headers handling is
off (`runtime/server.py`), so the address is rewritten once, before the access log, the
rate limits and the access decision (`aws:SourceIp`) read it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings import this module; the CLI's data-dir commands load no server
    from starlette.types import ASGIApp, Receive, Scope, Send

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

HEADERS = {"x-forwarded-for": b"x-forwarded-for", "forwarded": b"forwarded"}
"""The values of `client_address_header` (case does not matter), and the header each reads."""
SCHEMES = frozenset({"http", "https"})


@dataclass(frozen=True)
class Hop:
    """One element of the chain: the address a proxy received the request from (None: it
    names none, or none that parses), and the scheme of that request (`Forwarded`'s
    `proto=`; None: not said)."""

    address: Address | None
    scheme: str | None = None


@dataclass(frozen=True)
class Proxies:
    networks: tuple[Network, ...] = ()
    header: str = "x-forwarded-for"

    @classmethod
    def of(cls, trusted: Iterable[str], header: str = "x-forwarded-for") -> Proxies:
        """From the settings (checked when they load: addresses or CIDR ranges, and one of
        `HEADERS`)."""
        networks = tuple(ipaddress.ip_network(p, strict=False) for p in trusted)
        return cls(networks, header.lower())

    def trusts(self, address: Address) -> bool:
        return any(address in network for network in self.networks)


def parse_address(text: str) -> Address | None:
    """An address as proxies write one: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
    `[2001:db8::1]`, `[2001:db8::1]:4711`; IPv4-mapped IPv6 as its IPv4. None for anything
    else (`unknown`, `_hidden`, names, garbage)."""
    text = text.strip()
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return _ip(inside)
    if text.count(":") == 1:  # IPv4 with a port (an IPv6 address has two colons or more)
        host, _, port = text.partition(":")
        return _ip(host) if port.isdigit() else None
    return _ip(text)


def _ip(text: str) -> Address | None:
    try:  # without a zone (fe80::1%eth0): the interface it came in by, not the address
        address = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


Node = tuple[str | None, str | None]
"""A hop as written: the text naming its address (None: none named) and its scheme."""


def _x_forwarded_for_from_right(values: Sequence[str]) -> Iterator[Node]:
    """The hops of every X-Forwarded-For header, right-most first (several headers are
    one list, as HTTP joins them; empty elements are none, as in any HTTP list). Lazily:
    what a client wrote left of its proxy is never split, whatever its length."""
    for value in reversed(values):
        end = len(value)
        while end >= 0:
            start = value.rfind(",", 0, end)
            item = value[start + 1 : end]
            if item.strip():
                yield item, None
            end = start if start >= 0 else -1


def _forwarded_from_right(values: Sequence[str]) -> Iterator[Node]:
    """The hops of every RFC 7239 Forwarded header, right-most first: each element's
    `for=` and `proto=`. A header that does not parse is one hop naming nobody (it cannot
    run into the header after it, which another proxy wrote). A header line is parsed
    only once the lines right of it named no client."""
    for value in reversed(values):
        elements = _elements(value)
        if elements is None:
            yield None, None
            continue
        for pairs in reversed([pairs for pairs in elements if pairs]):  # an empty one is none
            proto = pairs.get("proto", "").lower()
            yield pairs.get("for"), proto if proto else None


def _hop(node: Node) -> Hop:
    text, scheme = node
    return Hop(None if text is None else parse_address(text), scheme)


def x_forwarded_for(values: Iterable[str]) -> list[Hop]:
    """The hops of every X-Forwarded-For header, in order."""
    return [_hop(node) for node in _x_forwarded_for_from_right(list(values))][::-1]


def forwarded(values: Iterable[str]) -> list[Hop]:
    """The hops of every RFC 7239 Forwarded header, in order."""
    return [_hop(node) for node in _forwarded_from_right(list(values))][::-1]


TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
"""RFC 7230's tchar. Not a token, but tolerated in a value: ':', '[' and ']', which an
address with a port needs quoted, and which proxies are known to leave unquoted."""
LENIENT = TOKEN | frozenset(":[]")


def _elements(value: str) -> list[dict[str, str]] | None:
    """`for=a;proto=https, for="[::1]:80"` as [{"for": "a", "proto": "https"}, {...}];
    parameter names lower-cased, quoted strings unquoted. None when the header does not
    parse (an unclosed quote, a pair without '=', a repeated parameter)."""
    elements: list[dict[str, str]] = []
    pairs: dict[str, str] = {}
    at, end = 0, len(value)
    while True:
        while at < end and value[at] in " \t":
            at += 1
        start = at
        while at < end and value[at] in TOKEN:
            at += 1
        name = value[start:at].lower()
        if name:
            if at >= end or value[at] != "=" or name in pairs:
                return None
            parsed = _value(value, at + 1)
            if parsed is None:
                return None
            pairs[name], at = parsed
        while at < end and value[at] in " \t":
            at += 1
        if at >= end:
            break
        if value[at] == ",":
            elements.append(pairs)
            pairs = {}
        elif value[at] != ";" or not name:
            return None
        at += 1
    elements.append(pairs)
    return elements


def _value(value: str, at: int) -> tuple[str, int] | None:
    """The token or quoted string at `at`, and where it ends."""
    if at < len(value) and value[at] == '"':
        chars: list[str] = []
        at += 1
        while at < len(value):
            char = value[at]
            if char == "\\" and at + 1 < len(value):
                chars.append(value[at + 1])
                at += 2
            elif char == '"':
                return "".join(chars), at + 1
            else:
                chars.append(char)
                at += 1
        return None
    start = at
    while at < len(value) and value[at] in LENIENT:
        at += 1
    return (value[start:at], at) if at > start else None


def client_of(peer: str, headers: list[tuple[bytes, bytes]], proxies: Proxies) -> Hop | None:
    """Who sent the request that `peer` (the TCP peer's address) delivered, and the scheme
    they used (None: as the connection's); None when that is the peer as it connected (it
    is no trusted proxy). A trusted peer without the header is the client too (a health
    check, a local tool). Otherwise the right-most hop that is not a trusted proxy (the
    left-most when all are); a hop naming no address on the way makes the client unknown
    (Hop(None))."""
    address = _ip(peer)
    if address is None or not proxies.trusts(address):
        return None
    wanted = HEADERS[proxies.header]
    values = [value.decode("latin-1") for name, value in headers if name == wanted]
    if proxies.header == "x-forwarded-for":
        hops, proto = _x_forwarded_for_from_right(values), _x_forwarded_proto(headers)
    else:
        hops, proto = _forwarded_from_right(values), None
    client = Hop(address, proto)
    for node in hops:  # right to left, parsed only as far as the client
        hop = _hop(node)
        client = Hop(hop.address, hop.scheme or proto)
        if hop.address is None or not proxies.trusts(hop.address):
            break
    return client


def _x_forwarded_proto(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The scheme the nearest proxy says the request came in by: the right-most value of
    X-Forwarded-Proto, if http or https."""
    values = [value.decode("latin-1") for name, value in headers if name == b"x-forwarded-proto"]
    if not values:
        return None
    last = values[-1].rsplit(",", 1)[-1].strip().lower()
    return last if last in SCHEMES else None


class ForwardedMiddleware:
    """`forward`, outermost on the /v1 listener."""

    def __init__(self, app: ASGIApp, proxies: Proxies) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            forward(scope, self.proxies)
        await self.app(scope, receive, send)


def forward(scope: Scope, proxies: Proxies) -> None:
    """Set an HTTP scope's `client` (and `scheme`) to the request's client (`client_of`):
    None when a trusted proxy names no address for it. The S3 listener calls it directly
    (`gateway/s3/listener.py`), /v1 through `ForwardedMiddleware`."""
    peer = scope.get("client")
    if not (proxies.networks and peer):
        return
    hop = client_of(peer[0], scope["headers"], proxies)
    if hop is not None:
        if hop.address is None:
            scope["client"] = None
        elif str(hop.address) != peer[0]:
            scope["client"] = (str(hop.address), 0)
        if hop.scheme is not None:
            scope["scheme"] = hop.scheme
