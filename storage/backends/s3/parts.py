"""Parts of multipart uploads kept in the S3 cluster, so that any gateway takes any part.

Behind a load balancer the parts of one upload arrive at different gateways; none may keep
a part on its own disk. Parts are objects of the cluster bucket `<brand>-parts`, two per part:

- `<upload id>/<number>.<token>`: the bytes, streamed there as they arrive (through a
  multipart upload of the cluster's own past one cluster part, so nothing is held whole);
- `<upload id>/<number>-<MD5>`: a few bytes naming the token. The MD5 is known only once
  the bytes are in, and a cluster's multipart upload completes only under the name it
  began with, so the name that the index's record (number, MD5) finds is this pointer,
  written last; no byte is copied.

As on disk, a part uploaded again is stored beside the earlier one until the index settles
which counts. A gateway killed mid-part leaves the cluster's unfinished upload of it (the
janitor aborts stale ones) or bytes no pointer names (removed with the upload).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from typing import Any

from storage.backends.s3.errors import s3_errors
from storage.backends.s3.store import S3Backend
from storage.errors import FileNotFound

PIECE = 1024 * 1024
"""Bytes hashed per trip to a worker thread."""
OCTETS = "application/octet-stream"


def _pointer(upload_id: str, number: int, md5: str) -> str:
    return f"{upload_id}/{number}-{md5}"


class ClusterParts:
    def __init__(self, backend: S3Backend, executor: Executor) -> None:
        self._backend = backend
        self.location = backend.parts_location
        self._executor = executor
        self._made = False

    async def _bucket(self) -> str:
        """The parts bucket, made on first use (a server starts while the cluster is away)."""
        if not self._made:
            await self._backend.create_bucket(self.location)
            self._made = True
        return self.location

    async def write(
        self, upload_id: str, number: int, chunks: AsyncIterator[bytes]
    ) -> tuple[int, str]:
        digest = hashlib.md5()
        size = 0

        async def hashed() -> AsyncIterator[bytes]:
            nonlocal size
            pending: list[bytes] = []
            gathered = 0
            async for chunk in chunks:
                pending.append(chunk)
                gathered += len(chunk)
                if gathered >= PIECE:
                    size += gathered
                    piece = b"".join(pending)
                    pending, gathered = [], 0
                    await self._hash(digest, piece)
                    yield piece
            size += gathered
            piece = b"".join(pending)
            await self._hash(digest, piece)
            yield piece

        token = uuid.uuid4().hex
        data = f"{upload_id}/{number}.{token}"
        staged = await self._backend.stage(await self._bucket(), data, OCTETS, hashed())
        try:
            await self._backend.publish(None, data, OCTETS, staged)
        finally:
            await self._backend.discard(staged)
        md5 = digest.hexdigest()
        try:
            with s3_errors(f"store part {number} of upload {upload_id}"):
                await self._backend.client.put_object(
                    Bucket=await self._bucket(),
                    Key=_pointer(upload_id, number, md5),
                    Body=token.encode(),
                )
        except BaseException:
            await self._delete([data])
            raise
        return size, md5

    async def _hash(self, digest: Any, piece: bytes) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, digest.update, piece)

    async def _token(self, upload_id: str, number: int, md5: str) -> str | None:
        """The token the part's pointer names; None when there is no such part."""
        try:
            with s3_errors(f"find part {number} of upload {upload_id}"):
                response = await self._backend.client.get_object(
                    Bucket=await self._bucket(), Key=_pointer(upload_id, number, md5)
                )
                async with response["Body"] as body:
                    named: bytes = await body.read()
        except FileNotFound:
            return None
        return named.decode()

    async def settle(self, upload_id: str, number: int, md5: str) -> None:
        kept = _pointer(upload_id, number, md5)
        token = await self._token(upload_id, number, md5)
        pointers = await self._list(f"{upload_id}/{number}-")
        datas = await self._list(f"{upload_id}/{number}.")
        await self._delete(
            [name for name in pointers if name != kept]
            + [name for name in datas if name != f"{upload_id}/{number}.{token}"]
        )

    async def discard(self, upload_id: str, number: int, md5: str) -> None:
        token = await self._token(upload_id, number, md5)
        gone = [_pointer(upload_id, number, md5)]
        await self._delete(gone if token is None else [*gone, f"{upload_id}/{number}.{token}"])

    async def read(self, upload_id: str, parts: list[tuple[int, str]]) -> AsyncIterator[bytes]:
        for number, md5 in parts:
            token = await self._token(upload_id, number, md5)
            name = f"{upload_id}/{number}.{token}"
            if token is None:  # aborted by another gateway meanwhile
                raise FileNotFoundError(name)
            try:
                with s3_errors(f"read part {number} of upload {upload_id}"):
                    response = await self._backend.client.get_object(
                        Bucket=await self._bucket(), Key=name
                    )
            except FileNotFound:
                raise FileNotFoundError(name) from None
            async for chunk in self._backend.stream(response["Body"], name):
                yield chunk

    async def remove(self, upload_id: str) -> None:
        await self._delete(await self._list(f"{upload_id}/"))

    async def uploads(self) -> set[str]:
        found: set[str] = set()
        with s3_errors("list the stored parts"):
            paginator = self._backend.client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=await self._bucket(), Delimiter="/"):
                for prefix in page.get("CommonPrefixes", []):
                    found.add(prefix["Prefix"].rstrip("/"))
        return found

    async def remove_partial(self) -> None:
        """A part half written is the cluster's own unfinished upload, not an object: the
        janitor aborts those once stale (other gateways may be writing parts right now)."""

    async def _list(self, prefix: str) -> list[str]:
        names: list[str] = []
        with s3_errors("list the stored parts"):
            paginator = self._backend.client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=await self._bucket(), Prefix=prefix):
                names.extend(item["Key"] for item in page.get("Contents", []))
        return names

    async def _delete(self, names: list[str]) -> None:
        for start in range(0, len(names), 1000):
            batch = [{"Key": name} for name in names[start : start + 1000]]
            with s3_errors("delete stored parts"):
                await self._backend.client.delete_objects(
                    Bucket=await self._bucket(), Delete={"Objects": batch, "Quiet": True}
                )
