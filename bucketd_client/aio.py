"""The client, asynchronous: `AsyncClient`. The synchronous `Client` (client.py) is
generated from this module by `make client` (unasync), so the two never drift."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import IO, Any, TypeVar

import anyio

from . import calls, shapes
from .aio_connection import AsyncConnection
from .aio_orgs import AsyncOrganizations
from .aio_snapshots import AsyncSnapshots
from .aio_webhooks import AsyncWebhooks
from .bodies import AsyncSource, Progress, Sink, async_body, etag_sha256
from .calls import CHUNK, UNSET, Unset
from .errors import BucketFailed
from .models import Bucket, File, FileVersion, Key, Organization, Page, decode

T = TypeVar("T")


class AsyncClient(AsyncConnection):
    """A bucketd API client over one pooled HTTP connection set.

    `url` and `key` default to BUCKETD_URL (else http://127.0.0.1:8080) and BUCKETD_KEY.
    Errors raise the typed exceptions of `bucketd_client.errors`. Idempotent calls are
    retried on 429, 5xx and connection failures as `retry` says (None: never).
    """

    @property
    def webhooks(self) -> AsyncWebhooks:
        """Webhooks and the live stream of events."""
        return AsyncWebhooks(self)

    @property
    def orgs(self) -> AsyncOrganizations:
        """The operator's calls: every organization, its plan and its keys (a key with the
        scope orgs:manage)."""
        return AsyncOrganizations(self)

    @property
    def snapshots(self) -> AsyncSnapshots:
        """Snapshots of a bucket (and the operator's of the whole server): take, list,
        restore, fork and delete them."""
        return AsyncSnapshots(self)

    # buckets

    async def list_buckets(
        self, limit: int | None = None, cursor: str | None = None
    ) -> Page[Bucket]:
        return await self._call(calls.list_buckets(limit, cursor))

    def iter_buckets(self, page_size: int = 100) -> AsyncIterator[Bucket]:
        """Every bucket the key can see, following the cursor page by page."""
        return self._pages(lambda cursor: self.list_buckets(page_size, cursor))

    async def create_bucket(
        self,
        name: str,
        region: str,
        *,
        max_upload_bytes: int | None = None,
        allowed_content_types: list[str] | None = None,
        versioning: str | None = None,
        object_lock: shapes.ObjectLockRule | None = None,
        lifecycle: list[shapes.LifecycleRule] | None = None,
        cors: list[shapes.CorsRule] | None = None,
        public: bool = False,
        cache_control: str | None = None,
        anonymous_requests_per_minute: int | None = None,
        encryption: str | None = None,
    ) -> Bucket:
        """A new bucket, `provisioning` at first: see `wait_until_active`. `versioning`:
        "enabled" keeps every version of every file; `object_lock` enables object lock (and
        versioning with it) for good; `lifecycle`: its lifecycle rules; `cors`: its CORS
        rules; `public`: anyone may download its files (with `cache_control`);
        `anonymous_requests_per_minute`: the rate of requests without a key per client
        address (0: no limit; None: the server's); `encryption`: its default encryption
        (AES256, aws:kms or aws:kms/<key name>), given to every write that asks for none.
        A file says its own in `File.encryption` and `File.kms_key_id`."""
        body = shapes.CreateBucket(
            name=name,
            region=region,
            max_upload_bytes=max_upload_bytes,
            allowed_content_types=allowed_content_types,
            versioning=versioning,
            object_lock=object_lock,
            lifecycle=lifecycle,
            cors=cors,
            public=public,
            cache_control=cache_control,
            anonymous_requests_per_minute=anonymous_requests_per_minute,
            encryption=encryption,
        )
        return await self._call(calls.create_bucket(body))

    async def get_bucket(self, bucket_id: str) -> Bucket:
        return await self._call(calls.get_bucket(bucket_id))

    async def get_bucket_by_name(self, name: str) -> Bucket:
        """The bucket called `name` among those the key can see (BucketNotFound if none)."""
        return calls.bucket_named([bucket async for bucket in self.iter_buckets()], name)

    async def update_bucket(
        self,
        bucket_id: str,
        *,
        name: str | Unset = UNSET,
        max_upload_bytes: int | Unset | None = UNSET,
        allowed_content_types: list[str] | Unset | None = UNSET,
        versioning: str | Unset = UNSET,
        object_lock: shapes.ObjectLockRule | Unset = UNSET,
        lifecycle: list[shapes.LifecycleRule] | Unset | None = UNSET,
        cors: list[shapes.CorsRule] | Unset | None = UNSET,
        public: bool | Unset = UNSET,
        cache_control: str | Unset | None = UNSET,
        policy: dict[str, Any] | Unset | None = UNSET,
        anonymous_requests_per_minute: int | Unset | None = UNSET,
        encryption: str | Unset | None = UNSET,
    ) -> Bucket:
        """Change what is given (None resets a limit to the default; `versioning` is
        "enabled" or "suspended"; `object_lock` enables object lock or changes its default
        retention; `lifecycle`, `cors` replace the rules, None removes them; `policy` is a
        bucket policy, None removes it; `encryption` the default encryption, AES256,
        aws:kms, aws:kms/<key name> or None); the bucket after."""
        body = shapes.UpdateBucket(
            name=name,
            max_upload_bytes=max_upload_bytes,
            allowed_content_types=allowed_content_types,
            versioning=versioning,
            object_lock=object_lock,
            lifecycle=lifecycle,
            cors=cors,
            public=public,
            cache_control=cache_control,
            policy=policy,
            anonymous_requests_per_minute=anonymous_requests_per_minute,
            encryption=encryption,
        )
        await self._call(calls.update_bucket(bucket_id, body))
        return await self.get_bucket(bucket_id)

    async def delete_bucket(self, bucket_id: str, *, force: bool = False) -> None:
        """Delete a bucket; `force` deletes its files with it (else 409 while it has any)."""
        await self._call(calls.delete_bucket(bucket_id, force))

    async def wait_until_active(
        self, bucket: Bucket | str, *, timeout: float = 60.0, interval: float = 0.1
    ) -> Bucket:
        """Poll until the bucket is active; BucketFailed if provisioning failed, TimeoutError
        after `timeout` seconds."""
        bucket_id = bucket if isinstance(bucket, str) else bucket.id
        limit = time.monotonic() + timeout
        while True:
            current = await self.get_bucket(bucket_id)
            if current.status == "active":
                return current
            if current.status == "failed":
                raise BucketFailed(bucket_id, current.status_reason)
            if time.monotonic() >= limit:
                raise TimeoutError(f"bucket {bucket_id} still {current.status} after {timeout} s")
            await anyio.sleep(interval)

    # files

    async def list_files(
        self,
        bucket_id: str,
        *,
        prefix: str = "",
        delimiter: str = "",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[File]:
        return await self._call(calls.list_files(bucket_id, prefix, delimiter, limit, cursor))

    def iter_files(
        self, bucket_id: str, *, prefix: str = "", page_size: int = 100
    ) -> AsyncIterator[File]:
        """Every file under `prefix`, in key order, following the cursor page by page."""
        return self._pages(
            lambda cursor: self.list_files(bucket_id, prefix=prefix, limit=page_size, cursor=cursor)
        )

    async def upload(
        self,
        bucket_id: str,
        key: str,
        source: AsyncSource,
        *,
        content_type: str | None = None,
        progress: Progress | None = None,
        if_none_match: bool = False,
        if_match: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> File:
        """Store `source` (bytes, a pathlib.Path, an open binary file or an iterable of bytes;
        for `AsyncClient`, an async iterable too) at `key`, streamed chunk by chunk. The type
        defaults to a guess from the key. `if_none_match`: only if no file is at the key;
        `if_match`: only over the file with that ETag (PreconditionFailed otherwise, Conflict
        for a lost race); `tags`: the file's tags."""
        upload = async_body(source)
        headers = calls.upload_headers(
            key, content_type, upload.length, if_none_match, if_match, tags
        )
        response = await self._send(
            "PUT",
            calls.file_path(bucket_id, key),
            headers=headers,
            content=lambda: upload.chunks(progress),
            idempotent=upload.replayable,
        )
        return decode(calls.data(response), File)

    async def download(
        self,
        bucket_id: str,
        key: str,
        dest: os.PathLike[str] | IO[bytes],
        *,
        progress: Progress | None = None,
        version_id: str | None = None,
    ) -> File:
        """Stream a file (or one version of it) into `dest` (a path, written whole or not at
        all, or an open binary file), checking its SHA-256 against the ETag."""
        response = await self._send(
            "GET",
            calls.file_path(bucket_id, key),
            params=calls.version_params(version_id),
            stream=True,
        )
        try:
            meta = calls.file_from_headers(bucket_id, key, response)
            sink = Sink(dest, etag_sha256(meta.etag))
            try:
                async for chunk in response.aiter_bytes(CHUNK):
                    sink.write(chunk)
                    if progress is not None:
                        progress(sink.received, meta.size)
                sink.finish()
            except BaseException:
                sink.abort()
                raise
        finally:
            await response.aclose()
        return meta

    async def read(
        self,
        bucket_id: str,
        key: str,
        *,
        start: int | None = None,
        end: int | None = None,
        version_id: str | None = None,
    ) -> bytes:
        """A file's bytes (or a version's), or bytes [start, end) of them, in memory: for
        small files."""
        response = await self._send(
            "GET",
            calls.file_path(bucket_id, key),
            params=calls.version_params(version_id),
            headers=calls.range_header(start, end),
        )
        return response.content

    async def iter_bytes(
        self, bucket_id: str, key: str, *, start: int | None = None, end: int | None = None
    ) -> AsyncIterator[bytes]:
        """A file's bytes (or [start, end) of them) as they arrive."""
        response = await self._send(
            "GET",
            calls.file_path(bucket_id, key),
            headers=calls.range_header(start, end),
            stream=True,
        )
        try:
            async for chunk in response.aiter_bytes(CHUNK):
                yield chunk
        finally:
            await response.aclose()

    async def get_file(self, bucket_id: str, key: str, *, version_id: str | None = None) -> File:
        """A file's metadata (or a version's)."""
        return await self._call(calls.file_metadata(bucket_id, key, version_id))

    async def update_file(
        self,
        bucket_id: str,
        key: str,
        *,
        new_key: str | None = None,
        content_type: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> File:
        """Rename (a metadata move), retype and/or retag (`tags` replaces every tag; {}
        removes them) a file; the file after."""
        moved_to = await self._call(calls.update_file(bucket_id, key, new_key, content_type, tags))
        return await self.get_file(bucket_id, moved_to)

    async def sign_url(
        self,
        bucket_id: str,
        key: str,
        expires_in: int,
        *,
        upload: bool = False,
        upsert: bool = False,
    ) -> shapes.SignedUrl:
        """A URL of the file that works without a key for `expires_in` seconds (like
        Supabase's createSignedUrl); `upload`: a URL for one PUT of the key instead, which
        only creates the file unless `upsert`."""
        return await self._call(calls.sign_file(bucket_id, key, expires_in, upload, upsert))

    def public_url(self, bucket_id: str, key: str) -> str:
        """Where anyone downloads a file of a public bucket (like getPublicUrl)."""
        return calls.public_url(str(self._http.base_url), bucket_id, key)

    async def delete_file(
        self,
        bucket_id: str,
        key: str,
        *,
        version_id: str | None = None,
        bypass_governance: bool = False,
    ) -> None:
        """Delete a file (in a versioned bucket: a delete marker), or one version for good
        (`bypass_governance`: though under GOVERNANCE retention, with a key that may)."""
        await self._call(calls.delete_file(bucket_id, key, version_id, bypass_governance))

    # versions

    async def list_versions(
        self,
        bucket_id: str,
        *,
        prefix: str = "",
        key: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[FileVersion]:
        """Versions and delete markers under `prefix` (or of the file `key`), by key and
        newest first."""
        return await self._call(calls.list_versions(bucket_id, prefix, key, limit, cursor))

    def iter_versions(
        self, bucket_id: str, *, prefix: str = "", key: str | None = None, page_size: int = 100
    ) -> AsyncIterator[FileVersion]:
        """Every version under `prefix` (or of `key`), following the cursor."""
        return self._pages(
            lambda cursor: self.list_versions(
                bucket_id, prefix=prefix, key=key, limit=page_size, cursor=cursor
            )
        )

    async def restore_version(self, bucket_id: str, key: str, version_id: str) -> File:
        """Make an old version current again (a new version sharing its content)."""
        return await self._call(calls.restore_version(bucket_id, key, version_id))

    async def protect_version(
        self,
        bucket_id: str,
        key: str,
        version_id: str,
        *,
        retention: shapes.RetentionRule | Unset | None = UNSET,
        legal_hold: bool | Unset = UNSET,
        bypass_governance: bool = False,
    ) -> FileVersion:
        """Set a version's retention (None removes it, where allowed) and/or legal hold."""
        return await self._call(
            calls.protect_version(
                bucket_id, key, version_id, retention, legal_hold, bypass_governance
            )
        )

    # keys and the organization

    async def create_key(
        self,
        name: str,
        scopes: list[str],
        *,
        bucket_id: str | None = None,
        expires_at: datetime | str | None = None,
        s3: bool = False,
    ) -> Key:
        """A new key (`s3`: S3 credentials, with `access_key_id`); its `secret` is set on
        this object only."""
        return await self._call(calls.create_key(name, scopes, bucket_id, expires_at, s3))

    async def list_keys(self, limit: int | None = None, cursor: str | None = None) -> Page[Key]:
        return await self._call(calls.list_keys(limit, cursor))

    def iter_keys(self, page_size: int = 100) -> AsyncIterator[Key]:
        return self._pages(lambda cursor: self.list_keys(page_size, cursor))

    async def get_key(self, key_id: str) -> Key:
        return await self._call(calls.get_key(key_id))

    async def revoke_key(self, key_id: str) -> None:
        await self._call(calls.revoke_key(key_id))

    async def get_organization(self) -> Organization:
        return await self._call(calls.get_organization())
