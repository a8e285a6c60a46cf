"""Snapshots and forks attacked from outside (issue 35, the review of points 1 and 2), the
state side: writes racing a restore and a SIGKILL after one, uploads in flight, what S3
shows of a restored or forked bucket, a fork's public object, and what the test fixture's
reset leaves of a test (`test_snapshots_hostile.py` attacks who may do what)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from bucketd.testing import running_bucketd
from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

TEXT = {"Content-Type": "text/plain"}


@pytest.fixture
def admin(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as http:
        yield http


def put(client: httpx.Client, bucket: dict, key: str, content: bytes) -> dict:
    response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def snapshot(client: httpx.Client, bucket: dict) -> dict:
    made = client.post(f"/buckets/{bucket['id']}/snapshots")
    assert made.status_code == 201, made.text
    return dict(made.json()["data"])


def test_an_upload_in_flight_does_not_survive_a_restore(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    """Its parts go with the restore: no part uploaded before can be completed after, and a
    part sent after finds no upload."""
    s3 = local_server.s3()
    bucket = new_bucket(admin, unique_name("mpu"))
    taken = snapshot(admin, bucket)
    upload = s3.create_multipart_upload(Bucket=bucket["name"], Key="big.bin")["UploadId"]
    part = s3.upload_part(
        Bucket=bucket["name"], Key="big.bin", UploadId=upload, PartNumber=1, Body=b"p" * 1024
    )
    assert admin.post(f"/snapshots/{taken['id']}/restore").status_code == 200
    with pytest.raises(ClientError) as late_part:
        s3.upload_part(
            Bucket=bucket["name"], Key="big.bin", UploadId=upload, PartNumber=2, Body=b"q"
        )
    assert late_part.value.response["Error"]["Code"] == "NoSuchUpload"
    with pytest.raises(ClientError) as completed:
        s3.complete_multipart_upload(
            Bucket=bucket["name"],
            Key="big.bin",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
    assert completed.value.response["Error"]["Code"] == "NoSuchUpload"
    assert s3.list_multipart_uploads(Bucket=bucket["name"]).get("Uploads", []) == []
    s3.close()


def test_writes_racing_a_restore_and_a_kill_during_one_leave_no_mix(tmp_path: Path) -> None:
    """S3 PUTs of new keys racing a restore each land before it (and go) or after it (and
    stay), with the counters exact. A SIGKILL 5 ms after another restore is sent (here that
    lands after its commit, before the contents it released are removed) leaves the bucket
    as before it or as the snapshot has it, never a mix, and once restarted (its start-up
    clean-up) `bucketd check` consistent."""
    live = LiveServer(tmp_path / "data").start()  # a SIGKILL loses nothing fsync keeps
    try:
        with live.client() as http:
            bucket = new_bucket(http, "racing", versioning="enabled")
            keys = [f"k{i:03}" for i in range(100)]
            s3 = live.s3()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda k: s3.put_object(Bucket="racing", Key=k, Body=b"old"), keys))
            taken = snapshot(http, bucket)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda k: s3.put_object(Bucket="racing", Key=k, Body=b"new"), keys))

            def race(i: int) -> None:
                s3.put_object(Bucket="racing", Key=f"race{i:02}", Body=b"r" * i)

            with ThreadPoolExecutor(4) as pool:
                racers = [pool.submit(race, i) for i in range(1, 21)]
                restored = http.post(f"/snapshots/{taken['id']}/restore")
                for racer in racers:
                    racer.result()
            assert restored.status_code == 200, restored.text
            listed = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket="racing")["Contents"]}
            assert {k: listed[k] for k in keys} == dict.fromkeys(keys, 3)
            assert s3.get_object(Bucket="racing", Key=keys[-1])["Body"].read() == b"old"
            raced = {k: v for k, v in listed.items() if k.startswith("race")}
            assert all(size == int(k[4:]) for k, size in raced.items())
            versions = s3.list_object_versions(Bucket="racing")["Versions"]
            shown = http.get(f"/buckets/{bucket['id']}").json()["data"]
            assert shown["fileCount"] == len(versions) == len(keys) + len(raced)
            assert shown["sizeBytes"] == sum(v["Size"] for v in versions)

            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda k: s3.put_object(Bucket="racing", Key=k, Body=b"new"), keys))
            s3.close()
            sent = ThreadPoolExecutor(1)
            sent.submit(http.post, f"/snapshots/{taken['id']}/restore")
            time.sleep(0.005)
            live.kill()
            sent.shutdown(wait=True)
    finally:
        live.stop()
    live.start()  # its start-up clean-up runs, as after any crash
    try:
        with live.client() as http:
            contents = {http.get(f"/buckets/{bucket['id']}/files/{k}").content for k in keys}
            assert contents in ({b"old"}, {b"new"}), contents
    finally:
        live.stop()
    assert live.cli("check").strip().endswith("consistent")


def test_the_fixtures_reset_leaves_nothing_a_test_made() -> None:
    """What a test can make besides files, through the same server the fixture gives it:
    API keys and S3 credentials, webhooks (which S3's notification configuration shows and
    which keep delivering), uploads in flight, the clock, fault rules. After `reset` the
    next test finds none of them: only the state it was promised."""
    with running_bucketd(["photos"]) as started:
        server = started.with_clean_state()
        try:
            s3 = server.s3()
            http = server.http
            photos = [b for b in http.get("/v1/buckets").json()["data"] if b["name"] == "photos"]
            keys_before = {k["id"] for k in http.get("/v1/keys").json()["data"]}  # none revoked

            hook = http.post(
                f"/v1/buckets/{photos[0]['id']}/webhooks",
                json={"url": "https://example.com/hook", "events": ["s3:ObjectCreated:*"]},
            )
            assert hook.status_code == 201, hook.text
            key = http.post("/v1/keys", json={"name": "by a test", "scopes": ["files:read"]})
            assert key.status_code == 201, key.text
            s3.create_multipart_upload(Bucket="photos", Key="half.bin")
            server.clock.advance(days=3)
            server.faults.add("PutObject", "SlowDown", times=5)
            assert s3.get_bucket_notification_configuration(Bucket="photos").get(
                "QueueConfigurations"
            )

            server.reset()
            config = s3.get_bucket_notification_configuration(Bucket="photos")
            assert not config.get("QueueConfigurations"), config
            hooks = http.get(f"/v1/buckets/{photos[0]['id']}/webhooks").json()["data"]
            assert hooks == []
            live = [k["id"] for k in http.get("/v1/keys").json()["data"] if not k["revokedAt"]]
            assert set(live) == keys_before
            with web.client(base_url=server.api) as stranger:
                headers = {"Authorization": f"Bearer {key.json()['data']['secret']}"}
                assert stranger.get("/buckets", headers=headers).status_code == 401
            assert s3.list_multipart_uploads(Bucket="photos").get("Uploads", []) == []
            assert server.clock.read()["offsetSeconds"] == 0
            assert server.faults.list() == []
            s3.put_object(Bucket="photos", Key="after.txt", Body=b"no fault left")
            s3.close()
        finally:
            server.close()


def test_s3_sees_every_setting_back_after_a_restore_and_in_a_fork(
    admin: httpx.Client, s3: Any
) -> None:
    """What S3's Get* calls answer for the bucket and its object after a restore, and for a
    fork, is what they answered when the snapshot was taken."""
    name = unique_name("settings")
    bucket = new_bucket(admin, name, versioning="enabled")
    rules = [{"AllowedMethods": ["GET"], "AllowedOrigins": ["*"]}]
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": rules})
    s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": "team", "Value": "a"}]})
    s3.put_public_access_block(
        Bucket=name, PublicAccessBlockConfiguration={"BlockPublicPolicy": True}
    )
    s3.put_object(
        Bucket=name, Key="o.txt", Body=b"o", Tagging="k=v", Metadata={"m": "1"}, ACL="public-read"
    )

    def seen(bucket_name: str) -> dict:
        block = s3.get_public_access_block(Bucket=bucket_name)
        return {
            "cors": s3.get_bucket_cors(Bucket=bucket_name)["CORSRules"],
            "tags": s3.get_bucket_tagging(Bucket=bucket_name)["TagSet"],
            "versioning": s3.get_bucket_versioning(Bucket=bucket_name).get("Status"),
            "block": block["PublicAccessBlockConfiguration"],
            "object tags": s3.get_object_tagging(Bucket=bucket_name, Key="o.txt")["TagSet"],
            "metadata": s3.head_object(Bucket=bucket_name, Key="o.txt")["Metadata"],
            "object acl": sorted(
                g["Permission"]
                for g in s3.get_object_acl(Bucket=bucket_name, Key="o.txt")["Grants"]
            ),
            "body": s3.get_object(Bucket=bucket_name, Key="o.txt")["Body"].read(),
        }

    before = seen(name)
    taken = snapshot(admin, bucket)
    s3.delete_bucket_cors(Bucket=name)
    s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": "team", "Value": "b"}]})
    s3.delete_public_access_block(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Suspended"})
    s3.put_object(Bucket=name, Key="o.txt", Body=b"p")

    assert admin.post(f"/snapshots/{taken['id']}/restore").status_code == 200
    assert seen(name) == before
    fork_name = unique_name("fork")
    assert admin.post(f"/snapshots/{taken['id']}/fork", json={"name": fork_name}).is_success
    assert seen(fork_name) == before


def test_a_forks_public_object_is_reachable_by_its_name_alone(
    admin: httpx.Client, s3: Any, anonymous: Any
) -> None:
    """An object's public-read ACL reserves its bucket's name across the server (a request
    from outside the organization names the bucket by its name alone): a fork holding such
    an object holds its own name so, or the object is public in name only."""
    name = unique_name("acl")
    bucket = new_bucket(admin, name)
    s3.put_object(Bucket=name, Key="open.txt", Body=b"for anyone", ACL="public-read")
    assert anonymous.get_object(Bucket=name, Key="open.txt")["Body"].read() == b"for anyone"
    taken = snapshot(admin, bucket)
    fork_name = unique_name("aclfork")
    fork = admin.post(f"/snapshots/{taken['id']}/fork", json={"name": fork_name})
    assert fork.status_code == 201, fork.text
    assert anonymous.get_object(Bucket=fork_name, Key="open.txt")["Body"].read() == b"for anyone"
