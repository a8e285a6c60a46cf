"""What an object version carries beside its content (its attributes: content type, user
metadata, stored headers, tags, ACL, retention, legal hold, checksum), written by every
path that writes a version and read back, on both backends (issue 33 point 1): the table
the `Attributes` refactor runs under. A path that does not take an attribute from its
request shows what it gives it instead (the source's, or nothing)."""

from __future__ import annotations

import base64
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name

UNTIL = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
EXPIRES = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
STORED = {
    "CacheControl": "max-age=1",
    "ContentDisposition": 'attachment; filename="a.txt"',
    "ContentEncoding": "x-a",
    "ContentLanguage": "fr",
}
PUBLIC = "http://acs.amazonaws.com/groups/global/AllUsers"
BODY = b"attributes " * 10

FULL = {
    "type": "text/x-a",
    "metadata": {"m": "a"},
    "headers": {**STORED, "Expires": EXPIRES},
    "tags": {"t": "a"},
    "acl": "public-read",
    "retention": ("GOVERNANCE", UNTIL),
    "hold": "ON",
    "checksum": ("CRC32", "FULL_OBJECT"),
}
"""Every attribute, as the source of copies, restores and renames carries them."""
OTHER = {
    "type": "text/x-b",
    "metadata": {"m": "b"},
    "headers": {"CacheControl": "no-store"},
    "tags": {"t": "b"},
    "acl": "public-read",
    "retention": ("GOVERNANCE", UNTIL),
    "hold": "ON",
}
"""What a REPLACE copy or a multipart upload asks for."""
NOTHING = {
    "type": "binary/octet-stream",
    "metadata": {},
    "headers": {},
    "tags": {},
    "acl": "private",
    "retention": None,
    "hold": None,
    "checksum": None,
}


def _put_arguments(attrs: dict[str, Any]) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "ContentType": attrs["type"],
        "Metadata": attrs["metadata"],
        **attrs["headers"],
        "Tagging": "&".join(f"{k}={v}" for k, v in attrs["tags"].items()),
        "ACL": attrs["acl"],
        "ObjectLockMode": attrs["retention"][0],
        "ObjectLockRetainUntilDate": attrs["retention"][1],
        "ObjectLockLegalHoldStatus": attrs["hold"],
    }
    if attrs.get("checksum"):
        arguments["ChecksumAlgorithm"] = attrs["checksum"][0]
    return arguments


def read(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    grants = s3.get_object_acl(Bucket=bucket, Key=key)["Grants"]
    public = any(g["Grantee"].get("URI") == PUBLIC for g in grants)
    checksum = next(
        (
            (name[8:], head.get("ChecksumType"))
            for name in head
            if name.startswith("Checksum") and name != "ChecksumType"
        ),
        None,
    )
    headers = {name: head[name] for name in STORED if name in head}
    if "Expires" in head:
        headers["Expires"] = head["Expires"]
    until = head.get("ObjectLockRetainUntilDate")
    return {
        "type": head["ContentType"],
        "metadata": head["Metadata"],
        "headers": headers,
        "tags": {
            t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
        },
        "acl": "public-read" if public else "private",
        "retention": None if until is None else (head["ObjectLockMode"], until),
        "hold": head.get("ObjectLockLegalHoldStatus"),
        "checksum": checksum,
    }


@pytest.fixture
def place(server: LiveServer) -> tuple[LiveServer, Any, str]:
    s3: Any = server.s3()
    bucket = unique_name("attrs")
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    s3.put_object(Bucket=bucket, Key="source", Body=BODY, **_put_arguments(FULL))
    return server, s3, bucket


def put_object(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    return "source", FULL


def post_form(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    fields = {
        "Content-Type": OTHER["type"],
        "x-amz-meta-m": "b",
        "Cache-Control": "no-store",
        "tagging": "<Tagging><TagSet><Tag><Key>t</Key><Value>b</Value></Tag></TagSet></Tagging>",
        "acl": "public-read",
        "x-amz-object-lock-mode": "GOVERNANCE",
        "x-amz-object-lock-retain-until-date": UNTIL.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "x-amz-object-lock-legal-hold": "ON",
    }
    post = s3.generate_presigned_post(
        bucket, "posted", Fields=fields, Conditions=[{k: v} for k, v in fields.items()]
    )
    sent = web.post(post["url"], data=post["fields"], files={"file": ("f", BODY)})
    assert sent.status_code == 204, sent.text
    return "posted", {**OTHER, "checksum": None}


def multipart(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="parts", **_put_arguments({**OTHER, "checksum": ("CRC32", "")})
    )["UploadId"]
    part = s3.upload_part(
        Bucket=bucket,
        Key="parts",
        UploadId=upload,
        PartNumber=1,
        Body=BODY,
        ChecksumAlgorithm="CRC32",
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="parts",
        UploadId=upload,
        MultipartUpload={
            "Parts": [
                {"PartNumber": 1, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]}
            ]
        },
    )
    return "parts", {**OTHER, "checksum": ("CRC32", "COMPOSITE")}


def copy_keeping(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/source")
    return "copied", {**FULL, "acl": "private", "retention": None, "hold": None}


def copy_replacing(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    s3.copy_object(
        Bucket=bucket,
        Key="replaced",
        CopySource=f"{bucket}/source",
        MetadataDirective="REPLACE",
        TaggingDirective="REPLACE",
        **_put_arguments(OTHER),
    )
    return "replaced", {**OTHER, "checksum": FULL["checksum"]}


def part_copy(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    upload = s3.create_multipart_upload(Bucket=bucket, Key="partcopy", **_put_arguments(OTHER))
    part = s3.upload_part_copy(
        Bucket=bucket,
        Key="partcopy",
        UploadId=upload["UploadId"],
        PartNumber=1,
        CopySource=f"{bucket}/source",
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="partcopy",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    return "partcopy", {**OTHER, "checksum": None}


def v1_put(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    with server.client() as http:
        put = http.put(
            f"/buckets/{bucket_id_named(http, bucket)}/files/v1put",
            content=BODY,
            headers={"Content-Type": "text/x-b", "Tagging": "t=b"},
        )
        assert put.status_code in (200, 201), put.text
    return "v1put", {"type": "text/x-b", "tags": {"t": "b"}}


def v1_form(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    with server.client() as http:
        put = http.put(
            f"/buckets/{bucket_id_named(http, bucket)}/files/v1form",
            data={"cacheControl": "60"},
            files={"file": ("f.txt", BODY, "text/x-b")},
        )
        assert put.status_code in (200, 201), put.text
    return "v1form", {"type": "text/x-b", "headers": {"CacheControl": "max-age=60"}}


def restore(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    version = s3.head_object(Bucket=bucket, Key="source")["VersionId"]
    s3.put_object(Bucket=bucket, Key="source", Body=b"newer")
    with server.client() as http:
        done = http.post(
            f"/buckets/{bucket_id_named(http, bucket)}/versions/{version}/restore",
            json={"key": "source"},
        )
        assert done.status_code == 201, done.text
    return "source", {**FULL, "acl": "private", "retention": None, "hold": None}


def rename(server: LiveServer, s3: Any, bucket: str) -> tuple[str, dict[str, Any]]:
    unlocked = {**FULL, "retention": None, "hold": None}
    arguments = {
        k: v
        for k, v in _put_arguments(unlocked | {"retention": ("", ""), "hold": ""}).items()
        if not k.startswith("ObjectLock")
    }
    s3.put_object(Bucket=bucket, Key="before", Body=BODY, **arguments)
    with server.client() as http:
        moved = http.patch(
            f"/buckets/{bucket_id_named(http, bucket)}/files/before", json={"key": "after"}
        )
        assert moved.status_code == 200, moved.text
    return "after", unlocked  # a move: the ACL goes along


PATHS = [
    put_object,
    post_form,
    multipart,
    copy_keeping,
    copy_replacing,
    part_copy,
    v1_put,
    v1_form,
    restore,
    rename,
]


@pytest.mark.parametrize("path", PATHS, ids=[p.__name__ for p in PATHS])
def test_every_attribute_round_trips_on_every_path(
    place: tuple[LiveServer, Any, str], path: Any
) -> None:
    server, s3, bucket = place
    key, given = path(server, s3, bucket)
    expected = {**NOTHING, **given}
    found = read(s3, bucket, key)
    if expected["checksum"] is not None and found["checksum"] is not None:
        assert found["checksum"][0] == expected["checksum"][0]
        found["checksum"] = expected["checksum"] = found["checksum"][:1]
    assert found == expected
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == BODY
    if expected["checksum"] == ("CRC32",) and path is not multipart:
        crc = base64.b64encode(zlib.crc32(BODY).to_bytes(4, "big")).decode()
        assert (
            s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")["ChecksumCRC32"] == crc
        )
