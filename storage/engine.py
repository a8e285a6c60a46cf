"""The storage engine: the one object the gateway talks to.

Every call that touches tenant data takes the `Actor` it acts for; a bucket of another
organization, or outside the actor's bucket restriction, is reported exactly as a missing one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from . import ids
from .backend import Backend, GcReport
from .commits import BlobCommits, ObjectCommits
from .config import PLAN_NAMES, EngineConfig, PlanLimits
from .errors import (
    BucketNotActive,
    BucketNotFound,
    FileNotFound,
    InvalidInput,
    KeyNotFound,
    OrganizationNotFound,
    QuotaExceeded,
    StorageError,
    TooLarge,
    UnsupportedContentType,
    UploadTimeout,
)
from .faults import Faults
from .index import BucketChanges, Index, Reaper
from .limits import limited, once, prepend
from .local import LocalBackend
from .models import (
    SCOPES,
    Actor,
    ApiKey,
    Bucket,
    Condition,
    FileRecord,
    Organization,
    Page,
    StorageStats,
    StoredBlob,
    WriteOptions,
)
from .multipart import PartStore
from .sealing import Sealer
from .sqlite_index import SQLiteIndex
from .uploads import MultipartUploads
from .validation import (
    check_allow_list,
    check_bucket_name,
    check_content_type_value,
    check_key,
    check_region,
    content_type_allowed,
    mime_essence,
)

logger = logging.getLogger("bucketd.engine")
T = TypeVar("T")
MAX_NAME_LENGTH = 200
PLAIN = WriteOptions()
JANITOR_INTERVAL_SECONDS = 30.0
PROVISIONER_INTERVAL_SECONDS = 1.0
JANITOR_GRACE_SECONDS = 60.0


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def iso_to_unix(value: str) -> int:
    """Seconds since the epoch of a stored `...Z` timestamp (fromisoformat is C-fast)."""
    return int(datetime.fromisoformat(value).timestamp())


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(
            f"{what} must be a non-empty string of at most {MAX_NAME_LENGTH} characters"
        )
    return name


def _check_max_bytes(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 2**62:
        raise InvalidInput("maxUploadBytes must be a non-negative integer")
    return value


async def open_index(config: EngineConfig, reaper: Reaper, faults: Faults) -> Index:
    """The SQLite index in the data dir (the default), or PostgreSQL for several gateways."""
    if config.index.postgres:
        from .pg_index import PostgresIndex

        return await PostgresIndex.open(
            config.index.url, config.uploads, reaper, faults, config.index.pool_size
        )
    return await SQLiteIndex.open(
        config.index.sqlite_path(config.data_dir),
        config.uploads,
        config.storage.fsync,
        reaper,
        faults,
    )


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        index: Index,
        backend: Backend,
        executor: ThreadPoolExecutor,
        faults: Faults,
    ) -> None:
        self.config = config
        self.gateway_id = uuid.uuid4().hex
        """Names this process in the provisioning leases it holds."""
        self._faults = faults
        self._index = index
        self._backend = backend
        self._executor = executor
        self._tasks: set[asyncio.Task[None]] = set()
        self._sealer_instance: Sealer | None = None
        self.multipart = MultipartUploads(
            self, index, PartStore(config.data_dir, config.storage.fsync, executor, faults)
        )
        self._commits: BlobCommits | ObjectCommits
        if not backend.content_addressed:
            self._commits = ObjectCommits(index, backend, faults, now_iso, self._spawn)  # type: ignore[arg-type]
        else:
            self._commits = BlobCommits(index, backend, faults, now_iso)

    @classmethod
    async def open(cls, config: EngineConfig, *, collect_garbage: bool = True) -> Engine:
        """Open the index and backend; clean leftovers of a crash; resume provisioning."""
        executor = ThreadPoolExecutor(config.storage.io_threads, thread_name_prefix="bucketd-io")
        faults = Faults(config.faults)
        backend = await _open_backend(config, executor, faults)
        index = await open_index(config, backend.reap, faults)
        engine = cls(config, index, backend, executor, faults)
        if collect_garbage:
            report = await engine.collect_garbage()
            if report.temp_files or report.blobs:
                logger.info(
                    "start-up clean-up removed %d temp files and %d unreferenced blobs",
                    report.temp_files,
                    report.blobs,
                )
        return engine

    def start_background(self) -> None:
        """Provision buckets no live gateway is working on (a previous run's included);
        settle interrupted uploads."""
        self._spawn(self._provisioner())
        if not self._backend.content_addressed:
            self._spawn(self._janitor())

    async def _janitor(self) -> None:
        """At start-up, settle every interrupted upload; later, those past any deadline."""
        grace = self.config.uploads.deadline_seconds + JANITOR_GRACE_SECONDS
        cutoff = time.time()
        while True:
            try:
                await self._commits.heal(cutoff)
            except StorageError as exc:
                logger.warning("settling interrupted uploads failed: %s", exc)
            await asyncio.sleep(JANITOR_INTERVAL_SECONDS)
            cutoff = time.time() - grace

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._index.close()
        await self._backend.close()
        self._executor.shutdown(wait=True)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def plan(self, org: Organization) -> PlanLimits:
        return self.config.plans.get(org.plan)

    # organizations

    async def count_organizations(self) -> int:
        return await self._index.count_organizations()

    async def create_organization(self, name: str, plan: str) -> Organization:
        name = _check_name(name, "name")
        if plan not in PLAN_NAMES:
            raise InvalidInput(f"plan must be one of {', '.join(PLAN_NAMES)}")
        org = Organization(ids.new_id(self.config.id_prefix), name, plan, now_iso(), 0, 0, 0)
        await self._index.create_organization(org)
        return org

    async def get_organization(self, org_id: str) -> Organization:
        org = await self._index.get_organization(org_id)
        if org is None:
            raise OrganizationNotFound("organization not found")
        return org

    # API keys

    async def create_key(
        self,
        org_id: str,
        name: object,
        scopes: list[str],
        bucket_id: str | None = None,
        expires_at: int | None = None,
        s3: bool = False,
    ) -> tuple[ApiKey, str]:
        """Make a key; returns it and its secret. An API key's secret is stored only as a
        hash; an S3 key (`s3=True`, with an access key id) has its secret sealed, since
        verifying a signature needs it."""
        name = _check_name(name, "name")
        unknown = [scope for scope in scopes if scope not in SCOPES]
        if unknown or not scopes:
            raise InvalidInput(f"scopes must be a non-empty list of: {', '.join(SCOPES)}")
        await self.get_organization(org_id)
        if bucket_id is not None:
            await self.get_bucket(Actor(org_id), bucket_id)
        if expires_at is not None and expires_at <= time.time():
            raise InvalidInput("the expiry must be in the future")
        secret = ids.new_s3_secret() if s3 else ids.new_secret(self.config.id_prefix)
        access_key_id = ids.new_access_key_id() if s3 else None
        key = ApiKey(
            id=ids.new_id(self.config.id_prefix),
            org_id=org_id,
            name=name,
            scopes=tuple(scope for scope in SCOPES if scope in scopes),
            bucket_id=bucket_id,
            created_at=now_iso(),
            expires_at=expires_at,
            revoked_at=None,
            last4=secret[-4:],
            access_key_id=access_key_id,
        )
        sealed = None if access_key_id is None else self._sealer().seal(secret, access_key_id)
        await self._index.create_key(key, ids.hash_secret(secret), sealed)
        return key, secret

    def _sealer(self) -> Sealer:
        if self._sealer_instance is None:
            self._sealer_instance = Sealer.for_data_dir(self.config.data_dir)
        return self._sealer_instance

    async def find_s3_key(self, access_key_id: str) -> tuple[ApiKey, str] | None:
        """The S3 credential and its secret (unsealed), whatever its state."""
        found = await self._index.find_access_key(access_key_id)
        if found is None:
            return None
        key, sealed = found
        return key, self._sealer().open(sealed, access_key_id)

    async def find_key(self, secret_hash: bytes) -> tuple[ApiKey, bytes] | None:
        """The key stored under a secret's hash, with that stored hash (in any state)."""
        return await self._index.find_key(secret_hash)

    async def get_key(self, actor: Actor, key_id: str) -> ApiKey:
        key = await self._index.get_key(actor.org_id, key_id)
        if key is None or (actor.bucket_id is not None and key.bucket_id != actor.bucket_id):
            raise KeyNotFound("key not found")
        return key

    async def list_keys(self, actor: Actor, after: str | None, limit: int) -> Page[ApiKey]:
        rows = await self._index.list_keys(actor.org_id, actor.bucket_id, after, limit + 1)
        return _page_of(rows, limit, lambda key: key.id)

    def watch_revocations(self, forget: Callable[[str], None]) -> None:
        """Have `forget` called with every key id revoked, by this process or another."""
        self._spawn(self._index.watch_revocations(forget))

    async def revoke_key(self, actor: Actor, key_id: str) -> ApiKey:
        await self.get_key(actor, key_id)
        await self._index.revoke_key(actor.org_id, key_id, now_iso())
        return await self.get_key(actor, key_id)

    # buckets

    async def create_bucket(
        self,
        actor: Actor,
        name: object,
        region: object,
        max_upload_bytes: object = None,
        allowed_content_types: object = None,
    ) -> Bucket:
        check_bucket_name(name)
        check_region(region, self.config.regions)
        assert isinstance(name, str) and isinstance(region, str)
        limit = None if max_upload_bytes is None else _check_max_bytes(max_upload_bytes)
        types = None if allowed_content_types is None else check_allow_list(allowed_content_types)
        org = await self.get_organization(actor.org_id)
        bucket = Bucket(
            id=ids.new_id(self.config.id_prefix),
            org_id=org.id,
            name=name,
            region=region,
            status="provisioning",
            status_reason=None,
            created_at=now_iso(),
            max_upload_bytes=self.config.uploads.default_max_bytes if limit is None else limit,
            allowed_content_types=types or tuple(self.config.uploads.allowed_content_types),
            file_count=0,
            size_bytes=0,
        )
        bucket = replace(bucket, location=self._backend.location_for(bucket))
        await self._index.insert_bucket(bucket, self.plan(org).max_buckets, limit, types)
        await self._claim_provisioning(bucket.id)
        return bucket

    async def _claim_provisioning(self, bucket_id: str | None = None) -> bool:
        """Claim a bucket to provision (that one, or any whose lease ran out) and start on
        it; False when there was none to claim."""
        now = time.time()
        until = (
            now + self.config.provisioning_delay_seconds + self.config.provisioning_lease_seconds
        )
        bucket = await self._index.claim_provisioning(self.gateway_id, now, until, bucket_id)
        if bucket is None:
            return False
        elapsed = now - iso_to_unix(bucket.created_at)
        delay = max(0.0, self.config.provisioning_delay_seconds - elapsed)
        self._spawn(self._provision(bucket, delay))
        return True

    async def _provision(self, bucket: Bucket, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            await self._backend.provision_bucket(bucket)
        except Exception as exc:
            logger.warning("provisioning bucket %s failed: %s", bucket.id, exc)
            await self._index.set_bucket_status(bucket.id, "failed", str(exc) or type(exc).__name__)
            return
        await self._index.set_bucket_status(bucket.id, "active", None)

    async def _provisioner(self) -> None:
        """Take over provisioning that no live gateway holds: a previous run's, or (with a
        shared PostgreSQL index, polled each second) that of a gateway that died."""
        if not self.config.index.postgres:
            await self._index.release_claims()  # this process is the only one
            while await self._claim_provisioning():
                pass
            return
        while True:
            try:
                while await self._claim_provisioning():
                    pass
            except StorageError as exc:
                logger.warning("claiming buckets to provision failed: %s", exc)
            await asyncio.sleep(PROVISIONER_INTERVAL_SECONDS)

    async def get_bucket(self, actor: Actor, bucket_id: str) -> Bucket:
        bucket = await self._index.get_bucket(bucket_id)
        if bucket is None or bucket.org_id != actor.org_id or not actor.can_see(bucket_id):
            raise BucketNotFound("bucket not found")
        return bucket

    async def bucket_owner(self, bucket_id: str) -> Actor:
        """The organization a bucket belongs to, as an actor: for operator commands that
        work on a data dir directly (export, import), where no API key is involved."""
        bucket = await self._index.get_bucket(bucket_id)
        if bucket is None:
            raise BucketNotFound("bucket not found")
        return Actor(bucket.org_id)

    async def get_bucket_by_name(self, actor: Actor, name: str) -> Bucket:
        bucket = await self._index.get_bucket_by_name(actor.org_id, name)
        if bucket is None or not actor.can_see(bucket.id):
            raise BucketNotFound("bucket not found")
        return bucket

    async def list_buckets(self, actor: Actor, after: str | None, limit: int) -> Page[Bucket]:
        rows = await self._index.list_buckets(actor.org_id, actor.bucket_id, after, limit + 1)
        return _page_of(rows, limit, lambda bucket: bucket.id)

    async def update_bucket(
        self, actor: Actor, bucket_id: str, changes: dict[str, object]
    ) -> Bucket:
        """Apply a PATCH; keys are `name`, `max_upload_bytes`, `allowed_content_types`."""
        checked: BucketChanges = {}
        if "name" in changes:
            checked["name"] = check_bucket_name(changes["name"])
        if "max_upload_bytes" in changes:
            value = changes["max_upload_bytes"]
            checked["max_upload_bytes"] = None if value is None else _check_max_bytes(value)
        if "allowed_content_types" in changes:
            value = changes["allowed_content_types"]
            checked["allowed_content_types"] = None if value is None else check_allow_list(value)
        await self.get_bucket(actor, bucket_id)
        await self._index.update_bucket(bucket_id, checked)
        return await self.get_bucket(actor, bucket_id)

    async def delete_bucket(self, actor: Actor, bucket_id: str, force: bool = False) -> None:
        bucket = await self.get_bucket(actor, bucket_id)
        await self._commits.delete_bucket(bucket, force)

    # files

    async def put_file(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        content_type: str | None,
        chunks: AsyncIterator[bytes],
        content_length: int | None = None,
        deadline: float | None = None,
        options: WriteOptions = PLAIN,
    ) -> FileRecord:
        """Store a stream at a key, checking limits in the order decisions.md gives.

        `deadline` is a time of the running loop's clock by which the whole body must have
        arrived; past it the upload fails with UploadTimeout, even if the client stalls.
        """
        bucket, quota_left, quota = await self.check_upload(
            actor, bucket_id, key, content_type, content_length
        )
        stream = limited(chunks, bucket.max_upload_bytes, quota_left)
        content_type = content_type.strip()  # type: ignore[union-attr]
        try:
            async with asyncio.timeout_at(deadline):
                blob = await self._store(bucket, key, content_type, stream, options.md5)
        except TimeoutError:
            raise UploadTimeout("the upload did not complete before its deadline") from None
        return await self._commits.commit(bucket, key, content_type, blob, quota, options)

    async def _store(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        stream: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        inline_max = self.config.storage.inline_max_bytes
        if inline_max <= 0 or not self._backend.content_addressed:
            return await self._backend.write(bucket, key, content_type, stream, md5)
        buffer = bytearray()
        async for chunk in stream:
            buffer += chunk
            if len(buffer) > inline_max:
                rest = prepend(bytes(buffer), stream)
                return await self._backend.write(bucket, key, content_type, rest, md5)
        data = bytes(buffer)
        sha = hashlib.sha256(data).hexdigest()
        digest = hashlib.md5(data).hexdigest() if md5 else None
        return StoredBlob(blob_id=sha, size=len(data), sha256=sha, inline=data, md5=digest)

    async def check_upload(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        content_type: str | None,
        content_length: int | None,
    ) -> tuple[Bucket, int, int]:
        """The checks of an upload before its body is read, in the order decisions.md gives:
        (bucket, bytes of quota left for this key, the plan's quota)."""
        check_key(key)
        self._backend.check_key(key)
        bucket = await self.get_bucket(actor, bucket_id)
        if bucket.status != "active":
            raise BucketNotActive(
                f"the bucket is {bucket.status}; files can be written once it is active"
            )
        essence = mime_essence(content_type) if content_type else None
        if essence is None:
            raise UnsupportedContentType("a Content-Type header with a MIME type is required")
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
        org = await self.get_organization(actor.org_id)
        quota = self.plan(org).max_storage_bytes
        old_size = await self._index.file_size(bucket_id, key)
        quota_left = quota - org.stored_bytes + (old_size or 0)
        if content_length is not None and content_length > quota_left:
            raise QuotaExceeded("the upload would bring the organization past its storage quota")
        return bucket, max(quota_left, 0), quota

    async def store_and_commit(
        self,
        actor: Actor,
        bucket: Bucket,
        key: str,
        content_type: str,
        chunks: AsyncIterator[bytes],
        options: WriteOptions,
        md5: str | None = None,
    ) -> FileRecord:
        """Store a stream the caller has already checked (a completed multipart upload);
        `md5` replaces the content's MD5 as its S3 ETag."""
        quota = self.plan(await self.get_organization(actor.org_id)).max_storage_bytes
        blob = await self._store(bucket, key, content_type, chunks)
        if md5 is not None:
            blob = replace(blob, md5=md5)
        return await self._commits.commit(bucket, key, content_type, blob, quota, options)

    async def copy_file(
        self,
        actor: Actor,
        source: FileRecord,
        bucket_id: str,
        key: str,
        content_type: str | None = None,
        metadata: str | None = None,
        condition: Condition | None = None,
    ) -> FileRecord:
        """Copy a file (visible to the actor) to another key, sharing its content where the
        backend can. `content_type`/`metadata` None keep the source's."""
        content_type = content_type or source.content_type
        bucket, _, quota = await self.check_upload(actor, bucket_id, key, content_type, source.size)
        return await self._commits.copy(
            source,
            bucket,
            key,
            content_type.strip(),
            source.metadata if metadata is None else metadata,
            quota,
            condition,
        )

    async def s3_etag(self, record: FileRecord) -> str:
        """The file's S3 ETag (quoted MD5, or MD5-of-MD5s-N). Files uploaded through /v1
        get their MD5 computed on first need, once."""
        if record.md5 is None:
            digest = hashlib.md5()
            async for chunk in await self.open_file(record, 0, record.size):
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, digest.update, chunk
                )
            md5 = digest.hexdigest()
            await self._index.set_md5(record.bucket_id, record.key, record.blob_id, md5)
            return f'"{md5}"'
        return f'"{record.md5}"'

    async def get_file(self, actor: Actor, bucket_id: str, key: str) -> FileRecord:
        check_key(key)
        await self.get_bucket(actor, bucket_id)
        record = await self._index.get_file(bucket_id, key)
        if record is None:
            raise FileNotFound("file not found")
        return record

    async def open_file(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes [start, end) of a file's content; FileNotFound if it was replaced meanwhile."""
        if not 0 <= start <= end <= record.size:
            raise InvalidInput("the byte range is outside the file")
        if record.size <= self.config.storage.inline_max_bytes:
            data = await self._index.read_inline(record.blob_id)
            if data is not None:
                return once(data[start:end])
        return await self._backend.read(record, start, end)

    async def list_files(
        self,
        actor: Actor,
        bucket_id: str,
        prefix: str = "",
        delimiter: str = "",
        after: str | None = None,
        limit: int = 20,
    ) -> Page[FileRecord]:
        await self.get_bucket(actor, bucket_id)
        self._faults.hit("list")
        return await self._index.list_files(bucket_id, prefix, delimiter, after, limit)

    async def update_file(
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
        bucket = await self.get_bucket(actor, bucket_id)
        if content_type is not None:
            essence = mime_essence(content_type)
            assert essence is not None
            if not content_type_allowed(essence, bucket.allowed_content_types):
                raise UnsupportedContentType(f"{essence} is not allowed in this bucket")
        if bucket.status != "active":
            raise BucketNotActive(
                f"the bucket is {bucket.status}; files can be changed once it is active"
            )
        record = await self._index.get_file(bucket_id, key)
        if record is None:
            raise FileNotFound("file not found")
        return await self._commits.update(record, new_key, content_type)

    async def delete_file(self, actor: Actor, bucket_id: str, key: str) -> None:
        check_key(key)
        await self.get_bucket(actor, bucket_id)
        await self._commits.delete(bucket_id, key)

    # maintenance

    async def stats(self) -> StorageStats:
        """Totals over every organization (operators' metrics, not scoped to an actor)."""
        return await self._index.stats()

    def observe_index_writes(self, observe: Callable[[float], None]) -> None:
        self._index.observe_writes(observe)

    async def collect_garbage(self) -> GcReport:
        """Remove temp files, unreferenced blobs and parts of uploads nobody knows.
        Only while no upload is in flight."""
        await self.multipart.collect_garbage()
        return await self._backend.collect_garbage(await self._index.blob_ids())

    async def check_consistency(self) -> list[str]:
        """Counters against the rows they count, blob files against references, temp files.

        Exact only while no write is in flight (a stopped server, or a quiet one).
        """
        problems = await self._index.check_consistency()
        if isinstance(self._backend, LocalBackend):
            referenced = await self._index.blob_ids()
            on_disk = self._backend.blob_ids_on_disk()
            problems += [f"blob {b}: referenced but missing on disk" for b in referenced - on_disk]
            problems += [
                f"blob {b}: on disk but referenced by no file" for b in on_disk - referenced
            ]
            problems += [
                f"temp file {path.name} left behind" for path in self._backend.temp_files()
            ]
        return problems


async def _open_backend(
    config: EngineConfig, executor: ThreadPoolExecutor, faults: Faults
) -> Backend:
    if config.storage.backend == "local":
        return LocalBackend(config.data_dir, config.storage.fsync, executor, faults)
    if config.storage.backend == "s3":
        from .s3 import S3Backend  # aiobotocore is heavy; the local default never loads it

        return await S3Backend.open(config.storage.s3, executor, faults)
    raise InvalidInput(f"unknown storage backend {config.storage.backend!r}")


def _page_of(rows: list[T], limit: int, position: Callable[[T], str]) -> Page[T]:
    has_more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, has_more, [], position(rows[-1]) if has_more else None)
