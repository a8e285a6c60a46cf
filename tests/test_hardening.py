"""Ways in that a hostile client found, each kept shut: bodies that exhaust memory, parts that
escape quotas, connections that never finish their head, keys that outlive their maker, type
lists that smuggle HTML, revoked and over-long credentials, keys with a line feed, racing
completes, foreign credential scopes, lying aws-chunked lengths, bad UTF-8 in queries, and
contents rotting on disk (the deep scrub)."""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError

from gateway.s3 import sigv2
from tests.support import launch, web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.metrics import metrics_key
from tests.support.names import bucket_id_named
from tests.support.rawhttp import read_response, request_head
from tests.support.s3 import signed_headers

MiB = 1024 * 1024
QUOTA = 12 * MiB
CONFIG = (
    TEST_CONFIG
    + f"""
[plans.free]
requests_per_minute = 10000000
max_storage_bytes = {QUOTA}

[connections]
head_timeout_seconds = 1.0
max_per_client = 300

[uploads]
multipart_expiry_seconds = 3600
cleanup_interval_seconds = 0.5
"""
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("hardening") / "data", CONFIG).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3(live: LiveServer) -> Any:
    return live.s3()


_names = iter(range(10_000))


def unique(stem: str = "h") -> str:
    return f"{stem}{next(_names)}-{int(time.time() * 1000) % 1_000_000}"


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique()
    s3.create_bucket(Bucket=name)
    return name


def code(error: ClientError) -> str:
    return str(error.response["Error"]["Code"])


def peak_rss(live: LiveServer) -> int:
    assert live.process is not None
    status = Path(f"/proc/{live.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def send_chunked(url: str, method: str, path: str, headers: dict[str, str], total: int) -> int:
    """Stream `total` bytes as chunked transfer-encoding until the server answers; its
    status."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request_head(method, path, {**headers, "Transfer-Encoding": "chunked"}))
        piece = b"<" * (256 * 1024)
        sent = 0
        try:
            while sent < total:
                sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                sent += len(piece)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed: what we wanted
        return read_response(sock).status


# 1. Memory exhaustion by one request


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "?delete"),
        ("POST", "/k?uploadId=x"),
        ("PUT", "/k?tagging"),  # an oversized tag document
        ("PUT", "?policy"),  # an oversized policy
        ("PUT", "?cors"),
        ("PUT", "?acl"),
    ],
)
def test_a_huge_declared_xml_body_is_refused_before_a_byte_is_read(
    live: LiveServer, bucket: str, method: str, target: str
) -> None:
    path = f"/{bucket}{target}"
    headers = signed_headers(live, method, path, {"Content-Length": str(400 * MiB)})
    host, port = live.s3_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_head(method, path, headers))
        answer = read_response(sock)
    assert answer.status == 400 and b"MaxMessageLengthExceeded" in answer.body


def test_streamed_bodies_over_the_cap_never_raise_memory_by_more_than_the_cap(
    live: LiveServer, bucket: str
) -> None:
    before = peak_rss(live)
    s3_headers = signed_headers(live, "POST", f"/{bucket}?delete")
    assert send_chunked(live.s3_url, "POST", f"/{bucket}?delete", s3_headers, 64 * MiB) == 400
    api_headers = {"Authorization": f"Bearer {live.admin_key}"}
    assert send_chunked(live.url, "POST", "/v1/buckets", api_headers, 64 * MiB) == 413
    new_bucket_path = f"/{unique()}"
    create = signed_headers(live, "PUT", new_bucket_path)
    assert send_chunked(live.s3_url, "PUT", new_bucket_path, create, 64 * MiB) == 400
    assert peak_rss(live) - before < 2 * MiB + 8 * MiB


# 2. Multipart parts escape quotas and clean-up


def free_org_s3(live: LiveServer) -> Any:
    org = live.cli("orgs", "create", unique("org"), "--plan", "free").strip().splitlines()[-1]
    access, secret = live.s3_credentials(org)
    return live.s3(access, secret)


def test_parts_in_flight_count_against_the_quota(live: LiveServer) -> None:
    s3 = free_org_s3(live)
    name = unique()
    s3.create_bucket(Bucket=name)
    upload = s3.create_multipart_upload(Bucket=name, Key="big")["UploadId"]
    s3.upload_part(Bucket=name, Key="big", UploadId=upload, PartNumber=1, Body=b"a" * 7 * MiB)
    with pytest.raises(ClientError) as over:
        s3.upload_part(Bucket=name, Key="big", UploadId=upload, PartNumber=2, Body=b"b" * 7 * MiB)
    assert code(over.value) == "QuotaExceeded"
    with pytest.raises(ClientError) as plain:
        s3.put_object(Bucket=name, Key="small", Body=b"c" * 6 * MiB)
    assert code(plain.value) == "QuotaExceeded"
    # the refused part replaced nothing: the upload completes with part 1's bytes
    parts = s3.list_parts(Bucket=name, Key="big", UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, 7 * MiB)]
    s3.abort_multipart_upload(Bucket=name, Key="big", UploadId=upload)
    s3.put_object(Bucket=name, Key="small", Body=b"c" * 6 * MiB)
    # completing does not count the parts twice: 6 MiB stored + 6 MiB of parts fits 12
    again = s3.create_multipart_upload(Bucket=name, Key="big")["UploadId"]
    etag = s3.upload_part(
        Bucket=name, Key="big", UploadId=again, PartNumber=1, Body=b"d" * 6 * MiB
    )["ETag"]
    s3.complete_multipart_upload(
        Bucket=name,
        Key="big",
        UploadId=again,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    assert s3.head_object(Bucket=name, Key="big")["ContentLength"] == 6 * MiB


def test_parts_together_cannot_pass_the_buckets_upload_limit(live: LiveServer) -> None:
    with live.client() as http:
        bucket = new_bucket(http, unique(), maxUploadBytes=10 * MiB)
    s3 = live.s3()
    upload = s3.create_multipart_upload(Bucket=bucket["name"], Key="k")["UploadId"]
    s3.upload_part(
        Bucket=bucket["name"], Key="k", UploadId=upload, PartNumber=1, Body=b"a" * 6 * MiB
    )
    with pytest.raises(ClientError) as over:
        s3.upload_part(
            Bucket=bucket["name"], Key="k", UploadId=upload, PartNumber=2, Body=b"b" * 6 * MiB
        )
    assert code(over.value) == "EntityTooLarge"


def test_abandoned_uploads_expire_and_deleted_buckets_take_theirs(tmp_path: Path) -> None:
    config = CONFIG.replace("multipart_expiry_seconds = 3600", "multipart_expiry_seconds = 1")
    live = LiveServer(tmp_path / "data", config).start()
    try:
        s3 = live.s3()
        s3.create_bucket(Bucket="stale")
        upload = s3.create_multipart_upload(Bucket="stale", Key="k")["UploadId"]
        s3.upload_part(Bucket="stale", Key="k", UploadId=upload, PartNumber=1, Body=b"x" * 1000)
        deadline = time.monotonic() + 10
        while s3.list_multipart_uploads(Bucket="stale").get("Uploads"):
            assert time.monotonic() < deadline, "the abandoned upload did not expire"
            time.sleep(0.2)
        assert not (live.data_dir / "multipart" / upload).exists()
    finally:
        live.stop()
    config = CONFIG  # uploads live an hour: only the bucket's deletion can remove them
    live = LiveServer(tmp_path / "again", config).start()
    try:
        s3 = live.s3()
        s3.create_bucket(Bucket="doomed")
        upload = s3.create_multipart_upload(Bucket="doomed", Key="k")["UploadId"]
        s3.upload_part(Bucket="doomed", Key="k", UploadId=upload, PartNumber=1, Body=b"x" * 1000)
        with live.client() as http:
            bucket_id = next(
                b["id"] for b in http.get("/buckets").json()["data"] if b["name"] == "doomed"
            )
            assert http.delete(f"/buckets/{bucket_id}?force=true").status_code == 200
        deadline = time.monotonic() + 10
        while (live.data_dir / "multipart" / upload).exists():
            assert time.monotonic() < deadline, "the deleted bucket's parts stayed on disk"
            time.sleep(0.2)
    finally:
        live.stop()
    assert live.cli("check").strip().endswith("consistent")


def test_check_reports_and_gc_removes_orphaned_parts(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    live.stop()
    orphan = live.data_dir / "multipart" / "f00d"
    orphan.mkdir(parents=True)
    (orphan / "1-abc").write_bytes(b"left behind")
    check = launch.run(["check", "--data-dir", str(live.data_dir)], env=dict(os.environ))
    assert check.returncode == 1 and "multipart folder f00d" in check.stdout
    live.cli("gc")
    assert not orphan.exists()
    assert live.cli("check").strip() == "consistent"


# 3. No header timeout and no connection cap


@pytest.mark.serial
def test_half_open_connections_are_capped_and_timed_out_while_healthz_answers(
    live: LiveServer,
) -> None:
    host, port = live.url.removeprefix("http://").split(":")
    held: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(1500):
            sock = socket.socket()
            sock.settimeout(5)
            sock.bind(("127.0.0.2", 0))  # an attacker on another loopback address
            sock.connect((host, int(port)))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
            held.append(sock)
        started = time.monotonic()
        for _ in range(20):
            response = web.get(live.url + "/healthz", timeout=5)
            assert response.status_code == 200
            assert web.get(live.s3_url + "/", timeout=5).status_code == 403
        assert time.monotonic() - started < 5
        statuses = []
        for sock in held:
            try:
                statuses.append(read_response(sock).status)
            except (ConnectionError, OSError):
                statuses.append(0)
        refused = statuses.count(503)
        assert refused >= 1500 - 300, statuses[:20]
        assert statuses.count(408) + refused + statuses.count(0) == 1500
        assert statuses.count(408) >= 250  # the admitted ones were timed out, not kept
    finally:
        for sock in held:
            sock.close()


# 4. A key outliving its creator


def test_a_key_cannot_create_a_key_that_outlives_it(live: LiveServer) -> None:
    soon = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    later = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=5)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    with live.client() as http:
        parent = http.post(
            "/keys", json={"name": "short", "scopes": ["keys:manage"], "expiresAt": soon}
        ).json()["data"]
    with live.client(parent["secret"]) as child:
        forever = child.post("/keys", json={"name": "c", "scopes": ["keys:manage"]})
        assert forever.status_code == 403
        assert forever.json()["error"]["code"] == "expiry_escalation"
        longer = child.post(
            "/keys", json={"name": "c", "scopes": ["keys:manage"], "expiresAt": later}
        )
        assert longer.status_code == 403
        same = child.post("/keys", json={"name": "c", "scopes": ["keys:manage"], "expiresAt": soon})
        assert same.status_code == 201


# 5. MIME allow-list bypass


def test_a_list_of_types_is_not_a_type(live: LiveServer) -> None:
    with live.client() as http:
        images = new_bucket(http, unique(), allowedContentTypes=["image/*"])
        sneaky = http.put(
            f"/buckets/{images['id']}/files/x.png",
            content=b"<script>alert(1)</script>",
            headers={"Content-Type": "image/png; x=1, text/html"},
        )
        assert sneaky.status_code == 415
        ok = http.put(
            f"/buckets/{images['id']}/files/y.png",
            content=b"png",
            headers={"Content-Type": "IMAGE/PNG ;  Charset=x"},
        )
        assert ok.status_code == 201 and ok.json()["data"]["contentType"] == "image/png; charset=x"
        got = http.get(f"/buckets/{images['id']}/files/y.png")
        assert got.headers["x-content-type-options"] == "nosniff"
        assert "content-disposition" not in got.headers


def test_active_content_downloads_as_an_attachment_on_both_apis(
    live: LiveServer, s3: Any, bucket: str
) -> None:
    s3.put_object(
        Bucket=bucket, Key="page.html", Body=b"<script>1</script>", ContentType="text/html"
    )
    got = s3.get_object(Bucket=bucket, Key="page.html")
    headers = got["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-disposition"] == "attachment"
    with live.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        page = http.get(f"/buckets/{bucket_id}/files/page.html")
        assert page.headers["content-disposition"] == "attachment"
        assert page.headers["x-content-type-options"] == "nosniff"


# 6. Revoked S3 credentials


def test_revoked_s3_credentials_fail_at_once(live: LiveServer) -> None:
    with live.client() as http:
        org = http.get("/organization").json()["data"]["id"]
    out = live.cli("keys", "create", "--org", org, "--scopes", "buckets:read", "--s3")
    key_id = out.split("credentials ", 1)[1].split(" ", 1)[0]
    access, secret = out.strip().splitlines()[-1].split(" ")
    s3 = live.s3(access, secret)
    s3.list_buckets()  # the secret is now cached
    with live.client() as http:
        assert http.delete(f"/keys/{key_id}").status_code == 200
    with pytest.raises(ClientError) as revoked:
        s3.list_buckets()
    assert code(revoked.value) == "InvalidAccessKeyId"


# 7. SigV2 presigned URLs with any expiry


def test_a_sigv2_presigned_url_may_not_outlive_seven_days(live: LiveServer, bucket: str) -> None:
    access, secret = live.s3_credentials()
    expires = "9999999999"  # the year 2286
    text = sigv2.string_to_sign("GET", [], expires, f"/{bucket}/x", "")
    query = f"AWSAccessKeyId={access}&Expires={expires}&Signature={quote(sigv2.sign(secret, text))}"
    response = web.get(f"{live.s3_url}/{bucket}/x?{query}")
    assert response.status_code == 403 and b"7 days" in response.content


# 8. Keys containing a line feed


def test_keys_with_a_line_feed_round_trip_on_both_apis(
    live: LiveServer, s3: Any, bucket: str
) -> None:
    s3.put_object(Bucket=bucket, Key="line\nfeed\r", Body=b"s3")
    assert s3.get_object(Bucket=bucket, Key="line\nfeed\r")["Body"].read() == b"s3"
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert "line\nfeed\r" in listed
    with live.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        key = quote("api\nkey", safe="")
        path = f"/buckets/{bucket_id}/files/{key}"
        assert (
            http.put(path, content=b"v1", headers={"Content-Type": "text/plain"}).status_code == 201
        )
        assert http.get(path).content == b"v1"
        assert http.get(f"/buckets/{bucket_id}/files/line%0Afeed%0D").content == b"s3"


# 9. Complete racing Abort


def test_complete_racing_abort_never_fails_and_never_half_completes(
    live: LiveServer, s3: Any, bucket: str
) -> None:
    def attempt(n: int) -> tuple[str, str, bool]:
        key = f"race{n}"
        upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x")[
            "ETag"
        ]

        def complete() -> str:
            try:
                s3.complete_multipart_upload(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload,
                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
                )
                return "ok"
            except ClientError as exc:
                return code(exc)

        def abort() -> str:
            try:
                s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
                return "ok"
            except ClientError as exc:
                return code(exc)

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            completed, aborted = pool.submit(complete), pool.submit(abort)
            outcome = completed.result(), aborted.result()
        try:
            s3.head_object(Bucket=bucket, Key=key)
            exists = True
        except ClientError:
            exists = False
        return outcome[0], outcome[1], exists

    for n in range(20):
        completed, aborted, exists = attempt(n)
        assert sorted((completed, aborted)) == ["NoSuchUpload", "ok"], (completed, aborted)
        assert exists == (completed == "ok")


# 10. The SigV4 credential scope


@pytest.mark.parametrize(
    ("region", "service", "named"),
    [("eu-west-9", "s3", b"us-east-1"), ("us-east-1", "iam", b"'s3'")],
)
def test_a_foreign_credential_scope_is_refused_naming_the_fix(
    live: LiveServer, region: str, service: str, named: bytes
) -> None:
    headers = signed_headers(live, "GET", "/", region=region, service=service)
    response = web.get(live.s3_url + "/", headers=headers)
    assert response.status_code == 400
    assert b"AuthorizationHeaderMalformed" in response.content and named in response.content


# 11. aws-chunked decoded length


@pytest.mark.parametrize("sent", [5, 15])
def test_a_wrong_decoded_length_is_refused(live: LiveServer, bucket: str, sent: int) -> None:
    path = f"/{bucket}/chunked"
    headers = signed_headers(
        live,
        "PUT",
        path,
        {
            "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": "10",
        },
    )
    body = b"%x\r\n" % sent + b"z" * sent + b"\r\n0\r\n\r\n"
    response = web.put(live.s3_url + path, content=body, headers=headers)
    assert response.status_code == 400 and b"IncompleteBody" in response.content


# 12. Invalid UTF-8 in a query


def test_invalid_utf8_in_a_query_is_refused(live: LiveServer, bucket: str) -> None:
    with live.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        response = http.get(f"/buckets/{bucket_id}/files?prefix=%FF")
        assert response.status_code == 400
    path = f"/{bucket}?list-type=2&prefix=%FF"
    response = web.get(live.s3_url + path, headers=signed_headers(live, "GET", path))
    assert response.status_code == 400 and b"InvalidArgument" in response.content


# 13. Deep scrub


@pytest.mark.parametrize("layout", ["blob file", "inline"])
def test_the_deep_scrub_names_a_file_whose_blob_rotted(tmp_path: Path, layout: str) -> None:
    """The content rots where it is: in its blob file, or in its index row (kept inline,
    the default for small contents), under the running server."""
    config = TEST_CONFIG + "\n[scrub]\ninterval_seconds = 0.3\nbytes_per_second = 0\n"
    if layout == "blob file":
        config += "[storage]\ninline_max_bytes = 0\n"
    live = LiveServer(tmp_path / "data", config).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "scrubbed")
            for key in ("good.txt", "rotten.txt", "twin.txt"):
                content = b"sound" if key == "good.txt" else b"one byte will flip"
                http.put(
                    f"/buckets/{bucket['id']}/files/{key}",
                    content=content,
                    headers={"Content-Type": "text/plain"},
                )
            sha = (
                http.get(f"/buckets/{bucket['id']}/files/rotten.txt?metadata=true")
                .json()["data"]["etag"]
                .strip('"')
            )
        data = bytearray(b"one byte will flip")
        data[3] ^= 0x01
        if layout == "inline":
            with closing(sqlite3.connect(live.data_dir / "index.db", timeout=10)) as db, db:
                db.execute("UPDATE blobs SET inline_data = ? WHERE id = ?", (bytes(data), sha))
        else:
            blob = live.data_dir / "blobs" / sha[:2] / sha[2:4] / sha
            os.chmod(blob, 0o644)
            blob.write_bytes(bytes(data))
        deadline = time.monotonic() + 10
        while True:
            metrics = web.get(
                live.url + "/metrics", headers={"Authorization": f"Bearer {metrics_key(live)}"}
            ).text
            if 'bucketd_scrub_problems{kind="corrupt"} 2.0' in metrics:
                break
            assert time.monotonic() < deadline, metrics[-2000:]
            time.sleep(0.2)
    finally:
        live.stop()
    deep = launch.run(["check", "--deep", "--data-dir", str(live.data_dir)], env=dict(os.environ))
    assert deep.returncode == 1
    assert "'rotten.txt': corrupt" in deep.stdout and "'twin.txt': corrupt" in deep.stdout
    assert "good.txt" not in deep.stdout
    if layout == "inline":  # the index's own bytes: the plain check hashes them
        with pytest.raises(RuntimeError, match=f"blob {sha}: the content inline does not hash"):
            live.cli("check")
    else:
        assert live.cli("check").strip() == "consistent"  # the shallow check cannot see it
