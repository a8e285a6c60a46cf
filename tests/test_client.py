"""bucketd_client against a live server: every endpoint, sync and async, the typed errors,
streaming both ways, pagination, and retries (against a real server that fails on purpose)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import bucketd_client as bc
from bucketd_client.calls import Retry, key_path
from tests.support.live import ROOT, TEST_CONFIG, LiveServer, free_port
from tests.support.names import unique_name

CONFIG = (
    TEST_CONFIG
    + """
[plans.free]
requests_per_minute = 10000000
max_buckets = 1
max_storage_bytes = 1000
"""
)
FAST = Retry(attempts=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("client") / "data", CONFIG).start()
    yield server
    server.stop()


@pytest.fixture
def client(live: LiveServer) -> Iterator[bc.Client]:
    with bc.Client(live.url, live.admin_key) as client:
        yield client


@pytest.fixture
def bucket(client: bc.Client) -> bc.Bucket:
    return client.wait_until_active(client.create_bucket(unique_name(), "us-east-1"))


def test_bucket_lifecycle(client: bc.Client) -> None:
    created = client.create_bucket(
        unique_name(), "eu-west-1", max_upload_bytes=100, allowed_content_types=["text/*"]
    )
    assert created.status == "provisioning"
    active = client.wait_until_active(created, timeout=10)
    assert active.status == "active" and active.allowed_content_types == ("text/*",)
    assert client.get_bucket(created.id) == active
    assert client.get_bucket_by_name(created.name) == active
    renamed = client.update_bucket(created.id, name=unique_name("renamed"), max_upload_bytes=None)
    assert renamed.name.startswith("renamed-") and renamed.max_upload_bytes > 100
    with pytest.raises(bc.BucketNameTaken) as taken:
        client.create_bucket(renamed.name, "us-east-1")
    assert taken.value.status == 409 and taken.value.code == "bucket_name_taken"
    client.upload(created.id, "a.txt", b"a")
    with pytest.raises(bc.BucketNotEmpty):
        client.delete_bucket(created.id)
    client.delete_bucket(created.id, force=True)
    with pytest.raises(bc.BucketNotFound) as missing:
        client.get_bucket(created.id)
    assert isinstance(missing.value, bc.NotFound) and missing.value.status == 404


def test_iterators_follow_the_cursor(client: bc.Client, bucket: bc.Bucket) -> None:
    keys = [f"dir/{i:02}" for i in range(7)] + ["other"]
    for key in keys:
        client.upload(bucket.id, key, key.encode())
    assert [f.key for f in client.iter_files(bucket.id, page_size=3)] == sorted(keys)
    assert [f.key for f in client.iter_files(bucket.id, prefix="dir/", page_size=2)] == keys[:7]
    page = client.list_files(bucket.id, delimiter="/", limit=10)
    assert page.prefixes == ["dir/"] and [f.key for f in page] == ["other"]
    assert not page.has_more
    first = client.list_files(bucket.id, limit=3)
    assert len(first) == 3 and first.has_more and first.next_cursor
    ids = {b.id for b in client.iter_buckets(page_size=1)}
    assert bucket.id in ids


def test_uploads_from_every_source_and_downloads(
    client: bc.Client, bucket: bc.Bucket, tmp_path: Path
) -> None:
    big = bytes(range(256)) * 12_000  # 3 MiB: several chunks
    path = tmp_path / "big.bin"
    path.write_bytes(big)
    seen: list[tuple[int, int | None]] = []
    stored = client.upload(
        bucket.id, "from/path.bin", path, progress=lambda done, total: seen.append((done, total))
    )
    assert stored.size == len(big) and stored.sha256 == hashlib.sha256(big).hexdigest()
    assert seen[-1] == (len(big), len(big)) and len(seen) >= 3
    assert stored.content_type == "application/octet-stream"

    with path.open("rb") as handle:
        handle.seek(10)
        assert client.upload(bucket.id, "from/file", handle).size == len(big) - 10
    chunks = (bytes([i]) * 1000 for i in range(5))
    streamed = client.upload(bucket.id, "from/iter.txt", chunks)
    assert streamed.size == 5000 and streamed.content_type == "text/plain"
    typed = client.upload(bucket.id, "from/bytes", b"{}", content_type="application/json")
    assert client.get_file(bucket.id, "from/bytes") == typed

    target = tmp_path / "out" / "big.bin"
    progress: list[int] = []
    meta = client.download(
        bucket.id, "from/path.bin", target, progress=lambda done, total: progress.append(done)
    )
    assert target.read_bytes() == big and meta.etag == stored.etag and meta.size == len(big)
    assert progress[-1] == len(big)
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".part")]
    sink = io.BytesIO()
    client.download(bucket.id, "from/iter.txt", sink)
    assert sink.getvalue() == b"".join(bytes([i]) * 1000 for i in range(5))
    assert client.read(bucket.id, "from/path.bin", start=256, end=260) == bytes(range(4))
    assert client.read(bucket.id, "from/path.bin", start=len(big) - 2) == big[-2:]
    assert b"".join(client.iter_bytes(bucket.id, "from/path.bin")) == big


def test_missing_file_download_leaves_no_partial_file(
    client: bc.Client, bucket: bc.Bucket, tmp_path: Path
) -> None:
    with pytest.raises(bc.FileNotFound) as missing:
        client.download(bucket.id, "nope", tmp_path / "nope")
    assert missing.value.code == "file_not_found" and missing.value.status == 404
    assert list(tmp_path.iterdir()) == []


def test_keys_with_awkward_characters_round_trip(client: bc.Client, bucket: bc.Bucket) -> None:
    for key in ["a b/ü?x#y%z", "../up", "./here", "a//b", "trailing/", "+plus&amp=1"]:
        client.upload(bucket.id, key, key.encode())
        assert client.read(bucket.id, key) == key.encode()
        assert client.get_file(bucket.id, key).key == key
    assert key_path("../a/./b") == "%2E%2E/a/%2E/b"


def test_rename_retype_and_delete(client: bc.Client, bucket: bc.Bucket) -> None:
    client.upload(bucket.id, "old", b"x", content_type="text/plain")
    moved = client.update_file(bucket.id, "old", new_key="new", content_type="text/csv")
    assert moved.key == "new" and moved.content_type == "text/csv"
    client.upload(bucket.id, "other", b"y")
    with pytest.raises(bc.FileExists):
        client.update_file(bucket.id, "other", new_key="new")
    client.delete_file(bucket.id, "new")
    with pytest.raises(bc.FileNotFound):
        client.get_file(bucket.id, "new")


def test_refusals_are_typed(client: bc.Client) -> None:
    small = client.wait_until_active(
        client.create_bucket(
            unique_name(), "us-east-1", max_upload_bytes=10, allowed_content_types=["image/*"]
        )
    )
    with pytest.raises(bc.TooLarge) as too_large:
        client.upload(small.id, "x.png", b"0123456789ab")
    assert too_large.value.status == 413
    with pytest.raises(bc.UnsupportedMediaType):
        client.upload(small.id, "x.txt", b"0")
    with pytest.raises(bc.BadRequest) as bad:
        client.create_bucket("NO", "us-east-1")
    assert bad.value.code == "invalid_bucket_name"
    client.upload(small.id, "r.png", b"1")
    with pytest.raises(bc.RangeNotSatisfiable):
        client.read(small.id, "r.png", start=5)


def test_keys_and_the_organization(live: LiveServer, client: bc.Client, bucket: bc.Bucket) -> None:
    org = client.get_organization()
    assert org.plan == "pro" and org.usage.buckets >= 1 and org.limits.max_buckets > 0
    key = client.create_key("reader", ["files:read"], bucket_id=bucket.id)
    assert key.secret and key.secret.startswith("svc_") and key.bucket_id == bucket.id
    assert client.get_key(key.id).secret is None
    assert key.id in {k.id for k in client.iter_keys(page_size=1)}
    client.upload(bucket.id, "k", b"v")
    with bc.Client(live.url, key.secret) as reader:
        assert reader.read(bucket.id, "k") == b"v"
        with pytest.raises(bc.Forbidden) as forbidden:
            reader.upload(bucket.id, "k", b"w")
        assert forbidden.value.code == "insufficient_scope"
        client.revoke_key(key.id)
        with pytest.raises(bc.Unauthorized) as revoked:
            reader.read(bucket.id, "k")
        assert revoked.value.code == "invalid_api_key"
    assert client.get_key(key.id).revoked_at is not None


def test_quota_exceeded_on_a_free_plan(live: LiveServer) -> None:
    org_id = live.cli("orgs", "create", "tiny", "--plan", "free").strip().splitlines()[-1]
    secret = (
        live.cli(
            "keys", "create", "--org", org_id, "--scopes", "buckets:write,buckets:read,files:write"
        )
        .strip()
        .splitlines()[-1]
    )
    with bc.Client(live.url, secret) as tiny:
        first = tiny.wait_until_active(tiny.create_bucket(unique_name(), "us-east-1"))
        with pytest.raises(bc.QuotaExceeded) as buckets:
            tiny.create_bucket(unique_name(), "us-east-1")
        assert buckets.value.status == 402 and buckets.value.code == "quota_exceeded"
        with pytest.raises(bc.QuotaExceeded):
            tiny.upload(first.id, "big", b"x" * 1001)


def test_wait_until_active_times_out(tmp_path: Path) -> None:
    slow = LiveServer(tmp_path / "data", "provisioning_delay_seconds = 30\n" + TEST_CONFIG).start()
    try:
        with bc.Client(slow.url, slow.admin_key) as client:
            created = client.create_bucket(unique_name(), "us-east-1")
            with pytest.raises(TimeoutError):
                client.wait_until_active(created, timeout=0.3, interval=0.05)
    finally:
        slow.stop()


def test_environment_supplies_url_and_key(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUCKETD_URL", live.url)
    monkeypatch.setenv("BUCKETD_KEY", live.admin_key)
    with bc.Client() as client:
        assert client.get_organization().name == "default"
    monkeypatch.delenv("BUCKETD_KEY")
    with pytest.raises(ValueError, match="BUCKETD_KEY"):
        bc.Client()


@pytest.mark.anyio
async def test_async_client(live: LiveServer, tmp_path: Path) -> None:
    async with bc.AsyncClient(live.url, live.admin_key) as client:
        bucket = await client.wait_until_active(
            await client.create_bucket(unique_name(), "us-east-1")
        )

        async def parts() -> AsyncIterator[bytes]:
            for i in range(3):
                yield bytes([65 + i]) * 700_000

        stored = await client.upload(bucket.id, "async/parts", parts(), content_type="text/plain")
        assert stored.size == 2_100_000
        source = tmp_path / "src"
        source.write_bytes(b"from a path")
        await client.upload(bucket.id, "async/path", source)
        keys = [f.key async for f in client.iter_files(bucket.id, page_size=1)]
        assert keys == ["async/parts", "async/path"]
        target = tmp_path / "got"
        meta = await client.download(bucket.id, "async/parts", target)
        assert meta.etag == stored.etag and target.stat().st_size == 2_100_000
        assert await client.read(bucket.id, "async/path", start=5) == b"a path"
        assert b"".join([c async for c in client.iter_bytes(bucket.id, "async/path")]) == (
            b"from a path"
        )
        assert (await client.update_file(bucket.id, "async/path", new_key="moved")).key == "moved"
        await client.delete_file(bucket.id, "moved")
        with pytest.raises(bc.FileNotFound):
            await client.get_file(bucket.id, "moved")
        assert (await client.get_organization()).usage.files >= 1
        key = await client.create_key("k", ["files:read"])
        assert key.id in {k.id async for k in client.iter_keys()}
        await client.revoke_key(key.id)
        await client.delete_bucket(bucket.id, force=True)


def test_versions(client: bc.Client, tmp_path: Path) -> None:
    bucket = client.wait_until_active(
        client.create_bucket(unique_name(), "us-east-1", versioning="enabled")
    )
    assert bucket.versioning == "enabled"
    first = client.upload(bucket.id, "doc.txt", b"first")
    second = client.upload(bucket.id, "doc.txt", b"second")
    assert first.version_id and second.version_id and first.version_id != second.version_id
    client.delete_file(bucket.id, "doc.txt")
    with pytest.raises(bc.FileNotFound):
        client.get_file(bucket.id, "doc.txt")
    history = list(client.iter_versions(bucket.id, key="doc.txt", page_size=1))
    assert [v.delete_marker for v in history] == [True, False, False]
    assert client.read(bucket.id, "doc.txt", version_id=first.version_id) == b"first"
    target = tmp_path / "old"
    assert client.download(bucket.id, "doc.txt", target, version_id=first.version_id).version_id
    assert target.read_bytes() == b"first"
    restored = client.restore_version(bucket.id, "doc.txt", first.version_id)
    assert client.get_file(bucket.id, "doc.txt").version_id == restored.version_id
    client.delete_file(bucket.id, "doc.txt", version_id=second.version_id)
    with pytest.raises(bc.FileNotFound):
        client.get_file(bucket.id, "doc.txt", version_id=second.version_id)
    assert client.update_bucket(bucket.id, versioning="suspended").versioning == "suspended"
    client.delete_bucket(bucket.id, force=True)


@pytest.mark.anyio
async def test_async_versions(live: LiveServer) -> None:
    async with bc.AsyncClient(live.url, live.admin_key) as client:
        bucket = await client.wait_until_active(
            await client.create_bucket(unique_name(), "us-east-1", versioning="enabled")
        )
        first = await client.upload(bucket.id, "k", b"one")
        await client.upload(bucket.id, "k", b"two")
        assert first.version_id is not None
        assert await client.read(bucket.id, "k", version_id=first.version_id) == b"one"
        keys = [v.version_id async for v in client.iter_versions(bucket.id, page_size=1)]
        assert len(keys) == 2 and keys[1] == first.version_id
        await client.restore_version(bucket.id, "k", first.version_id)
        assert await client.read(bucket.id, "k") == b"one"
        await client.delete_file(bucket.id, "k", version_id=first.version_id)
        assert len((await client.list_versions(bucket.id, prefix="k")).items) == 2
        await client.delete_bucket(bucket.id, force=True)


class Flaky:
    """A real HTTP server that answers `failures` errors before each success."""

    def __init__(self, status: int, failures: int, retry_after: str | None = "0") -> None:
        self.status, self.failures, self.retry_after = status, failures, retry_after
        self.hits = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    async def answer(self, request: Request) -> JSONResponse:
        self.hits += 1
        if self.hits <= self.failures:
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            body = {"data": None, "error": {"code": "x", "message": "try again"}, "meta": None}
            return JSONResponse(body, self.status, headers)
        return JSONResponse(
            {
                "data": {
                    "id": "svc_1",
                    "object": "bucket",
                    "name": "ok",
                    "region": "us-east-1",
                    "status": "active",
                    "statusReason": None,
                    "createdAt": "2026-01-01T00:00:00Z",
                    "maxUploadBytes": 1,
                    "allowedContentTypes": ["*/*"],
                    "fileCount": 0,
                    "sizeBytes": 0,
                },
                "error": None,
                "meta": None,
            },
            201 if request.method == "POST" else 200,
        )

    def __enter__(self) -> Flaky:
        app = Starlette(
            routes=[Route("/v1/buckets{rest:path}", self.answer, methods=["GET", "POST"])]
        )
        self.server = uvicorn.Server(uvicorn.Config(app, port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join()


@pytest.mark.parametrize("status", [429, 500, 503])
def test_idempotent_calls_are_retried(status: int) -> None:
    with Flaky(status, failures=2) as flaky, bc.Client(flaky.url, "svc_x", retry=FAST) as client:
        assert client.get_bucket("svc_1").name == "ok"
        assert flaky.hits == 3


def test_retries_give_up_with_the_typed_error() -> None:
    with (
        Flaky(429, failures=10, retry_after="7") as flaky,
        bc.Client(flaky.url, "svc_x", retry=FAST) as client,
    ):
        with pytest.raises(bc.RateLimited) as limited:
            client.get_bucket("svc_1")
        assert limited.value.retry_after == 7.0
        assert flaky.hits == 1 + FAST.attempts


def test_creates_are_not_retried_unless_asked() -> None:
    with Flaky(500, failures=1) as flaky, bc.Client(flaky.url, "svc_x", retry=FAST) as client:
        with pytest.raises(bc.ServerError):
            client.create_bucket("ok", "us-east-1")
        assert flaky.hits == 1
    retry_all = Retry(attempts=2, backoff=0.01, non_idempotent=True)
    with Flaky(500, failures=1) as flaky, bc.Client(flaky.url, "svc_x", retry=retry_all) as client:
        assert client.create_bucket("ok", "us-east-1").name == "ok"
        assert flaky.hits == 2


def test_no_retry_when_disabled() -> None:
    with Flaky(503, failures=1) as flaky, bc.Client(flaky.url, "svc_x", retry=None) as client:
        with pytest.raises(bc.Unavailable):
            client.get_bucket("svc_1")
        assert flaky.hits == 1


def test_each_retry_is_told_and_a_server_not_there_is_a_client_error() -> None:
    told: list[tuple[int | None, float]] = []
    notifying = Retry(attempts=2, backoff=0.01, notify=lambda *retry: told.append(retry))
    with (
        Flaky(429, failures=1, retry_after="0") as flaky,
        bc.Client(flaky.url, "svc_x", retry=notifying) as client,
    ):
        assert client.get_bucket("svc_1").name == "ok"
        port = flaky.port
    assert told == [(429, 0.0)]
    told.clear()
    with (
        bc.Client(f"http://127.0.0.1:{port}", "svc_x", retry=notifying) as client,
        pytest.raises(bc.ConnectionFailed) as refused,
    ):
        client.get_bucket("svc_1")
    assert isinstance(refused.value, bc.BucketdError) and refused.value.status == 0
    assert str(refused.value).startswith(f"cannot reach http://127.0.0.1:{port}/")
    assert [status for status, _ in told] == [None, None]


def test_the_cli_says_when_it_is_rate_limited_and_waits() -> None:
    with Flaky(429, failures=1, retry_after="1") as flaky:
        ran = subprocess.run(
            [sys.executable, "-m", "gateway", "buckets", "lifecycle", "svc_1", "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "BUCKETD_URL": flaky.url, "BUCKETD_KEY": "svc_x"},
            timeout=60,
        )
        assert flaky.hits == 2
    assert ran.stderr.splitlines()[0] == "bucketd: rate limited; retrying in 1 s", ran.stderr


@pytest.mark.anyio
async def test_the_async_client_says_connection_failures_too() -> None:
    async with bc.AsyncClient("http://127.0.0.1:9", "svc_x", retry=None) as client:
        with pytest.raises(bc.ConnectionFailed):
            await client.get_bucket_by_name("nope")


def test_retry_waits_what_retry_after_says() -> None:
    import httpx

    policy = Retry(max_backoff=30)
    answer = httpx.Response(429, headers={"Retry-After": "12"})
    assert policy.delay(0, answer) == 12
    assert Retry(max_backoff=5).delay(0, answer) == 5
    assert 0.125 <= policy.delay(1, None) <= 0.5


def test_the_client_is_mypy_strict_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "bucketd_client"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout


def test_clients_share_one_tls_context_per_trust_setting(tmp_path: Path) -> None:
    """Each client verifies with the context httpx would build, made once per process for
    each SSL_CERT_FILE / SSL_CERT_DIR / certifi choice instead of once per client."""
    import trustme

    from bucketd_client.calls import tls_context

    authority, ca = trustme.CA(), tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    default = tls_context({})
    assert tls_context({"SSL_CERT_FILE": ""}) is default
    assert len(default.get_ca_certs()) > 50  # certifi's bundle
    custom = tls_context({"SSL_CERT_FILE": str(ca)})
    assert custom is tls_context({"SSL_CERT_FILE": str(ca)}) and custom is not default
    assert len(custom.get_ca_certs()) == 1
    contexts = []
    for key in ("bk_x", "bk_y"):
        with bc.Client("http://127.0.0.1:1", key) as typed:
            contexts.append(cast(Any, typed)._http._transport._pool._ssl_context)
    assert contexts[0] is contexts[1] is tls_context(os.environ)
