"""S3 versioning with boto3: enabling and suspending, versions and their ids, delete
markers, reads, copies and deletes by version, ListObjectVersions, usage that counts
every version."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from storage.config import INLINE_MAX_BYTES
from tests.support import launch, web
from tests.support.live import TEST_CONFIG, LiveServer


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("versions") / "data", TEST_CONFIG).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3(live: LiveServer) -> Any:
    return live.s3()


_names = iter(range(10_000))


@pytest.fixture
def versioned(s3: Any) -> str:
    name = f"v{next(_names)}-{int(time.time() * 1000) % 1_000_000}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def error(exc: ClientError) -> tuple[int, str]:
    return exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]


def body(s3: Any, bucket: str, key: str, version: str | None = None) -> bytes:
    extra = {"VersionId": version} if version else {}
    return bytes(s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read())


def usage(live: LiveServer, bucket: str) -> tuple[int, int]:
    with live.client() as http:
        for found in http.get("/buckets", params={"limit": 100}).json()["data"]:
            if found["name"] == bucket:
                return found["fileCount"], found["sizeBytes"]
    raise AssertionError(bucket)


def test_a_new_bucket_is_unversioned_and_can_be_enabled_and_suspended(s3: Any) -> None:
    s3.create_bucket(Bucket="switches")
    assert "Status" not in s3.get_bucket_versioning(Bucket="switches")
    put = s3.put_object(Bucket="switches", Key="k", Body=b"unversioned")
    assert "VersionId" not in put
    s3.put_bucket_versioning(Bucket="switches", VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket="switches")["Status"] == "Enabled"
    s3.put_bucket_versioning(Bucket="switches", VersioningConfiguration={"Status": "Suspended"})
    assert s3.get_bucket_versioning(Bucket="switches")["Status"] == "Suspended"
    with pytest.raises(ClientError) as wrong:
        s3.put_bucket_versioning(Bucket="switches", VersioningConfiguration={"Status": "Off"})
    assert error(wrong.value) == (400, "MalformedXML")


def test_every_write_is_a_version_and_old_ones_stay_readable(
    live: LiveServer, s3: Any, versioned: str
) -> None:
    ids = [
        s3.put_object(Bucket=versioned, Key="doc", Body=f"v{n}".encode())["VersionId"]
        for n in range(3)
    ]
    assert len(set(ids)) == 3 and ids == sorted(ids)  # unique, time-ordered
    assert body(s3, versioned, "doc") == b"v2"
    for n, version in enumerate(ids):
        assert body(s3, versioned, "doc", version) == f"v{n}".encode()
        head = s3.head_object(Bucket=versioned, Key="doc", VersionId=version)
        assert head["VersionId"] == version and head["ContentLength"] == 2
    assert usage(live, versioned) == (3, 6)  # every version counts
    listed = s3.list_objects_v2(Bucket=versioned)["Contents"]
    assert [o["Key"] for o in listed] == ["doc"]


def test_a_delete_leaves_a_marker_and_deleting_the_marker_brings_the_file_back(
    live: LiveServer, s3: Any, versioned: str
) -> None:
    first = s3.put_object(Bucket=versioned, Key="k", Body=b"kept")["VersionId"]
    deleted = s3.delete_object(Bucket=versioned, Key="k")
    assert deleted["DeleteMarker"] is True and deleted["VersionId"] != first
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket=versioned, Key="k")
    assert error(gone.value) == (404, "NoSuchKey")
    headers = gone.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amz-delete-marker"] == "true"
    assert headers["x-amz-version-id"] == deleted["VersionId"]
    with pytest.raises(ClientError) as marker:
        s3.get_object(Bucket=versioned, Key="k", VersionId=deleted["VersionId"])
    assert error(marker.value) == (405, "MethodNotAllowed")
    assert "Contents" not in s3.list_objects_v2(Bucket=versioned)
    assert body(s3, versioned, "k", first) == b"kept"
    assert usage(live, versioned) == (1, 4)
    undone = s3.delete_object(Bucket=versioned, Key="k", VersionId=deleted["VersionId"])
    assert undone["DeleteMarker"] is True and undone["VersionId"] == deleted["VersionId"]
    assert body(s3, versioned, "k") == b"kept"


def test_deleting_a_version_for_good(live: LiveServer, s3: Any, versioned: str) -> None:
    old = s3.put_object(Bucket=versioned, Key="k", Body=b"old")["VersionId"]
    new = s3.put_object(Bucket=versioned, Key="k", Body=b"newer")["VersionId"]
    s3.delete_object(Bucket=versioned, Key="k", VersionId=old)
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket=versioned, Key="k", VersionId=old)
    assert error(gone.value)[0] == 404
    assert usage(live, versioned) == (1, 5)
    s3.delete_object(Bucket=versioned, Key="k", VersionId=new)  # the current one
    assert "Contents" not in s3.list_objects_v2(Bucket=versioned)
    assert usage(live, versioned) == (0, 0)


def test_list_object_versions_with_markers_prefixes_and_paging(s3: Any, versioned: str) -> None:
    ids = {}
    for key in ("a", "b", "dir/x", "dir/y"):
        ids[key] = [
            s3.put_object(Bucket=versioned, Key=key, Body=f"{key}{n}".encode())["VersionId"]
            for n in range(2)
        ]
    marker = s3.delete_object(Bucket=versioned, Key="b")["VersionId"]
    listed = s3.list_object_versions(Bucket=versioned, Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["dir/"]
    versions = [(v["Key"], v["VersionId"], v["IsLatest"]) for v in listed["Versions"]]
    assert versions == [
        ("a", ids["a"][1], True),
        ("a", ids["a"][0], False),
        ("b", ids["b"][1], False),
        ("b", ids["b"][0], False),
    ]
    markers = [(m["Key"], m["VersionId"], m["IsLatest"]) for m in listed["DeleteMarkers"]]
    assert markers == [("b", marker, True)]
    seen = []
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=versioned, PaginationConfig={"PageSize": 2}):
        seen += [(v["Key"], v["VersionId"]) for v in page.get("Versions", [])]
        seen += [(m["Key"], m["VersionId"]) for m in page.get("DeleteMarkers", [])]
    assert sorted(seen) == sorted([(k, v) for k, vs in ids.items() for v in vs] + [("b", marker)])
    under = s3.list_object_versions(Bucket=versioned, Prefix="dir/")
    assert {v["Key"] for v in under["Versions"]} == {"dir/x", "dir/y"}


def test_suspended_versioning_writes_and_replaces_the_null_version(
    live: LiveServer, s3: Any, versioned: str
) -> None:
    kept = s3.put_object(Bucket=versioned, Key="k", Body=b"versioned")["VersionId"]
    s3.put_bucket_versioning(Bucket=versioned, VersioningConfiguration={"Status": "Suspended"})
    # the null version's writes answer no version id (AWS's sample answers); reads say "null"
    assert "VersionId" not in s3.put_object(Bucket=versioned, Key="k", Body=b"null one")
    assert "VersionId" not in s3.put_object(Bucket=versioned, Key="k", Body=b"null two")
    assert s3.head_object(Bucket=versioned, Key="k")["VersionId"] == "null"
    ids = [v["VersionId"] for v in s3.list_object_versions(Bucket=versioned)["Versions"]]
    assert ids == ["null", kept]
    assert body(s3, versioned, "k", "null") == b"null two"
    assert usage(live, versioned) == (2, len(b"versioned") + len(b"null two"))


def test_copy_from_a_version_and_delete_objects_by_version(s3: Any, versioned: str) -> None:
    first = s3.put_object(Bucket=versioned, Key="src", Body=b"first")["VersionId"]
    s3.put_object(Bucket=versioned, Key="src", Body=b"second")
    copied = s3.copy_object(
        Bucket=versioned,
        Key="dst",
        CopySource={"Bucket": versioned, "Key": "src", "VersionId": first},
    )
    assert copied["CopySourceVersionId"] == first and copied["VersionId"]
    assert body(s3, versioned, "dst") == b"first"
    result = s3.delete_objects(
        Bucket=versioned,
        Delete={"Objects": [{"Key": "src", "VersionId": first}, {"Key": "dst"}]},
    )
    deleted = {d["Key"]: d for d in result["Deleted"]}
    assert deleted["src"]["VersionId"] == first
    assert deleted["dst"]["DeleteMarker"] is True and deleted["dst"]["DeleteMarkerVersionId"]
    assert body(s3, versioned, "src") == b"second"
    with pytest.raises(ClientError):
        s3.get_object(Bucket=versioned, Key="src", VersionId=first)


def test_upload_part_copy_from_a_version(s3: Any, versioned: str) -> None:
    first = s3.put_object(Bucket=versioned, Key="part-src", Body=b"a" * 5 * 1024 * 1024)
    s3.put_object(Bucket=versioned, Key="part-src", Body=b"later")
    upload = s3.create_multipart_upload(Bucket=versioned, Key="joined")["UploadId"]
    source = {"Bucket": versioned, "Key": "part-src", "VersionId": first["VersionId"]}
    part = s3.upload_part_copy(
        Bucket=versioned, Key="joined", UploadId=upload, PartNumber=1, CopySource=source
    )
    assert part["CopySourceVersionId"] == first["VersionId"]
    done = s3.complete_multipart_upload(
        Bucket=versioned,
        Key="joined",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    assert done["VersionId"]
    assert body(s3, versioned, "joined") == b"a" * 5 * 1024 * 1024
    with pytest.raises(ClientError) as bad:
        s3.copy_object(
            Bucket=versioned,
            Key="x",
            CopySource={"Bucket": versioned, "Key": "part-src", "VersionId": "nonsense"},
        )
    assert error(bad.value) == (400, "InvalidArgument")


def test_a_versioned_bucket_with_only_markers_is_not_empty(s3: Any, versioned: str) -> None:
    s3.put_object(Bucket=versioned, Key="k", Body=b"x")
    s3.delete_object(Bucket=versioned, Key="k")
    with pytest.raises(ClientError) as full:
        s3.delete_bucket(Bucket=versioned)
    assert error(full.value) == (409, "BucketNotEmpty")
    for version in s3.list_object_versions(Bucket=versioned).get("Versions", []):
        s3.delete_object(Bucket=versioned, Key="k", VersionId=version["VersionId"])
    for marker in s3.list_object_versions(Bucket=versioned).get("DeleteMarkers", []):
        s3.delete_object(Bucket=versioned, Key="k", VersionId=marker["VersionId"])
    s3.delete_bucket(Bucket=versioned)


def test_malformed_version_ids_are_400(s3: Any, versioned: str) -> None:
    s3.put_object(Bucket=versioned, Key="k", Body=b"x")
    with pytest.raises(ClientError) as bad:
        s3.get_object(Bucket=versioned, Key="k", VersionId="not-a-version")
    assert error(bad.value) == (400, "InvalidArgument")


def test_the_deep_scrub_reads_noncurrent_versions_and_skips_markers(
    live: LiveServer, s3: Any, versioned: str
) -> None:
    old = b"old content that rots" + b"." * INLINE_MAX_BYTES  # a blob file, past the limit
    s3.put_object(Bucket=versioned, Key="rots", Body=old)
    s3.put_object(Bucket=versioned, Key="rots", Body=b"new")
    s3.delete_object(Bucket=versioned, Key="rots")
    sha = hashlib.sha256(old).hexdigest()
    blob = live.data_dir / "blobs" / sha[:2] / sha[2:4] / sha
    os.chmod(blob, 0o644)
    blob.write_bytes(old.replace(b"rots", b"r0ts"))
    live.stop()
    try:
        assert live.cli("check").strip() == "consistent"  # counters and references agree
        deep = launch.run(
            ["check", "--deep", "--data-dir", str(live.data_dir)], env=dict(os.environ)
        )
        assert deep.returncode == 1, deep.stdout + deep.stderr
        assert deep.stdout.count("corrupt") == 1 and "'rots': corrupt" in deep.stdout
    finally:
        blob.write_bytes(old)
        live.start()


def test_a_versioning_configuration_is_honoured_whole_or_refused(local_server: LiveServer) -> None:
    """MinIO's extensions (ExcludedPrefixes, ExcludeFolders) were dropped with a 200."""

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    s3: Any = local_server.s3()
    name = f"vx-{os.urandom(6).hex()}"
    s3.create_bucket(Bucket=name)
    body = (
        b"<VersioningConfiguration><Status>Enabled</Status>"
        b"<ExcludedPrefixes><Prefix>tmp/</Prefix></ExcludedPrefixes>"
        b"<ExcludeFolders>true</ExcludeFolders></VersioningConfiguration>"
    )
    url = f"{local_server.s3_url}/{name}?versioning"
    request = AWSRequest("PUT", url, data=body)
    request.headers["Host"] = local_server.s3_url.removeprefix("http://")
    request.headers["Content-MD5"] = (
        __import__("base64").b64encode(hashlib.md5(body).digest()).decode()
    )
    S3SigV4Auth(Credentials(*local_server.s3_credentials()), "s3", "us-east-1").add_auth(request)
    answer = web.put(url, headers=dict(request.headers), content=body)
    assert answer.status_code == 501, answer.text
    assert "Status" not in s3.get_bucket_versioning(Bucket=name)
