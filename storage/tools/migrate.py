"""`bucketd migrate`: a stopped single-node data dir (SQLite index, blobs on disk) into a
PostgreSQL index and an S3 cluster, for several gateways.

Ids, keys (their hashes and sealed S3 secrets), plans, limits, timestamps and counters are
copied as they are. Each bucket gets its S3 bucket; each file is uploaded to its key there
(content-addressed blobs shared by several files become one object per file, as the S3
backend keeps them), each named version of a versioned bucket to its own object
(`storage/backends/s3/names.py`), delete markers to none. The index rows go into PostgreSQL in one
transaction, last, so an interrupted migration leaves the target index empty and can simply
be run again (objects already uploaded are overwritten). Multipart uploads in progress are
not carried over.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from storage import encryption
from storage.backends.local.blobs import blob_relpath
from storage.backends.null import refuse_null_data_dir
from storage.backends.s3.snapshots import cluster_bucket
from storage.backends.s3.store import S3Backend, bucket_location
from storage.config import EngineConfig
from storage.errors import InvalidInput, NotSupported
from storage.faults import Faults
from storage.index import NoFiles, accounts, maintenance
from storage.index.postgres import PostgresDriver
from storage.index.rows import BUCKET_FIELDS, bucket_from_row
from storage.index.sqlite import Table, dump_tables
from storage.models import Bucket
from storage.rules.ids import NULL_VERSION

TABLES = (
    "organizations",
    "api_keys",
    "buckets",
    "blobs",
    "files",
    "versions",
    "webhooks",
    "snapshots",
    "snapshot_versions",
)
"""What moves. The outbox's events and their deliveries stay behind: the webhooks start
again from the events written after the move. A bucket snapshot's contents are uploaded as
the S3 backend keeps them (its own objects, `backends/s3/snapshots.py`, in the folder of
the snapshot, or of the server snapshot it is part of), and each one's settings name the
cluster bucket of its bucket (where a server restore makes a bucket deleted since again)."""
CHUNK = 1024 * 1024


@dataclass
class MigrationReport:
    organizations: int = 0
    keys: int = 0
    buckets: int = 0
    files: int = 0
    bytes: int = 0
    problems: list[str] | None = None


async def migrate(
    source: EngineConfig, target: EngineConfig, progress: Callable[[str], None]
) -> MigrationReport:
    if not target.index.postgres or target.storage.backend != "s3":
        raise InvalidInput("migrate needs a PostgreSQL index URL and an S3 cluster")
    if source.storage.backend == "null":
        raise NotSupported("the null storage backend keeps no contents: nothing to migrate")
    refuse_null_data_dir(source.data_dir)
    if source.index.postgres or source.storage.backend != "local":
        raise InvalidInput("migrate reads a data dir with a SQLite index and local blobs")
    tables = dump_tables(source.index.sqlite_path(source.data_dir), TABLES)
    columns, hooks = tables["webhooks"]
    at = columns.index("last_seq")
    tables["webhooks"] = (columns, [(*row[:at], 0, *row[at + 1 :]) for row in hooks])
    report = MigrationReport(
        organizations=len(tables["organizations"][1]),
        keys=len(tables["api_keys"][1]),
        buckets=len(tables["buckets"][1]),
    )
    faults = Faults("")
    with ThreadPoolExecutor(4) as executor:
        backend = await S3Backend.open(target.storage.s3, executor, faults)
        index = await PostgresDriver.open(target.index.url, NoFiles(), faults, 2)
        try:
            if await index.read(accounts.count_organizations):
                raise InvalidInput("the target index is not empty; migrate into a new one")
            tables["buckets"], buckets = await _provision(
                tables["buckets"], backend, target, progress
            )
            blobs: list[tuple[object, ...]] = []
            for table in ("files", "versions"):
                tables[table] = await _upload(
                    source, tables, table, buckets, backend, progress, report, blobs
                )
            tables["snapshot_versions"] = await _upload_snapshots(source, tables, backend, blobs)
            tables["snapshots"] = _placed(tables["snapshots"], buckets, target)
            tables["blobs"] = (["id", "size", "refcount", "inline_data"], blobs)
            await index.load(tables)
            report.problems = await index.read(maintenance.check_consistency)
        finally:
            await index.close()
            await backend.close()
    return report


async def _provision(
    buckets: Table, backend: S3Backend, target: EngineConfig, progress: Callable[[str], None]
) -> tuple[Table, dict[str, Bucket]]:
    """Make each bucket's S3 bucket; the rows with their new location, and the buckets."""
    columns, rows = buckets
    where = columns.index("location")
    moved, provisioned = [], {}
    for row in rows:
        record = dict(zip(columns, row, strict=True))
        bucket = bucket_from_row(tuple(record[c] for c in BUCKET_FIELDS), target.uploads)
        bucket = replace(bucket, location=backend.location_for(bucket))
        await backend.provision_bucket(bucket)
        progress(f"bucket {bucket.name} ({bucket.id}) -> s3://{bucket.location}")
        moved.append((*row[:where], bucket.location, *row[where + 1 :]))
        provisioned[bucket.id] = bucket
    return (columns, moved), provisioned


async def _upload(
    source: EngineConfig,
    tables: dict[str, Table],
    table: str,
    buckets: dict[str, Bucket],
    backend: S3Backend,
    progress: Callable[[str], None],
    report: MigrationReport,
    blobs: list[tuple[object, ...]],
) -> Table:
    """Upload every version in `table` (files: current, versions: the others); the rows
    pointing at their objects, and their blob rows added to `blobs`."""
    inline = _inline(tables)
    columns, rows = tables[table]
    blob_at, etag_at = columns.index("blob_id"), columns.index("backend_etag")
    object_at = columns.index("object_key")
    moved_rows = []
    for row in rows:
        record = dict(zip(columns, row, strict=True))
        if record["delete_marker"]:
            moved_rows.append(row)
            continue
        bucket = buckets[record["bucket_id"]]
        version = record["version_id"]
        named = version not in (None, NULL_VERSION)
        name = backend.object_name(record["key"], version if named else None)
        chunks = _content(source.data_dir, record["blob_id"], inline.get(record["blob_id"]))
        staged = await backend.write(bucket, name, record["content_type"], chunks)
        stored = await backend.publish(bucket, name, record["content_type"], staged)
        if stored.sha256 != record["sha256"]:
            raise InvalidInput(f"{record['key']!r} in {bucket.id} does not match its SHA-256")
        moved = list(row)
        moved[blob_at], moved[etag_at] = stored.blob_id, stored.backend_etag
        moved[object_at] = None if name == record["key"] else name
        moved_rows.append(tuple(moved))
        blobs.append((stored.blob_id, _stored_size(record), 1, None))
        report.files += 1
        report.bytes += record["size"]
        if report.files % 100 == 0:
            progress(f"{report.files} versions ({report.bytes} bytes) uploaded")
    return columns, moved_rows


async def _upload_snapshots(
    source: EngineConfig,
    tables: dict[str, Table],
    backend: S3Backend,
    blobs: list[tuple[object, ...]],
) -> Table:
    """Upload the content of every snapshot row to an object of its own in the snapshots'
    cluster bucket (`<snapshot id>/<id>`); the rows pointing at them."""
    columns, rows = tables["snapshot_versions"]
    if not rows:
        return columns, rows
    inline = _inline(tables)
    snapshot_columns, snapshots = tables["snapshots"]
    ids, parents = snapshot_columns.index("id"), snapshot_columns.index("parent_id")
    folder_of = {row[ids]: row[parents] or row[ids] for row in snapshots}
    at = {name: columns.index(name) for name in ("blob_id", "backend_etag", "object_key")}
    location = backend.snapshots_location
    await backend.create_bucket(location)
    folder = cluster_bucket("", location)
    moved_rows = []
    for row in rows:
        record = dict(zip(columns, row, strict=True))
        if record["delete_marker"]:
            moved_rows.append(row)
            continue
        name = f"{folder_of[record['snapshot_id']]}/{uuid.uuid4().hex}"
        chunks = _content(source.data_dir, record["blob_id"], inline.get(record["blob_id"]))
        staged = await backend.write(folder, name, record["content_type"], chunks)
        stored = await backend.publish(folder, name, record["content_type"], staged)
        if stored.sha256 != record["sha256"]:
            raise InvalidInput(f"a version of snapshot {record['snapshot_id']} is corrupt")
        moved = list(row)
        moved[at["blob_id"]], moved[at["backend_etag"]] = stored.blob_id, stored.backend_etag
        moved[at["object_key"]] = name
        moved_rows.append(tuple(moved))
        blobs.append((stored.blob_id, _stored_size(record), 1, None))
    return columns, moved_rows


def _placed(snapshots: Table, buckets: dict[str, Bucket], target: EngineConfig) -> Table:
    """Each bucket snapshot's settings with the cluster bucket of its bucket: the one made
    for it, or (a bucket deleted since) the one a server restore would make."""
    columns, rows = snapshots
    at, bucket_at = columns.index("config"), columns.index("bucket_id")
    placed = []
    for row in rows:
        if row[at] is None:
            placed.append(row)
            continue
        config = json.loads(row[at])
        bucket = buckets.get(row[bucket_at])
        config["location"] = (
            bucket.location
            if bucket is not None
            else bucket_location(target.storage.s3.brand, config["name"], row[bucket_at])
        )
        placed.append((*row[:at], json.dumps(config), *row[at + 1 :]))
    return columns, placed


def _stored_size(record: dict[str, Any]) -> int:
    """What the version's content takes in the backend (an encrypted one's packages)."""
    size = int(record["size"])
    return size if record.get("encryption") is None else encryption.sealed_size(size)


def _inline(tables: dict[str, Table]) -> dict[str, bytes]:
    """The contents kept in the index itself, by blob id."""
    blob_columns, blob_rows = tables["blobs"]
    data_at = blob_columns.index("inline_data")
    return {row[0]: row[data_at] for row in blob_rows if row[data_at] is not None}


async def _content(data_dir: Path, blob_id: str, inline: bytes | None) -> AsyncIterator[bytes]:
    if inline is not None:
        yield inline
        return
    with open(data_dir / "blobs" / blob_relpath(blob_id), "rb") as handle:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
