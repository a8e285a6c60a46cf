"""Edges of who may do what. A response that outlives the check of its key ends with the key:
the event stream (revoked, or expired, with no event coming) and a slow download (over /v1
by sendfile, over S3 by sendfile and over TLS chunk by chunk). BlockPublicPolicy refuses an
`aws:SourceIp` range that holds everyone, as AWS does. X-Forwarded-For is believed from a
configured proxy only."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.engine import open_blobs
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.orgs import make_key, make_org
from tests.tls import make_certificate

MiB = 1024 * 1024
BIG = 16 * MiB + 17
"""Far more than the socket buffers between server and client hold (the client's receive
buffer is pinned at 64 KiB; the server's send buffer grows to 4 MiB at most here)."""
MANAGER = ["keys:manage", "buckets:read", "buckets:write", "files:read", "files:write"]
TEXT = {"Content-Type": "text/plain"}


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of its own that believes 127.0.0.1 as a proxy."""
    config = 'trusted_proxies = ["127.0.0.1"]\n' + TEST_CONFIG
    live = LiveServer(tmp_path_factory.mktemp("proxied") / "data", config).start()
    yield live
    live.stop()


def manager(live: LiveServer) -> httpx.Client:
    """A client of a new organization, with a key that may manage keys and files."""
    return live.client(make_key(live, make_org(live), MANAGER))


def new_key(http: httpx.Client, scopes: list[str], **fields: Any) -> dict[str, Any]:
    made = http.post("/keys", json={"name": unique_name("k"), "scopes": scopes, **fields})
    assert made.status_code == 201, made.text
    data: dict[str, Any] = made.json()["data"]
    return data


def revoke(http: httpx.Client, key: dict[str, Any]) -> None:
    assert http.delete(f"/keys/{key['id']}").status_code == 200


def stream_events(live: LiveServer, bucket: dict[str, Any], secret: str) -> Any:
    return web.stream(
        "GET",
        f"{live.url}/v1/events",
        params={"bucketId": bucket["id"]},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=10,
    )


def until_the_end(lines: Iterator[str]) -> list[str]:
    """The stream's remaining lines, once the server ends it (10 s of silence fails)."""
    try:
        return list(lines)
    except httpx.ReadTimeout:
        pytest.fail("the stream outlived its key")


@pytest.mark.serial
def test_revoking_a_key_ends_its_event_stream_though_no_event_comes(
    local_server: LiveServer,
) -> None:
    with manager(local_server) as http:
        bucket = new_bucket(http, unique_name("edge"))
        reader = new_key(http, ["files:read"])
        with stream_events(local_server, bucket, reader["secret"]) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "retry: 1000"
            http.put(f"/buckets/{bucket['id']}/files/before", content=b"x", headers=TEXT)
            assert any(line.startswith("data: ") for line in lines)  # the stream is live
            revoke(http, reader)
            revoked = time.monotonic()
            rest = until_the_end(lines)
            took = time.monotonic() - revoked
    assert not any(line.startswith("data: ") for line in rest)
    assert took < 4, f"the stream ended {took:.1f} s after its key was revoked"


@pytest.mark.serial
def test_a_stream_ends_when_its_key_expires(local_server: LiveServer) -> None:
    with manager(local_server) as http:
        bucket = new_bucket(http, unique_name("edge"))
        expires = int(time.time()) + 3
        moment = datetime.datetime.fromtimestamp(expires, datetime.UTC)
        reader = new_key(http, ["files:read"], expiresAt=moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
        with stream_events(local_server, bucket, reader["secret"]) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "retry: 1000"
            until_the_end(lines)
            ended = time.time()
    assert expires - 0.05 <= ended < expires + 3, f"ended {ended - expires:+.1f} s from expiry"


def cut_short(
    port: int, request: str, revoke_key: Callable[[], None], tls: ssl.SSLContext | None = None
) -> tuple[bytes, int, int]:
    """(response head, body bytes received, Content-Length) of a download read slowly: a
    first MiB, a pause while the server fills the socket, `revoke_key()`, then the rest as
    it comes, until the body is whole or the server ends the connection."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.settimeout(10)
    raw.connect(("127.0.0.1", port))
    sock = raw if tls is None else tls.wrap_socket(raw, server_hostname="127.0.0.1")
    with sock:
        sock.sendall(request.encode())
        received = bytearray()
        while b"\r\n\r\n" not in received or len(received) < MiB:
            chunk = sock.recv(65536)
            assert chunk, f"the connection ended early: {bytes(received[:300])!r}"
            received += chunk
        head, _, body = bytes(received).partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        time.sleep(0.3)
        revoke_key()
        count = len(body)
        while count < length:
            try:
                chunk = sock.recv(MiB)
            except (ConnectionResetError, ssl.SSLError):
                break
            if not chunk:
                break
            count += len(chunk)
    return head, count, length


def nothing_left_open(live: LiveServer) -> bool:
    """Whether the server let go of every blob file (a cut response closes its file)."""
    deadline = time.monotonic() + 5
    while open_blobs(live) and time.monotonic() < deadline:
        time.sleep(0.05)
    return open_blobs(live) == []


def test_a_slow_v1_download_stops_when_its_key_is_revoked(local_server: LiveServer) -> None:
    """The blob goes out by sendfile here (plain HTTP, local backend)."""
    with manager(local_server) as http:
        bucket = new_bucket(http, unique_name("edge"))
        path = f"/buckets/{bucket['id']}/files/big.bin"
        assert http.put(path, content=os.urandom(BIG), headers=TEXT).status_code == 201
        reader = new_key(http, ["files:read"])
        request = (
            f"GET /v1{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {reader['secret']}\r\n\r\n"
        )
        head, count, length = cut_short(local_server.port, request, lambda: revoke(http, reader))
        assert head.startswith(b"HTTP/1.1 200") and length == BIG
        assert count < BIG
        assert nothing_left_open(local_server)
        assert http.get(path).status_code == 200  # the manager's own key still reads it


def s3_download(
    live: LiveServer, scheme: str, tls: ssl.SSLContext | None = None
) -> tuple[bytes, int, int]:
    """A slow S3 GetObject of a big object, by a presigned URL of credentials revoked while
    it runs."""
    with manager(live) as http:
        bucket = new_bucket(http, unique_name("edge"))
        path = f"/buckets/{bucket['id']}/files/big.bin"
        assert http.put(path, content=os.urandom(BIG), headers=TEXT).status_code == 201
        credentials = new_key(http, ["buckets:read", "files:read"], s3=True)
        s3 = boto3.client(
            "s3",
            endpoint_url=f"{scheme}://127.0.0.1:{live.s3_port}",
            aws_access_key_id=credentials["accessKeyId"],
            aws_secret_access_key=credentials["secret"],
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )
        url = urlsplit(
            s3.generate_presigned_url(
                "get_object", Params={"Bucket": bucket["name"], "Key": "big.bin"}, ExpiresIn=300
            )
        )
        s3.close()
        request = f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n"
        return cut_short(live.s3_port, request, lambda: revoke(http, credentials), tls)


def test_a_slow_s3_download_stops_when_its_credentials_are_revoked(
    local_server: LiveServer,
) -> None:
    head, count, length = s3_download(local_server, "http")
    assert head.startswith(b"HTTP/1.1 200") and length == BIG
    assert count < BIG


def test_a_slow_download_over_tls_stops_too(tmp_path: Path) -> None:
    """Over TLS the body goes chunk by chunk through Python: the check is between chunks."""
    cert, key = make_certificate(tmp_path)
    config = f's3_tls_cert = "{cert}"\ns3_tls_key = "{key}"\n' + TEST_CONFIG
    live = LiveServer(tmp_path / "data", config).start()
    try:
        tls = ssl.create_default_context(cafile=cert)
        head, count, length = s3_download(live, "https", tls)
        assert nothing_left_open(live)
    finally:
        live.stop()
    assert head.startswith(b"HTTP/1.1 200") and length == BIG
    assert count < BIG


def refused(call: Callable[..., Any], **kwargs: Any) -> str:
    with pytest.raises(ClientError) as error:
        call(**kwargs)
    return str(error.value.response["Error"]["Code"])


def only_from(bucket: str, operator: str, ranges: str | list[str]) -> str:
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
        "Condition": {operator: {"aws:SourceIp": ranges}},
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


EVERYONE = ["0.0.0.0/0", "::/0", "0.0.0.0/1", "::ffff:0:0/96", "2001::/16"]
"""Ranges wider than AWS counts as limiting access (/8 for IPv4, /32 for IPv6; the
IPv4-mapped block as the IPv4 ranges it holds)."""
NARROW = ["10.0.0.0/8", "203.0.113.7", "2001:db8::/32", "::ffff:10.0.0.0/104"]


def test_block_public_policy_refuses_source_ip_ranges_that_hold_everyone(
    local_server: LiveServer,
) -> None:
    s3 = local_server.s3()
    bucket = unique_name("edge")
    s3.create_bucket(Bucket=bucket)
    block = {
        "BlockPublicAcls": False,
        "IgnorePublicAcls": False,
        "BlockPublicPolicy": True,
        "RestrictPublicBuckets": False,
    }
    s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=block)
    put = s3.put_bucket_policy
    wides: list[str | list[str]] = [*EVERYONE, ["10.0.0.0/8", "0.0.0.0/0"]]
    for wide in wides:
        assert refused(put, Bucket=bucket, Policy=only_from(bucket, "IpAddress", wide)) == (
            "AccessDenied"
        ), wide
    for narrow in NARROW:  # NotIpAddress limits nothing: everyone else is in
        assert refused(put, Bucket=bucket, Policy=only_from(bucket, "NotIpAddress", narrow)) == (
            "AccessDenied"
        ), narrow
    for narrow in NARROW:
        put(Bucket=bucket, Policy=only_from(bucket, "IpAddress", narrow))
        assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is False


def test_the_policy_status_calls_a_policy_open_to_every_address_public(
    local_server: LiveServer,
) -> None:
    s3 = local_server.s3()
    bucket = unique_name("edge")
    s3.create_bucket(Bucket=bucket)
    for wide in ("0.0.0.0/0", "::/0"):
        s3.put_bucket_policy(Bucket=bucket, Policy=only_from(bucket, "IpAddress", wide))
        assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is True


def deny_outside_ten(s3: Any) -> str:
    """A bucket holding one object, whose policy denies reading it from outside 10.0.0.0/8."""
    bucket = unique_name("edge")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"inside")
    statement = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
        "Condition": {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
    }
    s3.put_bucket_policy(
        Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    )
    return bucket


def claiming(s3: Any, address: str) -> Any:
    """`s3`, sending `X-Forwarded-For: address` with every GetObject."""

    def add(request: Any, **kwargs: Any) -> None:
        request.headers["X-Forwarded-For"] = address

    s3.meta.events.register("before-sign.s3.GetObject", add)
    return s3


def test_a_local_client_cannot_choose_its_source_ip_by_default(local_server: LiveServer) -> None:
    s3 = claiming(local_server.s3(), "10.1.2.3")
    bucket = deny_outside_ten(s3)
    assert refused(s3.get_object, Bucket=bucket, Key="k") == "AccessDenied"


def test_a_trusted_proxy_says_where_the_client_is(proxied: LiveServer) -> None:
    s3 = proxied.s3()
    bucket = deny_outside_ten(s3)
    assert refused(s3.get_object, Bucket=bucket, Key="k") == "AccessDenied"  # 127.0.0.1
    got = claiming(s3, "10.1.2.3").get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"inside"


def test_a_download_without_a_key_is_not_cut_by_anothers_revocation(
    local_server: LiveServer,
) -> None:
    """A public download has no key to watch: a revocation elsewhere (which makes every
    watched download look its key up again) leaves it whole."""
    with manager(local_server) as http:
        bucket = new_bucket(http, unique_name("edge"))
        path = f"/buckets/{bucket['id']}/files/big.bin"
        assert http.put(path, content=os.urandom(BIG), headers=TEXT).status_code == 201
        assert http.patch(f"/buckets/{bucket['id']}", json={"public": True}).status_code == 200
        unrelated = new_key(http, ["files:read"])
        request = f"GET /v1{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        head, count, length = cut_short(local_server.port, request, lambda: revoke(http, unrelated))
        assert head.startswith(b"HTTP/1.1 200") and count == length == BIG


def test_a_slow_signed_download_stops_when_its_signer_is_revoked(
    local_server: LiveServer,
) -> None:
    with manager(local_server) as http:
        bucket = new_bucket(http, unique_name("edge"))
        path = f"/buckets/{bucket['id']}/files/big.bin"
        assert http.put(path, content=os.urandom(BIG), headers=TEXT).status_code == 201
        signer = new_key(http, ["files:read"])
        with local_server.client(signer["secret"]) as theirs:
            signed = theirs.post(f"/buckets/{bucket['id']}/sign/big.bin", json={"expiresIn": 60})
        url = urlsplit(signed.json()["data"]["url"])
        request = f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        head, count, length = cut_short(local_server.port, request, lambda: revoke(http, signer))
        assert head.startswith(b"HTTP/1.1 200") and length == BIG
        assert count < BIG


KEEPALIVE = 2.0
"""The shared server's `events.stream_keepalive_seconds` (tests/support/live.py)."""


def test_a_deny_reaches_a_busy_stream_within_a_keep_alive(local_server: LiveServer) -> None:
    """The stream decides each bucket's events once per keep-alive (2 s on the shared
    server, `events.stream_keepalive_seconds`), however busy the bucket is: a Deny of
    s3:ListBucket stops them then (a busy stream had cached it for good)."""
    with manager(local_server) as http:
        bucket = new_bucket(http, unique_name("edge"))
        files = f"/buckets/{bucket['id']}/files/"
        seen: list[str] = []
        stop = threading.Event()

        def read() -> None:
            secret = http.headers["authorization"].split()[-1]
            with (
                local_server.client(secret) as reader,
                reader.stream("GET", "/events", timeout=20) as answer,
                contextlib.suppress(httpx.HTTPError),  # the server may end it first
            ):
                for line in answer.iter_lines():
                    if line.startswith("data:"):
                        seen.append(json.loads(line[5:])["Records"][0]["s3"]["object"]["key"])
                    if stop.is_set():
                        return

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        time.sleep(0.5)
        denied_at = None
        written: list[tuple[str, float]] = []
        for n in range(20):
            key = f"k{n}"
            assert http.put(files + key, content=b"x", headers=TEXT).status_code == 201
            written.append((key, time.monotonic()))
            if n == 3:
                deny = {
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:ListBucket",
                    "Resource": f"arn:aws:s3:::{bucket['name']}",
                }
                policy = {"Statement": [deny]}
                patched = http.patch(f"/buckets/{bucket['id']}", json={"policy": policy})
                assert patched.status_code == 200, patched.text
                denied_at = time.monotonic()
            time.sleep(0.3)
        assert thread.is_alive(), "the stream ended"
        stop.set()
        assert denied_at is not None and "k0" in seen
        late = [key for key, at in written if at > denied_at + KEEPALIVE + 1]
        assert late and not set(late) & set(seen), (late, seen)
