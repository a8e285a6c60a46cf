"""Multipart uploads (the S3 protocol's): create, upload parts, complete, abort, list.

Parts wait in a `PartStore` (the data dir, or the S3 cluster); completing streams them in
order into the backend as one file, whose S3 ETag is the MD5 of the parts' MD5s with the
part count, as S3 clients expect.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from storage import encryption, kms
from storage.attributes import Attributes, of_upload
from storage.backends.local.parts import PartStore
from storage.backends.s3.locks import KeyLocks
from storage.errors import (
    FileNotFound,
    InvalidInput,
    InvalidPart,
    QuotaExceeded,
    TooLarge,
    UploadNotFound,
    UploadTimeout,
)
from storage.index import Index, uploads
from storage.index.rows import upload_columns
from storage.models import (
    Actor,
    Bucket,
    CompletedPart,
    CompletionClaim,
    Condition,
    FileRecord,
    MultipartUpload,
    Part,
    WriteOptions,
)
from storage.rules import checksums, completion, events, object_lock
from storage.rules.clock import unix_to_iso
from storage.rules.limits import limited
from storage.rules.part_layout import PartLayout
from storage.services.buckets import Buckets
from storage.services.files import Files
from storage.services.sealed_parts import (
    SealedParts,
    check_key,
    opened_checksum,
    sealed_checksum,
    verifier,
)

MAX_PARTS = 10_000


NO_CLAIM = CompletionClaim()


class MultipartUploads:
    def __init__(self, index: Index, buckets: Buckets, files: Files, parts: PartStore) -> None:
        self._index = index
        self._buckets = buckets
        self._files = files
        self._parts = parts
        self._sealed = SealedParts(files.sealed, parts)
        self._locks = KeyLocks()
        """Complete, abort and expiry of one upload take turns in this process."""

    async def create(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        attrs: Attributes,
        checksum_algorithm: str | None = None,
        checksum_type: str | None = None,
        encryption: str | None = None,
        customer_key: bytes | None = None,
    ) -> MultipartUpload:
        """A new upload whose object will carry `attrs` (its lock, the retention and legal
        hold it will get; its checksum, the parts' combined by `checksum_type`); with
        `encryption` (AES256, aws:kms) or the bucket's default, every part is stored
        encrypted and so is the object; with `customer_key` (SSE-C) too, under that key,
        which every part and the completion must give again (`sealed_parts.check_key`)."""
        checked = await self._files.check_upload(actor, bucket_id, key, attrs.content_type, None)
        object_lock.for_new_version(
            attrs.lock, checked.bucket.object_lock, self._files.clock.time()
        )
        if checksum_algorithm is not None and checksum_algorithm not in checksums.ALGORITHMS:
            raise InvalidInput(f"unknown checksum algorithm {checksum_algorithm}")
        algorithm = None
        if checksum_algorithm:
            try:
                kind = checksums.upload_type(checksum_algorithm, checksum_type)
            except ValueError as exc:
                raise InvalidInput(str(exc)) from None
            algorithm = f"{checksum_algorithm}:{kind}"
        if customer_key is not None:
            encryption = verifier(customer_key)
        elif kms.is_kms(asked := encryption or checked.bucket.encryption):
            self._files.sealed.keyring.resolve(asked or "")  # refused now, not at completion
        upload = MultipartUpload(
            upload_id=uuid.uuid4().hex,
            bucket_id=bucket_id,
            key=key,
            checksum_algorithm=algorithm,
            created_at=self._files.clock.iso(),
            encryption=encryption or checked.bucket.encryption,
            **upload_columns(replace(attrs, content_type=checked.content_type)),
        )
        await self._index.run(uploads.create_upload, upload)
        return upload

    async def get(
        self, actor: Actor, bucket_id: str, key: str, upload_id: str
    ) -> tuple[Bucket, MultipartUpload]:
        """The upload `upload_id` of `key`: an upload id names its bucket and its key, as on
        S3, so that a request decided for one key never reaches another key's upload."""
        bucket = await self._buckets.get(actor, bucket_id)
        upload = await self._index.run(uploads.get_upload, upload_id)
        if upload is None or upload.bucket_id != bucket.id or upload.key != key:
            raise UploadNotFound("the multipart upload does not exist")
        return bucket, upload

    async def upload_part(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        upload_id: str,
        number: int,
        chunks: AsyncIterator[bytes],
        content_length: int | None = None,
        deadline: float | None = None,
        checksum: Callable[[], str | None] | None = None,
        customer_key: bytes | None = None,
    ) -> Part:
        if not 1 <= number <= MAX_PARTS:
            raise InvalidInput(f"part numbers go from 1 to {MAX_PARTS}")
        bucket, upload = await self.get(actor, bucket_id, key, upload_id)
        check_key(upload, customer_key)
        org, quota = await self._files.quota(actor)
        quota_left = max(0, quota - org.stored_bytes - org.part_bytes)
        if content_length is not None and content_length > bucket.max_upload_bytes:
            raise TooLarge(f"the part passes the bucket's limit of {bucket.max_upload_bytes} bytes")
        if content_length is not None and content_length > quota_left:
            raise QuotaExceeded("the part would bring the organization past its storage quota")
        stream = limited(chunks, bucket.max_upload_bytes, quota_left)
        try:
            async with asyncio.timeout_at(deadline):
                if upload.encryption is None:
                    size, md5 = await self._parts.write(upload_id, number, stream)
                    envelope = stored_md5 = None
                else:
                    size, md5, envelope, stored_md5 = await self._sealed.write(
                        upload, number, stream, customer_key
                    )
        except TimeoutError:
            raise UploadTimeout("the part did not arrive before its deadline") from None
        except FileNotFoundError:  # its folder went with an abort or a completion
            raise UploadNotFound("the multipart upload does not exist") from None
        part = Part(
            upload_id=upload_id,
            part_number=number,
            size=size,
            md5=md5,
            checksum=sealed_checksum(checksum() if checksum else None, customer_key),
            uploaded_at=self._files.clock.iso(),
            encryption=envelope,
            stored_md5=stored_md5,
        )
        name = part.stored_name
        try:
            await self._index.run(uploads.put_part, part, quota, bucket.max_upload_bytes)
        except BaseException:
            recorded = await self._index.run(uploads.list_parts, upload_id, number - 1, 1)
            if not recorded or recorded[0].part_number != number or recorded[0].stored_name != name:
                await self._parts.discard(upload_id, number, name)
            raise
        await self._parts.settle(upload_id, number, name)
        return part

    async def copy_part(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        upload_id: str,
        number: int,
        source: FileRecord,
        start: int,
        end: int,
        source_key: bytes | None = None,
        customer_key: bytes | None = None,
    ) -> Part:
        """A part copied from [start, end) of `source` (opened under `source_key`, an
        SSE-C source's), sealed as the upload's parts are (`customer_key`, an SSE-C
        upload's). Both keys are checked before a byte is read."""
        _, upload = await self.get(actor, bucket_id, key, upload_id)
        check_key(upload, customer_key)
        chunks = await self._files.open(source, start, end, source_key)
        return await self.upload_part(
            actor,
            bucket_id,
            key,
            upload_id,
            number,
            chunks,
            end - start,
            customer_key=customer_key,
        )

    async def complete(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        upload_id: str,
        requested: list[CompletedPart],
        condition: Condition | None = None,
        claim: CompletionClaim = NO_CLAIM,
        customer_key: bytes | None = None,
    ) -> FileRecord:
        """Join the named parts, in order, into the file (if `condition` holds: a failed
        one leaves the upload to retry or abort). The upload goes in the transaction
        that commits the file: a concurrent abort leaves either the file (and the abort gets
        NoSuchUpload) or the upload aborted (and this gets it), never half of both.
        An SSE-C upload's completion gives its key (`customer_key`): the object is sealed
        anew under it, as its parts were, and the key is kept nowhere.
        A completion sent again after it succeeded gets the version it made (`completed`)."""
        async with self._locks.hold("upload", upload_id):
            try:
                bucket, upload = await self.get(actor, bucket_id, key, upload_id)
            except UploadNotFound:
                done = await self.completed(actor, bucket_id, key, upload_id, requested)
                if done is None:
                    raise
                return done
            check_key(upload, customer_key)
            await self._files.check_condition(bucket_id, upload.key, condition)
            stored = {
                part.part_number: opened_checksum(part, customer_key)
                for part in await self._index.run(uploads.list_parts, upload_id, 0, MAX_PARTS)
            }
            try:
                parts = completion.validate(requested, stored, bucket)
            except InvalidPart:
                await self.get(actor, bucket_id, key, upload_id)  # aborted by another process?
                raise
            completion.check_claim(upload, parts, claim)
            digest = hashlib.md5(b"".join(bytes.fromhex(part.md5) for part in parts)).hexdigest()
            options = WriteOptions(
                checksum=lambda: completion.combined_checksum(upload, parts),
                upload_id=upload_id,
                condition=condition,
                event=events.COMPLETE,
                encryption=upload.encryption if customer_key is None else encryption.SSE_C,
                customer_key=customer_key,
            )
            chunks = self._sealed.read(upload_id, parts, customer_key)
            sizes = tuple(part.size for part in parts)
            layout = PartLayout(upload_id, sizes, completion.part_checksums(upload, parts))
            try:
                record = await self._files.store_and_commit(
                    actor,
                    bucket,
                    upload.key,
                    replace(of_upload(upload), parts=layout.encode()),
                    chunks,
                    options,
                    f"{digest}-{len(parts)}",
                )
            except FileNotFoundError:  # another gateway aborted it while its parts were read
                raise UploadNotFound("the multipart upload was aborted") from None
        await self._parts.remove(upload_id)
        return record

    async def completed(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        upload_id: str,
        requested: list[CompletedPart],
    ) -> FileRecord | None:
        """The version upload `upload_id` made of `key` from the parts `requested` lists,
        while it is the key's current version: S3 answers a completion sent again (a client
        whose answer was lost retries it) as it answered the first, for a while. None
        otherwise, and for a list whose ETags do not make that version's."""
        try:
            # The version this upload wrote, not one a decision judged (`Actor.judged`).
            record = await self._files.get(replace(actor, judged=None), bucket_id, key)
        except FileNotFound:  # a delete marker too
            return None
        layout = PartLayout.decode(record.parts)
        if layout is None or layout.upload_id != upload_id:
            return None
        return record if completion.lists_version(requested, record.md5) else None

    async def abort(self, actor: Actor, bucket_id: str, key: str, upload_id: str) -> None:
        async with self._locks.hold("upload", upload_id):
            await self.get(actor, bucket_id, key, upload_id)
            await self._index.run(uploads.delete_upload, upload_id)
        await self._parts.remove(upload_id)

    async def expire(self, older_than_seconds: float) -> int:
        """Abort the uploads begun more than `older_than_seconds` ago (abandoned), by the
        server's clock, which stamped their start: a clock set back by test mode must not
        make an upload begun a minute ago look a week old."""
        before = unix_to_iso(self._files.clock.time() - older_than_seconds)
        expired = await self._index.run(uploads.expired_uploads, before)
        for upload_id in expired:
            await self.drop(upload_id)
        return len(expired)

    async def drop(self, upload_id: str) -> None:
        """Abort an upload no client is told about (expired, or by a lifecycle rule)."""
        async with self._locks.hold("upload", upload_id):
            try:
                await self._index.run(uploads.delete_upload, upload_id)
            except UploadNotFound:
                pass
        await self._parts.remove(upload_id)

    async def list_parts(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        upload_id: str,
        after: int,
        limit: int,
        customer_key: bytes | None = None,
    ) -> tuple[MultipartUpload, list[Part]]:
        """A page of the upload's parts. A listing reads no content, so an SSE-C upload's
        key is not needed, as on S3; one given is checked all the same."""
        _, upload = await self.get(actor, bucket_id, key, upload_id)
        if customer_key is not None:
            check_key(upload, customer_key)
        return upload, await self._index.run(uploads.list_parts, upload_id, after, limit)

    async def list_uploads(
        self,
        actor: Actor,
        bucket_id: str,
        prefix: str,
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[MultipartUpload]:
        await self._buckets.get(actor, bucket_id)
        return await self._index.run(uploads.list_uploads, bucket_id, prefix, after, limit)

    async def collect_garbage(self, temp_files: bool = True) -> int:
        """Remove the parts of uploads the index does not know (and, while nothing is
        written, half-written parts)."""
        orphans = await self.orphans()
        for upload_id in orphans:
            await self._parts.remove(upload_id)
        if temp_files:
            await self._parts.remove_partial()
        return len(orphans)

    async def orphans(self) -> list[str]:
        """Uploads with stored parts that the index does not know. The parts are listed
        first: parts stored after that belong to an upload the index holds by then."""
        stored = await self._parts.uploads()
        return sorted(stored - await self._index.run(uploads.upload_ids))
