"""Names and servers' choices tests share: unique names, a bucket's id by name, the two
backends and the configuration that selects one."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.support.seaweed import SeaweedServer

BACKENDS = ["local", "s3"]


def with_backend(request: pytest.FixtureRequest, backend: str, config: str) -> str:
    """`config` plus the [storage] tables that select `backend`."""
    if backend == "local":
        return config
    seaweed: SeaweedServer = request.getfixturevalue("seaweed")
    return config + seaweed.bucketd_config(brand="t" + uuid.uuid4().hex[:6])


def bucket_id_named(http: httpx.Client, name: str) -> str:
    """The id of the bucket called `name`, paging through the listing: a shared server holds
    more buckets than one page."""
    cursor: str | None = None
    while True:
        page = http.get("/buckets", params={"limit": 100, **({"cursor": cursor} if cursor else {})})
        body = page.json()
        for found in body["data"]:
            if found["name"] == name:
                return str(found["id"])
        cursor = body["meta"].get("nextCursor")
        if not cursor:
            raise LookupError(f"no bucket named {name!r}")


def unique_name(stem: str = "b") -> str:
    return f"{stem}-{uuid.uuid4().hex[:12]}"
