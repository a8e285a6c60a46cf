"""S3 tagging with boto3: bucket and object tag sets round-trip (per version, through copies
and multipart uploads), S3's limits are refused with InvalidTag and leave the previous set."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.names import unique_name


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = exc.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_bucket_tags_round_trip_and_go(s3: Any) -> None:
    bucket = unique_name("tg")
    s3.create_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error(exc) == (404, "NoSuchTagSet")
    tags = [{"Key": "project", "Value": "apollo"}, {"Key": "cost center", "Value": "4 2/x@y"}]
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    got = s3.get_bucket_tagging(Bucket=bucket)["TagSet"]
    assert sorted(got, key=lambda t: t["Key"]) == sorted(tags, key=lambda t: t["Key"])
    s3.delete_bucket_tagging(Bucket=bucket)
    with pytest.raises(ClientError):
        s3.get_bucket_tagging(Bucket=bucket)


@pytest.mark.parametrize(
    "tag_set",
    [
        [{"Key": f"k{n}", "Value": "v"} for n in range(51)],
        [{"Key": "k" * 129, "Value": "v"}],
        [{"Key": "k", "Value": "v" * 257}],
        [{"Key": "k", "Value": "a"}, {"Key": "k", "Value": "b"}],
        [{"Key": "aws:reserved", "Value": "v"}],
        [{"Key": "bad<key>", "Value": "v"}],
    ],
)
def test_invalid_tag_sets_are_refused_and_keep_the_old_one(s3: Any, tag_set: list) -> None:
    bucket = unique_name("tg")
    s3.create_bucket(Bucket=bucket)
    kept = [{"Key": "keep", "Value": "me"}]
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": kept})
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tag_set})
    assert error(exc) == (400, "InvalidTag")
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == kept


def test_object_tags_on_writes_versions_copies_and_uploads(s3: Any) -> None:
    bucket = unique_name("tg")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"1", Tagging="team=a&stage=dev")
    assert (
        s3.head_object(Bucket=bucket, Key="k")["ResponseMetadata"]["HTTPHeaders"][
            "x-amz-tagging-count"
        ]
        == "2"
    )
    second = s3.put_object(Bucket=bucket, Key="k", Body=b"2")
    assert (
        "x-amz-tagging-count"
        not in s3.head_object(Bucket=bucket, Key="k")["ResponseMetadata"]["HTTPHeaders"]
    )
    old = s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=first["VersionId"])
    assert sorted((t["Key"], t["Value"]) for t in old["TagSet"]) == [
        ("stage", "dev"),
        ("team", "a"),
    ]
    s3.put_object_tagging(
        Bucket=bucket, Key="k", Tagging={"TagSet": [{"Key": "state", "Value": "new"}]}
    )
    now = s3.get_object_tagging(Bucket=bucket, Key="k")
    assert now["VersionId"] == second["VersionId"]
    assert now["TagSet"] == [{"Key": "state", "Value": "new"}]
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/k")
    assert s3.get_object_tagging(Bucket=bucket, Key="copied")["TagSet"] == now["TagSet"]
    s3.copy_object(
        Bucket=bucket,
        Key="copied",
        CopySource=f"{bucket}/k",
        TaggingDirective="REPLACE",
        Tagging="only=this",
    )
    replaced = s3.get_object_tagging(Bucket=bucket, Key="copied")["TagSet"]
    assert replaced == [{"Key": "only", "Value": "this"}]
    s3.delete_object_tagging(Bucket=bucket, Key="copied")
    assert s3.get_object_tagging(Bucket=bucket, Key="copied")["TagSet"] == []
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="from=upload")
    part = s3.upload_part(
        Bucket=bucket, Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=b"p"
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.get_object_tagging(Bucket=bucket, Key="mp")["TagSet"] == [
        {"Key": "from", "Value": "upload"}
    ]


def test_object_tag_limits_are_refused_and_write_nothing(s3: Any) -> None:
    bucket = unique_name("tg")
    s3.create_bucket(Bucket=bucket)
    eleven = "&".join(f"k{n}=v" for n in range(11))
    for tagging in (eleven, "k=" + "v" * 257, "a=1&a=2"):
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket=bucket, Key="never", Body=b"x", Tagging=tagging)
        assert error(exc) == (400, "InvalidTag")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="keep=me")
    with pytest.raises(ClientError) as exc:
        s3.put_object_tagging(
            Bucket=bucket,
            Key="k",
            Tagging={"TagSet": [{"Key": f"k{n}", "Value": "v"} for n in range(11)]},
        )
    assert error(exc) == (400, "InvalidTag")
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == [
        {"Key": "keep", "Value": "me"}
    ]
