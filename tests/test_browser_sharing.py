"""Sharing as a browser does it, in headless Chromium: pages served from other origins
(http://allowed.test:<port> and http://denied.test:<port>, mapped to loopback) upload with a
presigned PUT and with fetch() to /v1, and are refused where the origin is not allowed."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.support.browsers import CHROMIUM, CHROMIUM_FLAGS
from tests.support.live import LiveServer, free_port, new_bucket
from tests.support.names import unique_name

pytestmark = pytest.mark.slow  # Chromium

PAGE = b"<!doctype html><title>app</title><p>a page of another origin</p>"


class _PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def page_port() -> Iterator[int]:
    """A plain web server for the pages, on loopback."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _PageHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"Chromium not found at {CHROMIUM}: run `make test`"
    rules = "MAP allowed.test 127.0.0.1, MAP denied.test 127.0.0.1"
    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[*CHROMIUM_FLAGS, f"--host-resolver-rules={rules}"],
        )
        yield launched
        launched.close()


def page_at(browser: Browser, origin: str) -> Page:
    page = browser.new_page()
    page.goto(origin + "/")
    return page


UPLOAD = """async ([url, headers, body]) => {
  try {
    const answer = await fetch(url, {method: 'PUT', headers, body});
    return {status: answer.status, etag: answer.headers.get('ETag')};
  } catch (error) {
    return {error: String(error)};
  }
}"""


def test_uploads_from_an_allowed_origin_and_not_from_another(
    local_server: LiveServer, browser: Browser, page_port: int
) -> None:
    s3 = local_server.s3()
    name = unique_name("web")
    s3.create_bucket(Bucket=name)
    rule = {
        "AllowedOrigins": ["http://allowed.test:*"],
        "AllowedMethods": ["PUT", "GET"],
        "AllowedHeaders": ["*"],
        "ExposeHeaders": ["ETag"],
    }
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [rule]})
    with local_server.client() as http:
        v1 = new_bucket(http, unique_name("webv1"))
        cors = [
            {
                "allowedOrigins": ["http://allowed.test:*"],
                "allowedMethods": ["PUT"],
                "allowedHeaders": ["*"],
                "exposeHeaders": ["ETag"],
            }
        ]
        assert http.patch(f"/buckets/{v1['id']}", json={"cors": cors}).status_code == 200

    def presigned(key: str) -> str:
        return s3.generate_presigned_url(
            "put_object", Params={"Bucket": name, "Key": key, "ContentType": "text/plain"}
        )

    v1_headers = {"Authorization": f"Bearer {local_server.admin_key}", "Content-Type": "text/plain"}
    allowed = page_at(browser, f"http://allowed.test:{page_port}")
    put = allowed.evaluate(UPLOAD, [presigned("from-page"), {"Content-Type": "text/plain"}, "hi"])
    assert put["status"] == 200 and put["etag"], put
    file_url = f"{local_server.url}/v1/buckets/{v1['id']}/files/from-page.txt"
    put = allowed.evaluate(UPLOAD, [file_url, v1_headers, "hello"])
    assert put["status"] == 201, put
    denied = page_at(browser, f"http://denied.test:{page_port}")
    for url, headers in [
        (presigned("from-elsewhere"), {"Content-Type": "text/plain"}),
        (f"{local_server.url}/v1/buckets/{v1['id']}/files/from-elsewhere.txt", v1_headers),
    ]:
        refused = denied.evaluate(UPLOAD, [url, headers, "no"])
        assert "error" in refused, refused
    assert s3.get_object(Bucket=name, Key="from-page")["Body"].read() == b"hi"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"]] == ["from-page"]
    with local_server.client() as http:
        keys = [f["key"] for f in http.get(f"/buckets/{v1['id']}/files").json()["data"]]
        assert keys == ["from-page.txt"]
        listed = allowed.evaluate(
            "async ([url, key]) => "
            "(await fetch(url, {headers: {Authorization: 'Bearer ' + key}})).status",
            [f"{local_server.url}/v1/buckets", local_server.admin_key],
        )
        assert listed == 200
    allowed.close()
    denied.close()


FORM_UPLOAD = """async ([url, fields, body]) => {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  form.append('file', new Blob([body], {type: 'text/plain'}), 'note.txt');
  const answer = await fetch(url, {method: 'POST', body: form});
  return {status: answer.status, text: await answer.text()};
}"""


def test_a_page_uploads_with_a_signed_post_form(
    local_server: LiveServer, browser: Browser, page_port: int
) -> None:
    s3 = local_server.s3(signature_version="s3v4")
    name = unique_name("form")
    s3.create_bucket(Bucket=name)
    rule = {"AllowedOrigins": ["http://allowed.test:*"], "AllowedMethods": ["POST"]}
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [rule]})
    post = s3.generate_presigned_post(
        Bucket=name,
        Key="notes/${filename}",
        Fields={"success_action_status": "201"},
        Conditions=[
            ["starts-with", "$key", "notes/"],
            {"success_action_status": "201"},
            ["content-length-range", 1, 1000],
        ],
    )
    page = page_at(browser, f"http://allowed.test:{page_port}")
    answer = page.evaluate(FORM_UPLOAD, [post["url"], post["fields"], "from a form"])
    assert answer["status"] == 201 and "<Key>notes/note.txt</Key>" in answer["text"], answer
    assert s3.get_object(Bucket=name, Key="notes/note.txt")["Body"].read() == b"from a form"
    page.close()
