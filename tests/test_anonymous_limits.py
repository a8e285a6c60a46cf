"""Requests without a key behind a proxy (issue 34 point 7), through real servers: the
server's rate (`ratelimit.anonymous_rpm`) and a bucket's own (`anonymousRequestsPerMinute`)
on both listeners, per client address as `trusted_proxies` names it, from the header the
proxies write (a header from anyone else, or the other header, changes nothing), with a
real HAProxy in front. The pure parsing is tests/test_forwarded.py.

Two servers of their own (one believing X-Forwarded-For from 127.0.0.1, one RFC 7239's
Forwarded), with hour-long windows so that no count is cut by the clock minute; each test
names clients of its own (documentation addresses, or loopback addresses to connect from),
so that no test spends another's count."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.http.ratelimit import NO_LIMIT
from tests.support import web
from tests.support.balancer import Haproxy
from tests.support.live import TEST_CONFIG, LiveServer, free_port, new_bucket
from tests.support.names import unique_name

TEXT = {"Content-Type": "text/plain"}
HOUR = "[ratelimit]\nwindow_seconds = 3600\n"
CONFIG = 'trusted_proxies = ["127.0.0.1"]\n' + TEST_CONFIG + HOUR + "anonymous_rpm = 5\n"
RFC_7239 = (
    'trusted_proxies = ["127.0.0.1"]\nclient_address_header = "Forwarded"\n'
    + TEST_CONFIG
    + HOUR
    + "anonymous_rpm = 3\n"
)
HAPROXY = """\
global
    maxconn 200

defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s

frontend forwardfor
    bind 127.0.0.1:{xff_port}
    option forwardfor
    default_backend xff

frontend forwarded
    bind 127.0.0.1:{rfc_port}
    http-request add-header Forwarded for=%[src]
    default_backend rfc

backend xff
    server bucketd 127.0.0.1:{xff_server}

backend rfc
    server bucketd 127.0.0.1:{rfc_server}
"""
"""HAProxy's `option forwardfor` appends the address it took the connection from (as a
header line of its own, after any the client sent); the second frontend writes RFC 7239's
Forwarded (HAProxy 2.6 has no `option forwarded`)."""


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("proxied") / "data", CONFIG).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def rfc_7239(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("rfc7239") / "data", RFC_7239).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def haproxy(
    tmp_path_factory: pytest.TempPathFactory, proxied: LiveServer, rfc_7239: LiveServer
) -> Iterator[dict[str, str]]:
    """HAProxy in front of both servers: the URL of each frontend."""
    xff_port, rfc_port = free_port(), free_port()
    config = HAPROXY.format(
        xff_port=xff_port, rfc_port=rfc_port, xff_server=proxied.port, rfc_server=rfc_7239.port
    )
    proxy = Haproxy(tmp_path_factory.mktemp("haproxy"), config, [xff_port, rfc_port])
    yield {
        "forwardfor": f"http://127.0.0.1:{xff_port}",
        "forwarded": f"http://127.0.0.1:{rfc_port}",
    }
    proxy.stop()


def public_bucket(live: LiveServer, **fields: object) -> dict[str, Any]:
    """A public bucket holding the file `k`."""
    with live.client() as http:
        bucket = new_bucket(http, unique_name("anon"), public=True, **fields)
        assert http.put(f"/buckets/{bucket['id']}/files/k", content=b"hi", headers=TEXT).is_success
    return bucket


@pytest.fixture(scope="module")
def shared(proxied: LiveServer) -> dict[str, Any]:
    """A public bucket at the server's rate."""
    return public_bucket(proxied)


def get(url: str, via: str = "127.0.0.1", **headers: str) -> httpx.Response:
    """GET `url` on a connection from the loopback address `via` (the kernel takes any
    127.0.0.0/8 address as its own: a client that is not 127.0.0.1, the trusted proxy)."""
    transport = httpx.HTTPTransport(local_address=via, verify=web.CONTEXT)
    with web.client(transport=transport, timeout=30) as http:
        return http.get(url, headers={k.replace("_", "-"): v for k, v in headers.items()})


def v1(live: LiveServer | str, bucket: dict[str, Any]) -> str:
    base = live if isinstance(live, str) else live.url
    return f"{base}/v1/buckets/{bucket['id']}/files/k"


def s3(live: LiveServer, bucket: dict[str, Any]) -> str:
    return f"{live.s3_url}/{bucket['name']}/k"


def statuses(count: int, url: str, via: str = "127.0.0.1", **headers: str) -> list[int]:
    return [get(url, via, **headers).status_code for _ in range(count)]


def test_a_trusted_proxy_names_each_client(proxied: LiveServer, shared: dict[str, Any]) -> None:
    url = v1(proxied, shared)
    assert statuses(5, url, X_Forwarded_For="192.0.2.1") == [200] * 5
    refused = get(url, X_Forwarded_For="192.0.2.1")
    assert refused.status_code == 429 and refused.headers["x-ratelimit-limit"] == "5"
    assert "without a key, per client address" in refused.json()["error"]["message"]
    assert get(url, X_Forwarded_For="192.0.2.2").status_code == 200  # another client
    assert get(url, X_Forwarded_For="10.9.9.9, 192.0.2.3").status_code == 200  # the right-most
    assert get(url, X_Forwarded_For="192.0.2.3, 192.0.2.1").status_code == 429


def test_a_header_from_an_untrusted_peer_changes_nothing(
    proxied: LiveServer, shared: dict[str, Any]
) -> None:
    url = v1(proxied, shared)
    claimed = [get(url, "127.0.0.21", X_Forwarded_For=f"192.0.2.{10 + n}") for n in range(6)]
    assert [r.status_code for r in claimed] == [200] * 5 + [429]  # all of them 127.0.0.21
    assert get(url, X_Forwarded_For="192.0.2.10").status_code == 200  # charged nothing
    assert statuses(6, s3(proxied, shared), "127.0.0.22", X_Forwarded_For="192.0.2.20") == [
        *[200] * 5,
        503,
    ]


def test_an_ipv6_client_is_counted_by_its_64(proxied: LiveServer, shared: dict[str, Any]) -> None:
    """A host holds a whole /64 (SLAAC, privacy addresses): counted by the full address, it
    would take a new one for each request and never meet the limit, on either listener."""
    url = v1(proxied, shared)
    rotating = [get(url, X_Forwarded_For=f"2001:db8:6:4::{n:x}") for n in range(1, 7)]
    assert [r.status_code for r in rotating] == [200] * 5 + [429]
    assert get(url, X_Forwarded_For="2001:db8:6:5::1").status_code == 200  # another /64
    s3_codes = [
        get(s3(proxied, shared), X_Forwarded_For=f"[2001:db8:6:6::{n:x}]:4711").status_code
        for n in range(1, 7)
    ]
    assert s3_codes == [200] * 5 + [503]
    assert get(url, X_Forwarded_For="192.0.2.70").status_code == 200  # IPv4: the address


def test_the_server_rate_on_the_s3_listener(proxied: LiveServer, shared: dict[str, Any]) -> None:
    url = s3(proxied, shared)
    assert statuses(5, url, X_Forwarded_For="203.0.113.1") == [200] * 5
    refused = get(url, X_Forwarded_For="203.0.113.1")
    assert refused.status_code == 503 and b"<Code>SlowDown</Code>" in refused.content
    assert get(url, X_Forwarded_For="203.0.113.2").status_code == 200


def test_a_buckets_own_rate_on_both_listeners(proxied: LiveServer, shared: dict[str, Any]) -> None:
    tight = public_bucket(proxied, anonymousRequestsPerMinute=2)
    assert tight["anonymousRequestsPerMinute"] == 2
    assert statuses(3, v1(proxied, tight), X_Forwarded_For="198.51.100.1") == [200, 200, 429]
    assert statuses(3, s3(proxied, tight), X_Forwarded_For="198.51.100.2") == [200, 200, 503]
    # The bucket's count is its own: the address keeps the server's rate everywhere else.
    assert statuses(5, v1(proxied, shared), X_Forwarded_For="198.51.100.1") == [200] * 5
    with proxied.client() as http:
        signed = http.post(f"/buckets/{tight['id']}/sign/k", json={"expiresIn": 600})
        url = signed.json()["data"]["url"]
        assert statuses(3, url, X_Forwarded_For="198.51.100.3") == [200, 200, 429]

        unlimited = public_bucket(proxied)
        changed = http.patch(f"/buckets/{unlimited['id']}", json={"anonymousRequestsPerMinute": 0})
        assert changed.status_code == 200, changed.text
    assert statuses(8, v1(proxied, unlimited), X_Forwarded_For="198.51.100.4") == [200] * 8
    assert statuses(8, s3(proxied, unlimited), X_Forwarded_For="198.51.100.4") == [200] * 8
    # Every /v1 answer carries the headers (the contract); no limit says the largest rate.
    headers = get(v1(proxied, unlimited)).headers
    assert headers["x-ratelimit-limit"] == headers["x-ratelimit-remaining"] == str(NO_LIMIT)
    assert int(headers["x-ratelimit-reset"]) % 60 == 0
    # A failed key or signature is the server's to count, whatever the bucket says.
    bad_key = {"Authorization": "Bearer svc_" + "q" * 43, "X_Forwarded_For": "198.51.100.5"}
    assert statuses(6, v1(proxied, unlimited), **bad_key) == [401] * 5 + [429]
    forged = "AWS4-HMAC-SHA256 Credential=AKIDFORGED/20260101/us-east-1/s3/aws4_request, "
    bad_signature = {"Authorization": forged + "SignedHeaders=host, Signature=00"}
    refused = statuses(6, s3(proxied, unlimited), X_Forwarded_For="198.51.100.6", **bad_signature)
    assert 503 not in refused[:5] and 200 not in refused[:5] and refused[5] == 503, refused


def test_a_failed_form_signature_or_signed_url_token_is_counted_at_the_servers_rate(
    proxied: LiveServer,
) -> None:
    """A form upload's signature and a /v1 signed URL's token are checked after the
    request was counted (as one carrying no key, at the bucket's rate): one that fails is
    then counted at the server's rate too, as a bad key or a forged SigV4 header is, so a
    bucket set to 0 is no way to try access key ids (InvalidAccessKeyId says which exist)
    or secrets at any rate."""
    with proxied.client() as http:
        unlimited = public_bucket(proxied, anonymousRequestsPerMinute=0)
        signed = http.post(f"/buckets/{unlimited['id']}/sign/k", json={"expiresIn": 600})
    policy = base64.b64encode(b'{"expiration": "2030-01-01T00:00:00Z", "conditions": []}')
    form = {
        "key": "guess",
        "policy": policy.decode(),
        "x-amz-algorithm": "AWS4-HMAC-SHA256",
        "x-amz-date": "20260101T000000Z",
        "x-amz-signature": "0" * 64,
    }
    codes = []
    for n in range(6):
        fields = form | {"x-amz-credential": f"AKIDGUESS{n:04}/20260101/us-east-1/s3/aws4_request"}
        answer = web.post(
            f"{proxied.s3_url}/{unlimited['name']}",
            data=fields,
            files={"file": ("f", b"x")},
            headers={"X-Forwarded-For": "198.51.100.7"},
            timeout=30,
        )
        codes.append((answer.status_code, answer.text.partition("<Code>")[2].partition("<")[0]))
    assert codes == [(403, "InvalidAccessKeyId")] * 5 + [(503, "SlowDown")], codes
    # The URL as signed works at the bucket's rate; with another signature, at the server's.
    url = signed.json()["data"]["url"]
    assert statuses(6, url, X_Forwarded_For="198.51.100.8") == [200] * 6
    signature = url.partition("token=")[2].partition(".")[2]
    forged = url.replace(signature, ("A" if signature[0] != "A" else "B") + signature[1:])
    refused = [get(forged, X_Forwarded_For="198.51.100.9") for _ in range(6)]
    assert [r.status_code for r in refused] == [401] * 5 + [429]
    assert refused[0].json()["error"]["code"] == "invalid_signature"
    assert "without a key, per client address" in refused[5].json()["error"]["message"]


def test_the_access_log_names_the_client(proxied: LiveServer, shared: dict[str, Any]) -> None:
    url = v1(proxied, shared)
    assert get(url, X_Forwarded_For="192.0.2.30").status_code == 200
    assert get(url, "127.0.0.23", X_Forwarded_For="192.0.2.31").status_code == 200
    clients = set()
    deadline = time.monotonic() + 5
    while {"192.0.2.30", "127.0.0.23"} - clients and time.monotonic() < deadline:
        clients = logged_clients(proxied.log_path)
        time.sleep(0.05)
    assert {"192.0.2.30", "127.0.0.23"} <= clients and "192.0.2.31" not in clients


def logged_clients(log: Path) -> set[str]:
    """The `client` of every access line in a server's log (JSON lines)."""
    found = set()
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if "listener" in record and record.get("client"):  # an access line
                found.add(record["client"])
    return found


def test_behind_haproxy_each_visitor_is_counted_apart(
    haproxy: dict[str, str], proxied: LiveServer, shared: dict[str, Any]
) -> None:
    url = v1(haproxy["forwardfor"], shared)
    assert statuses(6, url, "127.0.0.31") == [200] * 5 + [429]
    assert get(url, "127.0.0.32").status_code == 200  # another visitor, the same proxy
    # A visitor's own X-Forwarded-For reaches bucketd left of the address HAProxy adds.
    spoofed = [get(url, "127.0.0.33", X_Forwarded_For=f"192.0.2.{40 + n}") for n in range(6)]
    assert [r.status_code for r in spoofed] == [200] * 5 + [429]


def test_behind_a_proxy_writing_rfc_7239(haproxy: dict[str, str], rfc_7239: LiveServer) -> None:
    bucket = public_bucket(rfc_7239)
    url = v1(haproxy["forwarded"], bucket)
    assert statuses(4, url, "127.0.0.41") == [200] * 3 + [429]
    assert get(url, "127.0.0.42").status_code == 200
    # X-Forwarded-For is not the header this server's proxies write: never read, even
    # from the proxy's own address.
    spoofed = [get(url, "127.0.0.43", X_Forwarded_For=f"192.0.2.{50 + n}") for n in range(4)]
    assert [r.status_code for r in spoofed] == [200] * 3 + [429]
    direct = v1(rfc_7239, bucket)
    assert statuses(4, direct, X_Forwarded_For="192.0.2.60") == [200] * 3 + [429]  # 127.0.0.1's
    assert get(direct, Forwarded="for=192.0.2.61").status_code == 200


def test_the_rate_is_checked_and_shown(local_server: LiveServer) -> None:
    """On the session's server: `anonymousRequestsPerMinute` is a whole number from 0 to
    a billion, or null (the server's); a bad one is refused and changes nothing."""
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("anon"), anonymousRequestsPerMinute=7)
        path = f"/buckets/{bucket['id']}"
        assert bucket["anonymousRequestsPerMinute"] == 7
        for bad in (-1, 1.5, "10", True, 1_000_000_001, {}):
            answer = http.patch(path, json={"anonymousRequestsPerMinute": bad})
            assert answer.status_code == 400, (bad, answer.text)
            assert "anonymousRequestsPerMinute" in answer.json()["error"]["message"]
        assert http.get(path).json()["data"]["anonymousRequestsPerMinute"] == 7
        for good in (0, 1_000_000_000, None):
            assert http.patch(path, json={"anonymousRequestsPerMinute": good}).status_code == 200
            assert http.get(path).json()["data"]["anonymousRequestsPerMinute"] == good
        refused = http.post(
            "/buckets",
            json={
                "name": unique_name("anon"),
                "region": "us-east-1",
                "anonymousRequestsPerMinute": -5,
            },
        )
        assert refused.status_code == 400
