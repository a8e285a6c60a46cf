"""The S3 listener's own ASGI wrapper (`gateway/s3/listener.py`, issue 36 point 3): what
the Starlette stack around the endpoint did, done by one object, and the answers only it
gives (a method S3 has no operation for, an error that escapes the endpoint).

The first tests go through the session's shared server. The others serve the wrapper
itself, around handlers written here, on Uvicorn with bucketd's own connection protocol
(`runtime/server.py`'s settings): an error that escapes the endpoint cannot be caused
from outside, and there the bytes counted can be compared with the bytes sent."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Scope

from gateway.http.cors import Cors
from gateway.http.forwarded import Proxies
from gateway.http.metrics import Metrics
from gateway.http.observe import Observer
from gateway.runtime.server import Listener, bind, uvicorn_config
from gateway.s3.listener import S3Listener
from storage.rules.cors import CorsRule
from tests.support import web
from tests.support.live import LiveServer
from tests.support.metrics import metrics, metrics_key
from tests.support.names import unique_name
from tests.support.rawhttp import connect, read_response, request_head

ORIGIN = "https://page.test"
CHUNKS = [b"a" * 1000, b"b" * 2000, b"c" * 3000]


def _access_line(live: LiveServer, request_id: str) -> dict[str, object]:
    for _ in range(50):  # the line is written once the response is sent
        for line in live.log_path.read_text().splitlines():
            if line.startswith("{") and request_id in line:
                entry: dict[str, object] = json.loads(line)
                if entry.get("request_id") == request_id:
                    return entry
        time.sleep(0.02)
    raise AssertionError(f"no access line for {request_id}")


def test_a_method_s3_has_no_operation_for_is_its_405(local_server: LiveServer) -> None:
    response = web.request(
        "PATCH", f"{local_server.s3_url}/bucket/key", headers={"X-Request-Id": "listener-405"}
    )
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, PUT, POST, DELETE"
    assert response.headers["content-type"] == "application/xml"
    assert "<Code>MethodNotAllowed</Code>" in response.text
    assert "<RequestId>listener-405</RequestId>" in response.text
    assert response.headers["x-amz-request-id"] == "listener-405"
    assert response.headers["x-request-id"] == "listener-405"
    line = _access_line(local_server, "listener-405")
    assert (line["listener"], line["route"], line["status"]) == ("s3", "/{path:path}", 405)


def test_an_origin_on_a_path_that_is_no_utf8_is_the_endpoints_400(
    local_server: LiveServer,
) -> None:
    """The CORS lookup reads the bucket from the path; a path that names none leaves the
    answer to the endpoint (it was a bare 500 before: the lookup's InvalidURI escaped)."""
    response = web.get(f"{local_server.s3_url}/%ff/key", headers={"Origin": ORIGIN})
    assert response.status_code == 400
    assert "<Code>InvalidURI</Code>" in response.text
    preflight = web.request(
        "OPTIONS",
        f"{local_server.s3_url}/%ff/key",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"},
    )
    assert preflight.status_code == 403
    assert "<Code>AccessForbidden</Code>" in preflight.text
    assert len(preflight.headers["x-request-id"]) == 32


def test_only_an_answer_that_left_its_body_unread_closes_the_connection(
    local_server: LiveServer,
) -> None:
    """Requests without a body share a connection; an answer given before its request's
    body was read says Connection: close (the next request would be read from the body's
    bytes)."""
    with connect(local_server.s3_url) as sock:
        sock.sendall(request_head("GET", "/bucket/key", {}))
        first = read_response(sock)
        assert first.status == 403 and "connection" not in first.headers
        sock.sendall(request_head("HEAD", "/bucket/key", {}))
        assert read_response(sock).status == 403
        sock.sendall(request_head("PUT", "/bucket/key", {"Content-Length": "100"}))
        left = read_response(sock)
        assert left.status == 403 and left.headers["connection"] == "close"


def test_large_objects_still_go_by_sendfile_and_small_ones_in_one_piece(
    local_server: LiveServer,
) -> None:
    """A GetObject over 256 KiB leaves the listener as a zero-copy message (the sendfile
    counter moves by its size), a range over 1 MiB too; a small one does not; each answer
    carries both request ids."""
    key = metrics_key(local_server)

    def by_sendfile() -> float:
        return metrics(local_server, key).get(
            ("bucketd_sent_by_sendfile_bytes_total", (("listener", "s3"),)), 0.0
        )

    s3 = local_server.s3()
    bucket = unique_name("listener")
    s3.create_bucket(Bucket=bucket)
    big = bytes(range(256)) * 12288 + b"tail"  # 3 MiB and 4 bytes
    s3.put_object(Bucket=bucket, Key="big", Body=big)
    s3.put_object(Bucket=bucket, Key="small", Body=b"x" * 1000)
    before = by_sendfile()
    small = s3.get_object(Bucket=bucket, Key="small")
    assert small["Body"].read() == b"x" * 1000
    assert by_sendfile() == before
    whole = s3.get_object(Bucket=bucket, Key="big")
    assert whole["Body"].read() == big
    headers = whole["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-request-id"] == headers["x-amz-request-id"]
    ranged = s3.get_object(Bucket=bucket, Key="big", Range="bytes=100-2000099")
    assert ranged["Body"].read() == big[100:2000100]
    assert by_sendfile() - before == len(big) + 2_000_000


async def _handle(request: Request) -> Response:
    path = request.url.path
    if path == "/boom":
        raise RuntimeError("a bug in a handler")
    if path == "/stream":

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in CHUNKS:
                yield chunk

        return StreamingResponse(chunks(), 200)
    return Response(await request.body(), 200)


async def _rules(scope: Scope) -> list[CorsRule]:
    return [CorsRule(allowed_origins=[ORIGIN], allowed_methods=["GET", "PUT"])]


def _refuse(scope: Scope, status: int, code: str, message: str) -> Response:
    return Response(code.encode(), status)


@contextmanager
def _serving(listener: S3Listener) -> Iterator[str]:
    """`listener` on Uvicorn with the settings bucketd serves S3 with, in a thread."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = Listener(uvicorn_config(listener, "127.0.0.1", port))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            time.sleep(0.01)
        assert server.started
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
    assert not thread.is_alive()


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Metrics]]:
    metrics = Metrics()
    listener = S3Listener(
        _handle,
        Cors(_rules, _refuse, options_need_origin=True),
        Observer("s3", metrics, access_log=False),
        None,
        Proxies(),
        deadline_seconds=30.0,
        capture=False,
    )
    with _serving(listener) as url:
        yield url, metrics


def _counted(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name, {"listener": "s3"}) or 0.0


def test_an_error_that_escapes_the_endpoint_is_s3s_500_and_logged(
    served: tuple[str, Metrics], caplog: pytest.LogCaptureFixture
) -> None:
    url, metrics = served
    with caplog.at_level(logging.ERROR, logger="bucketd.s3"), web.client() as http:
        response = http.get(f"{url}/boom", headers={"X-Request-Id": "boom-1"})
        assert response.status_code == 500
        assert response.headers["content-type"] == "application/xml"
        assert "<Code>InternalError</Code>" in response.text
        assert "<RequestId>boom-1</RequestId>" in response.text
        assert "a bug" not in response.text
        assert response.headers["x-amz-request-id"] == response.headers["x-request-id"]
        assert http.get(f"{url}/plain").status_code == 200  # the connection still serves
    errors = [r for r in caplog.records if r.name == "bucketd.s3"]
    assert errors and "boom-1" in errors[0].getMessage() and errors[0].exc_info is not None
    requests = metrics.registry.get_sample_value(
        "bucketd_requests_total",
        {"listener": "s3", "route": "/{path:path}", "method": "GET", "status": "500"},
    )
    assert requests == 1.0


def test_plain_and_streamed_answers_carry_the_headers_and_are_counted(
    served: tuple[str, Metrics],
) -> None:
    url, metrics = served
    received, sent = (
        _counted(metrics, n) for n in ("bucketd_received_bytes_total", "bucketd_sent_bytes_total")
    )
    with web.client() as http:
        plain = http.put(f"{url}/plain", content=b"x" * 700, headers={"Origin": ORIGIN})
        streamed = http.get(f"{url}/stream", headers={"Origin": ORIGIN})
        other = http.get(f"{url}/stream", headers={"Origin": "https://elsewhere.test"})
    assert plain.content == b"x" * 700 and streamed.content == b"".join(CHUNKS)
    for response in (plain, streamed):
        assert response.headers["access-control-allow-origin"] == ORIGIN
        assert len(response.headers["x-request-id"]) == 32
    assert "access-control-allow-origin" not in other.headers
    assert _counted(metrics, "bucketd_received_bytes_total") - received == 700
    assert _counted(metrics, "bucketd_sent_bytes_total") - sent == 700 + 2 * 6000


def test_a_preflight_is_answered_before_any_handler(served: tuple[str, Metrics]) -> None:
    url, _ = served
    asked = {"Origin": ORIGIN, "Access-Control-Request-Method": "PUT"}
    allowed = web.request("OPTIONS", f"{url}/boom", headers=asked)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    refused = web.request("OPTIONS", f"{url}/boom")
    assert (refused.status_code, refused.content) == (400, b"BadRequest")
