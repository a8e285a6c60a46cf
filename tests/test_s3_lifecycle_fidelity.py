"""Issue 38 point 6 with boto3 (and raw requests for bodies boto3 will not write) against the
shared server: a rule set with the legacy top-level Prefix comes back as set, the
x-amz-expiration header on PutObject, HeadObject and GetObject of an object a rule will
expire (its date as AWS computes it, its rule's id URL-encoded), and malformed dates answered
400 before transitions are refused."""

from __future__ import annotations

import email.utils
import math
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import code, status

DAY = 86_400
HEADER = re.compile(r'expiry-date="([^"]+)", rule-id="([^"]+)"')


@pytest.fixture(scope="module")
def keys(local_server: LiveServer) -> tuple[str, str]:
    return local_server.s3_credentials()


@pytest.fixture(scope="module")
def s3(local_server: LiveServer, keys: tuple[str, str]) -> Any:
    return local_server.s3(*keys)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("lc")
    s3.create_bucket(Bucket=name)
    return name


def configure(s3: Any, bucket: str, *rules: dict[str, Any]) -> None:
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})


def test_legacy_prefix_rules_come_back_as_set(s3: Any, bucket: str) -> None:
    rules = [
        {"ID": "test1/", "Expiration": {"Days": 31}, "Prefix": "test1/", "Status": "Enabled"},
        {"ID": "test2/", "Expiration": {"Days": 120}, "Prefix": "test2/", "Status": "Disabled"},
        {"ID": "all", "Expiration": {"Days": 7}, "Prefix": "", "Status": "Enabled"},
    ]
    configure(s3, bucket, *rules)
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == rules


def test_filter_rules_still_come_back_with_their_filter(s3: Any, bucket: str) -> None:
    rules = [
        {"ID": "a", "Expiration": {"Days": 1}, "Filter": {"Prefix": "a/"}, "Status": "Enabled"},
        {
            "ID": "b",
            "Expiration": {"Days": 2},
            "Filter": {"Tag": {"Key": "k", "Value": "v"}},
            "Status": "Enabled",
        },
    ]
    configure(s3, bucket, *rules)
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == rules


def expiration(headers: dict[str, str]) -> tuple[float, str] | None:
    raw = headers.get("x-amz-expiration")
    if raw is None:
        return None
    found = HEADER.fullmatch(raw)
    assert found is not None, raw
    return email.utils.parsedate_to_datetime(found[1]).timestamp(), found[2]


def headers_of(answer: dict[str, Any]) -> dict[str, str]:
    return dict(answer["ResponseMetadata"]["HTTPHeaders"])


def test_put_head_and_get_say_when_a_days_rule_expires_the_object(s3: Any, bucket: str) -> None:
    configure(
        s3,
        bucket,
        {"ID": "rule1", "Expiration": {"Days": 1}, "Prefix": "days1/", "Status": "Enabled"},
    )
    put = s3.put_object(Bucket=bucket, Key="days1/foo", Body=b"bar")
    head = s3.head_object(Bucket=bucket, Key="days1/foo")
    got = s3.get_object(Bucket=bucket, Key="days1/foo")
    uploaded = head["LastModified"].timestamp()
    # AWS: the upload plus the days, rounded up to the next midnight UTC.
    expected = math.ceil((uploaded + DAY) / DAY) * DAY
    assert datetime.fromtimestamp(expected, UTC).time().isoformat() == "00:00:00"
    assert 0 < expected - (uploaded + DAY) <= DAY
    for answer in (put, head, got):
        assert expiration(headers_of(answer)) == (expected, "rule1")
    assert "GMT" in headers_of(head)["x-amz-expiration"]
    other = s3.put_object(Bucket=bucket, Key="days2/foo", Body=b"bar")
    assert expiration(headers_of(other)) is None
    assert expiration(headers_of(s3.head_object(Bucket=bucket, Key="days2/foo"))) is None


def test_the_earliest_rule_is_named_and_its_id_url_encoded(s3: Any, bucket: str) -> None:
    configure(
        s3,
        bucket,
        {"ID": "long", "Expiration": {"Days": 30}, "Filter": {"Prefix": ""}, "Status": "Enabled"},
        {
            "ID": "short one/é",
            "Expiration": {"Days": 2},
            "Filter": {"Prefix": "logs/"},
            "Status": "Enabled",
        },
        {
            "ID": "dated",
            "Expiration": {"Date": datetime(2090, 1, 1, tzinfo=UTC)},
            "Filter": {"Prefix": "logs/"},
            "Status": "Enabled",
        },
        {"ID": "off", "Expiration": {"Days": 1}, "Filter": {"Prefix": ""}, "Status": "Disabled"},
    )
    s3.put_object(Bucket=bucket, Key="logs/a", Body=b"x")
    s3.put_object(Bucket=bucket, Key="data/a", Body=b"x")
    logs = s3.head_object(Bucket=bucket, Key="logs/a")
    found = expiration(headers_of(logs))
    assert found is not None and found[1] == "short%20one%2F%C3%A9"
    assert found[0] == math.ceil((logs["LastModified"].timestamp() + 2 * DAY) / DAY) * DAY
    data = expiration(headers_of(s3.head_object(Bucket=bucket, Key="data/a")))
    assert data is not None and data[1] == "long"
    configure(
        s3,
        bucket,
        {
            "ID": "dated",
            "Expiration": {"Date": datetime(2090, 1, 1, tzinfo=UTC)},
            "Filter": {"Prefix": "logs/"},
            "Status": "Enabled",
        },
    )
    dated = expiration(headers_of(s3.get_object(Bucket=bucket, Key="logs/a")))
    assert dated == (datetime(2090, 1, 1, tzinfo=UTC).timestamp(), "dated")


def test_a_tag_rule_names_only_objects_carrying_its_tags(s3: Any, bucket: str) -> None:
    def tagged(*tags: tuple[str, str]) -> dict[str, Any]:
        pairs = [{"Key": k, "Value": v} for k, v in tags]
        condition = {"Tag": pairs[0]} if len(pairs) == 1 else {"And": {"Tags": pairs}}
        return {"ID": "rule1", "Expiration": {"Days": 1}, "Filter": condition, "Status": "Enabled"}

    s3.put_object(Bucket=bucket, Key="obj", Body=b"x")
    tags = {"TagSet": [{"Key": "key1", "Value": "tag1"}, {"Key": "key5", "Value": "tag5"}]}
    s3.put_object_tagging(Bucket=bucket, Key="obj", Tagging=tags)
    cases = [
        (tagged(("key1", "tag1")), True),
        (tagged(("key2", "tag1")), False),
        (tagged(("key1", "tag1"), ("key5", "tag5")), True),
        (tagged(("key1", "tag1"), ("key5", "tag6")), False),
    ]
    for rule, named in cases:
        configure(s3, bucket, rule)
        found = expiration(headers_of(s3.head_object(Bucket=bucket, Key="obj")))
        assert (found is not None) == named, rule
    configure(s3, bucket, tagged(("key1", "tag1"), ("key5", "tag5")))
    put = s3.put_object(Bucket=bucket, Key="obj2", Body=b"x", Tagging="key1=tag1&key5=tag5")
    assert expiration(headers_of(put)) is not None


def put_raw(live: LiveServer, keys: tuple[str, str], bucket: str, rule: str) -> tuple[int, str]:
    body = f"<LifecycleConfiguration><Rule>{rule}</Rule></LifecycleConfiguration>".encode()
    path = f"/{bucket}?lifecycle"
    request = AWSRequest("PUT", live.s3_url + path, data=body)
    S3SigV4Auth(Credentials(*keys), "s3", "us-east-1").add_auth(request)
    answer = web.put(live.s3_url + path, content=body, headers=dict(request.headers))
    found = re.search(r"<Code>([^<]+)</Code>", answer.text)
    return answer.status_code, found[1] if found else ""


RULE = "<ID>r</ID><Prefix>p/</Prefix><Status>Enabled</Status>"


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<Expiration><Date>20200101</Date></Expiration>", (400, "MalformedXML")),
        ("<Expiration><Date>1st of May</Date></Expiration>", (400, "MalformedXML")),
        ("<Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration>", (400, "InvalidArgument")),
        (
            "<Expiration><Days>1</Days></Expiration>"
            "<Transition><Date>20220927</Date><StorageClass>GLACIER</StorageClass></Transition>",
            (400, "MalformedXML"),
        ),
        (
            "<Expiration><Days>1</Days></Expiration><Transition>"
            "<Date>2030-01-01T10:00:00Z</Date><StorageClass>GLACIER</StorageClass></Transition>",
            (400, "InvalidArgument"),
        ),
        (
            "<Expiration><Days>1</Days></Expiration><Transition>"
            "<Date>2030-01-01T00:00:00Z</Date><StorageClass>GLACIER</StorageClass></Transition>",
            (501, "NotImplemented"),
        ),
    ],
)
def test_a_malformed_date_is_400_before_a_transition_is_refused(
    local_server: LiveServer,
    keys: tuple[str, str],
    s3: Any,
    bucket: str,
    action: str,
    expected: tuple[int, str],
) -> None:
    assert put_raw(local_server, keys, bucket, RULE + action) == expected
    with pytest.raises(ClientError) as none:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code(none.value) == "NoSuchLifecycleConfiguration"


def test_dates_boto3_writes_from_a_number_are_judged_not_at_midnight(s3: Any, bucket: str) -> None:
    """boto3 reads '20220927' as seconds since 1970: a moment not at midnight, which S3
    answers InvalidArgument, in an Expiration or a Transition alike."""
    expiring = {"ID": "r", "Expiration": {"Date": "20200101"}, "Prefix": "p/", "Status": "Enabled"}
    moving = {
        "ID": "r",
        "Expiration": {"Date": "2030-09-27"},
        "Transitions": [{"Date": "20220927", "StorageClass": "GLACIER"}],
        "Prefix": "p/",
        "Status": "Enabled",
    }
    for rule in (expiring, moving):
        with pytest.raises(ClientError) as refused:
            configure(s3, bucket, rule)
        assert (status(refused.value), code(refused.value)) == (400, "InvalidArgument")
