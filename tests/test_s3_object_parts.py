"""A multipart object's parts (issue 38 point 11), with boto3 against the real S3 listener:
GetObjectAttributes (ETag, Checksum, ObjectParts and their pages, StorageClass, ObjectSize,
a named version, an SSE-C object's key, the two actions AWS decides it as), GetObject and
HeadObject with `partNumber` (the part's bytes, `x-amz-mp-parts-count`, the part's
checksum), a CompleteMultipartUpload sent again after it succeeded, and a POST upload's
checksum field."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.names import unique_name
from tests.support.s3 import presign, send

MIB = 1024 * 1024
ATTRIBUTES = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("pt")
    s3.create_bucket(Bucket=name)
    return name


def _refused(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    """The status and code of a call that must fail."""
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    answer: Any = caught.value.response
    return answer["ResponseMetadata"]["HTTPStatusCode"], answer["Error"]["Code"]


def code(call: Any, *args: Any, **kwargs: Any) -> str:
    return _refused(call, *args, **kwargs)[1]


def status(call: Any, *args: Any, **kwargs: Any) -> int:
    return _refused(call, *args, **kwargs)[0]


def _sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def _upload(
    s3: Any, bucket: str, key: str, parts: list[bytes], **create: Any
) -> tuple[str, list[dict[str, Any]]]:
    """An upload of `parts` (with the checksum algorithm `create` names, if any), not
    completed: its id and the completion's part list."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"]
    algorithm = create.get("ChecksumAlgorithm")
    listed = []
    for number, body in enumerate(parts, 1):
        extra = {} if algorithm is None else {"ChecksumAlgorithm": algorithm}
        answer = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body, **extra
        )
        entry = {"ETag": answer["ETag"], "PartNumber": number}
        if algorithm is not None:
            entry[f"Checksum{algorithm}"] = answer[f"Checksum{algorithm}"]
        listed.append(entry)
    return upload_id, listed


def _complete(s3: Any, bucket: str, key: str, upload_id: str, parts: list[dict]) -> Any:
    return s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )


def test_an_object_written_in_one_piece_has_no_parts_to_list(s3: Any, bucket: str) -> None:
    put = s3.put_object(Bucket=bucket, Key="one", Body=b"foo", ChecksumAlgorithm="SHA256")
    found = s3.get_object_attributes(Bucket=bucket, Key="one", ObjectAttributes=ATTRIBUTES)
    assert found["ETag"] == put["ETag"].strip('"')
    assert found["ObjectSize"] == 3
    assert found["StorageClass"] == "STANDARD"
    assert found["Checksum"] == {"ChecksumSHA256": _sha256(b"foo"), "ChecksumType": "FULL_OBJECT"}
    assert "ObjectParts" not in found and "VersionId" not in found
    assert found["LastModified"] == s3.head_object(Bucket=bucket, Key="one")["LastModified"]
    only = s3.get_object_attributes(Bucket=bucket, Key="one", ObjectAttributes=["ObjectSize"])
    assert only["ObjectSize"] == 3 and "ETag" not in only and "Checksum" not in only
    # partNumber 1 is all of it; past it, AWS's 416 InvalidPartNumber
    whole = s3.get_object(Bucket=bucket, Key="one", PartNumber=1)
    assert whole["Body"].read() == b"foo" and "PartsCount" not in whole
    past = _refused(s3.get_object, Bucket=bucket, Key="one", PartNumber=2)
    assert past == (416, "InvalidPartNumber")


def test_attributes_refuse_what_aws_refuses(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    asked = s3.get_object_attributes
    assert code(asked, Bucket=bucket, Key="k", ObjectAttributes=["Colour"]) == "InvalidArgument"
    assert code(asked, Bucket=bucket, Key="gone", ObjectAttributes=["ETag"]) == "NoSuchKey"


@pytest.mark.parametrize(
    ("algorithm", "kind", "digest"),
    [("SHA256", "COMPOSITE", _sha256), ("CRC32", "FULL_OBJECT", _crc32)],
)
def test_a_multipart_object_keeps_its_parts(
    s3: Any, bucket: str, algorithm: str, kind: str, digest: Any
) -> None:
    first, last = os.urandom(5 * MIB), os.urandom(1000)
    upload_id, parts = _upload(
        s3, bucket, "mp", [first, last], ChecksumAlgorithm=algorithm, ChecksumType=kind
    )
    done = _complete(s3, bucket, "mp", upload_id, parts)
    assert done["ChecksumType"] == kind
    found = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ATTRIBUTES)
    assert found["ETag"] == done["ETag"].strip('"') and done["ETag"].endswith('-2"')
    assert found["ObjectSize"] == len(first) + len(last)
    assert found["Checksum"] == {
        f"Checksum{algorithm}": done[f"Checksum{algorithm}"],
        "ChecksumType": kind,
    }
    listed = found["ObjectParts"]
    assert listed["TotalPartsCount"] == 2 and listed["IsTruncated"] is False
    assert listed["Parts"] == [
        {"PartNumber": 1, "Size": len(first), f"Checksum{algorithm}": digest(first)},
        {"PartNumber": 2, "Size": len(last), f"Checksum{algorithm}": digest(last)},
    ]
    page = s3.get_object_attributes(
        Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], MaxParts=1
    )["ObjectParts"]
    assert (page["IsTruncated"], page["NextPartNumberMarker"], page["MaxParts"]) == (True, 1, 1)
    assert [p["PartNumber"] for p in page["Parts"]] == [1]
    rest = s3.get_object_attributes(
        Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], PartNumberMarker=1
    )["ObjectParts"]
    assert rest["PartNumberMarker"] == 1 and rest["IsTruncated"] is False
    assert [p["PartNumber"] for p in rest["Parts"]] == [2]

    for number, body in ((1, first), (2, last)):
        read = s3.get_object(Bucket=bucket, Key="mp", PartNumber=number, ChecksumMode="ENABLED")
        assert read["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert (read["PartsCount"], read["ETag"], read["ContentLength"]) == (
            2,
            done["ETag"],
            len(body),
        )
        assert read[f"Checksum{algorithm}"] == digest(body) and read["ChecksumType"] == kind
        assert read["Body"].read() == body
        head = s3.head_object(Bucket=bucket, Key="mp", PartNumber=number)
        assert (head["PartsCount"], head["ContentLength"]) == (2, len(body))
        assert f"Checksum{algorithm}" not in head  # only with ChecksumMode, as a whole read
    assert code(s3.get_object, Bucket=bucket, Key="mp", PartNumber=3) == "InvalidPartNumber"
    # a copy that keeps the `-2` ETag keeps the parts it speaks of
    s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "mp"})
    copied = s3.head_object(Bucket=bucket, Key="copied", PartNumber=2)
    assert (copied["PartsCount"], copied["ETag"]) == (2, done["ETag"])


def test_a_completion_sent_again_gets_the_first_answer(s3: Any, bucket: str) -> None:
    upload_id, parts = _upload(s3, bucket, "again", [b"only part"], ChecksumAlgorithm="SHA256")
    first = _complete(s3, bucket, "again", upload_id, parts)
    second = _complete(s3, bucket, "again", upload_id, parts)
    assert (second["ETag"], second["ChecksumSHA256"]) == (first["ETag"], first["ChecksumSHA256"])
    assert s3.get_object(Bucket=bucket, Key="again")["Body"].read() == b"only part"
    # another part list is not that completion
    more = [*parts, {"ETag": parts[0]["ETag"], "PartNumber": 2}]
    assert code(_complete, s3, bucket, "again", upload_id, more) == "NoSuchUpload"
    # once the key holds another version, the upload is over for good
    s3.put_object(Bucket=bucket, Key="again", Body=b"new")
    assert code(_complete, s3, bucket, "again", upload_id, parts) == "NoSuchUpload"


def test_attributes_of_a_named_version_and_of_a_delete_marker(s3: Any, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=bucket, Key="v", Body=b"old")
    s3.put_object(Bucket=bucket, Key="v", Body=b"newer")
    named = s3.get_object_attributes(
        Bucket=bucket, Key="v", VersionId=old["VersionId"], ObjectAttributes=ATTRIBUTES
    )
    assert (named["VersionId"], named["ObjectSize"]) == (old["VersionId"], 3)
    assert named["ETag"] == old["ETag"].strip('"')
    current = s3.get_object_attributes(Bucket=bucket, Key="v", ObjectAttributes=["ObjectSize"])
    assert current["ObjectSize"] == 5 and current["VersionId"] != old["VersionId"]
    s3.delete_object(Bucket=bucket, Key="v")
    asked = s3.get_object_attributes
    assert status(asked, Bucket=bucket, Key="v", ObjectAttributes=["ETag"]) == 404


def test_an_sse_c_object_needs_its_key(s3: Any, bucket: str) -> None:
    key = os.urandom(32)
    sse = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    put = s3.put_object(Bucket=bucket, Key="sealed", Body=b"A" * 1000, **sse)
    asked = s3.get_object_attributes
    assert status(asked, Bucket=bucket, Key="sealed", ObjectAttributes=ATTRIBUTES) == 400
    wire = {  # botocore encodes the key for the operations that carry content only
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": base64.b64encode(key).decode(),
        "SSECustomerKeyMD5": base64.b64encode(hashlib.md5(key).digest()).decode(),
    }
    found = asked(Bucket=bucket, Key="sealed", ObjectAttributes=ATTRIBUTES, **wire)
    assert (found["ObjectSize"], found["ETag"]) == (1000, put["ETag"].strip('"'))


def test_attributes_need_both_actions_aws_names(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, outsider = other
    s3.put_object(Bucket=bucket, Key="shared", Body=b"data")

    def grant(*actions: str) -> None:
        statement = {
            "Effect": "Allow",
            "Principal": {"AWS": org},
            "Action": list(actions),
            "Resource": f"arn:aws:s3:::{bucket}/*",
        }
        policy = {"Version": "2012-10-17", "Statement": [statement]}
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))

    asked = outsider.get_object_attributes
    grant("s3:GetObject")
    assert code(asked, Bucket=bucket, Key="shared", ObjectAttributes=["ETag"]) == "AccessDenied"
    grant("s3:GetObjectAttributes")
    assert code(asked, Bucket=bucket, Key="shared", ObjectAttributes=["ETag"]) == "AccessDenied"
    grant("s3:GetObject", "s3:GetObjectAttributes")
    found = asked(Bucket=bucket, Key="shared", ObjectAttributes=["ObjectSize"])
    assert found["ObjectSize"] == 4


def test_a_post_upload_checksum_is_verified_and_kept(s3: Any, bucket: str) -> None:
    body = b"\x89PNG checked"
    covered = ["starts-with", "$x-amz-checksum-sha256", ""]
    post = presign(s3, bucket, "uploads/sum.png", conditions=[covered])
    good = send(post, body, **{"x-amz-checksum-sha256": _sha256(body)})
    assert good.status_code == 201, good.text
    assert good.headers["x-amz-checksum-sha256"] == _sha256(body)
    stored = s3.head_object(Bucket=bucket, Key="uploads/sum.png", ChecksumMode="ENABLED")
    assert stored["ChecksumSHA256"] == _sha256(body)

    post = presign(s3, bucket, "uploads/bad.png", conditions=[covered])
    bad = send(post, body, **{"x-amz-checksum-sha256": _sha256(b"other")})
    assert (bad.status_code, "<Code>BadDigest</Code>" in bad.text) == (400, True)
    assert status(s3.head_object, Bucket=bucket, Key="uploads/bad.png") == 404
    # a field the signed policy does not cover is refused, as every field is
    post = presign(s3, bucket, "uploads/uncovered.png")
    uncovered = send(post, body, **{"x-amz-checksum-sha256": _sha256(body)})
    assert uncovered.status_code == 403


def test_checksum_types_are_those_aws_has_for_each_algorithm(s3: Any, bucket: str) -> None:
    """CRC64NVME only combines into a full-object checksum, its default; the SHAs only
    into a composite one."""
    upload_id, parts = _upload(s3, bucket, "nvme", [b"crc64"], ChecksumAlgorithm="CRC64NVME")
    done = _complete(s3, bucket, "nvme", upload_id, parts)
    assert done["ChecksumType"] == "FULL_OBJECT"
    assert done["ChecksumCRC64NVME"] == parts[0]["ChecksumCRC64NVME"]  # one part: its own
    create = s3.create_multipart_upload
    for algorithm, kind in (("CRC64NVME", "COMPOSITE"), ("SHA256", "FULL_OBJECT")):
        refused = _refused(
            create, Bucket=bucket, Key="no", ChecksumAlgorithm=algorithm, ChecksumType=kind
        )
        assert refused[0] == 400, (algorithm, kind)
