"""ETags in conditional headers compared as RFC 9110 says, by one function for every
conditional header of both APIs: quoted or bare (minio-py sends them bare), `W/` weak tags
only in If-None-Match, `*`, comma lists."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from storage.rules.etags import etag_matches
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name


@pytest.mark.parametrize(
    ("field", "weak", "matched"),
    [
        ('"abc"', False, True),
        ("abc", False, True),
        ('"x", "abc"', False, True),
        ("x,abc", False, True),
        ("*", False, True),
        ('W/"abc"', False, False),
        ('W/"abc"', True, True),
        ('"abcd"', False, False),
        ('"ab"', True, False),
        ("", False, False),
    ],
)
def test_etag_fields(field: str, weak: bool, matched: bool) -> None:
    assert etag_matches(field, ('"abc"', None), weak) is matched


def status(error: pytest.ExceptionInfo[ClientError]) -> int:
    return int(error.value.response["ResponseMetadata"]["HTTPStatusCode"])


def test_bare_etags_work_on_both_apis(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    name = unique_name("etag")
    s3.create_bucket(Bucket=name)
    etag = s3.put_object(Bucket=name, Key="k", Body=b"one")["ETag"]
    bare = etag.strip('"')
    s3.put_object(Bucket=name, Key="k", Body=b"two", IfMatch=bare)  # the write's condition
    etag = s3.head_object(Bucket=name, Key="k")["ETag"]
    bare = etag.strip('"')
    with pytest.raises(ClientError) as error:
        s3.get_object(Bucket=name, Key="k", IfNoneMatch=bare)
    assert status(error) == 304
    assert s3.get_object(Bucket=name, Key="k", IfMatch=bare)["Body"].read() == b"two"
    copied = s3.copy_object(
        Bucket=name, Key="c", CopySource={"Bucket": name, "Key": "k"}, CopySourceIfMatch=bare
    )
    assert copied["CopyObjectResult"]["ETag"] == etag
    with pytest.raises(ClientError) as error:
        s3.get_object(Bucket=name, Key="k", IfMatch=f"W/{etag}")  # weak: never a strong match
    assert status(error) == 412
    with local_server.client() as http:
        bucket_id = bucket_id_named(http, name)
        url = f"/buckets/{bucket_id}/files/k"
        etag = http.head(url).headers["etag"]  # /v1's own ETag
        bare = etag.strip('"')
        assert http.get(url, headers={"If-None-Match": bare}).status_code == 304
        assert http.get(url, headers={"If-None-Match": f"W/{etag}"}).status_code == 304
        put = http.put(
            url, content=b"three", headers={"Content-Type": "text/plain", "If-Match": bare}
        )
        assert put.status_code == 201
