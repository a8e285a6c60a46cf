"""The web console in a real browser: Playwright driving Debian's Chromium (headless, kept off
the network) against a live bucketd on loopback. `make test` installs both.

Screenshots of the main screens go to a temporary folder; with BUCKETD_SCREENSHOTS=docs/console
they refresh the ones the README shows.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tests.support import web
from tests.support.browsers import CHROMIUM, CHROMIUM_FLAGS, DIAGNOSIS
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket

pytestmark = pytest.mark.slow  # Chromium

CONSOLE_CONFIG = (
    "provisioning_delay_seconds = 1.0\n" + TEST_CONFIG + '[events]\nallowed_hosts = ["127.0.0.1"]\n'
)
TIMEOUT_MS = 15_000


def png(width: int = 4, height: int = 3) -> bytes:
    """A real PNG image, for the image preview."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


KMS_ENV = {
    "BUCKETD_STORAGE__KMS_KEYS": json.dumps([f"alpha={base64.b64encode(os.urandom(32)).decode()}"])
}
"""A keyring of one key, so that a bucket's default encryption can be aws:kms."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("console") / "data"
    server = LiveServer(data, CONSOLE_CONFIG, env=KMS_ENV).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"Chromium not found at {CHROMIUM}: run `make test`"
    browser = playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
    )
    yield browser
    browser.close()


def watch_requests(page: Page) -> dict[str, str]:
    """Each request's fate, and when it last changed (seconds since the page opened)."""
    fate: dict[str, str] = {}
    opened = time.monotonic()

    def note(url: str, what: str) -> None:
        fate[url] = f"{what} (at {time.monotonic() - opened:.1f} s)"

    page.on("request", lambda r: note(r.url, "sent, no answer"))
    page.on("response", lambda r: note(r.url, f"answered {r.status}, body pending"))
    page.on("requestfinished", lambda r: note(r.url, "finished"))
    page.on("requestfailed", lambda r: note(r.url, f"failed: {r.failure}"))
    return fate


def what_happened(fate: dict[str, str], live: LiveServer) -> str:
    """A failed test's page requests (in the order first sent) and the server log's tail: a
    stalled page then tells a request the browser never sent from one the server never
    answered."""
    log = live.log_path.read_text(errors="replace").splitlines()[-30:]
    requests = [f"{url}: {what}" for url, what in fate.items()]
    return "\n".join(["page requests:", *requests, "server log, last lines:", *log])


@pytest.fixture
def page(browser: Browser, live: LiveServer, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    fate = watch_requests(page)
    request.node.stash[DIAGNOSIS] = lambda: what_happened(fate, live)
    yield page
    context.close()
    assert errors == [], f"JavaScript errors in the console: {errors}"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("BUCKETD_SCREENSHOTS")
    folder = Path(target) if target else tmp_path_factory.mktemp("screens")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def sign_in(page: Page, live: LiveServer, key: str | None = None) -> None:
    page.goto(f"{live.url}/console/")
    page.get_by_label("API key").fill(key or live.admin_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("navigation", name="Sections")).to_be_visible()


def create_bucket(page: Page, name: str) -> None:
    page.goto(page.url.split("#")[0] + "#/buckets")
    page.get_by_label("Bucket name").fill(name)
    page.get_by_label("Region").select_option("eu-west-1")
    page.get_by_role("button", name="Create bucket").click()
    row = page.locator(f'tr[data-bucket="{name}"]')
    expect(row.locator(".badge")).to_have_text("active")


def drop_files(page: Page, files: list[tuple[str, str, bytes]]) -> None:
    """Drag-and-drop: a drop event carrying a DataTransfer of real File objects."""
    transfer = page.evaluate_handle(
        """(files) => {
            const transfer = new DataTransfer();
            for (const [name, type, bytes] of files) {
                transfer.items.add(new File([new Uint8Array(bytes)], name, { type }));
            }
            return transfer;
        }""",
        [[name, kind, list(content)] for name, kind, content in files],
    )
    page.dispatch_event("#dropzone", "dragover", {"dataTransfer": transfer})
    page.dispatch_event("#dropzone", "drop", {"dataTransfer": transfer})


def test_the_console_is_static_files_with_a_strict_policy(live: LiveServer) -> None:
    for path in ("/console", "/"):  # the server's root is the console's front door
        redirect = web.get(f"{live.url}{path}")
        assert redirect.status_code == 308 and redirect.headers["location"] == "/console/"
    index = web.get(f"{live.url}/console/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert index.headers["x-frame-options"] == "DENY"
    script = web.get(f"{live.url}/console/js/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert web.get(f"{live.url}/console/js/missing.js").status_code == 404
    icon = web.get(f"{live.url}/console/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert 'rel="icon" href="favicon.svg"' in index.text
    assert web.get(f"{live.url}/console/%2E%2E/static.py").status_code == 404
    # The console has no API of its own: without a key, /v1 still says 401.
    assert web.get(f"{live.url}/v1/buckets").status_code == 401


def test_sign_in_refuses_a_bad_key_and_keeps_a_good_one_in_the_tab(
    page: Page, live: LiveServer
) -> None:
    page.goto(f"{live.url}/console/")
    page.get_by_label("API key").fill("svc_" + "x" * 43)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("The key is not valid")
    assert page.evaluate("sessionStorage.length") == 0

    page.get_by_label("API key").fill(live.admin_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Buckets")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('bucketd.key')") == live.admin_key
    assert live.admin_key not in page.url
    assert page.evaluate("localStorage.length") == 0

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_buckets_files_and_folders(page: Page, live: LiveServer, shots: Path) -> None:
    sign_in(page, live)

    page.get_by_label("Bucket name").fill("Bad_Name")
    page.get_by_role("button", name="Create bucket").click()
    api_error = web.post(
        f"{live.url}/v1/buckets",
        headers={"Authorization": f"Bearer {live.admin_key}"},
        json={"name": "Bad_Name", "region": "eu-west-1"},
    ).json()["error"]
    expect(page.get_by_role("alert")).to_contain_text(api_error["message"])

    page.get_by_label("Bucket name").fill("photos")
    page.get_by_role("button", name="Create bucket").click()
    badge = page.locator('tr[data-bucket="photos"] .badge')
    expect(badge).to_have_text("provisioning")
    expect(badge).to_have_text("active")  # live, without a reload
    page.screenshot(path=shots / "buckets.png")

    page.get_by_role("link", name="photos").click()
    expect(page.get_by_role("heading", name="photos")).to_be_visible()
    image = png()
    text = b"hello from the console\n"
    drop_files(page, [("pic.png", "image/png", image), ("hello.txt", "text/plain", text)])
    for name in ("pic.png", "hello.txt"):
        item = page.locator(f'li[data-upload="{name}"]')
        expect(item.locator(".state")).to_have_text("done")
        assert item.locator("progress").get_attribute("value") == "100"
    expect(page.get_by_role("button", name="hello.txt", exact=True)).to_be_visible()

    with live.client() as http:
        bucket_id = http.get("/buckets").json()["data"][0]["id"]
        nested = b"# notes\n" * 100
        put = http.put(
            f"/buckets/{bucket_id}/files/docs/notes/readme.md",
            content=nested,
            headers={"Content-Type": "text/markdown", "Tagging": "topic=notes&draft=yes"},
        )
        assert put.status_code == 201
    page.reload()
    page.get_by_role("link", name="docs/").click()
    page.get_by_role("link", name="notes/").click()
    crumbs = page.get_by_role("navigation", name="Folder")
    expect(crumbs.locator('[aria-current="page"]')).to_have_text("notes")
    expect(crumbs.get_by_role("link", name="docs")).to_be_visible()

    page.get_by_role("button", name="readme.md", exact=True).click()
    details = page.get_by_role("complementary", name="File details")
    expect(details).to_contain_text(str(len(nested)))
    expect(details).to_contain_text("text/markdown")
    expect(details).to_contain_text("draft=yes, topic=notes")
    expect(details.locator("pre")).to_contain_text("# notes")
    page.screenshot(path=shots / "files.png")

    with page.expect_download() as download:
        page.get_by_role("button", name="Download readme.md").click()
    assert download.value.suggested_filename == "readme.md"
    assert Path(download.value.path()).read_bytes() == nested

    crumbs.get_by_role("link", name="photos").click()
    page.get_by_role("button", name="pic.png", exact=True).click()
    expect(page.get_by_role("img", name="Preview of pic.png")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download pic.png").click()
    assert Path(download.value.path()).read_bytes() == image

    page.get_by_role("button", name="Rename hello.txt").click()
    page.get_by_label("New key").fill("greeting.txt")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("button", name="greeting.txt", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="hello.txt", exact=True)).to_have_count(0)

    page.get_by_role("button", name="Delete greeting.txt").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("button", name="greeting.txt", exact=True)).to_have_count(0)
    with live.client() as http:
        keys = [f["key"] for f in http.get(f"/buckets/{bucket_id}/files").json()["data"]]
        assert keys == ["docs/notes/readme.md", "pic.png"]


def test_versioning_switch_and_a_files_history(page: Page, live: LiveServer) -> None:
    with live.client() as http:
        bucket_id = new_bucket(http, "history")["id"]
        early = http.put(  # before versioning: S3 names its version "null"
            f"/buckets/{bucket_id}/files/early.txt",
            content=b"early",
            headers={"Content-Type": "text/plain"},
        )
        assert early.status_code == 201
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket_id}/settings")
    expect(page.get_by_label("Versioning")).to_have_value("")
    page.get_by_label("Versioning").select_option("enabled")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    with live.client() as http:
        assert http.get(f"/buckets/{bucket_id}").json()["data"]["versioning"] == "enabled"
        for text in (b"first draft", b"second draft"):
            put = http.put(
                f"/buckets/{bucket_id}/files/notes.txt",
                content=text,
                headers={"Content-Type": "text/plain"},
            )
            assert put.status_code == 201

    page.goto(f"{live.url}/console/#/buckets/{bucket_id}")
    page.get_by_role("button", name="early.txt", exact=True).click()
    expect(page.get_by_text("none (written while versioning was off)")).to_be_visible()
    expect(page.locator("dd", has_text="null")).to_have_count(0)
    page.goto(f"{live.url}/console/#/buckets/{bucket_id}")
    page.get_by_role("button", name="notes.txt", exact=True).click()
    history = page.get_by_role("table", name="Versions of notes.txt")
    expect(history.locator("tbody tr")).to_have_count(2)
    expect(history.locator("tbody tr").first).to_contain_text("current")
    with page.expect_download() as download:
        history.get_by_role("button", name="Download the version of").last.click()
    assert Path(download.value.path()).read_bytes() == b"first draft"
    history.get_by_role("button", name="Restore the version of").click()
    expect(history.locator("tbody tr")).to_have_count(3)
    with live.client() as http:
        assert http.get(f"/buckets/{bucket_id}/files/notes.txt").content == b"first draft"
    history.get_by_role("button", name="Delete the version of").last.click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(history.locator("tbody tr")).to_have_count(2)

    page.get_by_role("button", name="Delete notes.txt").click()
    expect(page.get_by_role("dialog")).to_contain_text("every version of it stays")
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("button", name="notes.txt", exact=True)).to_have_count(0)
    with live.client() as http:
        versions = http.get(f"/buckets/{bucket_id}/versions", params={"key": "notes.txt"})
        assert [v["deleteMarker"] for v in versions.json()["data"]] == [True, False, False]


def test_object_lock_status_is_shown(page: Page, live: LiveServer) -> None:
    with live.client() as http:
        rule = {"defaultRetention": {"mode": "governance", "days": 3}}
        bucket_id = new_bucket(http, "locked", objectLock=rule)["id"]
        put = http.put(
            f"/buckets/{bucket_id}/files/contract.txt",
            content=b"signed",
            headers={"Content-Type": "text/plain"},
        )
        version = put.json()["data"]["versionId"]
        held = http.patch(
            f"/buckets/{bucket_id}/versions/{version}",
            json={"key": "contract.txt", "legalHold": True},
        )
        assert held.status_code == 200
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket_id}/settings")
    expect(page.get_by_text("Object lock is on")).to_contain_text("3 days (governance)")
    page.goto(f"{live.url}/console/#/buckets/{bucket_id}")
    page.get_by_role("button", name="contract.txt", exact=True).click()
    history = page.get_by_role("table", name="Versions of contract.txt")
    row = history.locator("tbody tr").first
    expect(row).to_contain_text("governance until")
    expect(row).to_contain_text("legal hold")
    history.get_by_role("button", name="Delete the version of").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_text("legal hold").first).to_be_visible()
    with live.client() as http:
        versions = http.get(f"/buckets/{bucket_id}/versions", params={"key": "contract.txt"})
        assert len(versions.json()["data"]) == 1


def test_lifecycle_rules_are_edited_in_the_settings(page: Page, live: LiveServer) -> None:
    with live.client() as http:
        bucket_id = new_bucket(http, "rules")["id"]
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket_id}/settings")
    rules = page.get_by_label("Lifecycle rules")
    expect(rules).to_have_value("")
    rules.fill('[{"id": "logs", "prefix": "logs/"}]')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("no action")
    rules.fill("[{")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("not valid JSON")
    rules.fill('[{"id": "logs", "prefix": "logs/", "expirationDays": 30}]')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    with live.client() as http:
        saved = http.get(f"/buckets/{bucket_id}").json()["data"]["lifecycle"]
    assert saved == [{"id": "logs", "prefix": "logs/", "expirationDays": 30}]


def test_default_encryption_is_set_in_the_settings_and_files_show_theirs(
    page: Page, live: LiveServer
) -> None:
    with live.client() as http:
        bucket = new_bucket(http, "sealed-things")
        files = f"/buckets/{bucket['id']}/files"
        plain = http.put(
            f"{files}/plain.txt", content=b"open", headers={"Content-Type": "text/plain"}
        )
        assert plain.status_code == 201
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}/settings")
    mode = page.get_by_label("Default encryption")
    key_name = page.get_by_label("KMS key", exact=True)
    expect(mode).to_have_value("")
    expect(key_name).to_be_hidden()
    save = page.get_by_role("button", name="Save", exact=True)

    def saved(upload: str, expected: str | None) -> None:
        """The bucket's default is `expected` now, and a file written into it gets it."""
        expect(page.get_by_role("status")).to_have_text("Saved.")
        with live.client() as http:
            assert http.get(f"/buckets/{bucket['id']}").json()["data"]["encryption"] == expected
            headers = {"Content-Type": "application/octet-stream"}
            assert http.put(f"{files}/{upload}", content=b"x", headers=headers).status_code == 201

    mode.select_option("AES256")
    save.click()
    saved("sse-s3.bin", "AES256")
    mode.select_option("aws:kms")
    expect(key_name).to_be_visible()
    key_name.fill("nope")
    save.click()
    expect(page.get_by_role("alert")).to_contain_text("nope")  # not in the keyring: 400
    key_name.fill("alpha")
    save.click()
    saved("sse-kms.bin", "aws:kms/alpha")
    page.reload()  # the form shows what the server has
    expect(mode).to_have_value("aws:kms")
    expect(key_name).to_have_value("alpha")
    mode.select_option("")
    save.click()
    saved("plain-again.bin", None)

    s3: Any = live.s3()
    customer = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)}
    s3.put_object(
        Bucket="sealed-things", Key="sse-c.txt", Body=b"mine", ContentType="text/plain", **customer
    )
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}")
    details = page.get_by_role("complementary", name="File details")
    shown = {
        "plain.txt": "None",
        "sse-s3.bin": "AES256 (SSE-S3",
        "sse-kms.bin": "aws:kms (SSE-KMS), key alpha",
        "plain-again.bin": "None",
        "sse-c.txt": "SSE-C: under its uploader's own key",
    }
    for name, words in shown.items():
        page.get_by_role("button", name=name, exact=True).click()
        expect(details.get_by_role("heading", name=name)).to_be_visible()
        expect(details.locator("dd.encryption")).to_contain_text(words)
    expect(details.get_by_role("alert")).to_have_count(0)  # no preview tried without its key
    expect(details.locator("pre")).to_have_count(0)
    with live.client() as http:  # the bucket list as the keyboard test counts its rows
        assert http.delete(f"/buckets/{bucket['id']}", params={"force": "true"}).status_code == 200


def test_sharing_is_set_in_the_settings_and_files_get_share_links(
    page: Page, live: LiveServer
) -> None:
    with live.client() as http:
        bucket = new_bucket(http, "shared-things")
        http.put(
            f"/buckets/{bucket['id']}/files/report.txt",
            content=b"quarterly",
            headers={"Content-Type": "text/plain"},
        )
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}/settings")
    page.get_by_label("Public: anyone may download").check()
    page.get_by_label("Cache-Control of public downloads").fill("public, max-age=60")
    policy = page.get_by_label("Bucket policy")
    policy.fill('{"Statement": [')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("not valid JSON")
    statement = (
        '{"Effect": "Maybe", "Principal": "*", "Action": "s3:GetObject", '
        '"Resource": "arn:aws:s3:::shared-things/*"}'
    )
    policy.fill('{"Statement": [' + statement + "]}")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("Effect is Allow or Deny")
    policy.fill('{"Statement": [' + statement.replace("Maybe", "Allow") + "]}")
    page.get_by_label("CORS rules").fill('[{"allowedOrigins": ["*"], "allowedMethods": ["GET"]}]')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    with live.client() as http:
        saved = http.get(f"/buckets/{bucket['id']}").json()["data"]
    assert saved["public"] and saved["cacheControl"] == "public, max-age=60"
    assert saved["policy"]["Statement"][0]["Effect"] == "Allow"
    assert saved["cors"] == [{"allowedOrigins": ["*"], "allowedMethods": ["GET"]}]
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}")
    page.get_by_role("button", name="report.txt", exact=True).click()
    page.get_by_label("Tags, one key=value per line").fill("team=finance\nyear=2026")
    page.get_by_role("button", name="Save tags").click()
    expect(page.get_by_role("status")).to_have_text("Tags saved.")
    page.get_by_label("Link lifetime").select_option("86400")
    page.get_by_role("button", name="Copy share link").click()
    link = page.get_by_label("Share link")
    expect(link).to_be_visible()
    assert web.get(link.input_value()).content == b"quarterly"
    with live.client() as http:
        tags = http.get(f"/buckets/{bucket['id']}/files/report.txt?metadata=true").json()
    assert tags["data"]["tags"] == {"team": "finance", "year": "2026"}


def test_webhooks_and_their_deliveries_in_the_settings(page: Page, live: LiveServer) -> None:
    from tests.support.receiver import Receiver

    receiver = Receiver().start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "hooked")
        sign_in(page, live)
        page.goto(f"{live.url}/console/#/buckets/{bucket['id']}/settings")
        page.get_by_label("Webhook URL").fill(receiver.url)
        page.get_by_role("button", name="Add webhook").click()
        expect(page.get_by_label("Signing secret")).to_have_value(re.compile("^whsec_"))
        with live.client() as http:
            http.put(
                f"/buckets/{bucket['id']}/files/a.txt",
                content=b"a",
                headers={"Content-Type": "text/plain"},
            )
        receiver.wait_for(1)
        page.reload()
        table = page.get_by_role("table", name=f"Recent deliveries to {receiver.url}")
        expect(table.locator('tr[data-status="delivered"]')).to_contain_text("200")
        expect(table).to_contain_text("ObjectCreated:Put")
        page.get_by_role("button", name="Disable").click()
        expect(page.get_by_role("button", name="Enable")).to_be_visible()
    finally:
        receiver.stop()


def test_snapshots_are_taken_restored_forked_and_deleted_in_the_settings(
    page: Page, live: LiveServer
) -> None:
    text = {"Content-Type": "text/plain"}
    with live.client() as http:
        bucket = new_bucket(http, "snapped")
        http.put(f"/buckets/{bucket['id']}/files/a.txt", content=b"a", headers=text)
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}/settings")
    snapshots = page.get_by_role("table", name="Snapshots of snapped")
    expect(snapshots).to_contain_text("No snapshots yet.")
    page.get_by_label("Snapshot label").fill("first")
    page.get_by_role("button", name="Take snapshot").click()
    expect(snapshots.locator("tbody tr")).to_have_count(1)
    expect(snapshots.locator("tbody tr")).to_contain_text("first")

    with live.client() as http:
        http.put(f"/buckets/{bucket['id']}/files/b.txt", content=b"b", headers=text)
    page.reload()
    expect(page.get_by_text("2 files")).to_be_visible()
    page.get_by_role("button", name="Restore snapshot first").click()
    page.get_by_role("dialog").get_by_role("button", name="Restore").click()
    expect(page.locator("#announcer")).to_contain_text("Restored snapped: 1 version.")
    expect(page.get_by_text("1 files")).to_be_visible()  # the page read the bucket again
    with live.client() as http:
        listed = http.get(f"/buckets/{bucket['id']}/files").json()["data"]
        assert [found["key"] for found in listed] == ["a.txt"]

    page.get_by_role("button", name="Fork snapshot first").click()
    page.get_by_label("New bucket name").fill("snapped-fork")
    page.get_by_role("button", name="Create fork").click()
    expect(page.get_by_role("link", name="snapped-fork")).to_be_visible()
    with live.client() as http:
        forks = [b for b in http.get("/buckets").json()["data"] if b["name"] == "snapped-fork"]
        assert len(forks) == 1 and forks[0]["fileCount"] == 1

    page.get_by_role("button", name="Delete snapshot first").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(snapshots).to_contain_text("No snapshots yet.")


def test_the_storage_bar_counts_what_only_snapshots_hold(page: Page, live: LiveServer) -> None:
    with live.client() as http:
        bucket = new_bucket(http, "held")
        path = f"/buckets/{bucket['id']}/files/only-in-the-snapshot.txt"
        assert http.put(
            path, content=b"x" * 2048, headers={"Content-Type": "text/plain"}
        ).is_success
        taken = http.post(f"/buckets/{bucket['id']}/snapshots").json()["data"]
        assert http.delete(path).status_code == 200
        usage = http.get("/organization").json()["data"]["usage"]
    try:
        assert usage["snapshotBytes"] == 2048
        sign_in(page, live)
        page.get_by_role("link", name="Organization").click()
        expect(page.get_by_text("2.0 KiB of it held only by snapshots")).to_be_visible()
        storage = page.get_by_role("meter", name="Storage")
        assert storage.get_attribute("value") == str(usage["storedBytes"] + 2048)
    finally:
        with live.client() as http:
            assert http.delete(f"/snapshots/{taken['id']}").status_code == 204


def test_a_large_folder_pages_with_load_more(page: Page, live: LiveServer) -> None:
    sign_in(page, live)
    create_bucket(page, "many")
    with live.client() as http:
        bucket = next(b for b in http.get("/buckets").json()["data"] if b["name"] == "many")
        for n in range(130):
            http.put(
                f"/buckets/{bucket['id']}/files/f{n:03}",
                content=b"x",
                headers={"Content-Type": "text/plain"},
            )
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}")
    rows = page.locator("table[aria-label=Files] tbody tr")
    expect(rows).to_have_count(100)
    more = page.get_by_role("button", name="Load more")
    more.click()
    expect(rows).to_have_count(130)
    expect(more).to_be_hidden()
    assert rows.last.get_attribute("data-key") == "f129"


def test_a_filter_new_folders_and_several_files_deleted_at_once(
    page: Page, live: LiveServer
) -> None:
    with live.client() as http:
        bucket = new_bucket(http, "tidy")
        files = f"/buckets/{bucket['id']}/files"
        for key, size in (("a1.txt", 1), ("a2.txt", 1), ("b1.txt", 1), ("big.bin", 1_234_567)):
            http.put(f"{files}/{key}", content=b"x" * size, headers={"Content-Type": "text/plain"})
    sign_in(page, live)
    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}")
    rows = page.locator("table[aria-label=Files] tbody tr")
    expect(rows).to_have_count(4)
    page.get_by_label("Filter by name").fill("a")
    expect(rows).to_have_count(2)  # a1.txt, a2.txt: asked of the server as a longer prefix
    page.get_by_label("Select a1.txt").check()
    page.get_by_label("Select a2.txt").check()
    page.get_by_role("button", name="Delete 2 selected").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete 2").click()
    listing = page.locator("table[aria-label=Files] tbody")
    expect(listing).to_contain_text("No name here starts so.")
    page.get_by_label("Filter by name").fill("")
    expect(rows).to_have_count(2)

    page.get_by_role("button", name="big.bin", exact=True).click()
    details = page.get_by_role("complementary", name="File details")
    expect(details).to_contain_text("(1,234,567 bytes)")

    page.get_by_role("button", name="New folder").click()
    page.get_by_label("Folder name").fill("reports")
    page.get_by_role("button", name="Save", exact=True).click()
    crumbs = page.get_by_role("navigation", name="Folder")
    expect(crumbs.locator('[aria-current="page"]')).to_have_text("reports")
    expect(listing).to_contain_text("This folder is empty.")
    crumbs.get_by_role("link", name="tidy").click()
    expect(page.get_by_role("link", name="reports/")).to_be_visible()
    with live.client() as http:
        keys = [f["key"] for f in http.get(f"{files}").json()["data"]]
    assert keys == ["b1.txt", "big.bin", "reports/"]


def test_refusals_are_shown_in_words(page: Page, live: LiveServer) -> None:
    sign_in(page, live)
    create_bucket(page, "images-only")
    page.locator('tr[data-bucket="images-only"]').get_by_role("link", name="Settings").click()
    page.get_by_label("Allowed MIME types").fill("image/*")
    page.get_by_label("Largest file, in bytes").fill("1000")
    page.get_by_label("Name").fill("pictures")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    with live.client() as http:
        bucket = next(b for b in http.get("/buckets").json()["data"] if b["name"] == "pictures")
    assert bucket["allowedContentTypes"] == ["image/*"] and bucket["maxUploadBytes"] == 1000

    page.goto(f"{live.url}/console/#/buckets/{bucket['id']}")
    page.get_by_label("Choose files").set_input_files(
        [
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"words"},
            {"name": "huge.png", "mimeType": "image/png", "buffer": png() + b"\0" * 2000},
        ]
    )
    refused = page.locator('li[data-upload="notes.txt"]')
    expect(refused).to_contain_text("does not accept files of this type")
    expect(refused).to_contain_text("415")
    too_large = page.locator('li[data-upload="huge.png"]')
    expect(too_large).to_contain_text("Too large for this bucket's size limit")
    expect(too_large).to_contain_text("413")


def test_deleting_a_bucket_names_it_and_its_files(page: Page, live: LiveServer) -> None:
    sign_in(page, live)
    create_bucket(page, "doomed")
    with live.client() as http:
        bucket = next(b for b in http.get("/buckets").json()["data"] if b["name"] == "doomed")
        for key in ("a", "b", "c"):
            http.put(
                f"/buckets/{bucket['id']}/files/{key}",
                content=b"x",
                headers={"Content-Type": "text/plain"},
            )
    page.get_by_role("button", name="Delete bucket doomed").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("doomed")
    expect(dialog).to_contain_text("3 files")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.locator('tr[data-bucket="doomed"]')).to_have_count(1)

    page.get_by_role("button", name="Delete bucket doomed").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete doomed and 3 files").click()
    expect(page.locator('tr[data-bucket="doomed"]')).to_have_count(0)
    with live.client() as http:
        assert http.get(f"/buckets/{bucket['id']}").status_code == 404


def test_organization_usage_and_rate_limit_headers(
    page: Page, live: LiveServer, shots: Path
) -> None:
    sign_in(page, live)
    page.get_by_role("link", name="Organization").click()
    expect(page.get_by_role("heading", name="default, pro plan")).to_be_visible()
    with live.client() as http:
        org = http.get("/organization").json()["data"]
    storage = page.get_by_role("meter", name="Storage")
    assert storage.get_attribute("max") == str(org["limits"]["maxStorageBytes"])
    buckets = page.get_by_role("meter", name="Buckets")
    assert buckets.get_attribute("value") == str(org["usage"]["buckets"])
    expect(page.get_by_text("X-RateLimit-Remaining")).to_be_visible()
    expect(page.locator("dl.limits")).to_contain_text(f"{org['limits']['requestsPerMinute']:,}")
    page.screenshot(path=shots / "organization.png")


def create_key(page: Page, name: str, *choices: str) -> None:
    """The keys form filled in: a name, then each kind or scope label checked."""
    page.get_by_role("link", name="Keys").click()
    page.get_by_label("Key name").fill(name)
    for label in choices:
        page.get_by_label(label).check()
    page.get_by_role("button", name="Create key").click()


def revoke_key(page: Page, name: str) -> None:
    page.get_by_role("button", name=f"Revoke key {name}").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    expect(page.locator(f'tr[data-key-name="{name}"]')).to_contain_text("revoked")


def test_keys_create_shows_the_secret_once_and_revoke_stops_it(
    page: Page, live: LiveServer, shots: Path
) -> None:
    sign_in(page, live)
    create_key(page, "uploader", "files:read", "files:write")
    secret = page.get_by_role("textbox", name="Secret", exact=True).input_value()
    assert secret.startswith("svc_")
    expect(page.get_by_role("button", name="Copy secret")).to_be_visible()
    radio = page.get_by_role("radio", name="API key").bounding_box()
    label = page.get_by_text("API key", exact=True).bounding_box()
    assert radio and label and radio["x"] + radio["width"] < label["x"] < radio["x"] + 60  # beside
    page.screenshot(path=shots / "keys.png")
    with live.client(secret) as http:
        assert http.get("/buckets").status_code == 403  # a valid key without buckets:read
        assert http.get("/organization").status_code == 200

    page.get_by_role("button", name="Done").click()
    expect(page.get_by_role("textbox", name="Secret", exact=True)).to_have_count(0)
    revoke_key(page, "uploader")
    with live.client(secret) as http:
        assert http.get("/organization").status_code == 401


def test_s3_credentials_and_metrics_keys_are_made_and_revoked_here(
    page: Page, live: LiveServer
) -> None:
    sign_in(page, live)
    create_key(page, "s3-reader", "S3 credentials", "buckets:read")
    access = page.get_by_role("textbox", name="Access key id").input_value()
    secret = page.get_by_role("textbox", name="Secret access key").input_value()
    s3 = live.s3(access, secret)
    assert "Buckets" in s3.list_buckets()
    expect(page.locator('tr[data-key-name="s3-reader"]')).to_contain_text(f"S3 {access}")
    revoke_key(page, "s3-reader")
    with pytest.raises(Exception, match="InvalidAccessKeyId"):
        s3.list_buckets()

    create_key(page, "prometheus", "Metrics key")  # the admin key lacks metrics:read: told so
    expect(page.get_by_role("alert")).to_contain_text("metrics:read")
    operator = live.cli(
        "keys", "create", "--org", org_id(live), "--scopes", "keys:manage,metrics:read"
    ).splitlines()[-1]
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, live, operator)
    create_key(page, "prometheus", "Metrics key")
    scraper = page.get_by_role("textbox", name="Secret", exact=True).input_value()
    metrics = web.get(f"{live.url}/metrics", headers={"Authorization": f"Bearer {scraper}"})
    assert metrics.status_code == 200 and "bucketd_" in metrics.text
    expect(page.locator('tr[data-key-name="prometheus"]')).to_contain_text("metrics")


def test_a_key_without_keys_manage_is_told_so(page: Page, live: LiveServer) -> None:
    reader = live.cli(
        "keys", "create", "--org", org_id(live), "--scopes", "buckets:read,files:read"
    ).splitlines()[-1]
    sign_in(page, live, reader)
    page.get_by_role("link", name="Keys").click()
    expect(page.get_by_role("alert")).to_contain_text("no keys:manage scope")


def test_works_with_the_keyboard_alone(page: Page, live: LiveServer) -> None:
    page.goto(f"{live.url}/console/")
    page.keyboard.type(live.admin_key)  # the key field has the focus
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Buckets")).to_be_focused()
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.name") == "name":
            break
    page.keyboard.type("typed")
    page.keyboard.press("Enter")  # submits the create form
    expect(page.locator('tr[data-bucket="typed"] .badge')).to_have_text("active")
    page.keyboard.press("Shift+Tab")
    for _ in range(40):
        if page.evaluate("document.activeElement.textContent") == "typed":
            break
        page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="typed")).to_be_visible()


UNLABELED = """() => [
    ...document.querySelectorAll('input, select, textarea, button, meter, progress')
].filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                 && !el.textContent.trim())
 .map((el) => el.outerHTML)"""


def test_every_control_has_a_label(page: Page, live: LiveServer) -> None:
    sign_in(page, live)
    create_bucket(page, "labelled")
    with live.client() as http:
        bucket = next(b for b in http.get("/buckets").json()["data"] if b["name"] == "labelled")
        http.put(
            f"/buckets/{bucket['id']}/files/a/b.txt",
            content=b"x",
            headers={"Content-Type": "text/plain"},
        )
    sections = ["#/buckets", "#/organization", "#/keys", f"#/buckets/{bucket['id']}"]
    sections += [f"#/buckets/{bucket['id']}/settings", f"#/buckets/{bucket['id']}?prefix=a/"]
    for section in sections:
        page.goto(f"{live.url}/console/{section}")
        page.wait_for_load_state("networkidle")
        expect(page.locator("main h1")).to_be_visible()
        assert page.evaluate(UNLABELED) == [], section
    page.get_by_role("button", name="b.txt", exact=True).click()
    expect(page.get_by_role("complementary", name="File details")).to_be_visible()
    assert page.evaluate(UNLABELED) == []


WIDEST = """Array.from(document.querySelectorAll("body *"))
    .filter((e) => e.getBoundingClientRect().right > innerWidth || e.scrollWidth > e.clientWidth)
    .map((e) => `${e.tagName}.${e.className}: `
        + `right ${Math.round(e.getBoundingClientRect().right)}px, `
        + `content ${e.scrollWidth}px in ${e.clientWidth}px`)
    .slice(0, 10)"""
"""The elements that stick out past the viewport or whose content overflows them (a long word
overflows its paragraph without moving the paragraph's edge), to name what broke the layout."""


@pytest.mark.parametrize("width", [360, 1440])
def test_readable_from_a_phone_to_a_desktop(
    browser: Browser, live: LiveServer, width: int, shots: Path
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        sign_in(page, live)
        for section in ("#/buckets", "#/organization", "#/keys"):
            page.goto(f"{live.url}/console/{section}")
            page.wait_for_load_state("networkidle")
            expect(page.locator("main h1")).to_be_visible()
            try:  # the final layout: under load a frame may be measured before styles apply
                page.wait_for_function(
                    f"document.documentElement.scrollWidth <= {width}", timeout=3000
                )
            except PlaywrightError:
                wide = page.evaluate(WIDEST)
                overflow = page.evaluate("document.documentElement.scrollWidth")
                raise AssertionError(
                    f"{section} is {overflow}px wide at {width}px: {wide}"
                ) from None
        if width == 360:
            page.goto(f"{live.url}/console/#/buckets")
            page.wait_for_load_state("networkidle")
            page.screenshot(path=shots / "phone.png", full_page=True)
    finally:
        context.close()


def org_id(live: LiveServer) -> str:
    with live.client() as http:
        return str(http.get("/organization").json()["data"]["id"])
