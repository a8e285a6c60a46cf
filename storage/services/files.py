"""Files: streamed in against the bucket's limits, read, listed, copied, renamed, deleted."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from dataclasses import replace
from typing import NamedTuple

from storage import encryption, kms
from storage.attributes import Attributes, copied
from storage.backends.commits import Commits
from storage.backends.protocol import Backend
from storage.config import EngineConfig
from storage.errors import (
    BucketNotActive,
    ConditionalConflict,
    DeleteMarker,
    FileNotFound,
    InvalidInput,
    PreconditionFailed,
    QuotaExceeded,
    TooLarge,
    UnsupportedContentType,
    UploadTimeout,
)
from storage.faults import Faults
from storage.index import Index, files, version_listing, versions
from storage.index.counting import check_condition
from storage.models import (
    Actor,
    Bucket,
    Condition,
    DeleteCondition,
    FileRecord,
    Organization,
    Page,
    StoredBlob,
    WriteOptions,
)
from storage.rules import events
from storage.rules.clock import Clock, unix_to_iso
from storage.rules.limits import limited, once
from storage.rules.rereads import Rereads
from storage.rules.validation import (
    check_content_type_value,
    check_key,
    content_type_allowed,
    media_type,
    mime_essence,
)
from storage.services.buckets import Buckets
from storage.services.organizations import Organizations
from storage.services.sealed import SealedContents
from storage.services.version_settings import VersionSettings

PLAIN = WriteOptions()
Stream = AsyncIterator[bytes]


class UploadCheck(NamedTuple):
    bucket: Bucket
    quota_left: int
    """Bytes of quota left for this key (counting the file it replaces)."""
    quota: int
    """The plan's storage quota."""
    content_type: str
    """The upload's media type, normalised."""


class Files(VersionSettings):
    def __init__(
        self,
        index: Index,
        config: EngineConfig,
        orgs: Organizations,
        buckets: Buckets,
        commits: Commits,
        executor: Executor,
        faults: Faults,
        clock: Clock,
        keys: encryption.MasterKeys | None = None,
    ) -> None:
        self.clock = clock
        self.sealed = SealedContents(index, commits, config, keys, faults, executor)
        """Now for object-lock retention (a retention ends when the server's clock passes it)."""
        self._index = index
        self._config = config
        self._orgs = orgs
        self._buckets = buckets
        self._commits = commits
        self._backend: Backend = commits.backend
        self._executor = executor
        self._faults = faults

    async def put(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        attrs: Attributes,
        chunks: AsyncIterator[bytes],
        content_length: int | None = None,
        deadline: float | None = None,
        options: WriteOptions = PLAIN,
    ) -> FileRecord:
        """Store a stream at a key as a new version carrying `attrs`, checking limits in
        the documented order. `deadline`: a time of the running loop's clock by which the
        whole body must have arrived (else UploadTimeout, even if the client stalls)."""
        checked = await self.check_upload(actor, bucket_id, key, attrs.content_type, content_length)
        bucket = checked.bucket
        attrs = replace(attrs, content_type=checked.content_type)
        await self._buckets.reserve_name(bucket, attrs.acl)
        await self.check_condition(bucket_id, key, options.condition)
        stream = limited(chunks, bucket.max_upload_bytes, checked.quota_left)
        try:
            async with asyncio.timeout_at(deadline):
                attrs, blob = await self._store(bucket, key, attrs, stream, options)
        except TimeoutError:
            raise UploadTimeout("the upload did not complete before its deadline") from None
        return await self._commit(bucket, key, attrs, blob, checked.quota, options)

    async def _store(
        self, bucket: Bucket, key: str, attrs: Attributes, body: Stream, options: WriteOptions
    ) -> tuple[Attributes, StoredBlob]:
        if asked := options.encryption or bucket.encryption:  # the write's, else the bucket's
            options = replace(options, encryption=asked)
            return await self.sealed.store(bucket, key, attrs, body, options)
        return attrs, await self._commits.store(bucket, key, attrs.content_type, body, options.md5)

    async def check_condition(self, bucket_id: str, key: str, condition: Condition | None) -> None:
        """A conditional write's condition, checked before its body is read (412 at once);
        the commit checks it again, atomically."""
        if condition is not None:
            check_condition(await self._index.run(files.get_file, bucket_id, key), condition)

    async def _commit(
        self,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord:
        """Commit, grants checked (`check_granted`); a lost condition race: ConditionalConflict."""
        await self._buckets.check_granted(bucket, attrs.acl)
        try:
            return await self._commits.commit(bucket, key, attrs, blob, quota, options)
        except PreconditionFailed:
            raise ConditionalConflict(
                "a concurrent write changed the key while this conditional write ran"
            ) from None

    async def check_upload(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        content_type: str | None,
        content_length: int | None,
    ) -> UploadCheck:
        """The checks of an upload before its body is read, in the documented order."""
        check_key(key)
        self._backend.check_key(key)
        bucket = await self._buckets.get(actor, bucket_id)
        if bucket.status != "active":
            raise BucketNotActive.of(bucket.id, bucket.status, bucket.status_reason)
        if not content_type:
            raise UnsupportedContentType(
                "the Content-Type header is missing: send the file's MIME type "
                "(application/octet-stream for bytes of no particular type)"
            )
        parsed = media_type(content_type)
        if parsed is None:
            raise UnsupportedContentType(
                f"Content-Type {content_type[:80]!r} is not exactly one MIME type "
                "(type/subtype with optional ;name=value parameters)"
            )
        essence, normalised = parsed
        if not content_type_allowed(essence, bucket.allowed_content_types):
            raise UnsupportedContentType(
                f"{essence} is not allowed in this bucket; allowed: "
                + ", ".join(bucket.allowed_content_types)
            )
        if content_length is not None and content_length > bucket.max_upload_bytes:
            raise TooLarge(
                f"the upload ({content_length} bytes) passes the bucket's limit of "
                f"{bucket.max_upload_bytes} bytes"
            )
        org = await self._orgs.get(actor.org_id)
        quota = self._orgs.plan(org).max_storage_bytes
        replaced = bucket.versioning != "Enabled"  # an enabled bucket keeps the old version
        old_size = await self._index.run(files.file_size, bucket_id, key) if replaced else 0
        quota_left = quota - org.stored_bytes - org.part_bytes + (old_size or 0)
        if content_length is not None and content_length > quota_left:
            raise QuotaExceeded("the upload would bring the organization past its storage quota")
        return UploadCheck(bucket, max(quota_left, 0), quota, normalised)

    async def store_and_commit(
        self,
        actor: Actor,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        chunks: AsyncIterator[bytes],
        options: WriteOptions,
        md5: str | None = None,
    ) -> FileRecord:
        """Store a stream the caller has already checked (a completed multipart upload);
        `md5` replaces the content's MD5 as its S3 ETag."""
        _, quota = await self.quota(actor)
        attrs, blob = await self._store(bucket, key, attrs, chunks, options)
        if md5 is not None:
            blob = replace(blob, md5=md5)
        return await self._commit(bucket, key, attrs, blob, quota, options)

    async def quota(self, actor: Actor) -> tuple[Organization, int]:
        """The actor's organization (its usage) and its plan's storage quota."""
        org = await self._orgs.get(actor.org_id)
        return org, self._orgs.plan(org).max_storage_bytes

    async def copy(
        self,
        actor: Actor,
        source: FileRecord,
        bucket_id: str,
        key: str,
        attrs: Attributes,
        condition: Condition | None = None,
        encrypt: str | None = None,
        source_key: bytes | None = None,
        customer_key: bytes | None = None,
    ) -> FileRecord:
        """Copy a file (visible to the actor) to another key as a new version carrying
        `attrs` (`attributes.copied` makes them from the source), sharing its content, and
        an encrypted one's key, where the backend can. It is read and written again when
        the copy is sealed anew: a source not under `encrypt` (or the bucket's default; for
        aws:kms, any), or SSE-C on either side (`source_key` opens it, `customer_key` seals
        the copy; without, the bucket's default or plaintext, as in S3)."""
        checked = await self.check_upload(actor, bucket_id, key, attrs.content_type, source.size)
        encrypt = encrypt or checked.bucket.encryption
        under = source.encryption and encryption.Envelope.decode(source.encryption).algorithm
        rewrite = encrypt is not None and (under != encrypt or kms.is_kms(encrypt))
        if rewrite or source_key is not None or customer_key is not None:
            encrypt = encryption.SSE_C if customer_key is not None else encrypt
            body = await self.open(source, 0, source.size, source_key)
            options = WriteOptions(md5=True, condition=condition, encryption=encrypt)
            options = replace(options, event=events.COPY, customer_key=customer_key)
            fresh = replace(attrs, encryption=None, parts=None)  # sealed anew, one part
            return await self.put(actor, bucket_id, key, fresh, body, source.size, options=options)
        attrs = replace(attrs, content_type=checked.content_type)
        await self._buckets.reserve_name(checked.bucket, attrs.acl)
        return await self._commits.copy(
            source, checked.bucket, key, attrs, checked.quota, condition
        )

    async def restore(
        self, actor: Actor, bucket_id: str, key: str, version_id: str | None
    ) -> FileRecord:
        """Make an old version of `key` the current one again: a new version sharing its
        content and attributes (nothing is copied on local disk); the old one stays."""
        source = await self.get_version(actor, bucket_id, key, version_id)
        return await self.copy(actor, source, bucket_id, key, copied(source))

    async def s3_etag(self, record: FileRecord) -> str:
        """The file's S3 ETag (quoted MD5, or MD5-of-MD5s-N). Files uploaded through /v1
        get their MD5 computed on first need, once."""
        if record.md5 is not None:
            return f'"{record.md5}"'
        digest = hashlib.md5()
        loop = asyncio.get_running_loop()
        async for chunk in await self.open(record, 0, record.size):
            await loop.run_in_executor(self._executor, digest.update, chunk)
        md5 = digest.hexdigest()
        await self._index.run(files.set_md5, record.bucket_id, record.key, record.blob_id, md5)
        return f'"{md5}"'

    async def get(self, actor: Actor, bucket_id: str, key: str) -> FileRecord:
        """The key's current version; DeleteMarker when that is a delete marker."""
        check_key(key)
        await self._buckets.get(actor, bucket_id)
        record = await self._index.run(files.get_file, bucket_id, key)
        if record is None:
            raise FileNotFound("file not found")
        if record.delete_marker:
            raise DeleteMarker("file not found (deleted)", record.version_id)
        return self.as_judged(actor, record)

    async def get_version(
        self, actor: Actor, bucket_id: str, key: str, version_id: str | None
    ) -> FileRecord:
        """One version of `key` (None: the null version); DeleteMarker (`specific`) when it
        is a delete marker."""
        check_key(key)
        await self._buckets.get(actor, bucket_id)
        record = await self._index.run(versions.get_version, bucket_id, key, version_id)
        if record is None:
            raise FileNotFound("no such version of the file")
        if record.delete_marker:
            raise DeleteMarker("the version is a delete marker", version_id, specific=True)
        return self.as_judged(actor, record)

    async def list_versions(
        self,
        actor: Actor,
        bucket_id: str,
        prefix: str = "",
        delimiter: str = "",
        key_marker: str = "",
        version_marker: str = "",
        limit: int = 1000,
        exact: bool = False,
        as_of: float | None = None,
    ) -> version_listing.VersionPage:
        """Versions by key, newest first within a key; `exact`: of the key `prefix` only;
        `as_of` (seconds since the epoch): as the listing was then, as far as the index
        still tells (`version_listing.py`)."""
        await self._buckets.get(actor, bucket_id)
        return await self._index.run(
            version_listing.list_versions,
            *(bucket_id, prefix, delimiter, key_marker, version_marker, limit, exact),
            None if as_of is None else unix_to_iso(as_of),
        )

    async def delete_version(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        version_id: str | None,
        bypass_governance: bool = False,
    ) -> FileRecord:
        """Delete one version for good (what S3's DeleteObject with a versionId does);
        ObjectLocked while a retention or legal hold protects it."""
        check_key(key)
        bucket = await self._buckets.get(actor, bucket_id)
        if bucket.versioning is None and version_id is not None:
            raise FileNotFound("no such version of the file")
        if bucket.versioning is None:
            return await self._commits.delete(bucket_id, key)
        return await self._commits.remove_version(
            bucket_id, key, version_id, self.clock.time(), bypass_governance
        )

    def rereads(self) -> Rereads:
        """One GET's lookups of a key (`rules/rereads.py`)."""
        return Rereads(self._commits.replaced)

    async def open(
        self, record: FileRecord, start: int, end: int, customer_key: bytes | None = None
    ) -> AsyncIterator[bytes]:
        """Bytes [start, end) of a file's content, decrypted if it is encrypted (reading
        only the packages the range covers); FileNotFound if it was replaced meanwhile.
        `customer_key`: SSE-C's, for a content sealed under it (`SealedContents.check`)."""
        if record.encryption is None and customer_key is None:
            return await self.open_stored(record, start, end)
        self.sealed.check(record, customer_key)
        if not 0 <= start <= end <= record.size:
            raise InvalidInput("the byte range is outside the file")
        return await self.sealed.open(record, start, end, self.open_stored, customer_key)

    async def open_stored(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes [start, end) of a file's content as stored (an encrypted content's
        packages: `encryption.stored_size`), for what verifies or moves it unread."""
        size = encryption.stored_size(record)
        if not 0 <= start <= end <= size:
            raise InvalidInput("the byte range is outside the file")
        if record.inline is not None and record.inline[0] == record.blob_id:
            return once(record.inline[1][start:end])
        if size <= self._commits.inline_max:
            data = await self._index.run(files.read_inline, record.blob_id)
            if data is not None:
                return once(data[start:end])
            return await self._backend.read(record, start, end)
        try:
            return await self._backend.read(record, start, end)
        except FileNotFound:
            # Where the content is depends on the limit in force when it was written, not
            # today's: one written inline under a higher limit has no blob file.
            data = await self._index.run(files.read_inline, record.blob_id)
            if data is None:
                raise
            return once(data[start:end])

    async def list(
        self,
        actor: Actor,
        bucket_id: str,
        prefix: str = "",
        delimiter: str = "",
        after: str | None = None,
        limit: int = 20,
        as_of: float | None = None,
    ) -> Page[FileRecord]:
        """`as_of` (seconds since the epoch): the listing as it was then, as far as the
        index still tells (`version_listing.py`; test mode's stale-listing fault)."""
        await self._buckets.get(actor, bucket_id)
        self._faults.hit("list")
        if as_of is not None:
            return await self._index.run(
                version_listing.list_files_as_of,
                *(bucket_id, prefix, delimiter, after, limit, unix_to_iso(as_of)),
            )
        return await self._index.run(files.list_files, bucket_id, prefix, delimiter, after, limit)

    async def update(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        new_key: str | None = None,
        content_type: str | None = None,
    ) -> FileRecord:
        check_key(key)
        if new_key is not None:
            check_key(new_key)
            self._backend.check_key(new_key)
        if content_type is not None:
            content_type = check_content_type_value(content_type)
        bucket = await self._buckets.get(actor, bucket_id)
        if content_type is not None:
            essence = mime_essence(content_type)
            assert essence is not None
            if not content_type_allowed(essence, bucket.allowed_content_types):
                raise UnsupportedContentType(f"{essence} is not allowed in this bucket")
        if bucket.status != "active":
            raise BucketNotActive.of(bucket.id, bucket.status, bucket.status_reason)
        record = await self._index.run(files.get_file, bucket_id, key)
        if record is None or record.delete_marker:
            raise FileNotFound("file not found")
        return await self._commits.update(bucket, record, new_key, content_type)

    async def delete(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        condition: DeleteCondition | None = None,
    ) -> FileRecord:
        """Delete the key's current version: what was deleted, or in a versioned bucket the
        delete marker now current (S3 deletes absent keys too: `must_exist=False`; not
        with a `condition`, checked in the deleting transaction)."""
        check_key(key)
        await self._buckets.get(actor, bucket_id)
        return await self._commits.delete(bucket_id, key, must_exist, condition)
