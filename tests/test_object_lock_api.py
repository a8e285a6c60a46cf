"""Object lock on /v1 and in the typed client: a bucket's `objectLock`, retention and legal
hold on versions, what they refuse, and bypassing GOVERNANCE retention."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from bucketd_client import Client, Conflict, Forbidden, ObjectLockRule, RetentionRule
from bucketd_client.shapes import DefaultRetentionRule
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

TEXT = {"Content-Type": "text/plain"}


@pytest.fixture
def client(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as http:
        yield http


@pytest.fixture
def locked(client: httpx.Client) -> dict:
    return new_bucket(client, unique_name("lk"), objectLock={})


def later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def put(client: httpx.Client, bucket: dict, key: str, content: bytes = b"x") -> str:
    response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
    assert response.status_code == 201, response.text
    version: str = response.json()["data"]["versionId"]
    return version


def protect(client: httpx.Client, bucket: dict, version: str, **body: object) -> httpx.Response:
    return client.patch(f"/buckets/{bucket['id']}/versions/{version}", json=body)


def test_object_lock_on_create_forces_versioning_and_is_in_the_bucket(
    client: httpx.Client,
) -> None:
    bucket = new_bucket(
        client,
        unique_name("lk"),
        objectLock={"defaultRetention": {"mode": "governance", "days": 2}},
    )
    assert bucket["versioning"] == "enabled"
    assert bucket["objectLock"] == {"defaultRetention": {"mode": "governance", "days": 2}}
    url = f"/buckets/{bucket['id']}"
    refused = client.patch(url, json={"versioning": "suspended"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "invalid_bucket_state")
    version = put(client, bucket, "doc")
    data = client.get(f"{url}/files/doc", params={"metadata": "true"}).json()["data"]
    assert data["retention"]["mode"] == "governance"
    assert data["retention"]["retainUntil"] > later(86_400 * 2 - 60)
    deleted = client.delete(f"{url}/files/doc", params={"versionId": version})
    assert (deleted.status_code, deleted.json()["error"]["code"]) == (409, "file_locked")


@pytest.mark.parametrize(
    "body",
    [
        {"objectLock": {"defaultRetention": {"mode": "forever", "days": 1}}},
        {"objectLock": {"defaultRetention": {"mode": "governance", "days": 1, "years": 1}}},
        {"objectLock": {"defaultRetention": {"mode": "governance"}}},
        {"objectLock": {"defaultRetention": {"mode": "compliance", "days": 0}}},
        {"objectLock": {"unknown": 1}},
        {"objectLock": {}, "versioning": "suspended"},
    ],
)
def test_invalid_object_lock_is_refused_and_creates_nothing(
    client: httpx.Client, body: dict
) -> None:
    name = unique_name("bad")
    answer = client.post("/buckets", json={"name": name, "region": "us-east-1", **body})
    assert answer.status_code in (400, 409), answer.text
    names = [b["name"] for b in client.get("/buckets", params={"limit": 100}).json()["data"]]
    assert name not in names


def test_object_lock_by_patch_needs_versioning(client: httpx.Client) -> None:
    plain = new_bucket(client, unique_name())
    url = f"/buckets/{plain['id']}"
    refused = client.patch(url, json={"objectLock": {}})
    assert refused.status_code == 409
    assert client.get(url).json()["data"]["objectLock"] is None
    rule = {"defaultRetention": {"mode": "compliance", "years": 1}}
    assert client.patch(url, json={"versioning": "enabled", "objectLock": rule}).status_code == 200
    assert client.get(url).json()["data"]["objectLock"] == rule


def test_retention_and_legal_hold_on_a_version(client: httpx.Client, locked: dict) -> None:
    old = put(client, locked, "f", b"old")
    put(client, locked, "f", b"new")
    answer = protect(
        client, locked, old, key="f", retention={"mode": "compliance", "retainUntil": later(600)}
    )
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert (data["object"], data["isLatest"], data["retention"]["mode"]) == (
        "file_version",
        False,
        "compliance",
    )
    shorter = protect(
        client, locked, old, key="f", retention={"mode": "compliance", "retainUntil": later(60)}
    )
    assert (shorter.status_code, shorter.json()["error"]["code"]) == (409, "file_locked")
    removed = protect(client, locked, old, key="f", retention=None)
    assert removed.status_code == 409
    held = protect(client, locked, old, key="f", legalHold=True)
    assert held.json()["data"]["legalHold"] is True
    listed = client.get(f"/buckets/{locked['id']}/versions", params={"key": "f"}).json()["data"]
    by_id = {v["versionId"]: v for v in listed}
    assert by_id[old]["legalHold"] is True and by_id[old]["retention"]["mode"] == "compliance"
    gone = client.delete(f"/buckets/{locked['id']}/files/f", params={"versionId": old})
    assert gone.status_code == 409
    assert client.get(f"/buckets/{locked['id']}/files/f", params={"versionId": old}).content == (
        b"old"
    )


def test_malformed_protection_requests_are_400(client: httpx.Client, locked: dict) -> None:
    version = put(client, locked, "m")
    for body in (
        {"key": "m", "retention": {"mode": "governance", "retainUntil": "tomorrow"}},
        {"key": "m", "retention": {"mode": "governance", "retainUntil": "2099-01-01T00:00:00"}},
        {"key": "m", "retention": {"mode": "strict", "retainUntil": later(60)}},
        {"key": "m", "legalHold": "yes"},
        {"legalHold": True},
    ):
        answer = protect(client, locked, version, **body)
        assert answer.status_code == 400, (body, answer.text)
    assert protect(client, locked, "not-a-version", key="m", legalHold=True).status_code == 400
    missing = protect(client, locked, "0" * 26, key="m", legalHold=True)
    assert missing.status_code == 404


def test_protection_needs_object_lock(client: httpx.Client) -> None:
    bucket = new_bucket(client, unique_name("v"), versioning="enabled")
    version = put(client, bucket, "k")
    answer = protect(client, bucket, version, key="k", legalHold=True)
    assert (answer.status_code, answer.json()["error"]["code"]) == (
        400,
        "object_lock_not_enabled",
    )


def test_governance_bypass_needs_the_scope(local_server: LiveServer, locked: dict) -> None:
    with Client(local_server.url, local_server.admin_key) as admin:
        version = admin.upload(locked["id"], "g", b"x", content_type="text/plain").version_id
        assert version is not None
        admin.protect_version(
            locked["id"],
            "g",
            version,
            retention=RetentionRule(mode="governance", retain_until=later(3600)),
        )
        with pytest.raises(Forbidden):
            admin.delete_file(locked["id"], "g", version_id=version, bypass_governance=True)
        with pytest.raises(Conflict):
            admin.delete_file(locked["id"], "g", version_id=version)
        with pytest.raises(Forbidden):  # an API key cannot grant a scope it lacks
            admin.create_key("bypass", ["files:read", "files:write", "files:bypass-governance"])
        org = admin.get_organization().id
    scopes = "files:read,files:write,files:bypass-governance"
    out = local_server.cli("keys", "create", "--org", org, "--scopes", scopes)
    secret = out.strip().splitlines()[-1]
    with Client(local_server.url, secret) as bypassing:
        with pytest.raises(Conflict):
            bypassing.protect_version(locked["id"], "g", version, retention=None)
        shortened = bypassing.protect_version(
            locked["id"],
            "g",
            version,
            retention=RetentionRule(mode="governance", retain_until=later(60)),
            bypass_governance=True,
        )
        assert shortened.retention is not None
        bypassing.delete_file(locked["id"], "g", version_id=version, bypass_governance=True)
        assert list(bypassing.iter_versions(locked["id"], key="g")) == []


def test_the_client_sets_object_lock(local_server: LiveServer) -> None:
    with Client(local_server.url, local_server.admin_key) as admin:
        bucket = admin.create_bucket(unique_name("cl"), "us-east-1", versioning="enabled")
        rule = ObjectLockRule(default_retention=DefaultRetentionRule(mode="compliance", days=1))
        changed = admin.update_bucket(bucket.id, object_lock=rule)
        assert changed.object_lock is not None
        assert changed.object_lock.default_retention is not None
        assert changed.object_lock.default_retention.days == 1
        admin.wait_until_active(bucket)
        written = admin.upload(bucket.id, "k", b"x", content_type="text/plain")
        assert written.retention is not None and written.retention.mode == "compliance"
