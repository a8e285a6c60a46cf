"""The client's address behind trusted proxies, the pure part (`gateway/http/forwarded.py`):
which hop of X-Forwarded-For or RFC 7239 Forwarded is the client, for each shape a proxy
(or a client pretending) writes. The servers' side is tests/test_anonymous_limits.py."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.http.forwarded import Hop, Proxies, client_of, forwarded, parse_address

LOCAL = Proxies.of(["127.0.0.1"])
TWO_TIERS = Proxies.of(["127.0.0.1", "10.0.0.0/8"])
RFC_7239 = Proxies.of(["127.0.0.1", "10.0.0.0/8"], "Forwarded")


def client(proxies: Proxies, *headers: tuple[str, str], peer: str = "127.0.0.1") -> str | None:
    """The client's address as the server takes it ("peer" when it keeps the peer's)."""
    raw = [(name.lower().encode(), value.encode("latin-1")) for name, value in headers]
    hop = client_of(peer, raw, proxies)
    if hop is None:
        return "peer"
    return None if hop.address is None else str(hop.address)


def xff(value: str) -> tuple[str, str]:
    return ("X-Forwarded-For", value)


def fwd(value: str) -> tuple[str, str]:
    return ("Forwarded", value)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("192.0.2.1", "192.0.2.1"),
        (" 192.0.2.1 ", "192.0.2.1"),
        ("192.0.2.1:4711", "192.0.2.1"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("[2001:db8::1]:4711", "2001:db8::1"),
        ("2001:DB8:0:0:0:0:0:1", "2001:db8::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),  # IPv4-mapped: the IPv4 address
        ("fe80::1%eth0", "fe80::1"),
        ("unknown", None),
        ("_hidden", None),  # RFC 7239's obfuscated identifier
        ("proxy.example", None),
        ("", None),
        ("192.0.2.1:", None),
        ("192.0.2.1:http", None),
        ("[2001:db8::1", None),
        ("[2001:db8::1]4711", None),
        ("[192.0.2.1]:80", "192.0.2.1"),
        ("999.0.2.1", None),
    ],
)
def test_an_address_as_proxies_write_it(text: str, address: str | None) -> None:
    parsed = parse_address(text)
    assert (None if parsed is None else str(parsed)) == address


def test_an_untrusted_peer_is_the_client_whatever_it_says() -> None:
    assert client(LOCAL, xff("10.1.2.3"), peer="127.0.0.2") == "peer"
    assert client(LOCAL, fwd("for=10.1.2.3"), peer="192.0.2.9") == "peer"
    assert client(Proxies(), xff("10.1.2.3")) == "peer"  # nobody trusted: nothing read


def test_a_trusted_peer_without_the_header_is_the_client() -> None:
    assert client(LOCAL) == "127.0.0.1"
    assert client(LOCAL, xff("")) == "127.0.0.1"
    assert client(LOCAL, fwd("for=10.1.2.3")) == "127.0.0.1"  # not the header it writes


def test_the_right_most_address_that_is_not_a_trusted_proxy() -> None:
    assert client(LOCAL, xff("192.0.2.1")) == "192.0.2.1"
    # The client sent its own header; the proxy appended what it saw: the client's own
    # words are left of it, never read.
    assert client(LOCAL, xff("10.9.9.9, 192.0.2.1")) == "192.0.2.1"
    assert client(TWO_TIERS, xff("10.9.9.9, 192.0.2.1, 10.0.0.7")) == "192.0.2.1"
    assert client(TWO_TIERS, xff("198.51.100.1, 192.0.2.1, 10.0.0.7, 10.0.0.8")) == "192.0.2.1"


def test_every_hop_trusted_leaves_the_left_most() -> None:
    assert client(TWO_TIERS, xff("10.0.0.9, 10.0.0.7")) == "10.0.0.9"


def test_several_headers_are_one_list_in_order() -> None:
    """HAProxy's `option forwardfor` adds a header line of its own after the client's."""
    assert client(LOCAL, xff("10.9.9.9"), xff("192.0.2.1")) == "192.0.2.1"
    assert client(TWO_TIERS, xff("192.0.2.1"), xff("10.0.0.7")) == "192.0.2.1"
    assert client(RFC_7239, fwd('for="10.9.9.9"'), fwd("for=192.0.2.1")) == "192.0.2.1"


def test_ports_and_ipv6_in_x_forwarded_for() -> None:
    assert client(LOCAL, xff("192.0.2.1:51234")) == "192.0.2.1"
    assert client(LOCAL, xff("2001:db8::1")) == "2001:db8::1"
    assert client(LOCAL, xff("[2001:db8::1]:443")) == "2001:db8::1"
    v6 = Proxies.of(["::1", "fd00::/8"])
    assert client(v6, xff("2001:db8::1, fd00::2"), peer="::1") == "2001:db8::1"
    assert client(v6, xff("2001:db8::1"), peer="::ffff:127.0.0.1") == "peer"


def test_an_unnamed_hop_leaves_the_client_unknown_never_whoever_is_left_of_it() -> None:
    """`unknown`, an obfuscated identifier or garbage where the client should be: the
    address left of it is what that unknown party sent, so it is not taken either."""
    assert client(LOCAL, xff("192.0.2.1, unknown")) is None
    assert client(LOCAL, xff("192.0.2.1, not-an-address")) is None
    assert client(TWO_TIERS, xff("192.0.2.1, _hidden, 10.0.0.7")) is None
    assert client(RFC_7239, fwd("for=192.0.2.1, for=unknown")) is None
    assert client(RFC_7239, fwd('for=192.0.2.1, for="_gazonk"')) is None
    assert client(RFC_7239, fwd("for=192.0.2.1, by=10.0.0.7")) is None  # no for= at all
    assert client(LOCAL, xff("192.0.2.1,, ")) == "192.0.2.1"  # empty elements are none


def test_rfc_7239_for_values() -> None:
    assert client(RFC_7239, fwd("for=192.0.2.60;proto=http;by=203.0.113.43")) == "192.0.2.60"
    assert client(RFC_7239, fwd('For="[2001:db8:cafe::17]:4711"')) == "2001:db8:cafe::17"
    assert client(RFC_7239, fwd('for="192.0.2.43:47011"')) == "192.0.2.43"
    assert client(RFC_7239, fwd("for=192.0.2.43, for=198.51.100.17")) == "198.51.100.17"
    assert client(RFC_7239, fwd("for=192.0.2.43,for=10.0.0.7")) == "192.0.2.43"
    assert client(RFC_7239, fwd('proto=https;for="192.0.2.1";host=example.com')) == "192.0.2.1"
    assert client(RFC_7239, fwd(r'for="\192.0.2.1"')) == "192.0.2.1"  # a quoted-pair


@pytest.mark.parametrize(
    "header",
    [
        'for="192.0.2.1',  # the quote never closes
        "for",
        "for=",
        "=192.0.2.1",
        "for=192.0.2.1;for=192.0.2.2",  # the parameter twice in one element
        "for 192.0.2.1",
        "for = 192.0.2.1",
        "for=192.0.2.1;;proto=http",
        "for=192.0.2.1 junk",
    ],
)
def test_a_malformed_forwarded_header_names_nobody(header: str) -> None:
    assert forwarded([header]) == [Hop(None)]
    assert client(RFC_7239, fwd(header)) is None


def test_a_malformed_header_does_not_swallow_the_next_one() -> None:
    """A client's unclosed quote in its own header line cannot reach into the line the
    proxy added."""
    assert client(RFC_7239, fwd('for="10.9.9.9'), fwd("for=192.0.2.1")) == "192.0.2.1"


def test_the_scheme_comes_with_the_client() -> None:
    raw = [(b"forwarded", b"for=192.0.2.1;proto=https, for=10.0.0.7;proto=http")]
    hop = client_of("127.0.0.1", raw, RFC_7239)
    assert hop == Hop(ipaddress.ip_address("192.0.2.1"), "https")
    raw = [(b"x-forwarded-for", b"192.0.2.1"), (b"x-forwarded-proto", b"https")]
    assert client_of("127.0.0.1", raw, LOCAL) == Hop(ipaddress.ip_address("192.0.2.1"), "https")
    raw = [(b"x-forwarded-proto", b"gopher")]
    assert client_of("127.0.0.1", raw, LOCAL) == Hop(ipaddress.ip_address("127.0.0.1"), None)
    assert client_of("127.0.0.2", [(b"x-forwarded-proto", b"https")], LOCAL) is None


def test_ranges_with_host_bits_are_their_network() -> None:
    assert client(Proxies.of(["10.1.2.3/8"]), xff("192.0.2.1"), peer="10.200.0.1") == "192.0.2.1"


@pytest.mark.parametrize(
    ("proxies", "name", "junk", "last"),
    [
        (LOCAL, "x-forwarded-for", "1,", "192.0.2.1"),
        (RFC_7239, "forwarded", "for=1,", "for=192.0.2.1"),
    ],
)
def test_what_a_client_wrote_left_of_its_proxy_costs_nothing_to_read(
    proxies: Proxies, name: str, junk: str, last: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client behind the proxy fills its own header with tens of thousands of elements
    (the head may hold 64 KiB): only the hops right of the client are parsed as addresses,
    so such a request costs what any other does, not a tenth of a second of the event
    loop's time (each element that is no address costs microseconds to refuse)."""
    from gateway.http import forwarded as module

    parsed: list[str] = []
    real = module.parse_address

    def counting(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(module, "parse_address", counting)
    own = (name.encode(), (junk * 20_000).encode())
    added = (name.encode(), last.encode())
    for headers in ([own, added], [(name.encode(), own[1] + last.encode())]):
        parsed.clear()
        hop = client_of("127.0.0.1", headers, proxies)
        assert hop == Hop(ipaddress.ip_address("192.0.2.1"))
        assert len(parsed) == 1, len(parsed)
