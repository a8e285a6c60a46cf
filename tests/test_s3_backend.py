"""The S3 backend against a real SeaweedFS: naming, plain-S3 readability, faults, healing."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError

from storage.backends.s3.store import bucket_location
from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket, wait_active
from tests.support.rawhttp import connect, read_response, request_head
from tests.support.seaweed import SeaweedServer, open_uploads

pytestmark = pytest.mark.slow  # SeaweedFS outages

TEXT = {"Content-Type": "text/plain"}
S3_NAME = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")


@pytest.mark.parametrize(
    ("name", "bucket_id"),
    [
        ("photos", "svc_01JD3M5Q0W8K9Y7T6R5E4W3Q2A"),
        ("my.dotted.name", "svc_01JD3M5Q0W8K9Y7T6R5E4W3Q2B"),
        ("a" * 63, "svc_01JD3M5Q0W8K9Y7T6R5E4W3Q2C"),
        ("x" * 60 + ".-.", "svc_01JD3M5Q0W8K9Y7T6R5E4W3Q2D"),
    ],
)
def test_bucket_names_are_valid_s3_names(name: str, bucket_id: str) -> None:
    location = bucket_location("acme", name, bucket_id)
    assert len(location) <= 63 and S3_NAME.fullmatch(location)
    assert location.startswith("acme-") and location.endswith("-" + bucket_id[-8:].lower())
    assert "." not in location
    assert location == bucket_location("acme", name, bucket_id)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A SeaweedFS of this module's own: these tests stop and restart it."""
    server = SeaweedServer(tmp_path_factory.mktemp("own-seaweed")).start()
    yield server
    server.stop()


def parts_stored(cluster: SeaweedServer, location: str) -> int:
    """Parts of the multipart uploads open in the cluster bucket `location`."""
    client = cluster.client()
    count = 0
    for upload in client.list_multipart_uploads(Bucket=location).get("Uploads", []):
        listed = client.list_parts(Bucket=location, Key=upload["Key"], UploadId=upload["UploadId"])
        count += len(listed.get("Parts", []))
    return count


def bucketd(tmp_path: Path, cluster: SeaweedServer, extra: str = "", **kwargs) -> LiveServer:
    config = (
        TEST_CONFIG + "[uploads]\ndeadline_seconds = 20\n" + cluster.bucketd_config("acme", extra)
    )
    live = LiveServer(tmp_path / "data", config, **kwargs)
    live.seaweed = cluster
    return live


def test_buckets_and_files_are_real_s3_buckets_and_objects(
    tmp_path: Path, cluster: SeaweedServer
) -> None:
    live = bucketd(tmp_path, cluster).start()
    s3 = cluster.client()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "my.photos")
            location = bucket_location("acme", "my.photos", bucket["id"])
            assert location in [b["Name"] for b in s3.list_buckets()["Buckets"]]
            http.put(f"/buckets/{bucket['id']}/files/2024/cat.txt", content=b"meow", headers=TEXT)
            obj = s3.get_object(Bucket=location, Key="2024/cat.txt")
            assert obj["Body"].read() == b"meow" and obj["ContentType"] == "text/plain"
            http.patch(f"/buckets/{bucket['id']}", json={"name": "renamed"})
            assert s3.head_object(Bucket=location, Key="2024/cat.txt")  # the real bucket stays
            moved = http.patch(
                f"/buckets/{bucket['id']}/files/2024/cat.txt", json={"key": "cats/1.txt"}
            )
            assert moved.status_code == 200
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=location).get("Contents", [])]
            assert keys == ["cats/1.txt"]
            assert http.get(f"/buckets/{bucket['id']}/files/cats/1.txt").content == b"meow"
            http.delete(f"/buckets/{bucket['id']}/files/cats/1.txt")
            assert s3.list_objects_v2(Bucket=location).get("KeyCount", 0) == 0
            odd = http.put(
                f"/buckets/{bucket['id']}/files/a%2F%2Fb/%2E%2E", content=b"o", headers=TEXT
            )
            assert odd.status_code == 201 and odd.json()["data"]["key"] == "a//b/.."
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=location).get("Contents", [])]
            assert keys == [".bucketd-keys/a/%00/b/%2E%2E"]  # SeaweedFS would alter "a//b/.."
            assert http.delete(f"/buckets/{bucket['id']}/files/a%2F%2Fb/%2E%2E").status_code == 200
            http.put(f"/buckets/{bucket['id']}/files/left", content=b"x", headers=TEXT)
            assert http.delete(f"/buckets/{bucket['id']}").status_code == 409
            assert (
                http.delete(f"/buckets/{bucket['id']}", params={"force": "true"}).status_code == 200
            )
            assert location not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        endpoint = live.s3()
        endpoint.create_bucket(Bucket="history", ObjectLockEnabledForBucket=True)
        first = endpoint.put_object(Bucket="history", Key="doc", Body=b"one")["VersionId"]
        second = endpoint.put_object(Bucket="history", Key="doc", Body=b"two")["VersionId"]
        location = next(b["Name"] for b in s3.list_buckets()["Buckets"] if "history" in b["Name"])
        stored = {o["Key"] for o in s3.list_objects_v2(Bucket=location)["Contents"]}
        assert stored == {f".bucketd-versions/{v}/doc" for v in (first, second)}
        old = endpoint.get_object(Bucket="history", Key="doc", VersionId=first)
        assert old["Body"].read() == b"one"
        endpoint.put_object_legal_hold(
            Bucket="history", Key="doc", VersionId=first, LegalHold={"Status": "ON"}
        )
        with pytest.raises(ClientError) as refused:
            endpoint.delete_object(Bucket="history", Key="doc", VersionId=first)
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        endpoint.delete_object(Bucket="history", Key="doc", VersionId=second)
        stored = {o["Key"] for o in s3.list_objects_v2(Bucket=location)["Contents"]}
        assert stored == {f".bucketd-versions/{first}/doc"}
        assert endpoint.get_object(Bucket="history", Key="doc")["Body"].read() == b"one"
        mine = endpoint.put_object(Bucket="history", Key=".bucketd-versions/x/doc", Body=b"x")
        stored = {o["Key"] for o in s3.list_objects_v2(Bucket=location)["Contents"]}
        assert f".bucketd-versions/{mine['VersionId']}/.bucketd-keys/%2Ebucketd-versions/x/doc" in (
            stored
        )
        assert (
            endpoint.get_object(Bucket="history", Key=".bucketd-versions/x/doc")["Body"].read()
            == b"x"
        )
    finally:
        live.stop()


def test_large_upload_goes_multipart_and_leaves_no_upload_open(
    tmp_path: Path, cluster: SeaweedServer
) -> None:
    live = bucketd(tmp_path, cluster, "part_size_bytes = 5242880\n").start()
    payload = bytes(range(256)) * (4096 * 12 + 3)  # about 12 MiB: three parts
    try:
        with live.client() as http:
            bucket = new_bucket(http, "large")
            response = http.put(
                f"/buckets/{bucket['id']}/files/big.bin",
                content=payload,
                headers={"Content-Type": "application/octet-stream"},
            )
            assert response.status_code == 201
            location = bucket_location("acme", "large", bucket["id"])
            head = cluster.client().head_object(Bucket=location, Key="big.bin")
            assert head["ETag"].endswith('-3"') and head["ContentLength"] == len(payload)
            assert http.get(f"/buckets/{bucket['id']}/files/big.bin").content == payload
            part = http.get(
                f"/buckets/{bucket['id']}/files/big.bin", headers={"Range": "bytes=5242870-5242889"}
            )
            assert part.status_code == 206 and part.content == payload[5242870:5242890]
            assert open_uploads(cluster) == []
    finally:
        live.stop()


def test_refused_credentials_mark_the_bucket_failed(tmp_path: Path, cluster: SeaweedServer) -> None:
    config = TEST_CONFIG + cluster.bucketd_config("acme").replace(
        "bucketd-test-secret-key", "wrong-secret"
    )
    live = LiveServer(tmp_path / "data", config).start()
    try:
        with live.client() as http:
            created = http.post("/buckets", json={"name": "denied", "region": "us-east-1"}).json()[
                "data"
            ]
            bucket = wait_active(http, created["id"])
            assert bucket["status"] == "failed"
            assert "credentials" in bucket["statusReason"]
            upload = http.put(f"/buckets/{bucket['id']}/files/x", content=b"x", headers=TEXT)
            assert upload.status_code == 409
            assert http.delete(f"/buckets/{bucket['id']}").status_code == 200
    finally:
        live.stop()


def test_a_stopped_cluster_is_a_503_not_a_hang(tmp_path: Path, cluster: SeaweedServer) -> None:
    live = bucketd(tmp_path, cluster).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "outage")
            http.put(f"/buckets/{bucket['id']}/files/k", content=b"before", headers=TEXT)
            cluster.kill()
            try:
                started = time.monotonic()
                read = http.get(f"/buckets/{bucket['id']}/files/k")
                write = http.put(f"/buckets/{bucket['id']}/files/k", content=b"after", headers=TEXT)
                assert time.monotonic() - started < 20
                for response in (read, write):
                    assert response.status_code == 503
                    assert response.json()["error"]["code"] == "storage_unavailable"
                    assert "S3 cluster" in response.json()["error"]["message"]
                assert (
                    http.get(
                        f"/buckets/{bucket['id']}/files/k", params={"metadata": "true"}
                    ).status_code
                    == 200
                )
                unready = web.get(live.url + "/readyz")  # /healthz: the process; this: its parts
                assert unready.status_code == 503
                assert "S3 cluster" in unready.json()["error"]["message"]
                assert web.get(live.url + "/healthz").status_code == 200
            finally:
                cluster.start()
            assert web.get(live.url + "/readyz").status_code == 200
            assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"before"
            assert http.get(f"/buckets/{bucket['id']}").json()["data"]["sizeBytes"] == 6
    finally:
        live.stop()


def test_cluster_stopped_mid_upload_fails_cleanly(tmp_path: Path, cluster: SeaweedServer) -> None:
    live = bucketd(tmp_path, cluster, "part_size_bytes = 5242880\n").start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "midway")
            http.put(f"/buckets/{bucket['id']}/files/k", content=b"before", headers=TEXT)
        size = 20 * 1024 * 1024
        with connect(live.url) as sock:
            sock.sendall(
                request_head(
                    "PUT",
                    f"/v1/buckets/{bucket['id']}/files/k",
                    {
                        "Authorization": f"Bearer {live.admin_key}",
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(size),
                    },
                )
            )
            sock.sendall(b"z" * (12 * 1024 * 1024))
            deadline = time.monotonic() + 20
            location = bucket_location("acme", "midway", bucket["id"])
            while (
                parts_stored(cluster, location) < 2
            ):  # not a fixed pause: a loaded machine is slower
                assert time.monotonic() < deadline, "two parts never reached the cluster"
                time.sleep(0.05)
            cluster.kill()
            try:
                try:
                    sock.sendall(b"z" * (size - 12 * 1024 * 1024))
                except OSError:
                    pass
                response = read_response(sock)
            finally:
                cluster.start()
        assert response.status == 503
        deadline = time.monotonic() + 30
        while open_uploads(cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert open_uploads(cluster) == []
        with live.client() as http:
            assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"before"
    finally:
        live.stop()


def test_crash_between_publish_and_commit_is_healed_at_start(
    tmp_path: Path, cluster: SeaweedServer
) -> None:
    live = bucketd(tmp_path, cluster).start()
    with live.client() as http:
        bucket = new_bucket(http, "healed")
        http.put(f"/buckets/{bucket['id']}/files/k", content=b"old", headers=TEXT)
    live.stop()
    live.env = {"BUCKETD_FAULTS": "put.after_publish=kill"}
    live.start()
    with live.client() as http, pytest.raises(httpx.TransportError):
        http.put(f"/buckets/{bucket['id']}/files/k", content=b"newer content", headers=TEXT)
    live.kill()
    live.env = {}
    live.start()
    try:
        with live.client() as http:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if http.get(f"/buckets/{bucket['id']}/files/k").content == b"newer content":
                    break
                time.sleep(0.1)
            assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"newer content"
            data = http.get(f"/buckets/{bucket['id']}").json()["data"]
            assert data["sizeBytes"] == len(b"newer content") and data["fileCount"] == 1
    finally:
        live.stop()


def test_a_read_between_an_overwrites_publish_and_its_commit_is_never_a_404(
    tmp_path: Path, cluster: SeaweedServer
) -> None:
    """Found by tests/test_linearizable_cluster.py: between an overwrite's publish and its
    commit the index names the old record, whose ETag the cluster's object no longer has;
    a GET then failed its two attempts and answered 404 for a key that existed throughout.
    Here the commit is held 0.4 s after the publish (a fault point) on one worker while
    readers on fresh connections reach the other: each answers the old or the new content."""
    faults = {"BUCKETD_FAULTS": "put.after_publish=sleep:0.4"}
    live = bucketd(tmp_path, cluster, workers=2, env=faults).start()
    answers: list[tuple[int, bytes]] = []
    try:
        with live.client() as http:
            bucket = new_bucket(http, "raced")
            files = f"/buckets/{bucket['id']}/files/k"
            assert http.put(files, content=b"old", headers=TEXT).status_code == 201
            writer = threading.Thread(
                target=http.put, args=(files,), kwargs={"content": b"new", "headers": TEXT}
            )
            writer.start()

            def read() -> None:
                fresh = httpx.Limits(max_keepalive_connections=0)
                with live.client(limits=fresh) as reader:
                    while writer.is_alive():
                        got = reader.get(files)
                        answers.append((got.status_code, got.content))

            readers = [threading.Thread(target=read) for _ in range(3)]
            for thread in readers:
                thread.start()
            for thread in [writer, *readers]:
                thread.join()
    finally:
        live.stop()
    assert len(answers) >= 3
    assert {answer for answer in answers} <= {(200, b"old"), (200, b"new")}, answers


def test_credentials_refused_at_runtime_are_a_clear_503(
    tmp_path: Path, cluster: SeaweedServer
) -> None:
    live = bucketd(tmp_path, cluster).start()
    with live.client() as http:
        bucket = new_bucket(http, "rotated")
        http.put(f"/buckets/{bucket['id']}/files/k", content=b"data", headers=TEXT)
    live.stop()
    live.config_path.write_text(
        live.config_path.read_text().replace("bucketd-test-secret-key", "rotated")
    )
    live.start()
    try:
        with live.client() as http:
            response = http.get(f"/buckets/{bucket['id']}/files/k")
            assert response.status_code == 503
            assert "credentials" in response.json()["error"]["message"]
    finally:
        live.stop()


def test_unreachable_cluster_at_start_up_still_serves(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    config = (
        TEST_CONFIG
        + f'[storage]\nbackend = "s3"\n[storage.s3]\nendpoint_url = "http://127.0.0.1:{dead}"\n'
        + 'access_key_id = "any"\nsecret_access_key = "any"\n'
    )
    live = LiveServer(tmp_path / "data", config).start()
    try:
        with live.client() as http:
            created = http.post("/buckets", json={"name": "nowhere", "region": "us-east-1"})
            bucket = wait_active(http, created.json()["data"]["id"], timeout=30)
            assert bucket["status"] == "failed" and "unreachable" in bucket["statusReason"]
    finally:
        live.stop()


def test_multipart_parts_wait_in_the_cluster_not_on_the_gateways_disk(
    tmp_path: Path, cluster: SeaweedServer
) -> None:
    """Any gateway must be able to take any part: each part is an object of the cluster's
    `<brand>-parts` bucket (its bytes and a pointer named by its MD5), nothing in the data
    dir; a part sent again replaces the earlier one; complete and abort leave nothing."""
    live = bucketd(tmp_path, cluster).start()
    raw = cluster.client()
    try:
        s3 = live.s3()
        s3.create_bucket(Bucket="parts")
        first, second = os.urandom(5 * 1024 * 1024 + 1), os.urandom(1000)
        upload = s3.create_multipart_upload(Bucket="parts", Key="odd//key/..")["UploadId"]
        s3.upload_part(Bucket="parts", Key="odd//key/..", UploadId=upload, PartNumber=1, Body=b"x")
        one = s3.upload_part(
            Bucket="parts", Key="odd//key/..", UploadId=upload, PartNumber=1, Body=first
        )
        two = s3.upload_part(
            Bucket="parts", Key="odd//key/..", UploadId=upload, PartNumber=2, Body=second
        )
        stored = {o["Key"] for o in raw.list_objects_v2(Bucket="acme-parts")["Contents"]}
        pointers = {f"{upload}/1-{one['ETag'].strip(chr(34))}", f"{upload}/2-{two['ETag'][1:-1]}"}
        assert pointers <= stored and len(stored) == 4  # the first part 1 is gone
        assert not any((live.data_dir / "multipart").glob("*/*"))
        listed = s3.list_parts(Bucket="parts", Key="odd//key/..", UploadId=upload)["Parts"]
        assert [(p["PartNumber"], p["Size"]) for p in listed] == [(1, len(first)), (2, 1000)]
        s3.complete_multipart_upload(
            Bucket="parts",
            Key="odd//key/..",
            UploadId=upload,
            MultipartUpload={
                "Parts": [
                    {"PartNumber": 1, "ETag": one["ETag"]},
                    {"PartNumber": 2, "ETag": two["ETag"]},
                ]
            },
        )
        body = s3.get_object(Bucket="parts", Key="odd//key/..")["Body"].read()
        assert body == first + second
        assert raw.list_objects_v2(Bucket="acme-parts").get("KeyCount", 0) == 0
        aborted = s3.create_multipart_upload(Bucket="parts", Key="gone")["UploadId"]
        s3.upload_part(Bucket="parts", Key="gone", UploadId=aborted, PartNumber=1, Body=b"x")
        assert raw.list_objects_v2(Bucket="acme-parts")["KeyCount"] == 2
        s3.abort_multipart_upload(Bucket="parts", Key="gone", UploadId=aborted)
        assert raw.list_objects_v2(Bucket="acme-parts").get("KeyCount", 0) == 0
        assert open_uploads(cluster) == []
    finally:
        live.stop()
