"""S3 bucket tagging with boto3: a tag set round-trips, S3's limits are refused with
InvalidTag and leave the previous set, and object tagging still answers 501."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import unique_name
from tests.live import LiveServer


@pytest.fixture
def s3(local_server: LiveServer) -> Any:
    return local_server.s3()


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


def test_object_tagging_is_still_not_implemented(s3: Any) -> None:
    bucket = unique_name("tg")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for call in (
        lambda: s3.get_object_tagging(Bucket=bucket, Key="k"),
        lambda: s3.put_object_tagging(
            Bucket=bucket, Key="k", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]}
        ),
        lambda: s3.delete_object_tagging(Bucket=bucket, Key="k"),
    ):
        with pytest.raises(ClientError) as exc:
            call()
        assert error(exc) == (501, "NotImplemented")
