"""GetObjectAttributes and RenameObject with boto3 against the shared server (issue 38,
point 11): what they answer for plain, multipart and versioned objects, and who may ask."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from tests.support.access import policy, refused
from tests.support.names import unique_name

EVERYTHING = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]


def test_attributes_of_a_plain_and_a_multipart_object(s3: Any) -> None:
    bucket = unique_name("oa")
    s3.create_bucket(Bucket=bucket)
    body = b"attributes"
    put = s3.put_object(Bucket=bucket, Key="plain", Body=body, ChecksumAlgorithm="SHA256")
    got = s3.get_object_attributes(Bucket=bucket, Key="plain", ObjectAttributes=EVERYTHING)
    assert got["ETag"] == put["ETag"].strip('"') == hashlib.md5(body).hexdigest()
    assert (
        got["Checksum"]["ChecksumSHA256"]
        == base64.b64encode(hashlib.sha256(body).digest()).decode()
    )
    assert got["ObjectSize"] == len(body)
    assert got["StorageClass"] == "STANDARD"
    assert "ObjectParts" not in got
    assert got["LastModified"] == s3.head_object(Bucket=bucket, Key="plain")["LastModified"]
    only = s3.get_object_attributes(Bucket=bucket, Key="plain", ObjectAttributes=["ObjectSize"])
    assert "ETag" not in only and only["ObjectSize"] == len(body)

    upload = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    parts = []
    for number, chunk in ((1, b"a" * 5 * 1024 * 1024), (2, b"tail")):
        etag = s3.upload_part(
            Bucket=bucket, Key="big", UploadId=upload, PartNumber=number, Body=chunk
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="big", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    got = s3.get_object_attributes(Bucket=bucket, Key="big", ObjectAttributes=EVERYTHING)
    assert got["ETag"] == done["ETag"].strip('"')
    assert got["ObjectParts"]["TotalPartsCount"] == 2
    assert got["ObjectSize"] == 5 * 1024 * 1024 + 4


def test_versions_errors_and_who_may_ask(s3: Any, anonymous: Any, other: tuple[str, Any]) -> None:
    org, theirs = other
    bucket = unique_name("oav")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"three")
    old = s3.get_object_attributes(
        Bucket=bucket, Key="k", VersionId=first, ObjectAttributes=["ObjectSize"]
    )
    assert (old["ObjectSize"], old["VersionId"]) == (3, first)
    assert (
        s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])[
            "ObjectSize"
        ]
        == 5
    )
    assert (
        refused(s3.get_object_attributes, Bucket=bucket, Key="none", ObjectAttributes=["ETag"])
        == "NoSuchKey"
    )
    assert (
        refused(s3.get_object_attributes, Bucket=bucket, Key="k", ObjectAttributes=["Colour"])
        == "InvalidArgument"
    )
    # AWS asks for s3:GetObjectAttributes and s3:GetObject both.
    objects = f"arn:aws:s3:::{bucket}/*"
    attributes_only = {
        "Effect": "Allow",
        "Principal": {"AWS": org},
        "Action": "s3:GetObjectAttributes",
        "Resource": objects,
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, attributes_only))
    assert (
        refused(theirs.get_object_attributes, Bucket=bucket, Key="k", ObjectAttributes=["ETag"])
        == "AccessDenied"
    )
    both = {**attributes_only, "Action": ["s3:GetObjectAttributes", "s3:GetObject"]}
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, both))
    assert (
        theirs.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])[
            "ObjectSize"
        ]
        == 5
    )
    assert (
        refused(
            theirs.get_object_attributes,
            Bucket=bucket,
            Key="k",
            VersionId=first,
            ObjectAttributes=["ObjectSize"],
        )
        == "AccessDenied"
    )  # a named version is s3:GetObjectVersionAttributes
    assert (
        refused(anonymous.get_object_attributes, Bucket=bucket, Key="k", ObjectAttributes=["ETag"])
        == "AccessDenied"
    )


def test_rename_object_moves_a_key_within_its_bucket(s3: Any, other: tuple[str, Any]) -> None:
    org, theirs = other
    bucket = unique_name("rn")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="draft.txt", Body=b"text", Metadata={"by": "me"})
    s3.rename_object(Bucket=bucket, Key="final.txt", RenameSource=f"{bucket}/draft.txt")
    got = s3.get_object(Bucket=bucket, Key="final.txt")
    assert (got["Body"].read(), got["Metadata"]) == (b"text", {"by": "me"})
    assert refused(s3.head_object, Bucket=bucket, Key="draft.txt") == "404"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["final.txt"]
    # A taken destination is never replaced: 412 with If-None-Match: *, else refused.
    s3.put_object(Bucket=bucket, Key="other.txt", Body=b"other")
    taken = {"Bucket": bucket, "Key": "other.txt", "RenameSource": f"/{bucket}/final.txt"}
    assert refused(s3.rename_object, **taken, DestinationIfNoneMatch="*") == "PreconditionFailed"
    assert refused(s3.rename_object, **taken) == "NotImplemented"
    assert s3.get_object(Bucket=bucket, Key="other.txt")["Body"].read() == b"other"
    assert (
        refused(s3.rename_object, Bucket=bucket, Key="x", RenameSource=f"{bucket}/missing")
        == "NoSuchKey"
    )
    assert (
        refused(s3.rename_object, Bucket=bucket, Key="x", RenameSource="another-bucket/final.txt")
        == "InvalidArgument"
    )
    assert (
        refused(
            s3.rename_object,
            Bucket=bucket,
            Key="x",
            RenameSource=f"{bucket}/final.txt",
            SourceIfMatch='"abc"',
        )
        == "NotImplemented"
    )
    # Another organization needs s3:PutObject on the destination, s3:GetObject and
    # s3:DeleteObject on the source.
    put_only = {
        "Effect": "Allow",
        "Principal": {"AWS": org},
        "Action": ["s3:PutObject", "s3:GetObject"],
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, put_only))
    move = {"Bucket": bucket, "Key": "moved.txt", "RenameSource": f"{bucket}/final.txt"}
    assert refused(theirs.rename_object, **move) == "AccessDenied"
    everything = {**put_only, "Action": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject"]}
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, everything))
    theirs.rename_object(**move)
    assert s3.get_object(Bucket=bucket, Key="moved.txt")["Body"].read() == b"text"


def test_rename_object_in_a_versioned_bucket_keeps_the_history(s3: Any) -> None:
    bucket = unique_name("rnv")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket=bucket, Key="a", Body=b"a")["VersionId"]
    s3.rename_object(Bucket=bucket, Key="b", RenameSource=f"{bucket}/a")
    assert s3.get_object(Bucket=bucket, Key="b")["Body"].read() == b"a"
    assert s3.get_object(Bucket=bucket, Key="a", VersionId=first)["Body"].read() == b"a"
    versions = s3.list_object_versions(Bucket=bucket, Prefix="a")
    assert [m["Key"] for m in versions["DeleteMarkers"]] == ["a"]
