"""Issue 31's findings, each through a real server and on both protocols where both apply:
every resource a request touches gets its own access decision (a copy's source, each key of
a batch, the version named, the ACL and lock a write sets, a bypass of retention), and /v1
obeys the same policies, access block and version rules as S3."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.access import policy, refused
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name
from tests.support.orgs import make_org
from tests.support.s3 import signed_headers

SHARED_RW = ("s3:GetObject", "s3:PutObject")


def grant(principal: object, actions: object, resource: str, effect: str = "Allow") -> dict:
    return {"Effect": effect, "Principal": principal, "Action": actions, "Resource": resource}


def org_principal(org: str) -> dict:
    return {"AWS": [f"arn:aws:iam::{org}:root"]}


def new_bucket(s3: Any, *keys: str, **options: Any) -> str:
    name = unique_name("dec")
    s3.create_bucket(Bucket=name, **options)
    for key in keys:
        s3.put_object(Bucket=name, Key=key, Body=key.encode())
    return name


def test_a_copy_source_is_read_only_as_the_requester_may_read_it(
    s3: Any, other: tuple[str, Any]
) -> None:
    org, theirs = other
    name = new_bucket(s3, "private/payroll.csv", "shared/notes.txt")
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name, grant(org_principal(org), list(SHARED_RW), f"arn:aws:s3:::{name}/shared/*")
        ),
    )
    assert refused(theirs.get_object, Bucket=name, Key="private/payroll.csv") == "AccessDenied"
    source = {"Bucket": name, "Key": "private/payroll.csv"}
    assert (
        refused(theirs.copy_object, Bucket=name, Key="shared/stolen.csv", CopySource=source)
        == "AccessDenied"
    )
    upload = theirs.create_multipart_upload(Bucket=name, Key="shared/stolen2.csv")["UploadId"]
    assert (
        refused(
            theirs.upload_part_copy,
            Bucket=name,
            Key="shared/stolen2.csv",
            UploadId=upload,
            PartNumber=1,
            CopySource=source,
        )
        == "AccessDenied"
    )
    assert refused(s3.head_object, Bucket=name, Key="shared/stolen.csv") == "404"
    # What they may read they may copy.
    shared = {"Bucket": name, "Key": "shared/notes.txt"}
    theirs.copy_object(Bucket=name, Key="shared/copy.txt", CopySource=shared)
    assert s3.get_object(Bucket=name, Key="shared/copy.txt")["Body"].read() == b"shared/notes.txt"
    # A bucket of another organization that shares nothing is not there for them at all.
    hidden = new_bucket(s3, "k")
    assert (
        refused(
            theirs.copy_object,
            Bucket=name,
            Key="shared/x",
            CopySource={"Bucket": hidden, "Key": "k"},
        )
        == "NoSuchBucket"
    )


def test_the_owners_own_deny_binds_the_source_of_its_copies(s3: Any) -> None:
    name = new_bucket(s3, "private/payroll.csv")
    deny = grant("*", "s3:GetObject", f"arn:aws:s3:::{name}/private/*", "Deny")
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    source = {"Bucket": name, "Key": "private/payroll.csv"}
    assert refused(s3.get_object, Bucket=name, Key="private/payroll.csv") == "AccessDenied"
    assert refused(s3.copy_object, Bucket=name, Key="out.csv", CopySource=source) == "AccessDenied"


def test_delete_objects_decides_each_key_and_version(s3: Any) -> None:
    name = new_bucket(s3)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    kept = s3.put_object(Bucket=name, Key="protected/a", Body=b"a")["VersionId"]
    loose = s3.put_object(Bucket=name, Key="loose/b", Body=b"b")["VersionId"]
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant("*", "s3:DeleteObject", f"arn:aws:s3:::{name}/protected/*", "Deny"),
            grant("*", "s3:DeleteObjectVersion", f"arn:aws:s3:::{name}/*", "Deny"),
        ),
    )
    answer = s3.delete_objects(
        Bucket=name,
        Delete={
            "Objects": [
                {"Key": "protected/a"},
                {"Key": "loose/b", "VersionId": loose},
                {"Key": "loose/b"},
            ]
        },
    )
    errors = {(e["Key"], e.get("VersionId")): e["Code"] for e in answer.get("Errors", [])}
    assert errors[("protected/a", None)] == "AccessDenied"
    assert errors[("loose/b", loose)] == "AccessDenied"
    assert [d["Key"] for d in answer["Deleted"]] == ["loose/b"]  # a delete marker, allowed
    assert s3.get_object(Bucket=name, Key="protected/a", VersionId=kept)["Body"].read() == b"a"
    assert s3.get_object(Bucket=name, Key="loose/b", VersionId=loose)["Body"].read() == b"b"


def test_outsiders_never_reach_the_access_control_operations(
    s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    org, theirs = other
    name = new_bucket(s3, "k")
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant("*", ["s3:Put*", "s3:Get*"], [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]),
            grant(org_principal(org), "s3:*", [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]),
        ),
    )
    assert refused(anonymous.put_bucket_acl, Bucket=name, ACL="public-read") == "AccessDenied"
    block = {"BlockPublicAcls": False, "IgnorePublicAcls": False}
    assert (
        refused(
            anonymous.put_public_access_block, Bucket=name, PublicAccessBlockConfiguration=block
        )
        == "AccessDenied"
    )
    assert refused(anonymous.get_bucket_policy, Bucket=name) == "MethodNotAllowed"
    everything = policy(name, grant("*", "s3:*", f"arn:aws:s3:::{name}/*"))
    assert (
        refused(anonymous.put_bucket_policy, Bucket=name, Policy=everything) == "MethodNotAllowed"
    )
    assert refused(theirs.put_bucket_policy, Bucket=name, Policy=everything) == "MethodNotAllowed"
    assert refused(theirs.delete_bucket_policy, Bucket=name) == "MethodNotAllowed"
    assert refused(theirs.put_bucket_acl, Bucket=name, ACL="public-read") == "AccessDenied"
    assert s3.get_bucket_acl(Bucket=name)["Grants"][0]["Permission"] == "FULL_CONTROL"
    assert len(s3.get_bucket_acl(Bucket=name)["Grants"]) == 1
    # Named exactly, the owner's grant stands.
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(name, grant(org_principal(org), "s3:PutBucketAcl", f"arn:aws:s3:::{name}")),
    )
    theirs.put_bucket_acl(Bucket=name, ACL="authenticated-read")
    assert s3.get_bucket_acl(Bucket=name)["Grants"][-1]["Permission"] == "READ"


def test_a_writer_sets_no_protection_it_was_not_granted(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    name = new_bucket(s3, ObjectLockEnabledForBucket=True)
    inbox = grant("*", "s3:PutObject", f"arn:aws:s3:::{name}/inbox/*")
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, inbox))
    anonymous.put_object(Bucket=name, Key="inbox/plain", Body=b"x")
    anonymous.put_object(Bucket=name, Key="inbox/owned", Body=b"x", ACL="bucket-owner-full-control")
    assert (
        refused(anonymous.put_object, Bucket=name, Key="inbox/open", Body=b"x", ACL="public-read")
        == "AccessDenied"
    )
    until = datetime(2099, 1, 1, tzinfo=UTC)
    assert (
        refused(
            anonymous.put_object,
            Bucket=name,
            Key="inbox/pinned",
            Body=b"x",
            ObjectLockMode="COMPLIANCE",
            ObjectLockRetainUntilDate=until,
        )
        == "AccessDenied"
    )
    assert (
        refused(
            anonymous.put_object,
            Bucket=name,
            Key="inbox/held",
            Body=b"x",
            ObjectLockLegalHoldStatus="ON",
        )
        == "AccessDenied"
    )
    assert (
        refused(anonymous.create_multipart_upload, Bucket=name, Key="inbox/mp", ACL="public-read")
        == "AccessDenied"
    )
    form = anonymous.generate_presigned_post(name, "inbox/form", Fields={"acl": "public-read"})
    answer = web.post(
        form["url"], data={"key": "inbox/form", "acl": "public-read"}, files={"file": b"x"}
    )
    assert answer.status_code == 403 and b"AccessDenied" in answer.content
    for key in ("inbox/open", "inbox/pinned", "inbox/held", "inbox/form"):
        assert refused(s3.head_object, Bucket=name, Key=key) == "404"
    # Granted by name, the lock is theirs to set.
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name, inbox, grant("*", "s3:PutObjectLegalHold", f"arn:aws:s3:::{name}/inbox/*")
        ),
    )
    anonymous.put_object(Bucket=name, Key="inbox/held", Body=b"x", ObjectLockLegalHoldStatus="ON")
    assert s3.get_object_legal_hold(Bucket=name, Key="inbox/held")["LegalHold"]["Status"] == "ON"
    s3.put_object_legal_hold(Bucket=name, Key="inbox/held", LegalHold={"Status": "OFF"})


@contextmanager
def _v1_bucket(local_server: LiveServer, name: str) -> Iterator[tuple[httpx.Client, str]]:
    with local_server.client() as http:
        yield http, bucket_id_named(http, name)


def test_v1_obeys_the_bucket_policy_for_keys_credentials_and_signed_urls(
    local_server: LiveServer, s3: Any
) -> None:
    name = new_bucket(s3, "report.txt")
    access, secret = local_server.s3_credentials()
    only_vpn = {
        **grant("*", "s3:GetObject", f"arn:aws:s3:::{name}/*", "Deny"),
        "Condition": {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
    }
    with _v1_bucket(local_server, name) as (http, bucket_id):
        signed = http.post(f"/buckets/{bucket_id}/sign/report.txt", json={"expiresIn": 60})
        url = signed.json()["data"]["url"]
        assert http.get(f"/buckets/{bucket_id}/files/report.txt").status_code == 200
        s3.put_bucket_policy(Bucket=name, Policy=policy(name, only_vpn))
        assert refused(s3.get_object, Bucket=name, Key="report.txt") == "AccessDenied"
        answer = http.get(f"/buckets/{bucket_id}/files/report.txt")
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "access_denied"
        basic = web.get(
            f"{local_server.url}/v1/buckets/{bucket_id}/files/report.txt", auth=(access, secret)
        )
        assert basic.status_code == 403
        assert web.get(url).status_code == 403
        assert (
            http.post(f"/buckets/{bucket_id}/sign/report.txt", json={"expiresIn": 60}).status_code
            == 403
        )
        # Listing and writing are not what the policy denies.
        assert http.get(f"/buckets/{bucket_id}/files").status_code == 200


def test_v1_public_buckets_obey_deny_statements_and_the_access_block(
    local_server: LiveServer, s3: Any
) -> None:
    name = new_bucket(s3, "site/index.html", "secret/keys.txt")
    with _v1_bucket(local_server, name) as (http, bucket_id):
        assert http.patch(f"/buckets/{bucket_id}", json={"public": True}).status_code == 200
        public = f"{local_server.url}/v1/buckets/{bucket_id}/files/"
        assert web.get(public + "site/index.html").status_code == 200
        assert web.get(public + "secret/keys.txt").status_code == 200
        deny = grant("*", "s3:GetObject", f"arn:aws:s3:::{name}/secret/*", "Deny")
        s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
        assert web.get(public + "secret/keys.txt").status_code == 401
        assert web.get(public + "site/index.html").status_code == 200
        s3.delete_bucket_policy(Bucket=name)
        s3.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True}
        )
        assert web.get(public + "site/index.html").status_code == 401
        assert http.get(f"/buckets/{bucket_id}/files/site/index.html").status_code == 200


def test_what_was_shared_is_the_current_version_only(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    name = new_bucket(s3)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=name, Key="doc.txt", Body=b"draft with secrets")["VersionId"]
    s3.put_object(Bucket=name, Key="doc.txt", Body=b"final")
    with _v1_bucket(local_server, name) as (http, bucket_id):
        assert http.patch(f"/buckets/{bucket_id}", json={"public": True}).status_code == 200
        public = f"{local_server.url}/v1/buckets/{bucket_id}/files/doc.txt"
        assert web.get(public).content == b"final"
        assert web.get(public, params={"versionId": old}).status_code == 401
        assert anonymous.get_object(Bucket=name, Key="doc.txt")["Body"].read() == b"final"
        assert (
            refused(anonymous.get_object, Bucket=name, Key="doc.txt", VersionId=old)
            == "AccessDenied"
        )
        url = http.post(f"/buckets/{bucket_id}/sign/doc.txt", json={"expiresIn": 60}).json()
        signed = url["data"]["url"]
        assert web.get(signed).content == b"final"
        other_version = web.get(signed + "&versionId=" + old)
        assert other_version.status_code == 401
        assert other_version.json()["error"]["code"] == "invalid_signature"


def test_public_read_write_deletes_no_version_for_good(s3: Any, anonymous: Any) -> None:
    name = new_bucket(s3, ACL="public-read-write")
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    version = s3.put_object(Bucket=name, Key="k", Body=b"v1")["VersionId"]
    assert (
        refused(anonymous.delete_object, Bucket=name, Key="k", VersionId=version) == "AccessDenied"
    )
    answer = anonymous.delete_objects(
        Bucket=name, Delete={"Objects": [{"Key": "k", "VersionId": version}]}
    )
    assert answer["Errors"][0]["Code"] == "AccessDenied"
    assert s3.get_object(Bucket=name, Key="k", VersionId=version)["Body"].read() == b"v1"
    anonymous.delete_object(Bucket=name, Key="k")  # a delete marker: WRITE allows it
    assert s3.get_object(Bucket=name, Key="k", VersionId=version)["Body"].read() == b"v1"


def test_bypassing_governance_needs_its_own_grant(local_server: LiveServer, s3: Any) -> None:
    org = make_org(local_server)
    scopes = "buckets:read,files:read,files:write,files:bypass-governance"
    theirs = local_server.s3(*local_server.s3_credentials(org, scopes))
    name = new_bucket(s3, ObjectLockEnabledForBucket=True)
    version = s3.put_object(
        Bucket=name,
        Key="k",
        Body=b"v",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=datetime(2099, 1, 1, tzinfo=UTC),
    )["VersionId"]
    resource = f"arn:aws:s3:::{name}/*"
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(name, grant(org_principal(org), ["s3:DeleteObjectVersion"], resource)),
    )
    assert (
        refused(
            theirs.delete_object,
            Bucket=name,
            Key="k",
            VersionId=version,
            BypassGovernanceRetention=True,
        )
        == "AccessDenied"
    )
    assert s3.head_object(Bucket=name, Key="k", VersionId=version)["ContentLength"] == 1
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant(
                org_principal(org),
                ["s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"],
                resource,
            ),
        ),
    )
    theirs.delete_object(Bucket=name, Key="k", VersionId=version, BypassGovernanceRetention=True)
    assert refused(s3.head_object, Bucket=name, Key="k", VersionId=version) == "404"


def test_no_api_key_grants_the_bypass_scope(local_server: LiveServer) -> None:
    org = make_org(local_server)
    scopes = ["keys:manage", "files:read", "files:write", "files:bypass-governance"]
    key = local_server.cli("keys", "create", "--org", org, "--scopes", ",".join(scopes))
    with local_server.client(key.strip().splitlines()[-1]) as http:
        answer = http.post("/keys", json={"name": "x", "scopes": ["files:bypass-governance"]})
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "scope_escalation"
        assert http.post("/keys", json={"name": "y", "scopes": ["files:read"]}).status_code == 201


def test_another_organization_reads_on_v1_what_the_policy_grants_it(
    local_server: LiveServer, s3: Any
) -> None:
    """One decision for both protocols: a grant to an organization holds on /v1 too, and
    nothing more."""
    org = make_org(local_server)
    scopes = "buckets:read,buckets:write,files:read,files:write"
    key = local_server.cli("keys", "create", "--org", org, "--scopes", scopes)
    name = new_bucket(s3, "shared/a.txt", "private/b.txt")
    with _v1_bucket(local_server, name) as (_, bucket_id):
        pass
    with local_server.client(key.strip().splitlines()[-1]) as theirs:
        files = f"/buckets/{bucket_id}/files/"
        assert theirs.get(files + "shared/a.txt").status_code == 404
        s3.put_bucket_policy(
            Bucket=name,
            Policy=policy(
                name, grant(org_principal(org), "s3:GetObject", f"arn:aws:s3:::{name}/shared/*")
            ),
        )
        assert theirs.get(files + "shared/a.txt").content == b"shared/a.txt"
        assert theirs.get(files + "private/b.txt").status_code == 403
        put = theirs.put(
            files + "shared/c.txt", content=b"c", headers={"Content-Type": "text/plain"}
        )
        assert put.status_code == 403
        assert theirs.get(f"/buckets/{bucket_id}").status_code == 404
        assert theirs.patch(f"/buckets/{bucket_id}", json={"public": True}).status_code == 404


@pytest.mark.parametrize("field", ["policy", "public", "versioning"])
def test_a_deny_of_a_setting_binds_the_owner_on_v1(
    local_server: LiveServer, s3: Any, field: str
) -> None:
    name = new_bucket(s3)
    actions = {
        "policy": "s3:PutBucketPolicy",
        "public": "s3:PutBucketAcl",
        "versioning": "s3:PutBucketVersioning",
    }
    deny = grant("*", actions[field], f"arn:aws:s3:::{name}", "Deny")
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    values = {"policy": json.loads(policy(name, deny)), "public": True, "versioning": "enabled"}
    with _v1_bucket(local_server, name) as (http, bucket_id):
        answer = http.patch(f"/buckets/{bucket_id}", json={field: values[field]})
        # The policy is never taken from its owner; the other settings are.
        assert answer.status_code == (200 if field == "policy" else 403)


def test_v1_decides_each_resource_a_rename_or_restore_touches(
    local_server: LiveServer, s3: Any
) -> None:
    """/v1's copies: a rename reads, deletes and writes; a restore reads an old version and
    writes the key. Each is decided on its own resource, as CopyObject's source is."""
    name = new_bucket(s3)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=name, Key="private/plan.txt", Body=b"v1")["VersionId"]
    s3.put_object(Bucket=name, Key="private/plan.txt", Body=b"v2")
    s3.put_object(Bucket=name, Key="inbox/note.txt", Body=b"n")
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant("*", "s3:GetObjectVersion", f"arn:aws:s3:::{name}/private/*", "Deny"),
            grant("*", "s3:PutObject", f"arn:aws:s3:::{name}/public/*", "Deny"),
        ),
    )
    with _v1_bucket(local_server, name) as (http, bucket_id):
        restore = http.post(
            f"/buckets/{bucket_id}/versions/{old}/restore", json={"key": "private/plan.txt"}
        )
        assert restore.status_code == 403
        assert s3.get_object(Bucket=name, Key="private/plan.txt")["Body"].read() == b"v2"
        rename = http.patch(
            f"/buckets/{bucket_id}/files/inbox/note.txt", json={"key": "public/note.txt"}
        )
        assert rename.status_code == 403
        assert s3.get_object(Bucket=name, Key="inbox/note.txt")["Body"].read() == b"n"
        assert (
            http.get(f"/buckets/{bucket_id}/files/private/plan.txt", params={"versionId": old})
        ).status_code == 403
        moved = http.patch(
            f"/buckets/{bucket_id}/files/inbox/note.txt", json={"key": "inbox/renamed.txt"}
        )
        assert moved.status_code == 200


def test_v1_protecting_a_version_is_decided_as_its_s3_actions(
    local_server: LiveServer, s3: Any
) -> None:
    name = new_bucket(s3, ObjectLockEnabledForBucket=True)
    version = s3.put_object(Bucket=name, Key="k", Body=b"v")["VersionId"]
    deny = grant("*", "s3:PutObjectLegalHold", f"arn:aws:s3:::{name}/*", "Deny")
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    with _v1_bucket(local_server, name) as (http, bucket_id):
        held = http.patch(
            f"/buckets/{bucket_id}/versions/{version}", json={"key": "k", "legalHold": True}
        )
        assert held.status_code == 403
        assert (
            s3.get_object_legal_hold(Bucket=name, Key="k", VersionId=version)["LegalHold"]["Status"]
            == "OFF"
        )
        until = "2099-01-01T00:00:00Z"
        kept = http.patch(
            f"/buckets/{bucket_id}/versions/{version}",
            json={"key": "k", "retention": {"mode": "governance", "retainUntil": until}},
        )
        assert kept.status_code == 200


# The hostile review's findings (each failed before its fix).


def test_an_upload_is_reached_through_its_own_key_only(s3: Any, other: tuple[str, Any]) -> None:
    org, theirs = other
    name = new_bucket(s3)
    s3.put_object(Bucket=name, Key="reports/q1.pdf", Body=b"original")
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant(
                org_principal(org),
                ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                f"arn:aws:s3:::{name}/dropbox/*",
            ),
        ),
    )
    upload = s3.create_multipart_upload(Bucket=name, Key="reports/q1.pdf")["UploadId"]
    s3.upload_part(Bucket=name, Key="reports/q1.pdf", UploadId=upload, PartNumber=1, Body=b"a")
    through = {"Bucket": name, "Key": "dropbox/x", "UploadId": upload}
    assert refused(theirs.upload_part, PartNumber=1, Body=b"BOB", **through) == "NoSuchUpload"
    assert refused(theirs.list_parts, **through) == "NoSuchUpload"
    parts = {"Parts": [{"PartNumber": 1, "ETag": '"0cc175b9c0f1b6a831c399e269772661"'}]}
    assert (
        refused(theirs.complete_multipart_upload, MultipartUpload=parts, **through)
        == "NoSuchUpload"
    )
    assert refused(theirs.abort_multipart_upload, **through) == "NoSuchUpload"
    own = s3.list_parts(Bucket=name, Key="reports/q1.pdf", UploadId=upload)
    assert [p["PartNumber"] for p in own["Parts"]] == [1]
    assert s3.get_object(Bucket=name, Key="reports/q1.pdf")["Body"].read() == b"original"


def test_v1_force_delete_is_decided_for_every_file(local_server: LiveServer, s3: Any) -> None:
    org = make_org(local_server)
    key = local_server.cli("keys", "create", "--org", org, "--scopes", "buckets:write")
    name = new_bucket(s3, "a.txt", "locked/b.txt")
    with _v1_bucket(local_server, name) as (http, bucket_id):
        s3.put_bucket_policy(
            Bucket=name,
            Policy=policy(
                name,
                grant(org_principal(org), "s3:DeleteBucket", f"arn:aws:s3:::{name}"),
                grant("*", "s3:DeleteObject", f"arn:aws:s3:::{name}/locked/*", "Deny"),
            ),
        )
        with local_server.client(key.strip().splitlines()[-1]) as theirs:
            forced = theirs.delete(f"/buckets/{bucket_id}", params={"force": "true"})
            assert forced.status_code == 403
        mine = http.delete(f"/buckets/{bucket_id}", params={"force": "true"})
        assert mine.status_code == 403 and mine.json()["error"]["code"] == "access_denied"
        assert s3.get_object(Bucket=name, Key="a.txt")["Body"].read() == b"a.txt"
        s3.delete_bucket_policy(Bucket=name)
        assert http.delete(f"/buckets/{bucket_id}", params={"force": "true"}).status_code == 200


def test_v1_a_version_listing_is_decided_on_what_it_lists(
    local_server: LiveServer, s3: Any
) -> None:
    name = new_bucket(s3, "ok/a", "locked/a")
    deny = {
        **grant("*", "s3:ListBucketVersions", f"arn:aws:s3:::{name}", "Deny"),
        "Condition": {"StringNotLike": {"s3:prefix": "ok/*"}},
    }
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    with _v1_bucket(local_server, name) as (http, bucket_id):
        versions = f"/buckets/{bucket_id}/versions"
        assert http.get(versions, params={"prefix": "ok/"}).status_code == 200
        assert http.get(versions, params={"key": "ok/a"}).status_code == 200
        assert http.get(versions, params={"key": "locked/a"}).status_code == 403
        both = http.get(versions, params={"prefix": "ok/", "key": "locked/a"})
        assert both.status_code in (400, 403)


def test_a_copy_keeps_its_sources_tags_only_where_both_may_be_handled(
    s3: Any, other: tuple[str, Any]
) -> None:
    org, theirs = other
    name = new_bucket(s3)
    s3.put_object(Bucket=name, Key="shared/doc", Body=b"d", Tagging="project=apollo")
    s3.put_object(Bucket=name, Key="shared/plain", Body=b"p")
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant(org_principal(org), ["s3:GetObject", "s3:PutObject"], f"arn:aws:s3:::{name}/*"),
        ),
    )
    source = {"Bucket": name, "Key": "shared/doc"}
    assert (
        refused(theirs.copy_object, Bucket=name, Key="shared/copy", CopySource=source)
        == "AccessDenied"
    )
    theirs.copy_object(
        Bucket=name, Key="shared/copy", CopySource=source, TaggingDirective="REPLACE"
    )
    assert s3.get_object_tagging(Bucket=name, Key="shared/copy")["TagSet"] == []
    plain = {"Bucket": name, "Key": "shared/plain"}
    theirs.copy_object(Bucket=name, Key="shared/copy2", CopySource=plain)
    s3.copy_object(Bucket=name, Key="shared/mine", CopySource=source)
    assert s3.get_object_tagging(Bucket=name, Key="shared/mine")["TagSet"][0]["Value"] == "apollo"


def test_what_a_read_answers_beyond_the_content_is_the_readers_to_see(
    s3: Any, anonymous: Any
) -> None:
    name = new_bucket(s3, ObjectLockEnabledForBucket=True)
    s3.put_object(
        Bucket=name,
        Key="page.txt",
        Body=b"<script>alert(1)</script>",
        ContentType="text/plain",
        ACL="public-read",
        Tagging="secret=1",
        ObjectLockLegalHoldStatus="ON",
    )
    head = anonymous.head_object(Bucket=name, Key="page.txt")
    assert "x-amz-tagging-count" not in head["ResponseMetadata"]["HTTPHeaders"]
    assert "ObjectLockLegalHoldStatus" not in head
    own = s3.head_object(Bucket=name, Key="page.txt")
    assert own["ObjectLockLegalHoldStatus"] == "ON"
    assert own["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "1"
    assert (
        refused(
            anonymous.get_object,
            Bucket=name,
            Key="page.txt",
            ResponseContentType="text/html",
            ResponseContentDisposition="inline",
        )
        == "InvalidRequest"
    )
    s3.put_object_legal_hold(Bucket=name, Key="page.txt", LegalHold={"Status": "OFF"})


def test_a_request_names_the_owner_it_expects(s3: Any, other: tuple[str, Any]) -> None:
    org, theirs = other
    name = new_bucket(s3, "k", ACL="public-read-write")
    assert (
        refused(theirs.put_object, Bucket=name, Key="x", Body=b"x", ExpectedBucketOwner=org)
        == "AccessDenied"
    )
    assert refused(s3.head_object, Bucket=name, Key="x") == "404"
    owner = s3.get_bucket_acl(Bucket=name)["Owner"]["ID"]
    theirs.put_object(Bucket=name, Key="x", Body=b"x", ExpectedBucketOwner=owner)
    source = {"Bucket": name, "Key": "k"}
    assert (
        refused(
            s3.copy_object,
            Bucket=name,
            Key="y",
            CopySource=source,
            ExpectedSourceBucketOwner=org,
        )
        == "AccessDenied"
    )


def test_retention_and_expiry_settings_are_granted_by_name_only(
    s3: Any, other: tuple[str, Any]
) -> None:
    org, theirs = other
    name = new_bucket(s3, ObjectLockEnabledForBucket=True)
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant(
                org_principal(org), "s3:Put*", [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]
            ),
        ),
    )
    lock = {
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Years": 100}},
    }
    assert (
        refused(theirs.put_object_lock_configuration, Bucket=name, ObjectLockConfiguration=lock)
        == "AccessDenied"
    )
    rules = {"Rules": [{"ID": "x", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}}]}
    assert (
        refused(
            theirs.put_bucket_lifecycle_configuration, Bucket=name, LifecycleConfiguration=rules
        )
        == "AccessDenied"
    )
    theirs.put_object(Bucket=name, Key="ok", Body=b"x")


def test_a_public_bucket_cannot_be_created_under_a_name_another_holds(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    _, theirs = other
    name = new_bucket(s3, ACL="public-read")
    assert refused(theirs.create_bucket, Bucket=name, ACL="public-read") == "BucketAlreadyExists"


# The second review's findings (each failed before its fix).


def test_v1_shows_tags_and_protection_only_to_whom_may_read_them(
    local_server: LiveServer, s3: Any
) -> None:
    org = make_org(local_server)
    scopes = "buckets:read,files:read"
    key = local_server.cli("keys", "create", "--org", org, "--scopes", scopes).split()[-1]
    name = new_bucket(s3, ObjectLockEnabledForBucket=True, ACL="authenticated-read")
    s3.put_object(
        Bucket=name,
        Key="doc.txt",
        Body=b"d",
        Tagging="deal=merger",
        ObjectLockLegalHoldStatus="ON",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=datetime(2099, 1, 1, tzinfo=UTC),
    )
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(name, grant(org_principal(org), "s3:GetObject", f"arn:aws:s3:::{name}/*")),
    )
    with _v1_bucket(local_server, name) as (http, bucket_id), local_server.client(key) as theirs:
        own = http.get(f"/buckets/{bucket_id}/files/doc.txt", params={"metadata": "true"})
        assert own.json()["data"]["tags"] == {"deal": "merger"}
        assert own.json()["data"]["legalHold"] is True
        seen = theirs.get(f"/buckets/{bucket_id}/files/doc.txt", params={"metadata": "true"})
        assert seen.status_code == 200
        data = seen.json()["data"]
        assert not data.get("tags") and not data.get("legalHold") and not data.get("retention")
        listed = theirs.get(f"/buckets/{bucket_id}/files").json()["data"]
        assert [f["key"] for f in listed] == ["doc.txt"] and not listed[0].get("tags")
        versions = theirs.get(f"/buckets/{bucket_id}/versions").json()["data"]
        assert not versions[0].get("tags") and not versions[0].get("legalHold")
    version = s3.list_object_versions(Bucket=name)["Versions"][0]["VersionId"]
    s3.put_object_legal_hold(
        Bucket=name, Key="doc.txt", VersionId=version, LegalHold={"Status": "OFF"}
    )


def test_a_prefix_in_the_query_meets_no_prefix_condition_but_a_listings(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    org, theirs = other
    name = new_bucket(s3, "public/a")
    everything = {
        **grant(org_principal(org), "s3:*", f"arn:aws:s3:::{name}"),
        "Condition": {"StringLike": {"s3:prefix": "public/*"}},
    }
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, everything))
    signed = signed_headers(
        local_server,
        "PUT",
        f"/{name}?versioning&prefix=public/x",
        credentials=local_server.s3_credentials(org),
    )
    body = b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"
    answer = web.put(
        f"{local_server.s3_url}/{name}?versioning&prefix=public/x", headers=signed, content=body
    )
    assert answer.status_code == 403
    assert "Status" not in s3.get_bucket_versioning(Bucket=name)
    assert [
        o["Key"] for o in theirs.list_objects_v2(Bucket=name, Prefix="public/")["Contents"]
    ] == ["public/a"]


def test_v1_a_bucket_keeps_its_name_and_policy_apart(local_server: LiveServer, s3: Any) -> None:
    name = new_bucket(s3, "k")
    statement = grant("*", "s3:GetObject", f"arn:aws:s3:::{name}/*")
    with _v1_bucket(local_server, name) as (http, bucket_id):
        both = http.patch(
            f"/buckets/{bucket_id}",
            json={"name": unique_name("ren"), "policy": json.loads(policy(name, statement))},
        )
        assert both.status_code == 409
        assert http.get(f"/buckets/{bucket_id}/files/k").status_code == 200
        assert s3.get_object(Bucket=name, Key="k")["Body"].read() == b"k"


def test_the_owners_deny_binds_its_webhooks_and_event_stream(
    local_server: LiveServer, s3: Any
) -> None:
    name = new_bucket(s3)
    s3.put_bucket_policy(
        Bucket=name,
        Policy=policy(
            name,
            grant(
                "*", ["s3:PutBucketNotification", "s3:ListBucket"], f"arn:aws:s3:::{name}", "Deny"
            ),
        ),
    )
    with _v1_bucket(local_server, name) as (http, bucket_id):
        made = http.post(f"/buckets/{bucket_id}/webhooks", json={"url": "https://example.com/h"})
        assert made.status_code == 403
        stream = http.get("/events", params={"bucketId": bucket_id})
        assert stream.status_code == 403


def test_a_key_that_may_not_read_files_gets_no_webhook_of_them(
    local_server: LiveServer, s3: Any
) -> None:
    name = new_bucket(s3)
    org = s3.get_bucket_acl(Bucket=name)["Owner"]["ID"]
    key = local_server.cli(
        "keys", "create", "--org", org, "--scopes", "buckets:read,buckets:write"
    ).split()[-1]
    with _v1_bucket(local_server, name) as (http, bucket_id), local_server.client(key) as weak:
        made = weak.post(f"/buckets/{bucket_id}/webhooks", json={"url": "https://example.com/h"})
        assert made.status_code == 403
        assert made.json()["error"]["code"] == "insufficient_scope"
        mine = http.post(f"/buckets/{bucket_id}/webhooks", json={"url": "https://example.com/h"})
        hook = f"/buckets/{bucket_id}/webhooks/{mine.json()['data']['id']}"
        moved = weak.patch(hook, json={"url": "https://attacker.example/steal"})
        assert moved.status_code == 403
        assert http.get(hook).json()["data"]["url"] == "https://example.com/h"


def test_outsiders_see_no_organization_name(s3: Any, anonymous: Any) -> None:
    name = new_bucket(s3, "k", ACL="public-read")
    listed = anonymous.list_objects(Bucket=name)
    assert "DisplayName" not in listed["Contents"][0].get("Owner", {})
    assert "DisplayName" in s3.list_objects(Bucket=name)["Contents"][0]["Owner"]


def test_v1_a_rename_carries_tags_only_where_a_copy_would(
    local_server: LiveServer, s3: Any
) -> None:
    """A rename moves a file's tags: as a copy keeping its source's tags, it needs
    s3:GetObjectTagging on the old key and s3:PutObjectTagging on the new."""
    name = new_bucket(s3)
    s3.put_object(Bucket=name, Key="inbox/tagged", Body=b"t", Tagging="deal=merger")
    s3.put_object(Bucket=name, Key="inbox/plain", Body=b"p")
    deny = grant("*", "s3:PutObjectTagging", f"arn:aws:s3:::{name}/*", "Deny")
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    with _v1_bucket(local_server, name) as (http, bucket_id):
        files = f"/buckets/{bucket_id}/files/"
        tagged = http.patch(files + "inbox/tagged", json={"key": "done/tagged"})
        assert tagged.status_code == 403
        assert http.patch(files + "inbox/plain", json={"key": "done/plain"}).status_code == 200
    assert s3.get_object(Bucket=name, Key="inbox/tagged")["Body"].read() == b"t"
