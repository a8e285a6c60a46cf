"""Issue 38 points 7 and 10 with boto3 (and raw forms where boto3 cannot send them) against
the shared server: object lock's error codes as AWS answers them (MalformedXML for a body off
the schema, InvalidRetentionPeriod for a period out of range), a GOVERNANCE retention that
changes mode only by bypassing governance, DeleteObjects errors naming the version;
presigned URLs out of range refused 403, POST forms whose key is `${filename}`, whose
policy's expiration or X-Amz-Date is malformed, and their 201 answer's XML body."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.etree import ElementTree

import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import code, presign, send, status

BYPASS_SCOPES = "buckets:read,buckets:write,files:read,files:write,files:bypass-governance"


@pytest.fixture(scope="module")
def keys(local_server: LiveServer) -> tuple[str, str]:
    return local_server.s3_credentials()


@pytest.fixture(scope="module")
def s3(local_server: LiveServer, keys: tuple[str, str]) -> Any:
    return local_server.s3(*keys, signature_version="s3v4")


@pytest.fixture(scope="module")
def admin_s3(local_server: LiveServer) -> Any:
    """A client of the same organization whose key may bypass GOVERNANCE retention."""
    return local_server.s3(*local_server.s3_credentials(None, BYPASS_SCOPES))


@pytest.fixture
def locked(s3: Any) -> str:
    name = unique_name("lk")
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    return name


def refused(call: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as exc:
        call(**kwargs)
    return status(exc.value), code(exc.value)


def later(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("default", "expected"),
    [
        ({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, "MalformedXML"),
        ({"Mode": "GOVERNANCE"}, "MalformedXML"),
        ({"Mode": "abc", "Years": 1}, "MalformedXML"),
        ({"Mode": "governance", "Years": 1}, "MalformedXML"),
        ({"Mode": "GOVERNANCE", "Days": 0}, "InvalidRetentionPeriod"),
        ({"Mode": "GOVERNANCE", "Years": -1}, "InvalidRetentionPeriod"),
        ({"Mode": "COMPLIANCE", "Days": 36_501}, "InvalidRetentionPeriod"),
    ],
)
def test_a_default_retention_is_refused_with_the_code_aws_answers(
    s3: Any, locked: str, default: dict[str, Any], expected: str
) -> None:
    config = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": default}}
    answer = refused(
        s3.put_object_lock_configuration, Bucket=locked, ObjectLockConfiguration=config
    )
    assert answer == (400, expected)
    kept = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert "Rule" not in kept  # nothing was set


def test_a_valid_default_retention_is_still_taken_and_disabled_is_malformed(
    s3: Any, locked: str
) -> None:
    config = {
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 2}},
    }
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration=config)
    got = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert got["Rule"]["DefaultRetention"] == {"Mode": "GOVERNANCE", "Days": 2}
    disabled = {**config, "ObjectLockEnabled": "Disabled"}
    answer = refused(
        s3.put_object_lock_configuration, Bucket=locked, ObjectLockConfiguration=disabled
    )
    assert answer == (400, "MalformedXML")


def test_a_retention_or_legal_hold_body_off_the_schema_is_malformed_xml(
    s3: Any, locked: str
) -> None:
    s3.put_object(Bucket=locked, Key="k", Body=b"abc")
    for mode in ("governance", "abc"):
        retention = {"Mode": mode, "RetainUntilDate": later(3600)}
        answer = refused(s3.put_object_retention, Bucket=locked, Key="k", Retention=retention)
        assert answer == (400, "MalformedXML")
    hold = refused(s3.put_object_legal_hold, Bucket=locked, Key="k", LegalHold={"Status": "abc"})
    assert hold == (400, "MalformedXML")
    head = s3.head_object(Bucket=locked, Key="k")
    assert "ObjectLockMode" not in head and "ObjectLockLegalHoldStatus" not in head
    # The same values in a write's headers are InvalidArgument, as AWS answers them.
    header = refused(
        s3.put_object, Bucket=locked, Key="k2", Body=b"x", ObjectLockLegalHoldStatus="abc"
    )
    assert header == (400, "InvalidArgument")


def test_a_governance_retention_changes_mode_only_by_bypassing_governance(
    s3: Any, admin_s3: Any, locked: str
) -> None:
    until = later(30).replace(microsecond=0)
    s3.put_object(
        Bucket=locked,
        Key="g",
        Body=b"abc",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
    )
    to_compliance = {"Mode": "COMPLIANCE", "RetainUntilDate": until}
    answer = refused(s3.put_object_retention, Bucket=locked, Key="g", Retention=to_compliance)
    assert answer == (403, "AccessDenied")
    assert s3.get_object_retention(Bucket=locked, Key="g")["Retention"]["Mode"] == "GOVERNANCE"
    # Extending it in its own mode needs no bypass.
    longer = until + timedelta(seconds=5)
    s3.put_object_retention(
        Bucket=locked, Key="g", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": longer}
    )
    admin_s3.put_object_retention(
        Bucket=locked,
        Key="g",
        Retention={"Mode": "COMPLIANCE", "RetainUntilDate": longer},
        BypassGovernanceRetention=True,
    )
    got = s3.get_object_retention(Bucket=locked, Key="g")["Retention"]
    assert got["Mode"] == "COMPLIANCE" and got["RetainUntilDate"] == longer


def test_a_compliance_retention_never_changes_mode(s3: Any, admin_s3: Any, locked: str) -> None:
    until = later(30).replace(microsecond=0)
    s3.put_object(
        Bucket=locked,
        Key="c",
        Body=b"abc",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=until,
    )
    to_governance = {"Mode": "GOVERNANCE", "RetainUntilDate": until + timedelta(days=1)}
    for client, bypass in ((s3, False), (admin_s3, True)):
        answer = refused(
            client.put_object_retention,
            Bucket=locked,
            Key="c",
            Retention=to_governance,
            BypassGovernanceRetention=bypass,
        )
        assert answer == (403, "AccessDenied")
    assert s3.get_object_retention(Bucket=locked, Key="c")["Retention"]["Mode"] == "COMPLIANCE"


def test_delete_objects_names_the_locked_version_in_its_error(
    s3: Any, admin_s3: Any, locked: str
) -> None:
    first = s3.put_object(Bucket=locked, Key="one", Body=b"abc")["VersionId"]
    second = s3.put_object(Bucket=locked, Key="two", Body=b"abc")["VersionId"]
    retention = {"Mode": "GOVERNANCE", "RetainUntilDate": later(3600)}
    s3.put_object_retention(Bucket=locked, Key="one", Retention=retention)
    objects = [{"Key": "one", "VersionId": first}, {"Key": "two", "VersionId": second}]
    answer = s3.delete_objects(Bucket=locked, Delete={"Objects": objects})
    assert [(e["Key"], e["VersionId"], e["Code"]) for e in answer["Errors"]] == [
        ("one", first, "AccessDenied")
    ]
    assert [(d["Key"], d["VersionId"]) for d in answer["Deleted"]] == [("two", second)]
    bypassed = admin_s3.delete_objects(
        Bucket=locked, Delete={"Objects": objects[:1]}, BypassGovernanceRetention=True
    )
    assert not bypassed.get("Errors")
    assert [(d["Key"], d["VersionId"]) for d in bypassed["Deleted"]] == [("one", first)]


@pytest.fixture(scope="module")
def readable(s3: Any) -> str:
    name = unique_name("ps")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="foo", Body=b"kept")
    return name


def presigned(live: LiveServer, keys: tuple[str, str], method: str, path: str, seconds: int) -> str:
    """A SigV4 presigned URL valid for `seconds`, by botocore's own signer (boto3's CRT
    signer refuses to write one valid for no time or less)."""
    request = AWSRequest(method, live.s3_url + path)
    S3SigV4QueryAuth(Credentials(*keys), "s3", "us-east-1", expires=seconds).add_auth(request)
    return str(request.url)


@pytest.mark.parametrize("seconds", [0, -7, 604_801, 609_901])
def test_a_presigned_url_valid_for_no_time_or_past_a_week_is_refused_403(
    local_server: LiveServer, keys: tuple[str, str], readable: str, seconds: int
) -> None:
    url = presigned(local_server, keys, "GET", f"/{readable}/foo", seconds)
    answer = web.get(url)
    assert answer.status_code == 403, answer.text
    expected = "AccessDenied" if seconds == 0 else "AuthorizationQueryParametersError"
    assert f"<Code>{expected}</Code>" in answer.text


def test_a_presigned_url_of_a_week_works(
    local_server: LiveServer, keys: tuple[str, str], readable: str
) -> None:
    answer = web.get(presigned(local_server, keys, "GET", f"/{readable}/foo", 604_800))
    assert answer.status_code == 200 and answer.content == b"kept"


def test_an_expired_presigned_put_is_refused_403_and_writes_nothing(
    local_server: LiveServer, keys: tuple[str, str], s3: Any, readable: str
) -> None:
    url = presigned(local_server, keys, "PUT", f"/{readable}/foo", -1000)
    answer = web.put(url, content=b"replaced")
    assert answer.status_code == 403 and "<Code>AuthorizationQueryParametersError</Code>" in (
        answer.text
    )
    assert s3.get_object(Bucket=readable, Key="foo")["Body"].read() == b"kept"


@pytest.fixture(scope="module")
def form_bucket(s3: Any) -> str:
    name = unique_name("pf")
    s3.create_bucket(Bucket=name)
    return name


def test_a_form_key_of_filename_takes_the_files_name_before_the_policy_judges_it(
    s3: Any, form_bucket: str
) -> None:
    post = s3.generate_presigned_post(
        Bucket=form_bucket, Key="${filename}", Conditions=[["starts-with", "$key", "foo"]]
    )
    taken = web.post(post["url"], data=post["fields"], files={"file": ("foo.txt", b"bar")})
    assert taken.status_code == 204, taken.text
    assert s3.get_object(Bucket=form_bucket, Key="foo.txt")["Body"].read() == b"bar"
    other = web.post(post["url"], data=post["fields"], files={"file": ("baz.txt", b"bar")})
    assert other.status_code == 403 and "<Code>AccessDenied</Code>" in other.text
    with pytest.raises(ClientError):
        s3.head_object(Bucket=form_bucket, Key="baz.txt")


def _v2_form(
    live: LiveServer, bucket: str, expiration: str, key: str = "foo.txt"
) -> dict[str, str]:
    """A form whose policy SigV2 signs (HMAC-SHA1 of the policy under the secret), as older
    clients sign them: any expiration can be written."""
    access, secret = live.s3_credentials()
    document = {
        "expiration": expiration,
        "conditions": [{"bucket": bucket}, ["starts-with", "$key", "foo"]],
    }
    policy = base64.b64encode(json.dumps(document).encode()).decode()
    signature = hmac.new(secret.encode(), policy.encode(), hashlib.sha1).digest()
    return {
        "key": key,
        "AWSAccessKeyId": access,
        "policy": policy,
        "signature": base64.b64encode(signature).decode(),
    }


@pytest.mark.parametrize(
    "shape",
    [
        lambda moment: str(moment),  # a space for the T
        lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%S"),  # no zone
        lambda moment: moment.strftime("%Y-%m-%d"),  # a date alone
        lambda moment: moment.strftime("%d/%m/%Y %H:%M:%S"),
    ],
)
def test_a_policy_expiration_not_in_iso_8601_is_refused_400(
    local_server: LiveServer, s3: Any, form_bucket: str, shape: Any
) -> None:
    key = unique_name("foo")
    fields = _v2_form(local_server, form_bucket, shape(later(6000)), key)
    answer = web.post(local_server.s3_url + f"/{form_bucket}", data=fields, files={"file": b"x"})
    assert answer.status_code == 400 and "<Code>InvalidPolicyDocument</Code>" in answer.text
    with pytest.raises(ClientError):
        s3.head_object(Bucket=form_bucket, Key=key)


def test_a_policy_expiration_in_iso_8601_is_taken(
    local_server: LiveServer, s3: Any, form_bucket: str
) -> None:
    for expiration in (
        later(6000).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        later(6000).strftime("%Y-%m-%dT%H:%M:%SZ"),
        later(6000).isoformat(),
    ):
        key = unique_name("foo")
        fields = _v2_form(local_server, form_bucket, expiration, key)
        answer = web.post(
            local_server.s3_url + f"/{form_bucket}", data=fields, files={"file": b"x"}
        )
        assert answer.status_code == 204, (expiration, answer.text)


def test_a_form_whose_x_amz_date_is_malformed_is_refused_400(s3: Any, form_bucket: str) -> None:
    post = s3.generate_presigned_post(Bucket=form_bucket, Key="foo-date")
    assert "x-amz-date" in post["fields"]
    for malformed in ("2026-11-26T12:00:00Z", "20261126", "not a date"):
        fields = {**post["fields"], "x-amz-date": malformed}
        answer = web.post(post["url"], data=fields, files={"file": b"x"})
        assert answer.status_code == 400 and "<Code>InvalidArgument</Code>" in answer.text
    with pytest.raises(ClientError):
        s3.head_object(Bucket=form_bucket, Key="foo-date")


def test_success_action_status_201_answers_the_post_response_document(
    s3: Any, form_bucket: str
) -> None:
    answer = send(presign(s3, form_bucket))
    assert answer.status_code == 201, answer.text
    root = ElementTree.fromstring(answer.content)
    assert root.tag == "PostResponse"  # no namespace, as S3 writes it
    found = {child.tag: child.text for child in root}
    assert found["Key"] == "uploads/cat.jpg" and found["Bucket"] == form_bucket
    assert (
        found["ETag"]
        == answer.headers["etag"]
        == (s3.head_object(Bucket=form_bucket, Key="uploads/cat.jpg")["ETag"])
    )
    assert found["Location"] == answer.headers["location"]
    assert found["Location"].endswith(f"/{form_bucket}/uploads/cat.jpg")
