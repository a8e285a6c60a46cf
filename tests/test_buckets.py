"""Bucket endpoints through real HTTP."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.live import LiveServer, new_bucket, wait_active
from tests.support.names import unique_name

ID = re.compile(r"svc_[0-9A-HJKMNP-TV-Z]{26}")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def test_create_returns_201_with_record_and_write_shape(client: httpx.Client) -> None:
    name = unique_name()
    response = client.post("/buckets", json={"name": name, "region": "eu-west-1"})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"data", "error", "meta"}
    assert body["error"] is None and body["meta"] is None
    data = body["data"]
    assert data["object"] == "bucket"
    assert ID.fullmatch(data["id"])
    assert data["name"] == name and data["region"] == "eu-west-1"
    assert data["status"] == "provisioning"
    assert TIMESTAMP.fullmatch(data["createdAt"])
    assert wait_active(client, data["id"])["status"] == "active"


def test_get_returns_full_bucket(client: httpx.Client, bucket: dict) -> None:
    response = client.get(f"/buckets/{bucket['id']}")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data == bucket
    assert data["fileCount"] == 0 and data["sizeBytes"] == 0
    assert data["maxUploadBytes"] == 5 * 1024**3
    assert data["allowedContentTypes"] == ["*/*"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "ab", "region": "us-east-1"},
        {"name": "a" * 64, "region": "us-east-1"},
        {"name": "Upper", "region": "us-east-1"},
        {"name": "-dash", "region": "us-east-1"},
        {"name": "dash-", "region": "us-east-1"},
        {"name": "under_score", "region": "us-east-1"},
        {"name": "ok-name", "region": "mars-north-1"},
        {"name": "ok-name", "region": "useast1"},
        {"name": "ok-name"},
        {"region": "us-east-1"},
        {"name": 5, "region": "us-east-1"},
        {"name": "ok-name", "region": "us-east-1", "extra": 1},
        {"name": "ok-name", "region": "us-east-1", "maxUploadBytes": -1},
        {"name": "ok-name", "region": "us-east-1", "maxUploadBytes": "big"},
        {"name": "ok-name", "region": "us-east-1", "allowedContentTypes": []},
        {"name": "ok-name", "region": "us-east-1", "allowedContentTypes": ["nonsense"]},
    ],
)
def test_create_validation_is_400(client: httpx.Client, body: dict) -> None:
    response = client.post("/buckets", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["message"] and re.fullmatch(r"[a-z_]+", error["code"])
    assert response.json()["data"] is None


def test_create_accepts_name_edges_and_dots(client: httpx.Client) -> None:
    for name in ("a1b", "x" * 63, "my.bucket-1"):
        name = name if len(name) < 20 else unique_name()[:3] + name[3:]
        response = client.post("/buckets", json={"name": name, "region": "ap-northeast-1"})
        assert response.status_code in (201, 409), response.text


def test_bad_json_is_400(client: httpx.Client) -> None:
    for content in (b"{", b"[]", b"", b"\xff\xfe", b'"text"'):
        response = client.post(
            "/buckets", content=content, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400, content
        assert response.json()["error"]["code"] == "invalid_json"


def test_duplicate_name_is_409(client: httpx.Client, bucket: dict) -> None:
    response = client.post("/buckets", json={"name": bucket["name"], "region": "us-east-1"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "bucket_name_taken"


def test_unknown_bucket_is_404(client: httpx.Client) -> None:
    for path in ("/buckets/svc_00000000000000000000000000", "/buckets/nonsense"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "bucket_not_found"


def test_patch_renames_and_changes_limits(client: httpx.Client, bucket: dict) -> None:
    new_name = unique_name("renamed")
    response = client.patch(
        f"/buckets/{bucket['id']}",
        json={"name": new_name, "maxUploadBytes": 10, "allowedContentTypes": ["image/*"]},
    )
    assert response.status_code == 200
    assert response.json()["data"] == {"object": "bucket", "id": bucket["id"]}
    data = client.get(f"/buckets/{bucket['id']}").json()["data"]
    assert (data["name"], data["maxUploadBytes"], data["allowedContentTypes"]) == (
        new_name,
        10,
        ["image/*"],
    )
    reset = client.patch(
        f"/buckets/{bucket['id']}", json={"maxUploadBytes": None, "allowedContentTypes": None}
    )
    assert reset.status_code == 200
    data = client.get(f"/buckets/{bucket['id']}").json()["data"]
    assert data["maxUploadBytes"] == 5 * 1024**3 and data["allowedContentTypes"] == ["*/*"]


def test_patch_errors(client: httpx.Client, bucket: dict) -> None:
    other = new_bucket(client, unique_name())
    taken = client.patch(f"/buckets/{bucket['id']}", json={"name": other["name"]})
    assert taken.status_code == 409
    assert client.patch(f"/buckets/{bucket['id']}", json={"name": "BAD"}).status_code == 400
    assert client.patch(f"/buckets/{bucket['id']}", json={"region": "eu-west-1"}).status_code == 400
    missing = client.patch("/buckets/svc_00000000000000000000000000", json={"name": "fine-name"})
    assert missing.status_code == 404


def test_delete_empty_and_then_404(client: httpx.Client, bucket: dict) -> None:
    response = client.delete(f"/buckets/{bucket['id']}")
    assert response.status_code == 200
    assert response.json()["data"] == {"object": "bucket", "id": bucket["id"]}
    assert client.get(f"/buckets/{bucket['id']}").status_code == 404
    assert client.delete(f"/buckets/{bucket['id']}").status_code == 404


def test_delete_with_files_needs_force(client: httpx.Client, bucket: dict) -> None:
    put = client.put(
        f"/buckets/{bucket['id']}/files/a.txt",
        content=b"hello",
        headers={"Content-Type": "text/plain"},
    )
    assert put.status_code == 201
    refused = client.delete(f"/buckets/{bucket['id']}")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "bucket_not_empty"
    assert client.get(f"/buckets/{bucket['id']}/files/a.txt").content == b"hello"
    assert client.delete(f"/buckets/{bucket['id']}", params={"force": "maybe"}).status_code == 400
    forced = client.delete(f"/buckets/{bucket['id']}", params={"force": "true"})
    assert forced.status_code == 200
    assert client.get(f"/buckets/{bucket['id']}").status_code == 404


def test_list_is_ordered_and_paginates(client: httpx.Client) -> None:
    created = [new_bucket(client, unique_name())["id"] for _ in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        response = client.get("/buckets", params=params)
        assert response.status_code == 200
        body = response.json()
        assert len(body["data"]) <= 2
        seen += [b["id"] for b in body["data"]]
        cursor = body["meta"]["nextCursor"]
        assert body["meta"]["hasMore"] == (cursor is not None)
        if cursor is None:
            break
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    assert set(created) <= set(seen)


def test_list_accepts_a_bucket_id_as_cursor(client: httpx.Client) -> None:
    ids = [new_bucket(client, unique_name())["id"] for _ in range(3)]
    response = client.get("/buckets", params={"cursor": ids[0], "limit": 100})
    listed = [b["id"] for b in response.json()["data"]]
    assert ids[0] not in listed and ids[1] in listed and ids[2] in listed


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 101},
        {"limit": "x"},
        {"limit": -1},
        {"cursor": "garbage!"},
        {"cursor": "eyJ2IjoxfQ"},
    ],
)
def test_list_rejects_bad_limit_and_cursor(client: httpx.Client, params: dict) -> None:
    response = client.get("/buckets", params=params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"invalid_limit", "invalid_cursor"}


def test_provisioning_then_active_and_delete_409_while_provisioning(tmp_path) -> None:
    # long enough that four requests under the suite's load fit in it (1 s did not, once)
    live = LiveServer(tmp_path / "data", "provisioning_delay_seconds = 3.0\n").start()
    try:
        with live.client() as http:
            created = http.post("/buckets", json={"name": "slow-one", "region": "us-east-1"})
            bucket_id = created.json()["data"]["id"]
            assert http.get(f"/buckets/{bucket_id}").json()["data"]["status"] == "provisioning"
            refused = http.delete(f"/buckets/{bucket_id}")
            assert refused.status_code == 409
            assert refused.json()["error"]["code"] == "bucket_provisioning"
            upload = http.put(
                f"/buckets/{bucket_id}/files/x",
                content=b"x",
                headers={"Content-Type": "text/plain"},
            )
            assert upload.status_code == 409
            assert upload.headers["retry-after"] == "1"
            assert wait_active(http, bucket_id)["status"] == "active"
            assert http.delete(f"/buckets/{bucket_id}").status_code == 200
    finally:
        live.stop()


def test_provisioning_resumes_after_a_crash(tmp_path) -> None:
    live = LiveServer(tmp_path / "data", "provisioning_delay_seconds = 30.0\n").start()
    with live.client() as http:
        bucket_id = http.post("/buckets", json={"name": "resumed", "region": "us-east-1"}).json()[
            "data"
        ]["id"]
    live.kill()
    live.config_path.write_text("provisioning_delay_seconds = 0.0\n")
    live.start()
    try:
        with live.client() as http:
            assert wait_active(http, bucket_id)["status"] == "active"
    finally:
        live.stop()


def test_a_bucket_name_where_an_id_goes_gets_a_hint(client: httpx.Client, bucket: dict) -> None:
    """/v1 addresses buckets by id; a name there is still a 404, saying so, and an id that
    is merely unknown gets the plain answer."""
    by_name = client.get(f"/buckets/{bucket['name']}")
    assert by_name.status_code == 404
    message = by_name.json()["error"]["message"]
    assert "not a bucket id" in message and "GET /v1/buckets" in message
    unknown = client.get("/buckets/svc_01JD3M5Q0W8K9Y7T6R5E4W3Q2A")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "bucket not found"
