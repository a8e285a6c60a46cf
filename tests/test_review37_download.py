"""A hostile review of the encrypted download path (issue 37: `services/sealed_range.py`
reading 16 packages into reused buffers, `zero_copy.FILLED` writing them from a worker
thread). Each test is an attack that must find the server right: no plaintext to a client
without the key, no byte of one response in another, a tampered package never served as
bytes, every range boundary exact, nothing left open and no thread held by a client that
stops reading, HEAD without a body. Sizes are a few MiB: over the 256 KiB under which a
body is buffered, so the FILLED path is the one attacked."""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import os
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from storage import encryption as enc
from tests.support import web
from tests.support.engine import open_blobs
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.orgs import make_key, make_org
from tests.support.sealed import blob_of

MIB = 1024 * 1024
BLOCK = 16 * enc.PACKAGE
SIZE = 2 * BLOCK + 1000
"""Two whole blocks and a short third: block boundaries and a short last package."""


def _nothing_open(live: LiveServer) -> None:
    deadline = time.monotonic() + 5
    while open_blobs(live) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_blobs(live) == []


def _bucket(s3: Any, prefix: str) -> str:
    name = f"{prefix}-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    return name


def _customer(key: bytes) -> dict[str, str]:
    return {
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": base64.b64encode(key).decode(),
        "x-amz-server-side-encryption-customer-key-md5": base64.b64encode(
            hashlib.md5(key).digest()
        ).decode(),
    }


def _presigned(
    s3: Any,
    bucket: str,
    key: str,
    customer: bytes | None = None,
    op: str = "get_object",
    **params: Any,
) -> str:
    if customer is not None:
        params |= {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": customer}
    return str(s3.generate_presigned_url(op, Params={"Bucket": bucket, "Key": key, **params}))


def _leaks(received: bytes, plain: bytes) -> bool:
    """Whether `received` holds any 64-byte piece of `plain` at a package's start or end."""
    for at in range(0, len(plain), enc.PACKAGE):
        for piece in (plain[at : at + 64], plain[max(0, at - 64) : at]):
            if len(piece) == 64 and piece in received:
                return True
    return False


def _raw(port: int, request: bytes, limit: float = 20.0) -> bytes:
    """Everything the server sends for `request` (with Connection: close) until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit) as sock:
        sock.sendall(request)
        got = bytearray()
        while chunk := sock.recv(1 << 20):
            got += chunk
    return bytes(got)


def _request(method: str, url: str, headers: dict[str, str] | None = None) -> bytes:
    parts = urllib.parse.urlsplit(url)
    lines = [f"{method} {parts.path}?{parts.query} HTTP/1.1", f"Host: {parts.netloc}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_no_plaintext_reaches_a_client_without_the_customer_key(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "r37-sse-c")
    plain, other_plain = os.urandom(SIZE), os.urandom(SIZE)
    key, other = os.urandom(32), os.urandom(32)
    s3.put_object(
        Bucket=bucket, Key="o", Body=plain, SSECustomerAlgorithm="AES256", SSECustomerKey=key
    )
    s3.put_object(
        Bucket=bucket,
        Key="p",
        Body=other_plain,
        SSECustomerAlgorithm="AES256",
        SSECustomerKey=other,
    )
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="m", SSECustomerAlgorithm="AES256", SSECustomerKey=key
    )
    parts = []
    first_part = os.urandom(5 * MIB)
    for number, piece in enumerate((first_part, plain), 1):
        done = s3.upload_part(
            Bucket=bucket,
            Key="m",
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=piece,
            SSECustomerAlgorithm="AES256",
            SSECustomerKey=key,
        )
        parts.append({"PartNumber": number, "ETag": done["ETag"]})
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="m",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": parts},
        SSECustomerAlgorithm="AES256",
        SSECustomerKey=key,
    )
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=(
            '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*",'
            f'"Action":"s3:GetObject","Resource":"arn:aws:s3:::{bucket}/*"}}]}}'
        ),
    )
    etag = s3.head_object(
        Bucket=bucket, Key="o", SSECustomerAlgorithm="AES256", SSECustomerKey=key
    )["ETag"]
    anonymous = f"{local_server.s3_url}/{bucket}/o?x=1"
    attempts: list[tuple[str, str, dict[str, str], int]] = [
        ("GET", _presigned(s3, bucket, "o"), {}, 400),
        ("GET", anonymous, {}, 400),
        ("GET", _presigned(s3, bucket, "o"), {"Range": "bytes=0-99"}, 400),
        ("GET", _presigned(s3, bucket, "o"), {"Range": f"bytes=-{BLOCK + 1}"}, 400),
        ("GET", _presigned(s3, bucket, "o"), {"If-None-Match": '"nothing"'}, 400),
        ("GET", _presigned(s3, bucket, "o"), {"If-Match": etag}, 400),
        ("GET", _presigned(s3, bucket, "m", PartNumber=2), {}, 400),
        ("GET", _presigned(s3, bucket, "m", PartNumber=1), {"Range": "bytes=0-"}, 400),
        ("HEAD", _presigned(s3, bucket, "o", op="head_object"), {}, 400),
        ("GET", _presigned(s3, bucket, "o", other), _customer(other), 403),
        ("GET", _presigned(s3, bucket, "m", other, PartNumber=2), _customer(other), 403),
        ("GET", _presigned(s3, bucket, "p", key), _customer(key), 403),
        ("HEAD", _presigned(s3, bucket, "o", other, "head_object"), _customer(other), 403),
    ]
    for method, url, headers, status in attempts:
        answer = _raw(
            local_server.s3_port, _request(method, url, headers | {"Connection": "close"})
        )
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(f"HTTP/1.1 {status} ".encode()), (method, url, headers, head)
        assert len(body) < 4096 and not _leaks(answer, plain), (method, headers)
        assert not _leaks(answer, other_plain) and not _leaks(answer, first_part)
    # The right key still reads, from the same connection's kind of request.
    right = _raw(
        local_server.s3_port,
        _request("GET", _presigned(s3, bucket, "o", key), _customer(key) | {"Connection": "close"}),
    )
    assert right.partition(b"\r\n\r\n")[2] == plain
    whole = first_part + plain
    sealed = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    for asked, want in {
        None: whole,
        f"bytes={5 * MIB - 100}-{5 * MIB + 99}": whole[5 * MIB - 100 : 5 * MIB + 100],
        f"bytes={5 * MIB - BLOCK - 1}-": whole[5 * MIB - BLOCK - 1 :],
    }.items():
        extra = {} if asked is None else {"Range": asked}
        got = s3.get_object(Bucket=bucket, Key="m", **sealed, **extra)["Body"].read()
        assert (asked, got == want) == (asked, True)
    for number, want in ((1, first_part), (2, plain)):
        got = s3.get_object(Bucket=bucket, Key="m", PartNumber=number, **sealed)["Body"].read()
        assert (number, got == want) == (number, True)
    # With the key: a matching If-None-Match and a HEAD carry no body either.
    for method, url, headers in (
        ("GET", _presigned(s3, bucket, "o", key), {"If-None-Match": etag}),
        ("HEAD", _presigned(s3, bucket, "o", key, "head_object"), {}),
    ):
        answer = _raw(
            local_server.s3_port,
            _request(method, url, headers | _customer(key) | {"Connection": "close"}),
        )
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith((b"HTTP/1.1 304 ", b"HTTP/1.1 200 ")) and body == b"", head


def _read_response(sock: socket.socket, buffered: bytearray, slow: bool = False) -> bytes:
    """One response's body off a keep-alive connection (Content-Length framed); what
    follows it stays in `buffered`."""
    while b"\r\n\r\n" not in buffered:
        buffered += sock.recv(65536)
    head, _, rest = bytes(buffered).partition(b"\r\n\r\n")
    assert head.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 206 ")), head
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    body = bytearray(rest)
    while len(body) < length:
        chunk = sock.recv(4096 if slow else 1 << 20)
        assert chunk, "the connection ended before the body did"
        body += chunk
        if slow and len(body) < 64 * 1024:
            time.sleep(0.001)
    buffered[:] = body[length:]
    return bytes(body[:length])


def test_no_response_carries_bytes_of_another(local_server: LiveServer) -> None:
    """Pipelined requests on one connection (the second sent during the first body, read
    slowly), and concurrent downloads of different objects, some refused for a missing key:
    each body is its own object's, whole."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "r37-mix")
    key = os.urandom(32)
    plains = {name: os.urandom(SIZE + n) for n, name in enumerate(("a", "b", "c"))}
    s3.put_object(Bucket=bucket, Key="a", Body=plains["a"], ServerSideEncryption="AES256")
    s3.put_object(
        Bucket=bucket, Key="b", Body=plains["b"], SSECustomerAlgorithm="AES256", SSECustomerKey=key
    )
    s3.put_object(Bucket=bucket, Key="c", Body=plains["c"], ServerSideEncryption="AES256")
    urls = {
        "a": (_presigned(s3, bucket, "a"), {}),
        "b": (_presigned(s3, bucket, "b", key), _customer(key)),
        "c": (_presigned(s3, bucket, "c"), {"Range": f"bytes=1-{SIZE}"}),
    }
    with socket.create_connection(("127.0.0.1", local_server.s3_port), timeout=20) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.sendall(_request("GET", *urls["a"]))
        buffered = bytearray(sock.recv(4096))
        sock.sendall(_request("GET", *urls["b"]) + _request("GET", *urls["c"]))
        assert _read_response(sock, buffered, slow=True) == plains["a"]
        assert _read_response(sock, buffered) == plains["b"]
        assert _read_response(sock, buffered) == plains["c"][1 : SIZE + 1]

    def fetch(name: str) -> tuple[str, int, bytes]:
        url, headers = urls[name] if name != "b-nokey" else (_presigned(s3, bucket, "b"), {})
        with web.client(timeout=30) as http:
            answer = http.get(url, headers=headers)
        return name, answer.status_code, answer.content

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for name, status, body in pool.map(fetch, ["a", "b", "b-nokey", "c"] * 4):
            if name == "b-nokey":
                assert status == 400 and not _leaks(body, plains["b"])
            else:
                want = plains[name] if name != "c" else plains["c"][1 : SIZE + 1]
                assert (name, status, body == want) == (name, 200 if name != "c" else 206, True)


def test_range_boundaries_read_the_plaintext(server: LiveServer) -> None:
    """On both backends: the local one opens blocks in place, the S3 one chunk by chunk."""
    s3: Any = server.s3()
    bucket = _bucket(s3, "r37-ranges")
    plain = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="o", Body=plain, ServerSideEncryption="AES256")
    package, last = enc.PACKAGE, SIZE - 1
    ranges = {
        "bytes=0-0": plain[:1],
        f"bytes={last}-{last}": plain[-1:],
        f"bytes={package // 2}-{package + 77}": plain[package // 2 : package + 78],
        f"bytes={package}-{2 * package - 1}": plain[package : 2 * package],
        f"bytes=0-{BLOCK - 1}": plain[:BLOCK],
        f"bytes={BLOCK}-{2 * BLOCK - 1}": plain[BLOCK : 2 * BLOCK],
        f"bytes=0-{BLOCK}": plain[: BLOCK + 1],
        f"bytes={BLOCK - 1}-{2 * BLOCK}": plain[BLOCK - 1 : 2 * BLOCK + 1],
        f"bytes=-{BLOCK + 1}": plain[-(BLOCK + 1) :],
        "bytes=-1": plain[-1:],
        f"bytes=-{SIZE + 10}": plain,
        f"bytes={BLOCK + 5}-": plain[BLOCK + 5 :],
        f"bytes={last}-": plain[-1:],
        f"bytes=3-{SIZE + 100}": plain[3:],
    }
    for asked, want in ranges.items():
        got = s3.get_object(Bucket=bucket, Key="o", Range=asked)
        assert (asked, got["ContentLength"], got["Body"].read() == want) == (asked, len(want), True)


def test_tampered_packages_are_never_served_as_bytes(local_server: LiveServer) -> None:
    """A flip in the last package, at a block's last and next block's first package, a cut
    mid-package and at a package boundary, two packages swapped across a block boundary,
    and a package taken from another object sealed under the same customer key: the body
    is cut short, what came before it is the plaintext's own prefix."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "r37-tamper")
    key = os.urandom(32)
    one = enc.SEALED_PACKAGE
    edge = 16 * one
    changes = {
        "flip-last": lambda d, o: d[:-3] + bytes([d[-3] ^ 0x80]) + d[-2:],
        "flip-block-end": lambda d, o: d[: edge - 1] + bytes([d[edge - 1] ^ 1]) + d[edge:],
        "flip-block-start": lambda d, o: d[:edge] + bytes([d[edge] ^ 1]) + d[edge + 1 :],
        "cut-mid": lambda d, o: d[: len(d) - 100],
        "cut-boundary": lambda d, o: d[: 2 * edge],
        "swap": lambda d, o: (
            d[: edge - one] + d[edge : edge + one] + d[edge - one : edge] + d[edge + one :]
        ),
        "foreign": lambda d, o: d[:edge] + o[edge : edge + one] + d[edge + one :],
    }
    plains = {name: os.urandom(SIZE) for name in [*changes, "donor"]}
    for name, plain in plains.items():
        s3.put_object(
            Bucket=bucket, Key=name, Body=plain, SSECustomerAlgorithm="AES256", SSECustomerKey=key
        )
    donor = blob_of(local_server.data_dir, bucket, "donor").read_bytes()
    for name, change in changes.items():
        path: Path = blob_of(local_server.data_dir, bucket, name)
        data = path.read_bytes()
        path.chmod(0o600)
        path.write_bytes(change(data, donor))
    with web.client(timeout=30) as http:
        for name in changes:
            received = b""
            url = _presigned(s3, bucket, name, key)
            if name in ("flip-block-end", "swap"):  # in the first block: opened before the answer
                answer = http.get(url, headers=_customer(key))
                assert answer.status_code == 500 and not _leaks(answer.content, plains[name])
                continue
            with http.stream("GET", url, headers=_customer(key)) as answer:
                assert (name, answer.status_code) == (name, 200)
                with pytest.raises(httpx.RemoteProtocolError):
                    for chunk in answer.iter_raw():
                        received += chunk
            assert (name, received == plains[name][: len(received)]) == (name, True)
            assert len(received) < SIZE
    _nothing_open(local_server)


def _pids(live: LiveServer) -> list[int]:
    assert live.process is not None
    pids = [live.process.pid]
    return pids + [
        int(p) for p in Path(f"/proc/{pids[0]}/task/{pids[0]}/children").read_text().split()
    ]


def _counts(live: LiveServer) -> tuple[int, int]:
    """Open descriptors and threads of the server's processes."""
    fds = sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in _pids(live))
    threads = sum(len(os.listdir(f"/proc/{pid}/task")) for pid in _pids(live))
    return fds, threads


def _rss_mib(live: LiveServer) -> float:
    total = 0
    for pid in _pids(live):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def test_clients_that_stop_reading_hold_no_thread_and_leave_nothing(
    local_server: LiveServer,
) -> None:
    """24 downloads whose clients stop reading (more than the worker threads), then 50
    more abandoned mid-body: another download still answers at once, each stalled one
    holds about its plaintext block (a MiB) and no more, and once they are gone the
    server's descriptors and threads are what they were."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "r37-slow")
    plain = os.urandom(4 * MIB)
    s3.put_object(Bucket=bucket, Key="o", Body=plain, ServerSideEncryption="AES256")
    url = _presigned(s3, bucket, "o")
    with web.client(timeout=30) as http:
        for _ in range(3):  # the worker threads the downloads use, started
            assert http.get(url).content == plain
    fds, threads = _counts(local_server)
    rss = _rss_mib(local_server)
    stuck = []
    for _ in range(24):
        sock = socket.create_connection(("127.0.0.1", local_server.s3_port), timeout=20)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(_request("GET", url))
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        stuck.append(sock)
    try:
        # The sealed packages' buffer is the worker thread's, not each download's: 24
        # stalled downloads held 44 MiB with one each, 24 MiB without.
        grown = _rss_mib(local_server) - rss
        assert grown < 24 * 1.4, grown
        began = time.monotonic()
        with web.client(timeout=10) as http:
            assert http.get(url).content == plain
        assert time.monotonic() - began < 5
    finally:
        for sock in stuck:
            sock.close()
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", local_server.s3_port), timeout=20) as sock:
            sock.sendall(_request("GET", url))
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    _nothing_open(local_server)
    deadline = time.monotonic() + 5
    while _counts(local_server)[0] > fds and time.monotonic() < deadline:
        time.sleep(0.05)
    now = _counts(local_server)
    # A descriptor or two come and go with the index and the loop, and the worker pools
    # may start the threads they are allowed; one per download would be 62 more.
    assert now[0] <= fds + 2 and now[1] <= threads + 8, (now, (fds, threads))


def test_head_and_connection_close_on_both_listeners(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "r37-head")
    plain = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="o", Body=plain, ServerSideEncryption="AES256")
    head = _raw(
        local_server.s3_port,
        _request("HEAD", _presigned(s3, bucket, "o", op="head_object"), {"Connection": "close"}),
    )
    status, _, body = head.partition(b"\r\n\r\n")
    assert (
        status.startswith(b"HTTP/1.1 200 ") and f"content-length: {SIZE}".encode() in status.lower()
    )
    assert body == b""
    get = _raw(
        local_server.s3_port, _request("GET", _presigned(s3, bucket, "o"), {"Connection": "close"})
    )
    assert get.partition(b"\r\n\r\n")[2] == plain
    with local_server.client() as v1:
        made = new_bucket(v1, unique_name("r37-head"), encryption="AES256")
        path = f"/buckets/{made['id']}/files/o"
        put = v1.put(path, content=plain, headers={"Content-Type": "text/plain"})
        assert put.status_code == 201 and put.json()["data"]["encryption"] == "AES256"
        answer = v1.head(path)
        assert answer.status_code == 200 and answer.headers["content-length"] == str(SIZE)
        assert answer.content == b""
        answer = v1.get(path, headers={"Connection": "close"})
        assert answer.content == plain and answer.headers.get("connection") == "close"
        ranged = v1.get(path, headers={"Range": f"bytes={BLOCK - 1}-"})
        assert ranged.status_code == 206 and ranged.content == plain[BLOCK - 1 :]


def test_a_slow_encrypted_download_stops_when_its_key_is_revoked(
    local_server: LiveServer,
) -> None:
    """The FILLED path asks the key again between its hops and after each wait for the
    socket: a /v1 key revoked mid-body cuts an SSE-S3 download short."""
    big = 16 * MIB + 17
    manage = ["keys:manage", "buckets:read", "buckets:write", "files:read", "files:write"]
    with local_server.client(make_key(local_server, make_org(local_server), manage)) as http:
        bucket = new_bucket(http, unique_name("r37-revoke"), encryption="AES256")
        path = f"/buckets/{bucket['id']}/files/big.bin"
        put = http.put(path, content=os.urandom(big), headers={"Content-Type": "text/plain"})
        assert put.status_code == 201 and put.json()["data"]["encryption"] == "AES256"
        made = http.post("/keys", json={"name": unique_name("k"), "scopes": ["files:read"]})
        reader = made.json()["data"]
        request = (
            f"GET /v1{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {reader['secret']}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", local_server.port), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.sendall(request.encode())
            received = bytearray()
            while b"\r\n\r\n" not in received or len(received) < MIB:
                chunk = sock.recv(65536)
                assert chunk, bytes(received[:300])
                received += chunk
            assert received.startswith(b"HTTP/1.1 200")
            time.sleep(0.3)  # the server fills the socket and waits for it to drain
            assert http.delete(f"/keys/{reader['id']}").status_code == 200
            count = len(received)
            while chunk := sock.recv(MIB):
                count += len(chunk)
        assert count < big
        _nothing_open(local_server)
