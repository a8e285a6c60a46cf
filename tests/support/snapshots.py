"""What the snapshot tests share: reading back through the engine, the consistency check,
and the session's SeaweedFS seen as a cluster of this test's own (a brand of its own)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage.attributes import Attributes
from storage.backends.s3.names import stored_under
from storage.config import EngineConfig, IndexSettings, S3Settings, StorageSettings
from storage.engine import Engine
from storage.models import Actor
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

TEXT = Attributes("text/plain")


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def read(engine: Engine, actor: Actor, bucket_id: str, key: str) -> bytes:
    record = await engine.files.get(actor, bucket_id, key)
    return b"".join([c async for c in await engine.files.open(record, 0, record.size)])


async def versions(
    engine: Engine, actor: Actor, bucket_id: str
) -> list[tuple[str, str | None, str, bool]]:
    page = await engine.files.list_versions(actor, bucket_id, limit=1000)
    return [(r.key, r.version_id, r.sha256, r.delete_marker) for r, _ in page.versions]


async def consistent(engine: Engine) -> None:
    assert await engine.maintenance.check_consistency() == []


def cluster_settings(seaweed: SeaweedServer) -> S3Settings:
    """The session's SeaweedFS, under a brand of this test's own."""
    return S3Settings(
        endpoint_url=seaweed.endpoint,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        brand="snap" + uuid.uuid4().hex[:6],
    )


def cluster_config(
    tmp_path: Path, s3: S3Settings, request: pytest.FixtureRequest, kind: str = "sqlite"
) -> EngineConfig:
    """An engine on the cluster `s3`, its index SQLite or (`kind` "postgres") a new database
    of the session's PostgreSQL."""
    index = IndexSettings()
    if kind == "postgres":
        index = IndexSettings(url=request.getfixturevalue("postgres").new_database())
    return EngineConfig(
        data_dir=tmp_path, index=index, storage=StorageSettings(backend="s3", s3=s3)
    )


def cluster_objects(seaweed: SeaweedServer, location: str) -> set[str]:
    client = seaweed.client()
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=location)
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def cluster_buckets(seaweed: SeaweedServer, brand: str) -> set[str]:
    """The cluster buckets of one brand (one test's)."""
    found = seaweed.client().list_buckets()["Buckets"]
    return {b["Name"] for b in found if b["Name"].startswith(brand + "-")}


async def stored_names(engine: Engine, actor: Actor, bucket_id: str) -> set[str]:
    page = await engine.files.list_versions(actor, bucket_id, limit=1000)
    return {stored_under(r) for r, _ in page.versions if not r.delete_marker}
