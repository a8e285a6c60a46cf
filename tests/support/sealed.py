"""Helpers of the encryption-at-rest tests: a plaintext marker, and where it shows up in a
data dir (files and the index's inline contents) or in an S3 backend's cluster."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any


def marker() -> bytes:
    return b"PLAINTEXT-MARKER-" + os.urandom(8).hex().encode()


def content(mark: bytes, size: int) -> bytes:
    """`size` bytes with the marker repeated through them, so any stored piece shows it."""
    block = mark + b"." * (4096 - len(mark))
    return (block * (size // len(block) + 1))[:size]


def found_on_disk(data_dir: Path, mark: bytes) -> list[str]:
    found = []
    for path in data_dir.rglob("*"):
        if path.is_file() and mark in path.read_bytes():
            found.append(str(path.relative_to(data_dir)))
    index = data_dir / "index.db"
    if index.exists():
        with sqlite3.connect(index) as db:
            query = "SELECT inline_data FROM blobs WHERE inline_data IS NOT NULL"
            for (data,) in db.execute(query):
                if mark in bytes(data):
                    found.append("index.db inline_data")
    return found


def found_in_cluster(seaweed: Any, bucket: str, mark: bytes) -> list[str]:
    client = seaweed.client()
    found = []
    for listed in client.list_buckets()["Buckets"]:
        if bucket.replace("-", "") not in listed["Name"].replace("-", ""):
            continue
        for obj in client.list_objects_v2(Bucket=listed["Name"]).get("Contents", []):
            body = client.get_object(Bucket=listed["Name"], Key=obj["Key"])["Body"].read()
            if mark in body:
                found.append(f"{listed['Name']}/{obj['Key']}")
    return found


def found_in_part_store(seaweed: Any, mark: bytes) -> list[str]:
    """The marker in the cluster bucket where an S3 backend keeps waiting multipart parts
    (`<brand>-parts`, storage/backends/s3/parts.py), which no user bucket's name gives."""
    return found_in_cluster(seaweed, "parts", mark)


def blob_of(data_dir: Path, bucket: str, key: str) -> Path:
    """The local blob file holding the current version of `key` in the bucket named
    `bucket` (a server on the SQLite index and the local backend)."""
    from storage.backends.local.blobs import blob_relpath

    with sqlite3.connect(data_dir / "index.db") as db:
        (blob_id,) = db.execute(
            "SELECT f.blob_id FROM files f JOIN buckets b ON b.id = f.bucket_id "
            "WHERE b.name = ? AND f.key = ?",
            (bucket, key),
        ).fetchone()
    return data_dir / "blobs" / blob_relpath(blob_id)
