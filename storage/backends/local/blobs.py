"""Content-addressed blobs on the local disk.

A blob is the file `blobs/<2 hex>/<2 hex>/<sha256>`. Writes go to `tmp/` first, are fsynced,
renamed into place (an existing blob with the same hash is kept: dedupe) and the directory is
fsynced; only then does the index point a key at the blob. Keys never become paths.

A blob that a write has just produced is "held" until the index has committed or refused it,
so that a concurrent delete dropping the last reference to the same content cannot remove
the file between the write and its commit. Within a process, holds are counted and reaping
checks the count under one lock; across processes (the workers of `bucketd serve --workers`)
the holding process keeps a shared `flock` on the blob's file and a reaper must get an
exclusive one before it unlinks. A blob enters its place by `link`, which never replaces a
file another process placed and holds; a reap that met another process's hold is tried
again later (`held_elsewhere`).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import TypeVar

from storage.backends.local.blob_locks import BlobClaim, close_quietly, open_locked, unlink_quietly
from storage.backends.local.reaping import backup_running, empty_reaped
from storage.backends.protocol import GcReport
from storage.datadir import fsync_dir, make_dirs
from storage.errors import BackendUnavailable, FileNotFound
from storage.faults import Faults
from storage.models import Bucket, FileRecord, StoredBlob
from storage.rules.limits import once

T = TypeVar("T")
CHUNK = 1024 * 1024
READ_ON_LOOP = 16 * 1024
"""Ranges up to this size are read on the event loop, as the index's point reads are: from
the page cache that takes microseconds, a tenth of a hop to a worker thread and back."""
TEMP_SUFFIX = ".part"
CLAIMED_PAUSE_SECONDS = 0.001
"""How long a write waits before trying again to hold a blob file a reap has claimed."""


class LocalBackend:
    """A `BlobStore`: content-addressed blobs shared by every bucket."""

    def __init__(self, data_dir: Path, fsync: bool, executor: Executor, faults: Faults) -> None:
        self._faults = faults
        self.data_dir = data_dir
        self.blobs_dir = data_dir / "blobs"
        self.tmp_dir = data_dir / "tmp"
        self._fsync = fsync
        self._executor = executor
        self._holds: Counter[str] = Counter()
        self._hold_fds: dict[str, int] = {}
        """Per held blob, the descriptor that keeps the shared flock on its file."""
        self._deferred: set[str] = set()
        self._elsewhere: set[str] = set()
        """Blobs whose reap met another process's hold."""
        self._lock = threading.Lock()
        make_dirs(self.blobs_dir, fsync)
        make_dirs(self.tmp_dir, fsync)

    def blob_path(self, blob_id: str) -> Path:
        return self.blobs_dir / blob_relpath(blob_id)

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def location_for(self, bucket: Bucket) -> None:
        """Blobs are shared by every bucket; a bucket is an index row only."""

    def check_key(self, key: str) -> None:
        """Keys never become paths here: every valid key is stored as written."""

    async def check(self) -> None:
        writable = await self._run(os.access, self.tmp_dir, os.W_OK)
        if not writable:
            raise BackendUnavailable(f"{self.tmp_dir} is not writable")

    async def provision_bucket(self, bucket: Bucket) -> None:
        """Local buckets are index rows only; blobs are shared across buckets."""

    async def delete_bucket(self, bucket: Bucket) -> None:
        """Nothing to remove: unreferenced blobs were reaped with the bucket's rows."""

    async def write(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        chunks: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        """Spool to tmp/ in 1 MiB appends done by worker threads, one in flight while the
        next buffer arrives; then fsync and place the blob. A body smaller than one buffer
        costs a single thread hop: create, write, hash, fsync, rename, fsync the folder."""
        spool = _Spool(self.tmp_dir / f"{uuid.uuid4().hex}{TEMP_SUFFIX}")
        digests = [hashlib.sha256(), *([hashlib.md5()] if md5 else [])]
        size = 0
        pending: asyncio.Future[None] | None = None
        finish: asyncio.Future[str] | None = None
        try:
            buffer = bytearray()
            async for chunk in chunks:
                buffer += chunk
                size += len(chunk)
                if len(buffer) >= CHUNK:
                    if pending is not None:
                        await pending
                    pending = asyncio.ensure_future(self._run(self._append, spool, buffer, digests))
                    buffer = bytearray()
            if pending is not None:
                await pending
            pending = None
            finish = asyncio.ensure_future(self._run(self._finish, spool, buffer, digests))
            try:
                blob_id = await asyncio.shield(finish)
            except asyncio.CancelledError:
                # The thread runs on; once it is done the blob is nobody's (start-up GC).
                await asyncio.wait([finish])
                if not finish.exception():
                    self.release_hold(
                        StoredBlob(blob_id=finish.result(), size=size, sha256=finish.result())
                    )
                raise
        except BaseException:
            for running in (pending, finish):
                if running is not None and not running.done():
                    await asyncio.wait([running])
            spool.close()
            unlink_quietly(spool.path)
            raise
        md5_hex = digests[1].hexdigest() if md5 else None
        return StoredBlob(blob_id=blob_id, size=size, sha256=blob_id, md5=md5_hex)

    def _append(self, spool: _Spool, data: bytearray, digests: list[hashlib._Hash]) -> None:
        for digest in digests:
            digest.update(data)
        try:
            self._faults.hit("blob.write")
            spool.write(data)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write the blob: {exc.strerror}") from exc

    def _finish(self, spool: _Spool, tail: bytearray, digests: list[hashlib._Hash]) -> str:
        """Append the tail, fsync, put the blob in place under a hold; the blob id."""
        try:
            self._append(spool, tail, digests)
            if self._fsync:
                os.fsync(spool.fd)
            blob_id = digests[0].hexdigest()
            final = self.blob_path(blob_id)
            while (linked := self._hold(blob_id, spool, final)) is None:
                time.sleep(CLAIMED_PAUSE_SECONDS)  # a reap has the file for a moment
        except OSError as exc:
            raise BackendUnavailable(f"cannot write the blob: {exc.strerror}") from exc
        finally:
            spool.close()
            unlink_quietly(spool.path)
        if linked and self._fsync:
            fsync_dir(final.parent)
        return blob_id

    def _hold(self, blob_id: str, spool: _Spool, final: Path) -> bool | None:
        """Count a hold on the blob and, unless this process holds it in place already, hold
        its file: whether the spool was linked there; None, holding nothing, while a reap
        has claimed the file (waiting here would wait under the lock the reaper may need)."""
        with self._lock:
            self._holds[blob_id] += 1
            if blob_id in self._hold_fds:
                return False
            try:
                existing = self._place(spool, final)
            except OSError as exc:
                self._drop_hold(blob_id)
                raise BackendUnavailable(f"cannot store the blob: {exc.strerror}") from exc
            if existing is not None and existing < 0:
                self._drop_hold(blob_id)
                return None
            self._hold_fds[blob_id] = spool.fd if existing is None else existing
            if existing is None:
                spool.fd = -1
            return existing is None

    def _place(self, spool: _Spool, final: Path) -> int | None:
        """Hold the blob's file for this process: the locked descriptor of the file in
        place (dedupe), None when the spool, locked, was linked there, -1 while a reap has
        claimed the file."""
        while True:
            fd = open_locked(final)
            if fd is not None:
                return fd
            fcntl.flock(spool.fd, fcntl.LOCK_SH)  # before it is visible to any reaper
            make_dirs(final.parent, self._fsync)
            try:
                os.link(spool.path, final)
            except FileExistsError:  # another process placed the same content meanwhile
                continue
            return None

    def _drop_hold(self, blob_id: str) -> None:
        self._holds[blob_id] -= 1
        if self._holds[blob_id] <= 0:
            del self._holds[blob_id]
            fd = self._hold_fds.pop(blob_id, None)
            if fd is not None:
                close_quietly(fd)

    def release_hold(self, blob: StoredBlob) -> bool:
        """Drop the hold; True when a reap was put off because of it (reap again now)."""
        if blob.inline is not None:
            return False
        with self._lock:
            self._drop_hold(blob.blob_id)
            if blob.blob_id in self._deferred and self._holds[blob.blob_id] <= 0:
                self._deferred.discard(blob.blob_id)
                return True
            return False

    def claim(self, blob_ids: list[str]) -> BlobClaim:
        """Lock the files of blobs that lost their last reference (`sql.Claim`): a blob this
        process holds is reaped when the hold goes, one another process holds is tried again
        later (`held_elsewhere`)."""
        locked: dict[str, int] = {}
        with self._lock:
            for blob_id in blob_ids:
                if self._holds[blob_id] > 0:
                    self._deferred.add(blob_id)
                    continue
                fd = open_locked(self.blob_path(blob_id), exclusive=True)
                if fd is None:
                    continue
                if fd < 0:
                    self._elsewhere.add(blob_id)
                    continue
                locked[blob_id] = fd
        return BlobClaim(self.data_dir, {b: (self.blob_path(b), fd) for b, fd in locked.items()})

    def held_elsewhere(self) -> list[str]:
        """Blobs whose reap met another process's hold since the last call (to release
        again: the index says whether they are still unreferenced)."""
        with self._lock:
            found = sorted(self._elsewhere)
            self._elsewhere.clear()
            return found

    async def read(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        """A small range is read at once; a range of one chunk or less whole in a single
        thread hop; larger ones chunk by chunk, reading ahead."""
        path = str(self.blob_path(record.blob_id))
        try:
            if end - start <= READ_ON_LOOP:
                return once(_read_range(path, start, end))
            if end - start <= CHUNK:
                return once(await self._run(_read_range, path, start, end))
            fd = await self._run(os.open, path, os.O_RDONLY)
        except FileNotFoundError:
            raise FileNotFound("file not found") from None
        except OSError as exc:
            raise BackendUnavailable(f"cannot read the blob: {exc.strerror}") from exc
        return FileRange(fd, start, end - start, self._chunks(fd, start, end))

    async def _chunks(self, fd: int, start: int, end: int) -> AsyncIterator[bytes]:
        """Reads ahead one chunk in a worker thread while the previous one is sent."""
        try:
            position = start
            ahead = None
            if position < end:
                ahead = asyncio.ensure_future(
                    self._run(os.pread, fd, min(CHUNK, end - position), position)
                )
            while ahead is not None:
                data = await ahead
                if not data:
                    raise BackendUnavailable("the blob is shorter than the index says")
                position += len(data)
                ahead = None
                if position < end:
                    ahead = asyncio.ensure_future(
                        self._run(os.pread, fd, min(CHUNK, end - position), position)
                    )
                yield data
        finally:
            if ahead is not None and not ahead.done():
                await asyncio.wait([ahead])
            os.close(fd)

    async def collect_garbage(self, referenced: set[str]) -> GcReport:
        return await self._run(self._collect, referenced)

    def _collect(self, referenced: set[str]) -> GcReport:
        temp_files = 0
        for entry in self.tmp_dir.iterdir():
            unlink_quietly(entry)
            temp_files += 1
        blobs = 0 if backup_running(self.data_dir) else empty_reaped(self.data_dir)
        for root, _dirs, files in os.walk(self.blobs_dir):
            for name in files:
                if name not in referenced:
                    with self._lock:
                        if self._holds[name] > 0:
                            continue
                        unlink_quietly(Path(root) / name)
                    blobs += 1
        return GcReport(temp_files=temp_files, blobs=blobs)

    def temp_files(self) -> list[Path]:
        return list(self.tmp_dir.iterdir())

    def blob_ids_on_disk(self) -> set[str]:
        return {name for _root, _dirs, files in os.walk(self.blobs_dir) for name in files}

    async def close(self) -> None:
        """Nothing is held open between calls."""


class FileRange:
    """A range of an open blob file (a `bodies.OpenRange`): iterated chunk by chunk, or
    handed whole to the kernel by the server (sendfile). Closing closes the file."""

    def __init__(self, fd: int, offset: int, count: int, chunks: AsyncIterator[bytes]) -> None:
        self.fd = fd
        self.offset = offset
        self.count = count
        self._chunks = chunks
        self._started = False

    def __aiter__(self) -> FileRange:
        return self

    async def __anext__(self) -> bytes:
        self._started = True
        return await anext(self._chunks)

    async def aclose(self) -> None:
        if self._started:
            await self._chunks.aclose()  # type: ignore[attr-defined]
        elif self.fd >= 0:
            os.close(self.fd)
        self.fd = -1


def blob_relpath(blob_id: str) -> Path:
    """Where a blob lives under `blobs/`: two levels of fan-out by its first hex digits."""
    return Path(blob_id[:2], blob_id[2:4], blob_id)


class _Spool:
    """A temp file, created by the first write (on a worker thread, not the event loop)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def write(self, data: bytearray) -> None:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        if self.fd >= 0:
            close_quietly(self.fd)
            self.fd = -1


def _read_range(path: str, start: int, end: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    if len(data) < end - start:
        raise BackendUnavailable("the blob is shorter than the index says")
    return data
