"""Snapshots and forks attacked from outside (issue 35, the review of points 1 and 2): every
test talks to a real server over HTTP (/v1 or S3) and looks for a way around what the rest
of the server protects: object lock, quotas, organizations, keys, uploads in flight."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

TEXT = {"Content-Type": "text/plain"}
MISSING = "snap_01JBZZZZZZZZZZZZZZZZZZZZZZ"


@pytest.fixture
def admin(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as http:
        yield http


def later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def put(client: httpx.Client, bucket: dict, key: str, content: bytes) -> dict:
    response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def snapshot(client: httpx.Client, bucket: dict) -> dict:
    made = client.post(f"/buckets/{bucket['id']}/snapshots")
    assert made.status_code == 201, made.text
    return dict(made.json()["data"])


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_a_restore_never_turns_compliance_back_into_governance(admin: httpx.Client) -> None:
    """A snapshot taken while a version's retention was GOVERNANCE, restored after it became
    COMPLIANCE with the same end, would leave a retention that bypassGovernance removes:
    the protection shortened, which a restore must refuse."""
    bucket = new_bucket(admin, unique_name("lock"), objectLock={})
    version = put(admin, bucket, "ledger.csv", b"kept for years")["versionId"]
    url = f"/buckets/{bucket['id']}/versions/{version}"
    until = later(3600)
    governed = admin.patch(
        url, json={"key": "ledger.csv", "retention": {"mode": "governance", "retainUntil": until}}
    )
    assert governed.status_code == 200, governed.text
    taken = snapshot(admin, bucket)
    complied = admin.patch(
        url, json={"key": "ledger.csv", "retention": {"mode": "compliance", "retainUntil": until}}
    )
    assert complied.status_code == 200, complied.text

    refused = admin.post(f"/snapshots/{taken['id']}/restore")
    assert code(refused) == (409, "file_locked"), refused.text
    shown = admin.get(f"/buckets/{bucket['id']}/versions", params={"key": "ledger.csv"})
    assert shown.json()["data"][0]["retention"] == {"mode": "compliance", "retainUntil": until}


@pytest.mark.parametrize(
    "body",
    [
        b'{"dropLocked": false, "dropLocked": true}',
        b'{"dropLocked": "true"}',
        b'{"dropLocked": 1}',
        b'{"drop_locked": true}',
        b'{"DropLocked": true}',
    ],
)
def test_drop_locked_has_no_other_spelling_outside_test_mode(
    admin: httpx.Client, body: bytes
) -> None:
    """Every spelling is refused before the snapshot is even looked up: a 404 here would
    mean the flag got past the test-mode check."""
    refused = admin.post(
        f"/server/snapshots/{MISSING}/restore",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert refused.status_code == 400, refused.text
    for spelling in ("dropLocked=true", "drop_locked=1"):
        query = admin.post(f"/server/snapshots/{MISSING}/restore?{spelling}")
        assert code(query) == (404, "snapshot_not_found")  # the query is no way in either


def test_an_upload_in_flight_does_not_survive_a_restore(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    """Its parts go with the restore: no part uploaded before can be completed after, and a
    part sent after finds no upload."""
    s3 = local_server.s3()
    bucket = new_bucket(admin, unique_name("mpu"))
    taken = snapshot(admin, bucket)
    upload = s3.create_multipart_upload(Bucket=bucket["name"], Key="big.bin")["UploadId"]
    part = s3.upload_part(
        Bucket=bucket["name"], Key="big.bin", UploadId=upload, PartNumber=1, Body=b"p" * 1024
    )
    assert admin.post(f"/snapshots/{taken['id']}/restore").status_code == 200
    with pytest.raises(ClientError) as late_part:
        s3.upload_part(
            Bucket=bucket["name"], Key="big.bin", UploadId=upload, PartNumber=2, Body=b"q"
        )
    assert late_part.value.response["Error"]["Code"] == "NoSuchUpload"
    with pytest.raises(ClientError) as completed:
        s3.complete_multipart_upload(
            Bucket=bucket["name"],
            Key="big.bin",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
    assert completed.value.response["Error"]["Code"] == "NoSuchUpload"
    assert s3.list_multipart_uploads(Bucket=bucket["name"]).get("Uploads", []) == []
    s3.close()
