"""Large encrypted downloads (issue 37 performance): a stored range over a MiB is opened
16 packages at a time into reused buffers and written to the socket from a worker thread
(storage/services/sealed_range.py, gateway/http/zero_copy.py FILLED). Whole objects and
ranges that start and end mid-package and mid-block read right, for SSE-S3 and SSE-C; a
range reads from the blob only the packages it covers; a package changed, moved or cut
past the first block cuts the body short, never gives wrong bytes; a client that leaves
or a copy that reads the source leaves no blob file open."""

from __future__ import annotations

import os
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from storage import encryption as enc
from tests.support import web
from tests.support.engine import open_blobs
from tests.support.live import LiveServer
from tests.support.metrics import metrics, metrics_key
from tests.support.sealed import blob_of

MIB = 1024 * 1024
SIZE = 5 * MIB + 12_345
"""Five blocks of 16 packages and a short one: every block boundary is crossed."""
BLOCK = 16 * enc.PACKAGE


def _bucket(s3: Any, prefix: str) -> str:
    name = f"{prefix}-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    return name


def _bytes_read(live: LiveServer) -> int:
    """What the server's processes have read so far (/proc/<pid>/io rchar)."""
    assert live.process is not None
    pids = [live.process.pid]
    pids += [int(p) for p in Path(f"/proc/{pids[0]}/task/{pids[0]}/children").read_text().split()]
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                total += int(line.split()[1])
    return total


def _nothing_open(live: LiveServer) -> None:
    deadline = time.monotonic() + 5
    while open_blobs(live) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_blobs(live) == []


RANGES = [
    (0, SIZE - 1),
    (1, 2 * MIB),
    (BLOCK - 7, 2 * BLOCK + 7),
    (enc.PACKAGE + 3, SIZE - enc.PACKAGE - 3),
    (SIZE - 3 * MIB, SIZE - 1),
]


def test_large_sse_s3_and_sse_c_objects_and_their_ranges_read_right(
    local_server: LiveServer,
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "sse-large")
    body = os.urandom(SIZE)
    customer = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)}
    s3.put_object(Bucket=bucket, Key="s3", Body=body, ServerSideEncryption="AES256")
    s3.put_object(Bucket=bucket, Key="c", Body=body, **customer)
    for key, extra in (("s3", {}), ("c", customer)):
        got = s3.get_object(Bucket=bucket, Key=key, **extra)
        assert got["ContentLength"] == SIZE and got["Body"].read() == body
        for first, last in RANGES:
            part = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}", **extra)
            assert (key, first, part["Body"].read()) == (key, first, body[first : last + 1])
    # A copy reads its source as chunks (the path a TLS connection takes too).
    s3.copy_object(
        Bucket=bucket,
        Key="copy",
        CopySource={"Bucket": bucket, "Key": "c"},
        CopySourceSSECustomerAlgorithm="AES256",
        CopySourceSSECustomerKey=customer["SSECustomerKey"],
        ServerSideEncryption="AES256",
    )
    assert s3.get_object(Bucket=bucket, Key="copy")["Body"].read() == body
    _nothing_open(local_server)


def test_a_range_reads_only_the_packages_it_covers(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "sse-read")
    size = 16 * MIB
    body = os.urandom(size)
    s3.put_object(Bucket=bucket, Key="o", Body=body, ServerSideEncryption="AES256")
    first = size // 2 + 1000
    where = enc.span(first, first + MIB, size)
    before = _bytes_read(local_server)
    part = s3.get_object(Bucket=bucket, Key="o", Range=f"bytes={first}-{first + MIB - 1}")
    assert part["Body"].read() == body[first : first + MIB]
    read = _bytes_read(local_server) - before
    covered = where.stored_end - where.stored_start
    assert covered == 17 * enc.SEALED_PACKAGE  # a MiB that starts mid-package
    # The packages, and the index's few pages and the request itself: not the object.
    assert covered <= read < covered + 256 * 1024


def test_a_changed_moved_or_cut_package_past_the_first_block_cuts_the_body(
    local_server: LiveServer,
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "sse-tamper")
    bodies = {key: os.urandom(SIZE + n) for n, key in enumerate(("flip", "swap", "cut", "head"))}
    for key, body in bodies.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="AES256")
    at = 20 * enc.SEALED_PACKAGE  # the second block's fifth package
    one = enc.SEALED_PACKAGE
    changes = {
        "flip": lambda d: d[: at + 9] + bytes([d[at + 9] ^ 1]) + d[at + 10 :],
        "swap": lambda d: (
            d[:at] + d[at + one : at + 2 * one] + d[at : at + one] + d[at + 2 * one :]
        ),
        "cut": lambda d: d[: at + 5],
        "head": lambda d: bytes([d[0] ^ 1]) + d[1:],
    }
    for key, change in changes.items():
        path = blob_of(local_server.data_dir, bucket, key)
        data = path.read_bytes()
        path.chmod(0o600)
        path.write_bytes(change(data))
    with web.client(timeout=30) as http:
        for key in ("flip", "swap", "cut"):
            url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key})
            received = b""
            with http.stream("GET", url) as answer:
                assert answer.status_code == 200
                with pytest.raises(httpx.RemoteProtocolError):
                    for chunk in answer.iter_raw():
                        received += chunk
            assert BLOCK <= len(received) < len(bodies[key])
            assert received == bodies[key][: len(received)]
            # The block before the change is whole, and reads alone.
            ranged = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{BLOCK - 1}")
            assert ranged["Body"].read() == bodies[key][:BLOCK]
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="head")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    _nothing_open(local_server)


def test_a_client_that_leaves_an_encrypted_download_leaves_nothing_open(
    local_server: LiveServer,
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "sse-leave")
    s3.put_object(Bucket=bucket, Key="o", Body=os.urandom(SIZE), ServerSideEncryption="AES256")
    url = urllib.parse.urlsplit(
        s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "o"})
    )
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", local_server.s3_port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            head = f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n"
            sock.sendall(head.encode())
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.2)  # the server fills the socket and waits for it to drain
    _nothing_open(local_server)


def test_an_encrypted_download_counts_as_sent_and_never_as_sendfile(
    local_server: LiveServer,
) -> None:
    """The metrics (and the journal, fed by the same counting) see a body written by the
    worker thread as sent bytes; the sendfile counter, which says the bytes never passed
    through the server's memory, stays still."""
    key = metrics_key(local_server)

    def counted() -> tuple[float, float]:
        found = metrics(local_server, key)
        labels = (("listener", "s3"),)
        return (
            found.get(("bucketd_sent_bytes_total", labels), 0.0),
            found.get(("bucketd_sent_by_sendfile_bytes_total", labels), 0.0),
        )

    s3: Any = local_server.s3()
    bucket = _bucket(s3, "sse-count")
    s3.put_object(Bucket=bucket, Key="o", Body=os.urandom(SIZE), ServerSideEncryption="AES256")
    sent, by_sendfile = counted()
    assert len(s3.get_object(Bucket=bucket, Key="o")["Body"].read()) == SIZE
    ranged = s3.get_object(Bucket=bucket, Key="o", Range=f"bytes=10-{2 * MIB + 9}")
    assert len(ranged["Body"].read()) == 2 * MIB
    # A response is counted once its handler returns, which can be just after the client
    # has read its last byte (2026-11-27 14:52Z: the scrape came 2 MiB short, the range).
    # The sendfile count comes just after the sent bytes: once these are in, a moment more
    # for it to rise, if it wrongly does (with --workers 2 a scrape can fall in between).
    expected = (sent + SIZE + 2 * MIB, by_sendfile)
    deadline = time.monotonic() + 5
    while counted()[0] < expected[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.05)
    assert counted() == expected
