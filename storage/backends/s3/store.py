"""Contents in an S3-compatible cluster (AWS S3, SeaweedFS, Ceph RGW, MinIO), via aiobotocore.

Each bucketd bucket is a real S3 bucket named `<brand>-<name>-<8 id chars>`, and each file
is the object at its own key, so the data stays readable with plain S3 tools. Uploads stream
into a multipart upload (a single PUT when the whole body fits in one part) and are only
*staged* by `write`: nothing is visible until `publish` completes them, and `discard` aborts
them. Every read names the object version the index knows (If-Match on its ETag), so bytes
and metadata never disagree.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any, TypeVar

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import ClientError

from storage import encryption
from storage.backends.protocol import Fence, GcReport
from storage.backends.s3 import copy as s3_copy
from storage.backends.s3 import names as object_names
from storage.backends.s3.cleanup import Staged, UploadCleanup
from storage.backends.s3.errors import s3_errors
from storage.backends.s3.names import stored_under
from storage.config import S3Settings
from storage.errors import BackendUnavailable, FileNotFound, WriteSettled
from storage.faults import Faults
from storage.models import Bucket, FileRecord, StoredBlob
from storage.rules.etags import md5_of, multipart_etag

logger = logging.getLogger("bucketd.s3")
T = TypeVar("T")

MIN_PART = 5 * 1024 * 1024
READ_PIECE = 1024 * 1024
PARTS_PER_STEP = 1000
"""Every 1000 parts the part size grows by the base size: S3 allows 10,000 parts."""
MAX_BUCKET_NAME = 63


def bucket_location(brand: str, name: str, bucket_id: str) -> str:
    """`<brand>-<name>-<suffix>`: suffix the last 8 id characters lower-cased; dots in the
    name become dashes and the name is cut so the whole is a valid S3 name of <= 63."""
    suffix = bucket_id[-8:].lower()
    room = MAX_BUCKET_NAME - len(brand) - len(suffix) - 2
    part = name.replace(".", "-")[:room]
    return f"{brand}-{part}-{suffix}"


@functools.cache
def _session() -> AioSession:
    """One botocore session per process, for every engine it opens: a session parses the S3
    service model and the endpoint rules (JSON files of megabytes, 0.15 s of CPU) for its
    first client, and keeps them for its later ones. It holds no credentials (each client is
    given its own) and no connection."""
    return get_session()


class S3Backend(UploadCleanup):
    """An `ObjectStore`: one S3 bucket per bucket, each file an object at its key."""

    def __init__(self, settings: S3Settings, executor: Executor, faults: Faults) -> None:
        self._settings = settings
        self._executor = executor
        self._faults = faults
        self._stack = AsyncExitStack()
        self._client: Any = None

    @classmethod
    async def open(cls, settings: S3Settings, executor: Executor, faults: Faults) -> S3Backend:
        backend = cls(settings, executor, faults)
        config = AioConfig(
            connect_timeout=settings.connect_timeout_seconds,
            read_timeout=settings.read_timeout_seconds,
            retries={"total_max_attempts": settings.attempts, "mode": "standard"},
            s3={"addressing_style": "path"},
            max_pool_connections=64,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        backend._client = await backend._stack.enter_async_context(
            _session().create_client(
                "s3",
                endpoint_url=settings.endpoint_url,
                region_name=settings.region,
                aws_access_key_id=settings.access_key_id,
                aws_secret_access_key=settings.secret_access_key,
                config=config,
            )
        )
        return backend

    async def close(self) -> None:
        await self._stack.aclose()

    @property
    def parts_location(self) -> str:
        """The cluster bucket of multipart uploads' parts (`parts.py`); no user's
        bucket is named so (theirs end in 8 id characters)."""
        return f"{self._settings.brand}-parts"

    @property
    def snapshots_location(self) -> str:
        """The cluster bucket of snapshots' copies of their contents (`snapshots.py`), one
        folder per snapshot; no user's bucket is named so."""
        return f"{self._settings.brand}-snapshots"

    @property
    def client(self) -> Any:
        """The aiobotocore client, for the cluster's own objects (`parts.py`)."""
        return self._client

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def location_for(self, bucket: Bucket) -> str:
        return bucket_location(self._settings.brand, bucket.name, bucket.id)

    def _location(self, bucket: Bucket | FileRecord) -> str:
        if bucket.location is None:
            raise BackendUnavailable("the bucket has no S3 location (made by another backend)")
        return bucket.location

    def check_key(self, key: str) -> None:
        """Every key is stored: one the cluster would alter gets another name."""

    async def check(self) -> None:
        with s3_errors("answer"):
            await self._client.list_buckets()

    def object_name(self, key: str, version: str | None) -> str:
        return object_names.object_name(key, version, self._settings.portable_keys)

    # buckets

    async def provision_bucket(self, bucket: Bucket) -> None:
        await self.create_bucket(self._location(bucket))

    async def create_bucket(self, location: str) -> None:
        """Make the S3 bucket `location`; one that bucketd already owns is fine."""
        arguments: dict[str, Any] = {"Bucket": location}
        if self._settings.region != "us-east-1":
            arguments["CreateBucketConfiguration"] = {"LocationConstraint": self._settings.region}
        try:
            with s3_errors(f"create bucket {location}"):
                await self._client.create_bucket(**arguments)
        except BackendUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") in (
                "BucketAlreadyOwnedByYou",
            ):
                return
            raise

    async def delete_bucket(self, bucket: Bucket) -> None:
        """Delete every object, abort every upload, then the bucket itself."""
        location = self._location(bucket)
        await self.delete_prefix(location, "")
        with s3_errors(f"empty bucket {location}"):
            await self._abort_uploads(location, older_than=None)
        with s3_errors(f"delete bucket {location}"):
            try:
                await self._client.delete_bucket(Bucket=location)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchBucket":
                    raise

    async def delete_prefix(self, location: str, prefix: str) -> None:
        with s3_errors(f"empty {location}/{prefix}"):
            paginator = self._client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=location, Prefix=prefix):
                objects = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if objects:
                    await self._client.delete_objects(
                        Bucket=location, Delete={"Objects": objects, "Quiet": True}
                    )

    # writes

    async def write(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        chunks: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        return await self.stage(self._location(bucket), key, content_type, chunks)

    async def stage(
        self, location: str, key: str, content_type: str, chunks: AsyncIterator[bytes]
    ) -> StoredBlob:
        """Stage a stream: parts of at least `part_size_bytes` go to a multipart upload,
        `parallel_parts` at a time; a body smaller than one part is kept for one PUT.

        Each part is copied once (joining the received chunks) and hashed once (SHA-256,
        for the API's ETag, in a worker thread); the S3 ETag the upload will get is derived
        from the parts' ETags instead of hashing everything a second time with MD5.
        """
        staged = Staged(location, key)
        part_size = max(self._settings.part_size_bytes, MIN_PART)
        digest = hashlib.sha256()
        size = buffered = 0
        received: list[bytes] = []
        pending: list[asyncio.Task[None]] = []
        slots = asyncio.Semaphore(self._settings.parallel_parts)
        try:
            async for chunk in chunks:
                received.append(chunk)
                buffered += len(chunk)
                size += len(chunk)
                if buffered >= part_size * (1 + len(pending) // PARTS_PER_STEP):
                    part = b"".join(received)
                    received, buffered = [], 0
                    if staged.upload_id is None:
                        await self._create_upload(staged, content_type)
                    await slots.acquire()
                    _raise_failed(pending)
                    await self._run(digest.update, part)
                    number = len(pending) + 1
                    pending.append(
                        asyncio.create_task(self._upload_part(staged, number, part, slots))
                    )
            body = b"".join(received)
            if staged.upload_id is None:
                staged.body = body
                etag = f'"{await self._run(_hash_whole, digest, body)}"'
            else:
                if body:
                    await self._run(digest.update, body)
                    number = len(pending) + 1
                    pending.append(
                        asyncio.create_task(self._upload_part(staged, number, body, None))
                    )
                await asyncio.gather(*pending)
                etag = multipart_etag(staged.parts)
        except BaseException:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await self._abort_soon(staged)
            raise
        return StoredBlob(
            blob_id=f"s3:{uuid.uuid4().hex}",
            size=size,
            sha256=digest.hexdigest(),
            backend_etag=etag,
            handle=staged,
        )

    async def _create_upload(self, staged: Staged, content_type: str) -> None:
        with s3_errors("start a multipart upload"):
            response = await self._client.create_multipart_upload(
                Bucket=staged.location, Key=staged.key, ContentType=content_type
            )
        staged.upload_id = response["UploadId"]

    async def _upload_part(
        self, staged: Staged, number: int, data: bytes, slots: asyncio.Semaphore | None
    ) -> None:
        try:
            self._faults.hit("s3.part")
            with s3_errors(f"upload part {number}"):
                response = await self._client.upload_part(
                    Bucket=staged.location,
                    Key=staged.key,
                    UploadId=staged.upload_id,
                    PartNumber=number,
                    Body=data,
                )
            staged.parts.append({"PartNumber": number, "ETag": response["ETag"]})
        finally:
            if slots is not None:
                slots.release()

    async def publish(
        self,
        bucket: Bucket | None,
        key: str,
        content_type: str,
        blob: StoredBlob,
        fence: Fence | None = None,
    ) -> StoredBlob:
        """Make the staged content the object at `key` (in the bucket it was staged in), only
        over `fence`'s object if given (else WriteSettled); the blob with its real ETag."""
        staged: Staged = blob.handle
        given: dict[str, Any] = {"Bucket": staged.location, "Key": key}
        given |= s3_copy.replacing(fence)
        try:
            with s3_errors(f"store {key!r}"):
                if staged.upload_id is None:
                    body, kind = staged.body or b"", content_type
                    response = await self._client.put_object(**given, Body=body, ContentType=kind)
                else:
                    parts = sorted(staged.parts, key=lambda p: p["PartNumber"])
                    response = await self._client.complete_multipart_upload(
                        **given, UploadId=staged.upload_id, MultipartUpload={"Parts": parts}
                    )
        except FileNotFound as exc:  # 412: the object at the key is not the fence's
            if fence is None:
                raise
            raise WriteSettled("another write replaced this key while this one stalled") from exc
        staged.published = True
        staged.body = None
        etag = response.get("ETag") or blob.backend_etag
        return replace(blob, backend_etag=etag, md5=blob.md5 or md5_of(etag), handle=None)

    async def discard(self, blob: StoredBlob) -> None:
        staged: Staged | None = blob.handle
        if staged is not None and not staged.published:
            await self._abort_soon(staged)

    # reads and other file operations

    async def read(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        if start == end:
            return _nothing()
        arguments: dict[str, Any] = {
            "Bucket": self._location(record),
            "Key": stored_under(record),
        }
        if record.backend_etag:
            arguments["IfMatch"] = record.backend_etag
        if (start, end) != (0, encryption.stored_size(record)):
            arguments["Range"] = f"bytes={start}-{end - 1}"
        with s3_errors(f"read {record.key!r}"):
            response = await self._client.get_object(**arguments)
        if response.get("ContentLength", end - start) != end - start:
            response["Body"].close()
            raise BackendUnavailable(
                f"the S3 cluster answered {response.get('ContentLength')} bytes for "
                f"{record.key!r} instead of {end - start}; the object cannot be read back"
            )
        return self.stream(response["Body"], record.key)

    async def stream(self, body: Any, key: str) -> AsyncIterator[bytes]:
        """The object's bytes in pieces of about 1 MiB: the cluster's socket hands over a
        few dozen KiB at a time, and each piece costs a trip through the ASGI stack."""
        try:
            with s3_errors(f"read {key!r}"):
                pieces: list[bytes] = []
                gathered = 0
                async for chunk in body.iter_chunks(READ_PIECE):
                    pieces.append(chunk)
                    gathered += len(chunk)
                    if gathered >= READ_PIECE:
                        yield b"".join(pieces)
                        pieces, gathered = [], 0
                if pieces:
                    yield b"".join(pieces)
        finally:
            body.close()

    async def head(self, location: str, key: str) -> str | None:
        """The object's ETag, or None when there is no object at `key`."""
        try:
            with s3_errors(f"look at {key!r}"):
                response = await self._client.head_object(Bucket=location, Key=key)
        except FileNotFound:
            return None
        etag: str = response["ETag"]
        return etag

    async def delete_object(self, record: FileRecord) -> None:
        with s3_errors(f"delete {record.key!r}"):
            await self._client.delete_object(
                Bucket=self._location(record), Key=stored_under(record)
            )

    async def copy_object(
        self,
        source: FileRecord,
        key: str,
        location: str | None = None,
        fence: Fence | None = None,
    ) -> StoredBlob:
        """Server-side copy to `key` in `location` (default: the same bucket), only over
        `fence`'s object if given (else WriteSettled, which a source changed since its
        record also gives then: a 412 does not say which). The source stays; a null
        version restored onto itself is already there."""
        copy_from = {"Bucket": self._location(source), "Key": stored_under(source)}
        location = location or self._location(source)
        etag = source.backend_etag or ""
        if copy_from != {"Bucket": location, "Key": key}:
            try:
                with s3_errors(f"copy {source.key!r}"):
                    etag = await s3_copy.copy_object(
                        self._client,
                        copy_from,
                        location,
                        key,
                        encryption.stored_size(source),
                        source.backend_etag,
                        source.content_type,
                        self._abort,
                        s3_copy.replacing(fence),
                    )
            except FileNotFound as exc:
                if fence is None:
                    raise
                raise WriteSettled("the key's object is not the one this copy replaces") from exc
        return s3_copy.copied(source, etag)

    # maintenance

    async def abort_stale_uploads(self, locations: list[str], older_than: float) -> int:
        """Abort multipart uploads begun before `older_than` (left by a crash or an outage)."""
        aborted = 0
        for location in [*locations, self.parts_location]:
            try:
                with s3_errors(f"list the uploads of {location}"):
                    aborted += await self._abort_uploads(location, older_than)
            except BackendUnavailable as exc:
                logger.warning("%s", exc)
        return aborted

    async def collect_garbage(self, referenced: set[str]) -> GcReport:
        """Stale multipart uploads are aborted by the engine's janitor; nothing else to do."""
        return GcReport(temp_files=0, blobs=0)


def _hash_whole(digest: Any, data: bytes) -> str:
    digest.update(data)
    return hashlib.md5(data).hexdigest()


def _raise_failed(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""
