"""Pagination over HTTP: every entry exactly once, in order, for any limit (Hypothesis)."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from tests.support.live import LiveServer, new_bucket
from tests.support.model import model_listing
from tests.support.names import unique_name
from tests.support.profiles import budget

KEYS = st.sets(st.text(alphabet="ab/.é🎉", min_size=1, max_size=5), max_size=25)


@pytest.fixture(scope="module")
def server(local_server: LiveServer) -> LiveServer:
    """Paging is the index's: the backend does not matter, one is enough."""
    return local_server


def listing(
    client: httpx.Client, bucket_id: str, prefix: str, delimiter: str, limit: int
) -> list[str]:
    entries: list[str] = []
    cursor = None
    while True:
        params = {"limit": limit, "prefix": prefix, "delimiter": delimiter}
        if cursor:
            params["cursor"] = cursor
        response = client.get(f"/buckets/{bucket_id}/files", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        page = [f["key"] for f in body["data"]] + body["meta"]["prefixes"]
        assert len(page) <= limit
        entries += sorted(page)
        cursor = body["meta"]["nextCursor"]
        assert body["hasMore"] == (cursor is not None)
        if cursor is None:
            return entries


@settings(max_examples=budget(25))
@given(
    keys=KEYS,
    prefix=st.sampled_from(["", "a", "a/", "é"]),
    delimiter=st.sampled_from(["", "/", "."]),
    limit=st.integers(1, 7),
)
def test_listing_matches_model(
    server: LiveServer, keys: set[str], prefix: str, delimiter: str, limit: int
) -> None:
    with server.client() as client:
        bucket = new_bucket(client, unique_name("page"))
        for key in keys:
            response = client.put(
                f"/buckets/{bucket['id']}/files/{quote(key, safe='').replace('.', '%2E')}",
                content=b"",
                headers={"Content-Type": "text/plain"},
            )
            assert response.status_code == 201
        assert listing(client, bucket["id"], prefix, delimiter, limit) == model_listing(
            keys, prefix, delimiter
        )
        client.delete(f"/buckets/{bucket['id']}", params={"force": "true"})


@settings(max_examples=budget(10))
@given(count=st.integers(0, 12), limit=st.integers(1, 5))
def test_bucket_listing_every_bucket_once(server: LiveServer, count: int, limit: int) -> None:
    org_id = server.cli("orgs", "create", unique_name("paging"), "--plan", "pro").splitlines()[-1]
    secret = (
        server.cli("keys", "create", "--org", org_id, "--scopes", "buckets:read,buckets:write")
        .strip()
        .splitlines()[-1]
    )
    with server.client(secret) as client:
        made = [
            client.post("/buckets", json={"name": f"p-{i}", "region": "us-east-1"}).json()["data"][
                "id"
            ]
            for i in range(count)
        ]
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
            body = client.get("/buckets", params=params).json()
            seen += [b["id"] for b in body["data"]]
            cursor = body["meta"]["nextCursor"]
            if cursor is None:
                break
        assert seen == made
