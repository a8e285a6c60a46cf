"""Plaintext markers, and the search for them where an encrypted object's bytes may land:
the data dir (files and the index's inline contents) and an S3 backend's cluster."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any


def marker() -> bytes:
    return b"PLAINTEXT-MARKER-" + os.urandom(8).hex().encode()


def content(marker: bytes, size: int) -> bytes:
    """`size` bytes with the marker repeated through them, so any stored piece shows it."""
    block = marker + b"." * (4096 - len(marker))
    return (block * (size // len(block) + 1))[:size]


def found_on_disk(data_dir: Path, marker: bytes) -> list[str]:
    found = []
    for path in data_dir.rglob("*"):
        if path.is_file() and marker in path.read_bytes():
            found.append(str(path.relative_to(data_dir)))
    index = data_dir / "index.db"
    if index.exists():
        with sqlite3.connect(index) as db:
            query = "SELECT inline_data FROM blobs WHERE inline_data IS NOT NULL"
            for (data,) in db.execute(query):
                if marker in bytes(data):
                    found.append("index.db inline_data")
    return found


def found_in_cluster(seaweed: Any, bucket: str, marker: bytes) -> list[str]:
    client = seaweed.client()
    found = []
    for listed in client.list_buckets()["Buckets"]:
        if bucket.replace("-", "") not in listed["Name"].replace("-", ""):
            continue
        for obj in client.list_objects_v2(Bucket=listed["Name"]).get("Contents", []):
            body = client.get_object(Bucket=listed["Name"], Key=obj["Key"])["Body"].read()
            if marker in body:
                found.append(f"{listed['Name']}/{obj['Key']}")
    return found
