"""File endpoints through real HTTP: uploads, downloads, ranges, listing, rename, delete."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

import httpx
import pytest

from tests.support.keys import ODD_KEYS, odd_path
from tests.support.live import LiveServer

TEXT = {"Content-Type": "text/plain"}


def put(
    client: httpx.Client, bucket: dict, key: str, content: bytes, content_type: str = "text/plain"
) -> httpx.Response:
    return client.put(
        f"/buckets/{bucket['id']}/files/{quote(key, safe='/')}",
        content=content,
        headers={"Content-Type": content_type},
    )


def test_upload_returns_201_with_file_record(client: httpx.Client, bucket: dict) -> None:
    response = put(client, bucket, "docs/readme.txt", b"hello world")
    assert response.status_code == 201
    data = response.json()["data"]
    assert data["object"] == "file" and data["id"] == "docs/readme.txt"
    assert data["key"] == "docs/readme.txt" and data["size"] == 11
    assert data["contentType"] == "text/plain"
    assert data["etag"] == f'"{hashlib.sha256(b"hello world").hexdigest()}"'
    assert data["uploadedAt"].endswith("Z")


def test_download_headers_and_body(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "a.bin", b"0123456789", "application/octet-stream")
    response = client.get(f"/buckets/{bucket['id']}/files/a.bin")
    assert response.status_code == 200
    assert response.content == b"0123456789"
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-length"] == "10"
    assert response.headers["accept-ranges"] == "bytes"
    assert response.headers["etag"] == f'"{hashlib.sha256(b"0123456789").hexdigest()}"'
    assert response.headers["last-modified"].endswith("GMT")
    assert "x-ratelimit-limit" in response.headers


def test_head_sends_get_headers_without_body(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "h.txt", b"head me")
    get = client.get(f"/buckets/{bucket['id']}/files/h.txt")
    head = client.head(f"/buckets/{bucket['id']}/files/h.txt")
    assert head.status_code == 200 and head.content == b""
    for name in ("content-length", "content-type", "etag", "last-modified", "accept-ranges"):
        assert head.headers[name] == get.headers[name]
    assert client.head(f"/buckets/{bucket['id']}/files/nope").status_code == 404


@pytest.mark.parametrize(
    ("range_header", "status", "body", "content_range"),
    [
        ("bytes=0-3", 206, b"0123", "bytes 0-3/10"),
        ("bytes=5-", 206, b"56789", "bytes 5-9/10"),
        ("bytes=-3", 206, b"789", "bytes 7-9/10"),
        ("bytes=8-100", 206, b"89", "bytes 8-9/10"),
        ("bytes=-100", 206, b"0123456789", "bytes 0-9/10"),
        ("bytes=10-", 416, None, "bytes */10"),
        ("bytes=5-2", 416, None, "bytes */10"),
        ("bytes=0-1,4-5", 416, None, "bytes */10"),
        ("lines=1-2", 416, None, "bytes */10"),
        ("bytes=-0", 416, None, "bytes */10"),
    ],
)
def test_ranges(
    client: httpx.Client,
    bucket: dict,
    range_header: str,
    status: int,
    body: bytes | None,
    content_range: str,
) -> None:
    put(client, bucket, "r.txt", b"0123456789")
    response = client.get(f"/buckets/{bucket['id']}/files/r.txt", headers={"Range": range_header})
    assert response.status_code == status
    assert response.headers["content-range"] == content_range
    if body is not None:
        assert response.content == body
        assert response.headers["content-length"] == str(len(body))
    else:
        assert response.json()["error"]["code"] == "range_not_satisfiable"


def test_if_range_with_stale_etag_gives_full_body(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "ir.txt", b"0123456789")
    response = client.get(
        f"/buckets/{bucket['id']}/files/ir.txt",
        headers={"Range": "bytes=0-1", "If-Range": '"stale"'},
    )
    assert response.status_code == 200 and response.content == b"0123456789"


def test_if_none_match_gives_304_with_etag(client: httpx.Client, bucket: dict) -> None:
    etag = put(client, bucket, "c.txt", b"cache me").json()["data"]["etag"]
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = client.get(
            f"/buckets/{bucket['id']}/files/c.txt", headers={"If-None-Match": header}
        )
        assert response.status_code == 304
        assert response.headers["etag"] == etag
        assert response.content == b""
    fresh = client.get(f"/buckets/{bucket['id']}/files/c.txt", headers={"If-None-Match": '"other"'})
    assert fresh.status_code == 200


def test_if_modified_since(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "m.txt", b"m")
    last_modified = client.head(f"/buckets/{bucket['id']}/files/m.txt").headers["last-modified"]
    response = client.get(
        f"/buckets/{bucket['id']}/files/m.txt", headers={"If-Modified-Since": last_modified}
    )
    assert response.status_code == 304
    old = client.get(
        f"/buckets/{bucket['id']}/files/m.txt",
        headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"},
    )
    assert old.status_code == 200


def test_metadata_true_returns_file_object(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "meta.json", b"{}", "application/json")
    response = client.get(f"/buckets/{bucket['id']}/files/meta.json", params={"metadata": "true"})
    assert response.status_code == 200
    data = response.json()["data"]
    assert (
        data["key"] == "meta.json"
        and data["size"] == 2
        and data["contentType"] == "application/json"
    )


def test_overwrite_replaces_and_updates_counters(client: httpx.Client, bucket: dict) -> None:
    assert put(client, bucket, "o.txt", b"first version").status_code == 201
    assert put(client, bucket, "o.txt", b"second").status_code == 201
    assert client.get(f"/buckets/{bucket['id']}/files/o.txt").content == b"second"
    data = client.get(f"/buckets/{bucket['id']}").json()["data"]
    assert data["fileCount"] == 1 and data["sizeBytes"] == 6


def test_empty_file(client: httpx.Client, bucket: dict) -> None:
    response = put(client, bucket, "empty", b"")
    assert response.status_code == 201 and response.json()["data"]["size"] == 0
    download = client.get(f"/buckets/{bucket['id']}/files/empty")
    assert download.status_code == 200 and download.content == b""
    assert download.headers["content-length"] == "0"


@pytest.mark.parametrize(
    "content_type",
    [None, "", "nonsense", "text/", "/plain", "text plain"],
)
def test_missing_or_malformed_content_type_is_415(
    client: httpx.Client, bucket: dict, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = client.put(f"/buckets/{bucket['id']}/files/x", content=b"data", headers=headers)
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    if content_type:  # the value given, quoted
        assert f"Content-Type {content_type!r} is not exactly one MIME type" in error["message"]
    else:  # the contract's 415, with the header a client forgot named
        assert error["message"].startswith("the Content-Type header is missing")


def test_allow_list_with_wildcards(client: httpx.Client, bucket: dict) -> None:
    client.patch(
        f"/buckets/{bucket['id']}", json={"allowedContentTypes": ["image/*", "application/pdf"]}
    )
    assert put(client, bucket, "p.png", b"png", "image/png").status_code == 201
    assert put(client, bucket, "d.pdf", b"pdf", "application/PDF; x=y").status_code == 201
    refused = put(client, bucket, "t.txt", b"text", "text/plain")
    assert refused.status_code == 415
    assert "text/plain" in refused.json()["error"]["message"]


KEYS = [
    "plain.txt",
    "with space.txt",
    "deep/nested/path/file.txt",
    "unicode-ünïcødé/日本語.txt",
    "emoji-🎉.bin",
    "percent%20literal",
    "question?mark",
    "hash#tag",
    "plus+sign",
    "a//double//slash",
    "/leading-slash",
    "trailing-slash/",
    "semi;colon",
    "quote\"s'",
    "x" * 1024,
]


def test_odd_keys_round_trip_and_list_in_order(client: httpx.Client, bucket: dict) -> None:
    for key in ODD_KEYS:
        path = f"/buckets/{bucket['id']}/files/{odd_path(key)}"
        stored = client.put(path, content=key.encode(), headers=TEXT)
        assert stored.status_code == 201, (key, stored.text)
        assert stored.json()["data"]["key"] == key
        assert client.get(path).content == key.encode()
    listed, cursor = [], None
    while True:
        page = client.get(
            f"/buckets/{bucket['id']}/files",
            params={"limit": 7, **({"cursor": cursor} if cursor else {})},
        ).json()
        listed += [f["key"] for f in page["data"]]
        cursor = page["meta"].get("nextCursor") if page["meta"] else None
        if not cursor:
            break
    assert listed == sorted(ODD_KEYS, key=lambda k: k.encode("utf-8"))


@pytest.mark.parametrize("key", KEYS)
def test_keys_round_trip(server: LiveServer, client: httpx.Client, bucket: dict, key: str) -> None:
    encoded = quote(key, safe="")
    response = client.put(
        f"/buckets/{bucket['id']}/files/{encoded}", content=key.encode(), headers=TEXT
    )
    assert response.status_code == 201, response.text
    assert response.json()["data"]["key"] == key
    download = client.get(f"/buckets/{bucket['id']}/files/{encoded}")
    assert download.content == key.encode()
    listed = client.get(
        f"/buckets/{bucket['id']}/files", params={"prefix": key, "limit": 100}
    ).json()["data"]
    assert key in [f["key"] for f in listed]
    assert client.delete(f"/buckets/{bucket['id']}/files/{encoded}").status_code == 200


def test_encoded_slash_is_the_same_key_as_a_slash(client: httpx.Client, bucket: dict) -> None:
    client.put(f"/buckets/{bucket['id']}/files/a%2Fb", content=b"ab", headers=TEXT)
    assert client.get(f"/buckets/{bucket['id']}/files/a/b").content == b"ab"


def test_dot_segments_are_ordinary_keys(
    server: LiveServer, client: httpx.Client, bucket: dict
) -> None:
    for key in ("%2E%2E/%2E%2E/etc/passwd", "a/%2E/b", "%2E%2E"):
        response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=b"dots", headers=TEXT)
        assert response.status_code == 201
        expected = key.replace("%2E", ".")
        assert response.json()["data"]["key"] == expected
        assert client.get(f"/buckets/{bucket['id']}/files/{key}").content == b"dots"


@pytest.mark.parametrize("encoded", ["", "%00", "a%00b", "%FF", "%C3%28", "x" * 1025])
def test_invalid_keys_are_400(client: httpx.Client, bucket: dict, encoded: str) -> None:
    response = client.put(f"/buckets/{bucket['id']}/files/{encoded}", content=b"x", headers=TEXT)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_key"


def test_list_with_prefix_and_delimiter(client: httpx.Client, bucket: dict) -> None:
    for key in ("a.txt", "dir/one", "dir/two", "dir/sub/three", "other/x", "z"):
        put(client, bucket, key, b"x")
    body = client.get(f"/buckets/{bucket['id']}/files", params={"delimiter": "/"}).json()
    assert [f["key"] for f in body["data"]] == ["a.txt", "z"]
    assert body["meta"]["prefixes"] == ["dir/", "other/"]
    assert body["hasMore"] is False and body["meta"]["hasMore"] is False
    inner = client.get(
        f"/buckets/{bucket['id']}/files", params={"prefix": "dir/", "delimiter": "/"}
    ).json()
    assert [f["key"] for f in inner["data"]] == ["dir/one", "dir/two"]
    assert inner["meta"]["prefixes"] == ["dir/sub/"]
    flat = client.get(f"/buckets/{bucket['id']}/files", params={"prefix": "dir/"}).json()
    assert [f["key"] for f in flat["data"]] == ["dir/one", "dir/sub/three", "dir/two"]
    for item in flat["data"]:
        assert set(item) >= {"key", "size", "contentType", "uploadedAt"}


def test_list_pagination_with_delimiter(client: httpx.Client, bucket: dict) -> None:
    for key in ("a", "b/1", "b/2", "c", "d/1", "e"):
        put(client, bucket, key, b"x")
    entries: list[str] = []
    cursor = None
    while True:
        params = {"delimiter": "/", "limit": 1, **({"cursor": cursor} if cursor else {})}
        body = client.get(f"/buckets/{bucket['id']}/files", params=params).json()
        entries += [f["key"] for f in body["data"]] + body["meta"]["prefixes"]
        cursor = body["meta"]["nextCursor"]
        if cursor is None:
            break
    assert entries == ["a", "b/", "c", "d/", "e"]


def test_cursor_of_another_list_is_400(client: httpx.Client, bucket: dict) -> None:
    for key in ("k1", "k2", "k3"):
        put(client, bucket, key, b"x")
    cursor = client.get(f"/buckets/{bucket['id']}/files", params={"limit": 1}).json()["meta"][
        "nextCursor"
    ]
    other = client.post(
        "/buckets", json={"name": bucket["name"] + "-o", "region": "us-east-1"}
    ).json()["data"]
    assert client.get(f"/buckets/{other['id']}/files", params={"cursor": cursor}).status_code == 400
    assert (
        client.get(
            f"/buckets/{bucket['id']}/files", params={"cursor": cursor, "prefix": "zz"}
        ).status_code
        == 400
    )
    bucket_cursor = client.get("/buckets", params={"limit": 1}).json()["meta"]["nextCursor"]
    assert (
        client.get(f"/buckets/{bucket['id']}/files", params={"cursor": bucket_cursor}).status_code
        == 400
    )
    resumed = client.get(f"/buckets/{bucket['id']}/files", params={"cursor": cursor}).json()
    assert [f["key"] for f in resumed["data"]] == ["k2", "k3"]


def test_list_unknown_bucket_is_404(client: httpx.Client) -> None:
    response = client.get("/buckets/svc_00000000000000000000000000/files")
    assert response.status_code == 404


def test_rename_and_content_type_patch(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "old/name.txt", b"moving")
    response = client.patch(
        f"/buckets/{bucket['id']}/files/old/name.txt", json={"key": "new/name.txt"}
    )
    assert response.status_code == 200
    assert response.json()["data"] == {"object": "file", "id": "new/name.txt"}
    assert client.get(f"/buckets/{bucket['id']}/files/old/name.txt").status_code == 404
    assert client.get(f"/buckets/{bucket['id']}/files/new/name.txt").content == b"moving"
    typed = client.patch(
        f"/buckets/{bucket['id']}/files/new/name.txt", json={"contentType": "text/markdown"}
    )
    assert typed.status_code == 200
    assert (
        client.head(f"/buckets/{bucket['id']}/files/new/name.txt").headers["content-type"]
        == "text/markdown"
    )


def test_rename_errors(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "one", b"1")
    put(client, bucket, "two", b"2")
    taken = client.patch(f"/buckets/{bucket['id']}/files/one", json={"key": "two"})
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "file_exists"
    assert client.get(f"/buckets/{bucket['id']}/files/two").content == b"2"
    assert (
        client.patch(f"/buckets/{bucket['id']}/files/missing", json={"key": "x"}).status_code == 404
    )
    assert client.patch(f"/buckets/{bucket['id']}/files/one", json={"key": ""}).status_code == 400
    assert client.patch(f"/buckets/{bucket['id']}/files/one", json={"key": 7}).status_code == 400
    assert (
        client.patch(f"/buckets/{bucket['id']}/files/one", json={"contentType": "bad"}).status_code
        == 400
    )
    assert client.patch(f"/buckets/{bucket['id']}/files/one", json={"size": 3}).status_code == 400


def test_delete_file(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "gone.txt", b"bye")
    response = client.delete(f"/buckets/{bucket['id']}/files/gone.txt")
    assert response.status_code == 200
    assert response.json()["data"] == {"object": "file", "id": "gone.txt"}
    assert client.get(f"/buckets/{bucket['id']}/files/gone.txt").status_code == 404
    second = client.delete(f"/buckets/{bucket['id']}/files/gone.txt")
    assert second.status_code == 404 and second.json()["error"]["code"] == "file_not_found"


def test_file_ops_on_unknown_bucket_are_404(client: httpx.Client) -> None:
    base = "/buckets/svc_00000000000000000000000000/files/x"
    assert client.put(base, content=b"x", headers=TEXT).status_code == 404
    assert client.get(base).status_code == 404
    assert client.delete(base).status_code == 404
    assert client.patch(base, json={"key": "y"}).status_code == 404


def test_content_types_are_printable_ascii(client: httpx.Client, bucket: dict) -> None:
    put(client, bucket, "typed", b"x")
    response = client.patch(
        f"/buckets/{bucket['id']}/files/typed",
        json={"contentType": "text/plain; name=\u00fc\U0003bf38"},
    )
    assert response.status_code == 400
    assert client.head(f"/buckets/{bucket['id']}/files/typed").status_code == 200
