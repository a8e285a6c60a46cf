"""Large file bodies go from the blob file to the socket by sendfile (gateway/http/zero_copy.py):
whole, in ranges, to clients that read slowly or leave halfway, with nothing left open."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time

from gateway.http.zero_copy import _outlast
from tests.support import web
from tests.support.engine import open_blobs
from tests.support.live import LiveServer, new_bucket
from tests.support.metrics import metrics, metrics_key
from tests.support.names import unique_name

BIG = 5 * 1024 * 1024 + 17
TYPE = {"Content-Type": "application/octet-stream"}


def test_large_bodies_and_ranges_arrive_whole(local_server: LiveServer) -> None:
    body = os.urandom(BIG)
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("zc"))
        path = f"/buckets/{bucket['id']}/files/big.bin"
        assert http.put(path, content=body, headers=TYPE).status_code == 201
        whole = http.get(path)
        assert whole.status_code == 200 and whole.content == body
        for first, last in [(0, 0), (1, 3 * 1024 * 1024), (BIG - 2 * 1024 * 1024, BIG - 1)]:
            part = http.get(path, headers={"Range": f"bytes={first}-{last}"})
            assert part.status_code == 206 and part.content == body[first : last + 1]
        head = http.head(path)
        assert head.status_code == 200 and head.headers["content-length"] == str(BIG)
        assert http.get(path).content == body  # the connection is still good after a HEAD


def test_a_client_that_leaves_halfway_leaves_nothing_open(local_server: LiveServer) -> None:
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("zc"))
        path = f"/v1/buckets/{bucket['id']}/files/big.bin"
        assert http.put(path[3:], content=os.urandom(BIG), headers=TYPE).status_code == 201
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", local_server.port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            key = local_server.admin_key
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
            )
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.2)  # the server fills the socket and waits for it to drain
    deadline = time.monotonic() + 5
    while open_blobs(local_server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_blobs(local_server) == []
    assert web.get(local_server.url + "/healthz").status_code == 200


def test_large_bodies_take_the_sendfile_path_and_small_ones_do_not(
    local_server: LiveServer,
) -> None:
    """The sendfile counter tells the two paths apart: a streaming fallback would deliver the
    same bytes and leave it still."""
    key = metrics_key(local_server)

    def by_sendfile() -> float:
        return metrics(local_server, key).get(
            ("bucketd_sent_by_sendfile_bytes_total", (("listener", "api"),)), 0.0
        )

    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("zc"))
        path = f"/buckets/{bucket['id']}/files/"
        assert http.put(path + "big", content=os.urandom(BIG), headers=TYPE).status_code == 201
        assert http.put(path + "small", content=b"x" * 1000, headers=TYPE).status_code == 201
        before = by_sendfile()
        assert len(http.get(path + "small").content) == 1000
        assert by_sendfile() == before
        assert len(http.get(path + "big").content) == BIG
        assert by_sendfile() - before == BIG
        ranged = http.get(path + "big", headers={"Range": "bytes=100-2000099"})
        assert len(ranged.content) == 2_000_000
        assert by_sendfile() - before == BIG + 2_000_000


def test_a_task_cancelled_twice_still_outlasts_its_worker_thread() -> None:
    """An encrypted body's worker thread writes to a duplicated socket descriptor from the
    app's buffer: the task that would close the one and reuse the other waits for the thread
    however often it is cancelled (a second cancel used to end the wait early)."""
    released = threading.Event()

    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(None, released.wait, 5.0)

        async def sender() -> None:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                await _outlast(work)
                raise

        task = asyncio.create_task(sender())
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.05)
        still_waiting = not task.done()
        released.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return still_waiting and work.done()

    assert asyncio.run(scenario())
