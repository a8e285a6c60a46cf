"""S3 object lock with boto3: buckets created with object lock, default retention,
retention and legal hold on writes and on versions, what a lock refuses, and bypassing
GOVERNANCE retention with the files:bypass-governance scope."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.live import LiveServer
from tests.support.names import bucket_id_named

BYPASS_SCOPES = "buckets:read,buckets:write,files:read,files:write,files:bypass-governance"


@pytest.fixture(scope="module")
def live(local_server: LiveServer) -> LiveServer:
    return local_server


@pytest.fixture(scope="module")
def s3(live: LiveServer) -> Any:
    return live.s3()


@pytest.fixture(scope="module")
def admin_s3(live: LiveServer) -> Any:
    """A client whose key may bypass GOVERNANCE retention."""
    return live.s3(*live.s3_credentials(None, BYPASS_SCOPES))


_names = iter(range(10_000))


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}-{int(time.time() * 1000) % 1_000_000}"


@pytest.fixture
def locked(s3: Any) -> str:
    name = _name("lk")
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    return name


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = exc.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def later(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_a_bucket_created_with_object_lock_is_versioned_and_configured(s3: Any) -> None:
    name = _name("lk")
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    assert s3.get_bucket_versioning(Bucket=name)["Status"] == "Enabled"
    config = s3.get_object_lock_configuration(Bucket=name)["ObjectLockConfiguration"]
    assert config == {"ObjectLockEnabled": "Enabled"}
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Suspended"})
    assert error(exc) == (409, "InvalidBucketState")


def test_a_bucket_without_object_lock_has_no_configuration_and_refuses_retention(
    s3: Any,
) -> None:
    name = _name("nl")
    s3.create_bucket(Bucket=name)
    with pytest.raises(ClientError) as exc:
        s3.get_object_lock_configuration(Bucket=name)
    assert error(exc) == (404, "ObjectLockConfigurationNotFoundError")
    with pytest.raises(ClientError) as exc:
        s3.put_object(
            Bucket=name,
            Key="k",
            Body=b"x",
            ObjectLockMode="GOVERNANCE",
            ObjectLockRetainUntilDate=later(60),
        )
    assert error(exc) == (400, "InvalidRequest")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=name, Key="k")
    with pytest.raises(ClientError) as exc:
        s3.put_object_lock_configuration(
            Bucket=name, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}
        )
    assert error(exc) == (409, "InvalidBucketState")


def test_enabling_object_lock_on_a_versioned_bucket(s3: Any) -> None:
    name = _name("ve")
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(
        Bucket=name, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}
    )
    assert s3.get_object_lock_configuration(Bucket=name)["ObjectLockConfiguration"] == {
        "ObjectLockEnabled": "Enabled"
    }


def test_default_retention_applies_to_new_versions(s3: Any, locked: str) -> None:
    s3.put_object_lock_configuration(
        Bucket=locked,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}},
        },
    )
    rule = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]["Rule"]
    assert rule == {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}}
    version = s3.put_object(Bucket=locked, Key="doc", Body=b"v1")["VersionId"]
    head = s3.head_object(Bucket=locked, Key="doc")
    assert head["ObjectLockMode"] == "COMPLIANCE"
    until = head["ObjectLockRetainUntilDate"]
    assert later(86_400 - 60) < until < later(86_400 + 60)
    retention = s3.get_object_retention(Bucket=locked, Key="doc", VersionId=version)
    assert retention["Retention"]["Mode"] == "COMPLIANCE"
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="doc", VersionId=version)
    assert error(exc) == (403, "AccessDenied")
    # Deleting without a version writes a delete marker: the version itself stays.
    marker = s3.delete_object(Bucket=locked, Key="doc")
    assert marker["DeleteMarker"] is True
    assert s3.get_object(Bucket=locked, Key="doc", VersionId=version)["Body"].read() == b"v1"
    s3.delete_object(Bucket=locked, Key="doc", VersionId=marker["VersionId"])
    # An overwrite is a new version; the locked one is still there.
    s3.put_object(Bucket=locked, Key="doc", Body=b"v2")
    assert s3.get_object(Bucket=locked, Key="doc", VersionId=version)["Body"].read() == b"v1"


@pytest.mark.parametrize(
    "rule",
    [
        {"Mode": "GOVERNANCE", "Days": 0},
        {"Mode": "GOVERNANCE", "Days": 1, "Years": 1},
        {"Mode": "STRICT", "Days": 1},
        {"Mode": "GOVERNANCE", "Years": 101},
    ],
)
def test_invalid_default_retention_is_refused(s3: Any, locked: str, rule: dict) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_object_lock_configuration(
            Bucket=locked,
            ObjectLockConfiguration={
                "ObjectLockEnabled": "Enabled",
                "Rule": {"DefaultRetention": rule},
            },
        )
    assert error(exc)[0] == 400
    assert "Rule" not in s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]


def test_compliance_can_be_extended_never_shortened(s3: Any, admin_s3: Any, locked: str) -> None:
    until = later(3600).replace(microsecond=0)
    version = s3.put_object(
        Bucket=locked,
        Key="c",
        Body=b"x",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=until,
    )["VersionId"]
    head = s3.head_object(Bucket=locked, Key="c")
    assert (head["ObjectLockMode"], head["ObjectLockRetainUntilDate"]) == ("COMPLIANCE", until)
    for client in (s3, admin_s3):
        with pytest.raises(ClientError) as exc:
            client.put_object_retention(
                Bucket=locked,
                Key="c",
                VersionId=version,
                Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later(60)},
                BypassGovernanceRetention=True,
            )
        assert error(exc) == (403, "AccessDenied")
        with pytest.raises(ClientError) as exc:
            client.put_object_retention(
                Bucket=locked,
                Key="c",
                VersionId=version,
                Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(7200)},
            )
        assert error(exc) == (403, "AccessDenied")
        with pytest.raises(ClientError) as exc:
            client.delete_object(
                Bucket=locked, Key="c", VersionId=version, BypassGovernanceRetention=True
            )
        assert error(exc) == (403, "AccessDenied")
    longer = later(7200).replace(microsecond=0)
    s3.put_object_retention(
        Bucket=locked,
        Key="c",
        VersionId=version,
        Retention={"Mode": "COMPLIANCE", "RetainUntilDate": longer},
    )
    got = s3.get_object_retention(Bucket=locked, Key="c", VersionId=version)["Retention"]
    assert got == {"Mode": "COMPLIANCE", "RetainUntilDate": longer}


def test_governance_is_bypassed_only_with_the_header_and_the_scope(
    s3: Any, admin_s3: Any, locked: str
) -> None:
    version = s3.put_object(
        Bucket=locked,
        Key="g",
        Body=b"x",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=later(3600),
    )["VersionId"]
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="g", VersionId=version, BypassGovernanceRetention=True)
    assert error(exc) == (403, "AccessDenied")
    with pytest.raises(ClientError) as exc:
        admin_s3.delete_object(Bucket=locked, Key="g", VersionId=version)
    assert error(exc) == (403, "AccessDenied")
    with pytest.raises(ClientError) as exc:
        s3.put_object_retention(
            Bucket=locked,
            Key="g",
            VersionId=version,
            Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(60)},
        )
    assert error(exc) == (403, "AccessDenied")
    admin_s3.put_object_retention(
        Bucket=locked,
        Key="g",
        VersionId=version,
        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(60)},
        BypassGovernanceRetention=True,
    )
    admin_s3.delete_object(
        Bucket=locked, Key="g", VersionId=version, BypassGovernanceRetention=True
    )
    versions = s3.list_object_versions(Bucket=locked, Prefix="g").get("Versions", [])
    assert versions == []


def test_retention_ends_on_its_date(s3: Any, locked: str) -> None:
    version = s3.put_object(
        Bucket=locked,
        Key="short",
        Body=b"x",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=later(1.5),
    )["VersionId"]
    with pytest.raises(ClientError):
        s3.delete_object(Bucket=locked, Key="short", VersionId=version)
    deadline = time.monotonic() + 10
    while True:
        try:
            s3.delete_object(Bucket=locked, Key="short", VersionId=version)
            break
        except ClientError:
            assert time.monotonic() < deadline
            time.sleep(0.3)
    assert "Versions" not in s3.list_object_versions(Bucket=locked, Prefix="short")


def test_legal_hold_protects_until_lifted(s3: Any, admin_s3: Any, locked: str) -> None:
    version = s3.put_object(Bucket=locked, Key="h", Body=b"x", ObjectLockLegalHoldStatus="ON")[
        "VersionId"
    ]
    assert s3.head_object(Bucket=locked, Key="h")["ObjectLockLegalHoldStatus"] == "ON"
    assert s3.get_object_legal_hold(Bucket=locked, Key="h")["LegalHold"] == {"Status": "ON"}
    with pytest.raises(ClientError) as exc:
        admin_s3.delete_object(
            Bucket=locked, Key="h", VersionId=version, BypassGovernanceRetention=True
        )
    assert error(exc) == (403, "AccessDenied")
    s3.put_object_legal_hold(Bucket=locked, Key="h", VersionId=version, LegalHold={"Status": "OFF"})
    assert s3.get_object_legal_hold(Bucket=locked, Key="h")["LegalHold"] == {"Status": "OFF"}
    assert "ObjectLockLegalHoldStatus" not in s3.head_object(Bucket=locked, Key="h")
    s3.delete_object(Bucket=locked, Key="h", VersionId=version)


def test_legal_hold_on_a_noncurrent_version(s3: Any, locked: str) -> None:
    old = s3.put_object(Bucket=locked, Key="n", Body=b"old")["VersionId"]
    s3.put_object(Bucket=locked, Key="n", Body=b"new")
    s3.put_object_legal_hold(Bucket=locked, Key="n", VersionId=old, LegalHold={"Status": "ON"})
    assert s3.get_object_legal_hold(Bucket=locked, Key="n", VersionId=old)["LegalHold"] == {
        "Status": "ON"
    }
    assert s3.get_object_legal_hold(Bucket=locked, Key="n")["LegalHold"] == {"Status": "OFF"}
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="n", VersionId=old)
    assert error(exc) == (403, "AccessDenied")
    result = s3.delete_objects(Bucket=locked, Delete={"Objects": [{"Key": "n", "VersionId": old}]})
    assert result["Errors"][0]["Code"] == "AccessDenied"


def test_an_object_without_retention_answers_no_configuration(s3: Any, locked: str) -> None:
    s3.put_object(Bucket=locked, Key="plain", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.get_object_retention(Bucket=locked, Key="plain")
    assert error(exc) == (404, "NoSuchObjectLockConfiguration")
    with pytest.raises(ClientError) as exc:
        s3.put_object_legal_hold(Bucket=locked, Key="plain", LegalHold={"Status": "MAYBE"})
    assert error(exc)[0] == 400


def test_copy_and_multipart_take_the_lock_headers(s3: Any, locked: str) -> None:
    s3.put_object(Bucket=locked, Key="src", Body=b"x", ObjectLockLegalHoldStatus="ON")
    s3.copy_object(
        Bucket=locked,
        Key="dst",
        CopySource={"Bucket": locked, "Key": "src"},
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=later(3600),
    )
    head = s3.head_object(Bucket=locked, Key="dst")
    assert head["ObjectLockMode"] == "GOVERNANCE"
    assert "ObjectLockLegalHoldStatus" not in head  # a copy's lock is its own, not the source's
    upload = s3.create_multipart_upload(Bucket=locked, Key="mp", ObjectLockLegalHoldStatus="ON")[
        "UploadId"
    ]
    part = s3.upload_part(Bucket=locked, Key="mp", UploadId=upload, PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(
        Bucket=locked,
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.head_object(Bucket=locked, Key="mp")["ObjectLockLegalHoldStatus"] == "ON"


def test_a_bucket_holding_locked_versions_cannot_be_deleted(
    live: LiveServer, s3: Any, locked: str
) -> None:
    s3.put_object(Bucket=locked, Key="kept", Body=b"x", ObjectLockLegalHoldStatus="ON")
    with live.client() as http:
        answer = http.delete(f"/buckets/{bucket_id_named(http, locked)}", params={"force": "true"})
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "file_locked"
    assert s3.get_object(Bucket=locked, Key="kept")["Body"].read() == b"x"


def test_malformed_lock_headers_are_refused(s3: Any, locked: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_object(
            Bucket=locked,
            Key="bad",
            Body=b"x",
            ObjectLockMode="FOREVER",
            ObjectLockRetainUntilDate=later(60),
        )
    assert error(exc) == (400, "InvalidArgument")
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=locked, Key="bad", Body=b"x", ObjectLockMode="GOVERNANCE")
    assert error(exc) == (400, "InvalidArgument")
    assert "Versions" not in s3.list_object_versions(Bucket=locked, Prefix="bad")


ASKING = [
    ("put_object", {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": later(600)}),
    ("put_object", {"ObjectLockLegalHoldStatus": "ON"}),
    ("copy_object", {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": later(600)}),
    ("copy_object", {"ObjectLockLegalHoldStatus": "ON"}),
    ("create_multipart_upload", {"ObjectLockLegalHoldStatus": "ON"}),
    (
        "create_multipart_upload",
        {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": later(600)},
    ),
]


@pytest.mark.parametrize(
    ("operation", "extra"), ASKING, ids=[f"{op}-{next(iter(x))}" for op, x in ASKING]
)
def test_a_lock_asked_of_a_bucket_without_object_lock_writes_nothing(
    s3: Any, operation: str, extra: dict[str, Any]
) -> None:
    name = _name("un")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="source", Body=b"source")
    arguments: dict[str, Any] = {"Bucket": name, "Key": "never"}
    if operation == "copy_object":
        arguments["CopySource"] = f"{name}/source"
    elif operation == "put_object":
        arguments["Body"] = b"x"
    with pytest.raises(ClientError) as exc:
        getattr(s3, operation)(**arguments, **extra)
    assert error(exc) == (400, "InvalidRequest")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"]] == ["source"]
    assert not s3.list_multipart_uploads(Bucket=name).get("Uploads")
