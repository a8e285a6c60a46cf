"""The null content backend (`storage.backend = "null"`), for benchmarks only: what versitygw's
`noop` backend is to it. It measures bucketd's request handling without the content's disk
work, against the peers and the empty app (`python -m benchmarks peers`).

- A write reads the whole body and hashes it as every write does (SHA-256, and MD5 when the
  ETag needs it), so ETags, Content-MD5, checksums and the size limits behave as on disk;
  then the bytes are dropped. Nothing of the content is kept anywhere, not even in the index
  (contents never live inline here, whatever `inline_max_bytes` says).
- The index is the real one: buckets, keys, sizes, ETags, versions, listings, snapshots.
- A read synthesizes the range asked for as zero bytes, so a GET answers the recorded size
  (and any range of it) with the same headers as on disk, but not the bytes that were sent.
- Multipart parts wait in the data dir as usual (they are the upload's state); the completed
  object's content is discarded like any other write's.

So that it cannot hold real data by accident, it runs only on a data dir of its own: it marks
a new data dir (`NULL_MARKER`) and refuses one whose index was made by another backend, and
the other backends refuse a data dir it marked (its files have no contents to serve). The
index must be in the data dir (SQLite) or in memory, where the mark protects it.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from pathlib import Path

from storage.backends.commits import BlobCommits
from storage.backends.protocol import GcReport
from storage.config import EngineConfig
from storage.errors import NotSupported
from storage.index.sql import NoFiles
from storage.models import Bucket, FileRecord, StoredBlob
from storage.rules.limits import once

NULL_MARKER = "NULL-BACKEND"
"""The file that marks a data dir as the null backend's: its files have no contents."""
CHUNK = 1024 * 1024
ZEROS = bytes(CHUNK)
HASH_ON_LOOP = 64 * 1024
"""Bodies up to this size are hashed on the event loop (microseconds); larger buffers in a
worker thread, as the local backend does, so a large upload does not stall other requests."""
NO_CONTENTS = "the null backend keeps no contents"
DATA_DIR_INDEX = "index.db"
"""The index's file in a data dir when the settings name no other."""
SERVED_MARK = "admin.key"
"""The admin key's file (`gateway/runtime/bootstrap.py`), written into the data dir on a
server's first start, after the backend has opened it."""


def claim_data_dir(config: EngineConfig) -> None:
    """Mark the data dir as the null backend's, unless its index was made by another
    backend (NotSupported: real data is never served without its contents)."""
    index = config.index
    if index.postgres:
        raise NotSupported(f"{NO_CONTENTS}: it runs only with the index in the data dir")
    # The data is looked at before the mark: a worker starting beside another sees the
    # other's mark whenever it sees the index the other made after marking.
    held = _real_data(config)
    marker = config.data_dir / NULL_MARKER
    if marker.exists():
        return
    if held is not None:
        raise NotSupported(
            f"{config.data_dir} holds {held} made with another storage backend: the null "
            "backend (benchmarks only, it discards contents) runs only on a new data dir"
        )
    config.data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(
        "This data dir was served by bucketd's null storage backend (benchmarks only):\n"
        "its files were never stored; no other backend will open it.\n"
    )


def _real_data(config: EngineConfig) -> str | None:
    """What in the data dir another backend made, if anything: the index the settings name,
    the data dir's own index whatever the settings name (an in-memory index or one kept
    elsewhere must not let the mark onto a real data dir, which no real backend would then
    open), blob files, or the admin key a served data dir holds."""
    index, data_dir = config.index, config.data_dir
    if not index.in_memory and index.sqlite_path(data_dir).exists():
        return "an index"
    if (data_dir / DATA_DIR_INDEX).exists():
        return f"an index ({DATA_DIR_INDEX})"
    blobs = data_dir / "blobs"
    if blobs.is_dir() and any(blobs.iterdir()):
        return "blob files"
    if (data_dir / SERVED_MARK).exists():
        # A server made it (its index elsewhere: PostgreSQL, or the file index.url names; its
        # contents all inline, or in an S3 cluster), before any null start would have.
        return f"an admin key ({SERVED_MARK})"
    return None


def refuse_null_data_dir(data_dir: Path) -> None:
    """For the other backends: a data dir the null backend marked has no contents."""
    if (data_dir / NULL_MARKER).exists():
        raise NotSupported(
            f"{data_dir} was served by the null storage backend ({NULL_MARKER}): its files "
            "have no contents; use another data dir"
        )


class NullBackend:
    """A `BlobStore` that keeps nothing: writes hashed and dropped, reads zero bytes."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    def location_for(self, bucket: Bucket) -> None:
        """A bucket is an index row only."""

    def check_key(self, key: str) -> None:
        """No key is stored anywhere but in the index."""

    async def check(self) -> None:
        """Always answers."""

    async def provision_bucket(self, bucket: Bucket) -> None:
        """Nothing to make."""

    async def delete_bucket(self, bucket: Bucket) -> None:
        """Nothing to remove."""

    async def write(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        chunks: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        digests = [hashlib.sha256(), *([hashlib.md5()] if md5 else [])]
        loop = asyncio.get_running_loop()
        size = 0
        buffer = bytearray()
        async for chunk in chunks:
            buffer += chunk
            size += len(chunk)
            if len(buffer) >= CHUNK:
                await loop.run_in_executor(self._executor, _update, digests, bytes(buffer))
                buffer = bytearray()
        if len(buffer) > HASH_ON_LOOP:
            await loop.run_in_executor(self._executor, _update, digests, bytes(buffer))
        else:
            _update(digests, buffer)
        sha = digests[0].hexdigest()
        return StoredBlob(
            blob_id=sha, size=size, sha256=sha, md5=digests[1].hexdigest() if md5 else None
        )

    async def read(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        """Zero bytes, as many as the range holds."""
        if end - start <= CHUNK:
            return once(ZEROS[: end - start])
        return _zeros(end - start)

    async def collect_garbage(self, referenced: set[str]) -> GcReport:
        return GcReport(temp_files=0, blobs=0)

    def release_hold(self, blob: StoredBlob) -> bool:
        return False

    def claim(self, blob_ids: list[str]) -> NoFiles:
        return NoFiles()

    def held_elsewhere(self) -> list[str]:
        return []

    def blob_ids_on_disk(self) -> set[str]:
        return set()

    def temp_files(self) -> list[Path]:
        return []

    async def close(self) -> None:
        """Nothing is open."""


class NullCommits(BlobCommits):
    """`BlobCommits` with no contents behind the index: nothing inline, nothing to compare
    the references with (`bucketd check` still checks the index's counters and references)."""

    async def problems(self) -> list[str]:
        return []


def _update(digests: list[hashlib._Hash], data: bytes | bytearray) -> None:
    for digest in digests:
        digest.update(data)


async def _zeros(count: int) -> AsyncIterator[bytes]:
    while count > 0:
        step = min(count, CHUNK)
        yield ZEROS if step == CHUNK else ZEROS[:step]
        count -= step
