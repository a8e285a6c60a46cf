"""Where the parts of multipart uploads wait until the upload completes: `PartStore`, and
its data-dir implementation `DiskParts` (the S3 backend's is `s3/parts.ClusterParts`).

On disk, each part is streamed to `multipart/<upload id>/<n>.<random>.tmp` (a name of its
own: two uploads of one part number at once must not write into one file), fsynced and
renamed to `multipart/<upload id>/<n>-<md5>`, the folder fsynced (with the upload's folder
named durably in `multipart/`: an acknowledged part survives a power cut), and only then
recorded in the index. A part uploaded again gets a file of its own: the index names the one
that counts (by its MD5), so a part the index refuses (quota, size) or a crash before the
commit never replaces the part the index knows; the others go once the new one is recorded.
Completing an upload streams the recorded parts, in order, into the backend as one new file;
aborting removes the folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from storage.datadir import fsync_dir, make_dirs
from storage.errors import BackendUnavailable
from storage.faults import Faults

T = TypeVar("T")
CHUNK = 1024 * 1024


class PartStore(Protocol):
    """Parts by (upload id, part number, MD5): a part uploaded again is stored beside the
    earlier one until the index says which counts (`settle`) or refuses it (`discard`)."""

    async def write(
        self, upload_id: str, number: int, chunks: AsyncIterator[bytes]
    ) -> tuple[int, str]:
        """Store a part; returns (size, hex MD5). Nothing remains of a part that fails."""

    async def settle(self, upload_id: str, number: int, md5: str) -> None: ...
    async def discard(self, upload_id: str, number: int, md5: str) -> None: ...

    def read(self, upload_id: str, parts: list[tuple[int, str]]) -> AsyncIterator[bytes]:
        """The bytes of the parts (number, md5), one after the other; a part that is gone
        (the upload aborted elsewhere) raises FileNotFoundError."""

    async def remove(self, upload_id: str) -> None: ...

    async def uploads(self) -> set[str]:
        """The uploads that have parts stored."""

    async def remove_partial(self) -> None:
        """Remove parts half written when a process stopped; only while none is written."""


class DiskParts:
    def __init__(self, data_dir: Path, fsync: bool, executor: Executor, faults: Faults) -> None:
        self.root = data_dir / "multipart"
        make_dirs(self.root, fsync)
        self._fsync = fsync
        self._executor = executor
        self._faults = faults

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _path(self, upload_id: str, number: int, md5: str) -> Path:
        return self.root / upload_id / f"{number}-{md5}"

    async def write(
        self, upload_id: str, number: int, chunks: AsyncIterator[bytes]
    ) -> tuple[int, str]:
        """Store a part; returns (size, hex MD5). Nothing remains of a part that fails; one
        stored is kept beside any earlier version until `settle` or `discard`."""
        folder = self.root / upload_id
        await self._run(make_dirs, folder, self._fsync)
        temp = folder / f"{number}.{uuid.uuid4().hex}.tmp"
        digest = hashlib.md5()
        size = 0
        handle: BinaryIO = await self._run(open, temp, "wb")
        try:
            buffer = bytearray()
            async for chunk in chunks:
                buffer += chunk
                size += len(chunk)
                if len(buffer) >= CHUNK:
                    await self._run(self._append, handle, bytes(buffer), digest)
                    buffer = bytearray()
            await self._run(self._append, handle, bytes(buffer), digest)
            final = self._path(upload_id, number, digest.hexdigest())
            await self._run(self._finish, handle, temp, final)
        except BaseException:
            handle.close()
            temp.unlink(missing_ok=True)
            raise
        return size, digest.hexdigest()

    def _append(self, handle: BinaryIO, data: bytes, digest: hashlib._Hash) -> None:
        digest.update(data)
        try:
            self._faults.hit("blob.write")
            handle.write(data)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write the part: {exc.strerror}") from exc

    def _finish(self, handle: BinaryIO, temp: Path, final: Path) -> None:
        try:
            handle.flush()
            if self._fsync:
                os.fsync(handle.fileno())
        except OSError as exc:
            raise BackendUnavailable(f"cannot write the part: {exc.strerror}") from exc
        finally:
            handle.close()
        os.replace(temp, final)
        if self._fsync:
            fsync_dir(final.parent)

    async def settle(self, upload_id: str, number: int, md5: str) -> None:
        """The index recorded this version of the part: remove the others."""
        keep = self._path(upload_id, number, md5)

        def sweep() -> None:
            for other in keep.parent.glob(f"{number}-*"):
                if other != keep:
                    other.unlink(missing_ok=True)

        await self._run(sweep)

    async def discard(self, upload_id: str, number: int, md5: str) -> None:
        """The index refused this version of the part (unless it holds the same content)."""
        await self._run(self._path(upload_id, number, md5).unlink, True)

    async def read(self, upload_id: str, parts: list[tuple[int, str]]) -> AsyncIterator[bytes]:
        """The bytes of the parts (number, md5), one after the other."""
        for number, md5 in parts:
            handle: BinaryIO = await self._run(open, self._path(upload_id, number, md5), "rb")
            try:
                while chunk := await self._run(handle.read, CHUNK):
                    yield chunk
            finally:
                handle.close()

    async def remove(self, upload_id: str) -> None:
        await self._run(shutil.rmtree, self.root / upload_id, True)

    async def uploads(self) -> set[str]:
        return await self._run(lambda: {entry.name for entry in self.root.iterdir()})

    async def remove_partial(self) -> None:
        def sweep() -> None:
            for leftover in self.root.glob("*/*.tmp"):
                leftover.unlink(missing_ok=True)

        await self._run(sweep)
