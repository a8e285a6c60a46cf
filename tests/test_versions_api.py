"""Versions on /v1: the bucket's `versioning`, versionId on reads and deletes, delete
markers, listing versions with cursors, restoring, and usage that counts every version."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

TEXT = {"Content-Type": "text/plain"}


@pytest.fixture
def client(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as http:
        yield http


@pytest.fixture
def versioned(client: httpx.Client) -> dict:
    return new_bucket(client, unique_name("v"), versioning="enabled")


def put(client: httpx.Client, bucket: dict, key: str, content: bytes) -> str:
    response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
    assert response.status_code == 201, response.text
    version: str = response.json()["data"]["versionId"]
    return version


def usage(client: httpx.Client, bucket: dict) -> tuple[int, int]:
    data = client.get(f"/buckets/{bucket['id']}").json()["data"]
    return data["fileCount"], data["sizeBytes"]


def versions(client: httpx.Client, bucket: dict, **params: object) -> list[dict]:
    """Every page of the version list."""
    found: list[dict] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        answer = client.get(f"/buckets/{bucket['id']}/versions", params=query).json()
        found += answer["data"]
        cursor = answer["meta"]["nextCursor"]
        if not answer["meta"]["hasMore"]:
            return found


def test_versioning_is_set_on_create_or_patch_and_never_unset(client: httpx.Client) -> None:
    plain = new_bucket(client, unique_name())
    assert plain["versioning"] is None
    url = f"/buckets/{plain['id']}"
    assert client.patch(url, json={"versioning": "suspended"}).status_code == 200
    assert client.get(url).json()["data"]["versioning"] == "suspended"
    assert client.patch(url, json={"versioning": "enabled"}).status_code == 200
    assert client.get(url).json()["data"]["versioning"] == "enabled"
    for wrong in (None, "on", "Enabled", 1):
        refused = client.patch(url, json={"versioning": wrong})
        assert refused.status_code == 400, (wrong, refused.text)
    assert client.get(url).json()["data"]["versioning"] == "enabled"
    bad = client.post(
        "/buckets", json={"name": unique_name(), "region": "us-east-1", "versioning": "yes"}
    )
    assert bad.status_code == 400


def test_uploads_make_versions_and_each_stays_readable(
    client: httpx.Client, versioned: dict
) -> None:
    ids = [put(client, versioned, "doc.txt", f"version {n}".encode()) for n in range(3)]
    assert len(set(ids)) == 3 and ids == sorted(ids)
    url = f"/buckets/{versioned['id']}/files/doc.txt"
    latest = client.get(url)
    assert latest.content == b"version 2" and latest.headers["x-version-id"] == ids[2]
    for n, version in enumerate(ids):
        got = client.get(url, params={"versionId": version})
        assert got.content == f"version {n}".encode()
        head = client.head(url, params={"versionId": version})
        assert head.headers["content-length"] == "9" and head.headers["x-version-id"] == version
        meta = client.get(url, params={"versionId": version, "metadata": "true"}).json()["data"]
        assert meta["versionId"] == version
    assert usage(client, versioned) == (3, 27)
    listed = client.get(f"/buckets/{versioned['id']}/files").json()["data"]
    assert [f["key"] for f in listed] == ["doc.txt"]


def test_a_delete_leaves_a_marker_and_deleting_a_version_is_for_good(
    client: httpx.Client, versioned: dict
) -> None:
    first = put(client, versioned, "k", b"first")
    second = put(client, versioned, "k", b"second!")
    url = f"/buckets/{versioned['id']}/files/k"
    deleted = client.delete(url)
    assert deleted.json()["data"] == {"object": "file", "id": "k"}
    gone = client.get(url)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "file_not_found"
    assert client.get(f"/buckets/{versioned['id']}/files").json()["data"] == []
    history = versions(client, versioned, key="k")
    assert [(v["deleteMarker"], v["isLatest"]) for v in history] == [
        (True, True),
        (False, False),
        (False, False),
    ]
    assert [v["versionId"] for v in history[1:]] == [second, first]
    marker = history[0]["versionId"]
    assert client.get(url, params={"versionId": marker}).status_code == 404
    assert usage(client, versioned) == (2, 12)
    removed = client.delete(url, params={"versionId": first})
    assert removed.json()["data"] == {"object": "file_version", "id": first}
    assert client.get(url, params={"versionId": first}).status_code == 404
    assert usage(client, versioned) == (1, 7)
    client.delete(url, params={"versionId": marker})  # the marker goes: `second` is back
    assert client.get(url).content == b"second!"
    assert client.delete(url, params={"versionId": first}).status_code == 404


def test_restore_makes_an_old_version_current_without_losing_any(
    client: httpx.Client, versioned: dict
) -> None:
    old = put(client, versioned, "report.pdf", b"the good one")
    put(client, versioned, "report.pdf", b"broken")
    client.delete(f"/buckets/{versioned['id']}/files/report.pdf")
    restored = client.post(
        f"/buckets/{versioned['id']}/versions/{old}/restore", json={"key": "report.pdf"}
    )
    assert restored.status_code == 201, restored.text
    data = restored.json()["data"]
    assert data["object"] == "file" and data["versionId"] not in (old, None)
    assert client.get(f"/buckets/{versioned['id']}/files/report.pdf").content == b"the good one"
    assert len(versions(client, versioned, key="report.pdf")) == 4
    assert usage(client, versioned) == (3, 2 * len(b"the good one") + len(b"broken"))
    marker = versions(client, versioned, key="report.pdf")[1]
    assert marker["deleteMarker"]
    for version, body, status in (
        (marker["versionId"], {"key": "report.pdf"}, 404),
        ("nonsense", {"key": "report.pdf"}, 400),
        (old, {}, 400),
        (old, {"key": "nothing"}, 404),
    ):
        url = f"/buckets/{versioned['id']}/versions/{version}/restore"
        answer = client.post(url, json=body)
        assert answer.status_code == status, (body, answer.text)


def test_version_lists_page_by_cursor_and_tell_a_key_from_a_prefix(
    client: httpx.Client, versioned: dict
) -> None:
    written = {
        key: [put(client, versioned, key, key.encode() * n) for n in (1, 2, 3)]
        for key in ("a", "a/b", "b")
    }
    every = versions(client, versioned, limit=2)
    assert [(v["key"], v["versionId"]) for v in every] == [
        (key, version) for key in ("a", "a/b", "b") for version in reversed(written[key])
    ]
    assert [v["isLatest"] for v in every] == [True, False, False] * 3
    assert [v["key"] for v in versions(client, versioned, key="a", limit=1)] == ["a"] * 3
    assert {v["key"] for v in versions(client, versioned, prefix="a")} == {"a", "a/b"}
    first = client.get(f"/buckets/{versioned['id']}/versions", params={"limit": 1}).json()
    other = client.get(
        f"/buckets/{versioned['id']}/versions",
        params={"cursor": first["meta"]["nextCursor"], "key": "b"},
    )
    assert other.status_code == 400 and other.json()["error"]["code"] == "invalid_cursor"
    files_cursor = client.get(f"/buckets/{versioned['id']}/files", params={"limit": 1}).json()
    mixed = client.get(
        f"/buckets/{versioned['id']}/versions",
        params={"cursor": files_cursor["meta"]["nextCursor"]},
    )
    assert mixed.status_code == 400


def test_malformed_version_ids_are_400(client: httpx.Client, versioned: dict) -> None:
    put(client, versioned, "k", b"x")
    for method in ("GET", "HEAD", "DELETE"):
        answer = client.request(
            method, f"/buckets/{versioned['id']}/files/k", params={"versionId": "v1"}
        )
        assert answer.status_code == 400
    code = client.get(f"/buckets/{versioned['id']}/files/k", params={"versionId": "v1"}).json()
    assert code["error"]["code"] == "invalid_version_id"


def test_suspended_writes_replace_the_null_version(client: httpx.Client, versioned: dict) -> None:
    kept = put(client, versioned, "k", b"kept")
    client.patch(f"/buckets/{versioned['id']}", json={"versioning": "suspended"})
    assert put(client, versioned, "k", b"null one") is None
    assert put(client, versioned, "k", b"null 2") is None
    assert [v["versionId"] for v in versions(client, versioned, key="k")] == ["null", kept]
    url = f"/buckets/{versioned['id']}/files/k"
    assert client.get(url, params={"versionId": "null"}).content == b"null 2"
    assert usage(client, versioned) == (2, 10)


def test_versions_of_another_organization_are_not_found(
    local_server: LiveServer, client: httpx.Client, versioned: dict
) -> None:
    version = put(client, versioned, "secret", b"mine")
    org = (
        local_server.cli("orgs", "create", unique_name("other"), "--plan", "free")
        .strip()
        .splitlines()[-1]
    )
    key = (
        local_server.cli("keys", "create", "--org", org, "--scopes", "files:read,files:write")
        .strip()
        .splitlines()[-1]
    )
    with local_server.client(key) as stranger:
        base = f"/buckets/{versioned['id']}"
        assert stranger.get(f"{base}/versions").status_code == 404
        assert (
            stranger.get(f"{base}/files/secret", params={"versionId": version}).status_code == 404
        )
        assert (
            stranger.delete(f"{base}/files/secret", params={"versionId": version}).status_code
            == 404
        )
        restore = stranger.post(f"{base}/versions/{version}/restore", json={"key": "secret"})
        assert restore.status_code == 404
    assert client.get(f"{base}/files/secret").content == b"mine"


def test_read_only_keys_cannot_delete_or_restore_versions(
    local_server: LiveServer, client: httpx.Client, versioned: dict
) -> None:
    version = put(client, versioned, "k", b"x")
    org = client.get("/organization").json()["data"]["id"]
    key = (
        local_server.cli("keys", "create", "--org", org, "--scopes", "files:read")
        .strip()
        .splitlines()[-1]
    )
    with local_server.client(key) as reader:
        base = f"/buckets/{versioned['id']}"
        assert reader.get(f"{base}/versions").status_code == 200
        assert reader.delete(f"{base}/files/k", params={"versionId": version}).status_code == 403
        assert (
            reader.post(f"{base}/versions/{version}/restore", json={"key": "k"}).status_code == 403
        )


def test_file_tags_on_upload_patch_and_versions(client: httpx.Client, versioned: dict) -> None:
    url = f"/buckets/{versioned['id']}/files/tagged"
    made = client.put(url, content=b"one", headers={**TEXT, "Tagging": "team=a&stage=dev%20x"})
    assert made.status_code == 201, made.text
    assert made.json()["data"]["tags"] == {"team": "a", "stage": "dev x"}
    first = made.json()["data"]["versionId"]
    assert client.patch(url, json={"tags": {"state": "new"}}).status_code == 200
    meta = client.get(url, params={"metadata": "true"}).json()["data"]
    assert meta["tags"] == {"state": "new"}
    put(client, versioned, "tagged", b"two")
    listed = client.get(f"/buckets/{versioned['id']}/versions", params={"key": "tagged"})
    by_id = {v["versionId"]: v for v in listed.json()["data"]}
    assert by_id[first]["tags"] == {"state": "new"}
    assert client.patch(url, json={"tags": {}}).status_code == 200
    assert client.get(url, params={"metadata": "true"}).json()["data"]["tags"] == {}
    eleven = "&".join(f"k{n}=v" for n in range(11))
    refused = client.put(url, content=b"x", headers={**TEXT, "Tagging": eleven})
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_tag")
    bad = client.patch(url, json={"tags": {"aws:x": "y"}})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_tag")
