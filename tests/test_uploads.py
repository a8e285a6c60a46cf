"""Upload edge cases: limits, deadlines, chunked bodies, clients that go away.

After every refused or broken upload: nothing of it is visible, the key's previous content
is intact, and no temp file is left in the data dir.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import LiveServer, new_bucket
from tests.support.names import BACKENDS, with_backend
from tests.support.rawhttp import connect, exchange, read_response, request_head
from tests.support.seaweed import open_uploads

LIMIT = 1000
CONFIG = """
[uploads]
default_max_bytes = 1000
deadline_seconds = 1.5
[plans.pro]
requests_per_minute = 1000000
"""


@pytest.fixture(scope="module", params=BACKENDS)
def small(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    config = with_backend(request, request.param, CONFIG)
    live = LiveServer(tmp_path_factory.mktemp("small") / "data", config)
    live.seaweed = request.getfixturevalue("seaweed") if request.param == "s3" else None
    live.start()
    yield live
    live.stop()


@pytest.fixture
def setup(small: LiveServer) -> Iterator[tuple[httpx.Client, dict]]:
    with small.client() as http:
        bucket = new_bucket(http, f"up-{time.monotonic_ns()}")
        assert (
            http.put(
                f"/buckets/{bucket['id']}/files/k",
                content=b"previous",
                headers={"Content-Type": "text/plain"},
            ).status_code
            == 201
        )
        yield http, bucket


def temp_files(live: LiveServer) -> list[Path]:
    tmp = live.data_dir / "tmp"
    return list(tmp.iterdir()) if tmp.exists() else []


def leftovers(live: LiveServer) -> list:
    found: list = temp_files(live)
    if live.backend == "s3":
        found += open_uploads(live.seaweed, live.brand)
    return found


def assert_untouched(live: LiveServer, http: httpx.Client, bucket: dict) -> None:
    deadline = time.monotonic() + 5
    while leftovers(live) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert leftovers(live) == []
    assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"previous"
    data = http.get(f"/buckets/{bucket['id']}").json()["data"]
    assert data["fileCount"] == 1 and data["sizeBytes"] == len(b"previous")


def path(bucket: dict) -> str:
    return f"/v1/buckets/{bucket['id']}/files/k"


def headers(small: LiveServer, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {small.admin_key}", "Content-Type": "text/plain", **extra}


def test_exactly_at_the_limit_is_stored(small: LiveServer, setup) -> None:
    http, bucket = setup
    body = b"a" * LIMIT
    assert (
        http.put(
            f"/buckets/{bucket['id']}/files/k", content=body, headers={"Content-Type": "text/plain"}
        ).status_code
        == 201
    )
    assert http.get(f"/buckets/{bucket['id']}/files/k").content == body


def test_one_byte_over_by_content_length_is_413_before_reading(small: LiveServer, setup) -> None:
    http, bucket = setup
    with connect(small.url) as sock:
        sock.sendall(
            request_head("PUT", path(bucket), headers(small, **{"Content-Length": str(LIMIT + 1)}))
        )
        response = read_response(sock)  # answered without a byte of body sent
    assert response.status == 413
    assert response.json()["error"]["code"] == "file_too_large"
    assert_untouched(small, http, bucket)


def test_chunked_body_cut_off_when_it_passes_the_limit(small: LiveServer, setup) -> None:
    http, bucket = setup

    def body() -> Iterator[bytes]:
        for _ in range(20):
            yield b"b" * 100

    response = http.put(
        f"/buckets/{bucket['id']}/files/k", content=body(), headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 413
    assert_untouched(small, http, bucket)


def test_chunked_body_within_the_limit_is_stored(small: LiveServer, setup) -> None:
    http, bucket = setup

    def body() -> Iterator[bytes]:
        yield b"c" * 500
        yield b"c" * 500

    response = http.put(
        f"/buckets/{bucket['id']}/files/k", content=body(), headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 201 and response.json()["data"]["size"] == 1000
    assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"c" * 1000


def test_client_disconnect_mid_body_stores_nothing(small: LiveServer, setup) -> None:
    http, bucket = setup
    with connect(small.url) as sock:
        sock.sendall(request_head("PUT", path(bucket), headers(small, **{"Content-Length": "900"})))
        sock.sendall(b"d" * 400)
        time.sleep(0.2)
    assert_untouched(small, http, bucket)


def test_truncated_chunked_body_stores_nothing(small: LiveServer, setup) -> None:
    http, bucket = setup
    with connect(small.url) as sock:
        sock.sendall(
            request_head("PUT", path(bucket), headers(small, **{"Transfer-Encoding": "chunked"}))
        )
        sock.sendall(b"64\r\n" + b"e" * 100 + b"\r\n")
        time.sleep(0.2)
    assert_untouched(small, http, bucket)


@pytest.mark.serial
def test_stalled_body_gets_408_at_the_deadline(small: LiveServer, setup) -> None:
    http, bucket = setup
    started = time.monotonic()
    with connect(small.url) as sock:
        sock.sendall(request_head("PUT", path(bucket), headers(small, **{"Content-Length": "500"})))
        sock.sendall(b"f" * 100)
        response = read_response(sock)
    assert response.status == 408
    assert response.json()["error"]["code"] == "upload_timeout"
    assert time.monotonic() - started < 10
    assert_untouched(small, http, bucket)


@pytest.mark.serial
def test_slow_body_past_the_deadline_is_408(small: LiveServer, setup) -> None:
    http, bucket = setup
    response = exchange(
        small.url,
        "PUT",
        path(bucket),
        headers(small, **{"Content-Length": "200"}),
        b"g" * 200,
        pause_after=100,
        pause=2.5,
    )
    assert response.status == 408
    assert_untouched(small, http, bucket)


def test_disallowed_type_and_unknown_bucket_read_no_body(small: LiveServer, setup) -> None:
    http, bucket = setup
    with connect(small.url) as sock:
        sock.sendall(
            request_head(
                "PUT",
                path(bucket),
                headers(small, **{"Content-Type": "bogus", "Content-Length": "50"}),
            )
        )
        assert read_response(sock).status == 415
    assert_untouched(small, http, bucket)


def test_content_length_must_be_a_number(small: LiveServer, setup) -> None:
    http, bucket = setup
    response = exchange(
        small.url, "PUT", path(bucket), headers(small, **{"Content-Length": "12abc"}), b""
    )
    assert response.status == 400
    assert_untouched(small, http, bucket)


def test_large_streamed_upload_round_trips(small: LiveServer, setup) -> None:
    http, bucket = setup
    http.patch(f"/buckets/{bucket['id']}", json={"maxUploadBytes": 20 * 1024 * 1024})
    payload = bytes(range(256)) * (12 * 1024 * 4 + 7)

    def body() -> Iterator[bytes]:
        for i in range(0, len(payload), 70_000):
            yield payload[i : i + 70_000]

    response = http.put(
        f"/buckets/{bucket['id']}/files/big",
        content=body(),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 201
    assert http.get(f"/buckets/{bucket['id']}/files/big").content == payload
    ranged = http.get(
        f"/buckets/{bucket['id']}/files/big", headers={"Range": "bytes=1048570-1048585"}
    )
    assert ranged.content == payload[1048570:1048586]


def test_form_uploads_store_the_file_and_not_the_envelope(small: LiveServer, setup) -> None:
    """`curl -F file=@x`, a browser's FormData and Supabase's client (its file part named
    "", after cacheControl) store the file with its part's type, under the same limits."""
    http, bucket = setup
    files = f"/buckets/{bucket['id']}/files"
    curl = http.put(f"{files}/notes.txt", files={"file": ("notes.txt", b"hello", "text/plain")})
    assert curl.status_code == 201, curl.text
    assert curl.json()["data"]["contentType"] == "text/plain"
    stored = http.get(f"{files}/notes.txt")
    assert stored.content == b"hello" and stored.headers["content-type"] == "text/plain"
    supabase = http.put(
        f"{files}/cat.jpg",
        data={"cacheControl": "3600"},
        files={"": ("blob", b"\xff\xd8 cat", "image/jpeg")},
    )
    assert supabase.status_code == 201, supabase.text
    cat = http.get(f"{files}/cat.jpg")
    assert cat.content == b"\xff\xd8 cat"
    assert cat.headers["cache-control"] == "max-age=3600"  # as Supabase Storage reads it
    refusals = [
        ({"files": {"file": ("k", b"x" * (LIMIT + 1), "text/plain")}}, 413, "file_too_large"),
        ({"files": {"file": ("k", b"x", "bogus")}}, 415, "unsupported_media_type"),
        (
            {"data": {"metadata": "{}"}, "files": {"file": ("k", b"x", "text/plain")}},
            400,
            "invalid_request",
        ),
        ({"data": {"note": "no file"}, "files": {}}, 400, "invalid_request"),
    ]
    for form, status, code in refusals:
        if not form["files"]:  # httpx sends a urlencoded body without files: force a form
            form = {"data": form["data"], "files": {"other": (None, b"text")}}
        answer = http.put(f"{files}/k", **form)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.text
    boundary = "b0undary"
    cut = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="k"\r\n'
        "Content-Type: text/plain\r\n\r\nab"
    )
    truncated = http.put(
        f"{files}/k",
        content=cut.encode(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert truncated.status_code == 400, truncated.text
    named = (  # a field named in UTF-8 beyond Latin-1, before the file: refused, not a 500
        f'--{boundary}\r\nContent-Disposition: form-data; name="✓"\r\n\r\nx\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="k"\r\n'
        f"Content-Type: text/plain\r\n\r\nab\r\n--{boundary}--\r\n"
    )
    refused = http.put(
        f"{files}/k",
        content=named.encode(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert refused.status_code == 400 and "✓" in refused.json()["error"]["message"]
    http.delete(f"{files}/notes.txt")
    http.delete(f"{files}/cat.jpg")
    assert_untouched(small, http, bucket)
