"""The index in PostgreSQL (asyncpg), for several gateways over one database.

The same tables, migrations (numbered alike, in `migrations/postgres/`) and rules as the
SQLite index. What differs is concurrency: SQLite has one writer, PostgreSQL many. Every
write that changes an organization's counters locks that organization's row first
(`SELECT ... FOR UPDATE`), so quota checks and usage counters stay exact across gateways,
and always in the same order (organization, then bucket, then blobs) to keep deadlocks
rare; a transaction PostgreSQL still aborts as a deadlock or a serialization failure is run
again.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

import asyncpg

from . import listing
from .config import UploadSettings
from .errors import (
    BucketNameTaken,
    BucketNotActive,
    BucketNotEmpty,
    BucketNotFound,
    BucketProvisioning,
    FileExists,
    FileNotFound,
    IndexUnavailable,
    QuotaExceeded,
    UploadNotFound,
)
from .faults import Faults
from .index import BucketChanges, Reaper
from .listing import Range
from .models import (
    ApiKey,
    Bucket,
    Condition,
    FileRecord,
    MultipartUpload,
    Organization,
    Page,
    Part,
    Reservation,
    StorageStats,
    StoredBlob,
)
from .rows import (
    BUCKET_COLUMNS,
    CONSISTENCY_QUERIES,
    FILE_COLUMNS,
    KEY_COLUMNS,
    ORG_COLUMNS,
    PART_COLUMNS,
    UPLOAD_COLUMNS,
    bucket_change_columns,
    bucket_from_row,
    check_condition,
    consistency_problems,
    file_from_row,
    key_from_row,
    org_from_row,
    page_query,
)
from .sqlite_db import migrations

T = TypeVar("T")
Released = list[tuple[str, bool]]
Conn = Any
"""An asyncpg connection (asyncpg ships no type hints)."""

RETRIES = 5
REVOCATIONS = "bucketd_revocations"
LISTEN_RETRY_SECONDS = 1.0
MIGRATION_LOCK = 0x6275636B  # "buck": one gateway migrates at a time
_PLACEHOLDER = re.compile(r"\?")


def pg(sql: str) -> str:
    """SQL written with `?` placeholders (as for SQLite) in PostgreSQL's `$1, $2, ...`."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


def _unavailable(exc: BaseException) -> IndexUnavailable:
    return IndexUnavailable(f"the PostgreSQL index is unavailable: {exc}")


_DOWN = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError)
_RETRY = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


async def _migrate(conn: Conn) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        applied = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        known = migrations("postgres")
        newest = known[-1][0] if known else 0
        if applied > newest:
            raise IndexUnavailable(
                f"the index is at schema version {applied}, newer than this bucketd knows "
                f"({newest}); run the newer bucketd"
            )
        for version, script in known:
            if version > applied:
                await conn.execute(script)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)


class PostgresIndex:
    def __init__(
        self, pool: Any, url: str, uploads: UploadSettings, faults: Faults, reaper: Reaper
    ) -> None:
        self._pool = pool
        self._url = url
        self._uploads = uploads
        self._faults = faults
        self._reaper = reaper
        self._observe: Callable[[float], None] | None = None

    @classmethod
    async def open(
        cls, url: str, uploads: UploadSettings, reaper: Reaper, faults: Faults, pool_size: int = 10
    ) -> PostgresIndex:
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=pool_size, timeout=10)
        except (TimeoutError, *_DOWN) as exc:
            raise _unavailable(exc) from exc
        try:
            async with pool.acquire() as conn:
                await _migrate(conn)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, url, uploads, faults, reaper)

    async def close(self) -> None:
        await self._pool.close()

    async def _read(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        try:
            async with self._pool.acquire() as conn:
                return await fn(conn)
        except _DOWN as exc:
            raise _unavailable(exc) from exc

    async def _fetchrow(self, sql: str, *args: object) -> Any:
        return await self._read(lambda conn: conn.fetchrow(pg(sql), *args))

    async def _fetch(self, sql: str, *args: object) -> list[Any]:
        rows: list[Any] = await self._read(lambda conn: conn.fetch(pg(sql), *args))
        return rows

    async def _write(self, fn: Callable[[Conn, Released], Awaitable[T]]) -> T:
        """One transaction, run again if PostgreSQL aborts it as a deadlock; then the
        blobs it released are handed to the reaper."""
        started = time.perf_counter()
        for attempt in range(RETRIES):
            released: Released = []
            try:
                async with self._pool.acquire() as conn:
                    async with conn.transaction():
                        result = await fn(conn, released)
                    await self._after_commit(conn, released)
                break
            except _RETRY:
                if attempt == RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
            except _DOWN as exc:
                raise _unavailable(exc) from exc
        if self._observe is not None:
            self._observe(time.perf_counter() - started)
        return result

    async def _after_commit(self, conn: Conn, released: Released) -> None:
        for blob_id, has_file in released:
            if not has_file:
                continue
            inline_free = await conn.fetchval(
                "SELECT inline_data IS NULL FROM blobs WHERE id = $1", blob_id
            )
            if inline_free is None or not inline_free:
                self._reaper(blob_id)

    def _bucket(self, row: Any) -> Bucket:
        return bucket_from_row(tuple(row), self._uploads)

    # organizations

    async def count_organizations(self) -> int:
        return int(await self._read(lambda c: c.fetchval("SELECT COUNT(*) FROM organizations")))

    async def create_organization(self, org: Organization) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute(
                "INSERT INTO organizations (id, name, plan, created_at) VALUES ($1, $2, $3, $4)",
                org.id,
                org.name,
                org.plan,
                org.created_at,
            )

        await self._write(write)

    async def get_organization(self, org_id: str) -> Organization | None:
        row = await self._fetchrow(f"SELECT {ORG_COLUMNS} FROM organizations WHERE id = ?", org_id)
        return None if row is None else org_from_row(tuple(row))

    # API keys

    async def create_key(
        self, key: ApiKey, secret_hash: bytes, secret_sealed: bytes | None = None
    ) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute(
                pg(
                    "INSERT INTO api_keys (id, org_id, name, secret_hash, last4, scopes, "
                    "bucket_id, created_at, expires_at, access_key_id, secret_sealed) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                key.id,
                key.org_id,
                key.name,
                secret_hash,
                key.last4,
                " ".join(key.scopes),
                key.bucket_id,
                key.created_at,
                key.expires_at,
                key.access_key_id,
                secret_sealed,
            )

        await self._write(write)

    async def find_key(self, secret_hash: bytes) -> tuple[ApiKey, bytes] | None:
        row = await self._fetchrow(
            f"SELECT {KEY_COLUMNS}, secret_hash FROM api_keys WHERE secret_hash = ?", secret_hash
        )
        return None if row is None else (key_from_row(tuple(row)[:-1]), bytes(row[-1]))

    async def find_access_key(self, access_key_id: str) -> tuple[ApiKey, bytes] | None:
        row = await self._fetchrow(
            f"SELECT {KEY_COLUMNS}, secret_sealed FROM api_keys WHERE access_key_id = ?",
            access_key_id,
        )
        if row is None or row[-1] is None:
            return None
        return key_from_row(tuple(row)[:-1]), bytes(row[-1])

    async def get_key(self, org_id: str, key_id: str) -> ApiKey | None:
        row = await self._fetchrow(
            f"SELECT {KEY_COLUMNS} FROM api_keys WHERE org_id = ? AND id = ?", org_id, key_id
        )
        return None if row is None else key_from_row(tuple(row))

    async def list_keys(
        self, org_id: str, bucket_id: str | None, after: str | None, limit: int
    ) -> list[ApiKey]:
        sql, args = page_query("api_keys", KEY_COLUMNS, org_id, after, limit, bucket_id=bucket_id)
        return [key_from_row(tuple(row)) for row in await self._fetch(sql, *args)]

    async def revoke_key(self, org_id: str, key_id: str, at: str) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute(
                "UPDATE api_keys SET revoked_at = $1 "
                "WHERE org_id = $2 AND id = $3 AND revoked_at IS NULL",
                at,
                org_id,
                key_id,
            )
            await conn.execute("SELECT pg_notify($1, $2)", REVOCATIONS, key_id)

        await self._write(write)

    async def watch_revocations(self, forget: Callable[[str], None]) -> None:
        """LISTEN on a connection of its own (delivered when the revoking transaction
        commits); reconnect after losing it, and meanwhile the key cache's expiry holds."""
        while True:
            try:
                conn = await asyncpg.connect(self._url)
            except (TimeoutError, *_DOWN):
                await asyncio.sleep(LISTEN_RETRY_SECONDS)
                continue
            try:
                await conn.add_listener(REVOCATIONS, lambda *args: forget(args[-1]))
                while not conn.is_closed():
                    await asyncio.sleep(LISTEN_RETRY_SECONDS)
                    await conn.execute("SELECT 1")
            except _DOWN:
                pass
            finally:
                await conn.close()

    # buckets

    async def insert_bucket(
        self,
        bucket: Bucket,
        max_buckets: int,
        own_max_upload_bytes: int | None,
        own_allowed_content_types: tuple[str, ...] | None,
    ) -> None:
        types = None if own_allowed_content_types is None else json.dumps(own_allowed_content_types)

        async def write(conn: Conn, released: Released) -> None:
            count = await conn.fetchval(
                "SELECT bucket_count FROM organizations WHERE id = $1 FOR UPDATE", bucket.org_id
            )
            if count >= max_buckets:
                raise QuotaExceeded(f"the plan allows at most {max_buckets} buckets")
            try:
                async with conn.transaction():
                    await conn.execute(
                        pg(
                            "INSERT INTO buckets (id, org_id, name, region, status, created_at, "
                            "max_upload_bytes, allowed_content_types, location) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                        ),
                        bucket.id,
                        bucket.org_id,
                        bucket.name,
                        bucket.region,
                        bucket.status,
                        bucket.created_at,
                        own_max_upload_bytes,
                        types,
                        bucket.location,
                    )
            except asyncpg.UniqueViolationError:
                raise BucketNameTaken(f"a bucket named {bucket.name!r} already exists") from None
            await conn.execute(
                "UPDATE organizations SET bucket_count = bucket_count + 1 WHERE id = $1",
                bucket.org_id,
            )

        await self._write(write)

    async def get_bucket(self, bucket_id: str) -> Bucket | None:
        row = await self._fetchrow(f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE id = ?", bucket_id)
        return None if row is None else self._bucket(row)

    async def get_bucket_by_name(self, org_id: str, name: str) -> Bucket | None:
        row = await self._fetchrow(
            f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE org_id = ? AND name = ?", org_id, name
        )
        return None if row is None else self._bucket(row)

    async def list_buckets(
        self, org_id: str, only_id: str | None, after: str | None, limit: int
    ) -> list[Bucket]:
        sql, args = page_query("buckets", BUCKET_COLUMNS, org_id, after, limit, id=only_id)
        return [self._bucket(row) for row in await self._fetch(sql, *args)]

    async def buckets_with_status(self, status: str) -> list[Bucket]:
        rows = await self._fetch(
            f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE status = ? ORDER BY id", status
        )
        return [self._bucket(row) for row in rows]

    async def update_bucket(self, bucket_id: str, changes: BucketChanges) -> None:
        columns = bucket_change_columns(changes)
        if not columns:
            return
        assignments = ", ".join(f"{column} = ?" for column in columns)

        async def write(conn: Conn, released: Released) -> None:
            try:
                async with conn.transaction():
                    status = await conn.execute(
                        pg(f"UPDATE buckets SET {assignments} WHERE id = ?"),
                        *columns.values(),
                        bucket_id,
                    )
            except asyncpg.UniqueViolationError:
                raise BucketNameTaken(
                    f"a bucket named {changes['name']!r} already exists"
                ) from None
            if status.endswith(" 0"):
                raise BucketNotFound("bucket not found")

        await self._write(write)

    async def claim_provisioning(
        self, owner: str, now: float, until: float, bucket_id: str | None = None
    ) -> Bucket | None:
        """Claim one bucket to provision; SKIP LOCKED lets gateways claim side by side
        without waiting for each other or claiming the same one."""
        only = "" if bucket_id is None else " AND id = $4"
        args: list[object] = [owner, now, until]
        if bucket_id is not None:
            args.append(bucket_id)

        async def write(conn: Conn, released: Released) -> Bucket | None:
            row = await conn.fetchrow(
                "UPDATE buckets SET claimed_by = $1, claimed_until = $3, "
                "provision_claims = provision_claims + 1 WHERE id = ("
                "SELECT id FROM buckets WHERE status = 'provisioning' "
                f"AND (claimed_until IS NULL OR claimed_until < $2){only} "
                f"ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {BUCKET_COLUMNS}",
                *args,
            )
            return None if row is None else self._bucket(row)

        return await self._write(write)

    async def release_claims(self) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute(
                "UPDATE buckets SET claimed_by = NULL, claimed_until = NULL "
                "WHERE status = 'provisioning'"
            )

        await self._write(write)

    async def set_bucket_status(self, bucket_id: str, status: str, reason: str | None) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute(
                "UPDATE buckets SET status = $1, status_reason = $2 WHERE id = $3",
                status,
                reason,
                bucket_id,
            )

        await self._write(write)

    async def delete_bucket(self, bucket_id: str, force: bool) -> None:
        async def write(conn: Conn, released: Released) -> None:
            org_id = await conn.fetchval("SELECT org_id FROM buckets WHERE id = $1", bucket_id)
            if org_id is None:
                raise BucketNotFound("bucket not found")
            await _lock_organization(conn, org_id)
            row = await conn.fetchrow(
                "SELECT status, file_count, size_bytes FROM buckets WHERE id = $1 FOR UPDATE",
                bucket_id,
            )
            if row is None:
                raise BucketNotFound("bucket not found")
            status, file_count, size_bytes = row
            if status == "provisioning":
                raise BucketProvisioning("the bucket is still provisioning; try again later")
            if file_count and not force:
                raise BucketNotEmpty(
                    f"the bucket holds {file_count} files; delete them or pass force=true"
                )
            counts = await conn.fetch(
                "SELECT blob_id, COUNT(*) FROM files WHERE bucket_id = $1 "
                "GROUP BY blob_id ORDER BY blob_id",
                bucket_id,
            )
            for blob_id, count in counts:
                await _decref(conn, blob_id, count, released)
            await conn.execute("DELETE FROM files WHERE bucket_id = $1", bucket_id)
            await conn.execute("DELETE FROM buckets WHERE id = $1", bucket_id)
            await conn.execute(
                "UPDATE organizations SET bucket_count = bucket_count - 1, "
                "file_count = file_count - $1, stored_bytes = stored_bytes - $2 WHERE id = $3",
                file_count,
                size_bytes,
                org_id,
            )

        await self._write(write)

    # files

    async def get_file(self, bucket_id: str, key: str) -> FileRecord | None:
        row = await self._fetchrow(
            f"SELECT {FILE_COLUMNS}, (SELECT location FROM buckets WHERE id = bucket_id) "
            "FROM files WHERE bucket_id = ? AND key = ?",
            bucket_id,
            key,
        )
        return None if row is None else file_from_row(tuple(row)[:-1], row[-1])

    async def stats(self) -> StorageStats:
        async def read(conn: Conn) -> StorageStats:
            orgs, buckets, files, stored = await conn.fetchrow(
                "SELECT COUNT(*), COALESCE(SUM(bucket_count), 0), COALESCE(SUM(file_count), 0), "
                "COALESCE(SUM(stored_bytes), 0) FROM organizations"
            )
            blobs, blob_bytes = await conn.fetchrow(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs"
            )
            return StorageStats(
                int(orgs), int(buckets), int(files), int(stored), int(blobs), int(blob_bytes)
            )

        return await self._read(read)

    def observe_writes(self, observe: Callable[[float], None]) -> None:
        self._observe = observe

    async def file_size(self, bucket_id: str, key: str) -> int | None:
        row = await self._fetchrow(
            "SELECT size FROM files WHERE bucket_id = ? AND key = ?", bucket_id, key
        )
        return None if row is None else int(row[0])

    async def read_inline(self, blob_id: str) -> bytes | None:
        row = await self._fetchrow("SELECT inline_data FROM blobs WHERE id = ?", blob_id)
        return None if row is None or row[0] is None else bytes(row[0])

    async def commit_file(
        self,
        bucket_id: str,
        key: str,
        blob: StoredBlob,
        content_type: str,
        uploaded_at: str,
        max_storage_bytes: int,
        reservation: str | None = None,
        metadata: str | None = None,
        checksum: str | None = None,
        condition: Condition | None = None,
    ) -> FileRecord:
        record = FileRecord(
            bucket_id,
            key,
            blob.size,
            content_type,
            uploaded_at,
            blob.sha256,
            blob.blob_id,
            blob.backend_etag,
            md5=blob.md5,
            metadata=metadata,
            checksum=checksum,
        )

        async def write(conn: Conn, released: Released) -> FileRecord:
            org_id = await _bucket_for_file_write(conn, bucket_id)
            old = await conn.fetchrow(
                "SELECT blob_id, size, md5, sha256 FROM files WHERE bucket_id = $1 AND key = $2",
                bucket_id,
                key,
            )
            check_condition(None if old is None else tuple(old)[2:], condition)
            delta = blob.size - (old[1] if old else 0)
            if reservation is None:
                await _check_quota(conn, org_id, delta, max_storage_bytes)
            else:
                await conn.execute("DELETE FROM reservations WHERE token = $1", reservation)
            await conn.execute(
                "INSERT INTO blobs (id, size, refcount, inline_data) VALUES ($1, $2, 1, $3) "
                "ON CONFLICT (id) DO UPDATE SET refcount = blobs.refcount + 1",
                blob.blob_id,
                blob.size,
                blob.inline,
            )
            if old:
                await _decref(conn, old[0], 1, released)
            await _put_file_row(conn, record)
            await _count_change(conn, bucket_id, org_id, 0 if old else 1, delta)
            self._faults.hit("put.in_commit")
            return record

        return await self._write(write)

    async def reserve(
        self,
        token: str,
        bucket_id: str,
        key: str,
        blob: StoredBlob,
        content_type: str,
        max_storage_bytes: int,
        now: float,
        condition: Condition | None = None,
    ) -> None:
        async def write(conn: Conn, released: Released) -> None:
            org_id = await _bucket_for_file_write(conn, bucket_id)
            old = await conn.fetchrow(
                "SELECT size, md5, sha256 FROM files WHERE bucket_id = $1 AND key = $2",
                bucket_id,
                key,
            )
            check_condition(None if old is None else tuple(old)[1:], condition)
            await _check_quota(conn, org_id, blob.size - (old[0] if old else 0), max_storage_bytes)
            await conn.execute(
                pg(
                    "INSERT INTO reservations (token, bucket_id, org_id, key, size, sha256, "
                    "content_type, backend_etag, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                token,
                bucket_id,
                org_id,
                key,
                blob.size,
                blob.sha256,
                content_type,
                blob.backend_etag or "",
                now,
            )

        await self._write(write)

    async def release_reservation(self, token: str) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute("DELETE FROM reservations WHERE token = $1", token)

        await self._write(write)

    async def reservations(self, created_before: float) -> list[Reservation]:
        rows = await self._fetch(
            "SELECT r.token, r.bucket_id, r.key, r.size, r.sha256, r.content_type, "
            "r.backend_etag, b.location FROM reservations r "
            "LEFT JOIN buckets b ON b.id = r.bucket_id "
            "WHERE r.created_at < ? ORDER BY r.created_at",
            created_before,
        )
        return [Reservation(*row) for row in rows]

    async def list_files(
        self, bucket_id: str, prefix: str, delimiter: str, after: str | None, limit: int
    ) -> Page[FileRecord]:
        async def read(conn: Conn) -> Page[FileRecord]:
            async def fetch(wanted: Range) -> list[FileRecord]:
                condition, args = wanted.where()
                rows = await conn.fetch(
                    pg(
                        f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = ? AND {condition} "
                        "ORDER BY key LIMIT ?"
                    ),
                    bucket_id,
                    *args,
                    wanted.need,
                )
                return [file_from_row(tuple(row)) for row in rows]

            return await listing.run_async(listing.paginate(prefix, delimiter, after, limit), fetch)

        return await self._read(read)

    async def update_file(
        self,
        bucket_id: str,
        key: str,
        new_key: str | None,
        content_type: str | None,
        moved_blob: StoredBlob | None = None,
    ) -> FileRecord:
        async def write(conn: Conn, released: Released) -> FileRecord:
            await _bucket_for_file_write(conn, bucket_id)
            row = await conn.fetchrow(
                f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = $1 AND key = $2",
                bucket_id,
                key,
            )
            if row is None:
                raise FileNotFound("file not found")
            record = file_from_row(tuple(row))
            if new_key is not None and new_key != key:
                taken = await conn.fetchval(
                    "SELECT 1 FROM files WHERE bucket_id = $1 AND key = $2", bucket_id, new_key
                )
                if taken:
                    raise FileExists("a file with that key already exists")
                await conn.execute(
                    "UPDATE files SET key = $1 WHERE bucket_id = $2 AND key = $3",
                    new_key,
                    bucket_id,
                    key,
                )
                record = replace(record, key=new_key)
            if moved_blob is not None:
                await conn.execute(
                    "INSERT INTO blobs (id, size, refcount) VALUES ($1, $2, 1)",
                    moved_blob.blob_id,
                    moved_blob.size,
                )
                await conn.execute(
                    "UPDATE files SET blob_id = $1, backend_etag = $2 "
                    "WHERE bucket_id = $3 AND key = $4",
                    moved_blob.blob_id,
                    moved_blob.backend_etag,
                    bucket_id,
                    record.key,
                )
                await _decref(conn, record.blob_id, 1, released)
                record = replace(
                    record, blob_id=moved_blob.blob_id, backend_etag=moved_blob.backend_etag
                )
            if content_type is not None:
                await conn.execute(
                    "UPDATE files SET content_type = $1 WHERE bucket_id = $2 AND key = $3",
                    content_type,
                    bucket_id,
                    record.key,
                )
                record = replace(record, content_type=content_type)
            return record

        return await self._write(write)

    async def delete_file(self, bucket_id: str, key: str) -> None:
        async def write(conn: Conn, released: Released) -> None:
            org_id = await _bucket_for_file_write(conn, bucket_id)
            row = await conn.fetchrow(
                "SELECT blob_id, size FROM files WHERE bucket_id = $1 AND key = $2",
                bucket_id,
                key,
            )
            if row is None:
                raise FileNotFound("file not found")
            await conn.execute(
                "DELETE FROM files WHERE bucket_id = $1 AND key = $2", bucket_id, key
            )
            await _decref(conn, row[0], 1, released)
            await _count_change(conn, bucket_id, org_id, -1, -row[1])
            self._faults.hit("delete.in_commit")

        await self._write(write)

    async def copy_file(
        self,
        source: FileRecord,
        bucket_id: str,
        key: str,
        content_type: str,
        metadata: str | None,
        uploaded_at: str,
        max_storage_bytes: int,
        condition: Condition | None = None,
    ) -> FileRecord:
        async def write(conn: Conn, released: Released) -> FileRecord:
            org_id = await _bucket_for_file_write(conn, bucket_id)
            current = await conn.fetchrow(
                "SELECT blob_id, md5, checksum FROM files WHERE bucket_id = $1 AND key = $2",
                source.bucket_id,
                source.key,
            )
            if current is None or current[0] != source.blob_id:
                raise FileNotFound("the source file changed or is gone")
            old = await conn.fetchrow(
                "SELECT blob_id, size, md5, sha256 FROM files WHERE bucket_id = $1 AND key = $2",
                bucket_id,
                key,
            )
            check_condition(None if old is None else tuple(old)[2:], condition)
            delta = source.size - (old[1] if old else 0)
            await _check_quota(conn, org_id, delta, max_storage_bytes)
            await conn.execute(
                "UPDATE blobs SET refcount = refcount + 1 WHERE id = $1", source.blob_id
            )
            if old:
                await _decref(conn, old[0], 1, released)
            record = FileRecord(
                bucket_id,
                key,
                source.size,
                content_type,
                uploaded_at,
                source.sha256,
                source.blob_id,
                md5=current[1],
                metadata=metadata,
                checksum=current[2],
            )
            await _put_file_row(conn, record)
            await _count_change(conn, bucket_id, org_id, 0 if old else 1, delta)
            return record

        return await self._write(write)

    async def set_md5(self, bucket_id: str, key: str, blob_id: str, md5: str) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await conn.execute(
                "UPDATE files SET md5 = $1 WHERE bucket_id = $2 AND key = $3 AND blob_id = $4",
                md5,
                bucket_id,
                key,
                blob_id,
            )

        await self._write(write)

    # multipart uploads

    async def create_upload(self, upload: MultipartUpload) -> None:
        async def write(conn: Conn, released: Released) -> None:
            await _bucket_for_file_write(conn, upload.bucket_id)
            await conn.execute(
                f"INSERT INTO multipart_uploads ({UPLOAD_COLUMNS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                upload.upload_id,
                upload.bucket_id,
                upload.key,
                upload.content_type,
                upload.metadata,
                upload.checksum_algorithm,
                upload.created_at,
            )

        await self._write(write)

    async def get_upload(self, upload_id: str) -> MultipartUpload | None:
        row = await self._fetchrow(
            f"SELECT {UPLOAD_COLUMNS} FROM multipart_uploads WHERE upload_id = ?", upload_id
        )
        return None if row is None else MultipartUpload(*row)

    async def list_uploads(
        self, bucket_id: str, prefix: str, after: tuple[str, str] | None, limit: int
    ) -> list[MultipartUpload]:
        after_key, after_id = after or ("", "")
        rows = await self._fetch(
            f"SELECT {UPLOAD_COLUMNS} FROM multipart_uploads WHERE bucket_id = ? "
            "AND (key > ? OR (key = ? AND upload_id > ?)) AND left(key, ?) = ? "
            "ORDER BY key, upload_id LIMIT ?",
            bucket_id,
            after_key,
            after_key,
            after_id,
            len(prefix),
            prefix,
            limit,
        )
        return [MultipartUpload(*row) for row in rows]

    async def put_part(self, part: Part) -> None:
        async def write(conn: Conn, released: Released) -> None:
            exists = await conn.fetchval(
                "SELECT 1 FROM multipart_uploads WHERE upload_id = $1", part.upload_id
            )
            if exists is None:
                raise UploadNotFound("the multipart upload does not exist")
            await conn.execute(
                f"INSERT INTO multipart_parts ({PART_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) "
                "ON CONFLICT (upload_id, part_number) DO UPDATE SET size = EXCLUDED.size, "
                "md5 = EXCLUDED.md5, checksum = EXCLUDED.checksum, "
                "uploaded_at = EXCLUDED.uploaded_at",
                part.upload_id,
                part.part_number,
                part.size,
                part.md5,
                part.checksum,
                part.uploaded_at,
            )

        await self._write(write)

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        rows = await self._fetch(
            f"SELECT {PART_COLUMNS} FROM multipart_parts WHERE upload_id = ? "
            "AND part_number > ? ORDER BY part_number LIMIT ?",
            upload_id,
            after,
            limit,
        )
        return [Part(*row) for row in rows]

    async def delete_upload(self, upload_id: str) -> None:
        async def write(conn: Conn, released: Released) -> None:
            status = await conn.execute(
                "DELETE FROM multipart_uploads WHERE upload_id = $1", upload_id
            )
            if status.endswith(" 0"):
                raise UploadNotFound("the multipart upload does not exist")
            await conn.execute("DELETE FROM multipart_parts WHERE upload_id = $1", upload_id)

        await self._write(write)

    async def upload_ids(self) -> set[str]:
        return {row[0] for row in await self._fetch("SELECT upload_id FROM multipart_uploads")}

    # blobs

    async def reap(self, blob_ids: list[str]) -> None:
        async def write(conn: Conn, released: Released) -> None:
            released.extend((blob_id, True) for blob_id in blob_ids)

        await self._write(write)

    async def locations(self) -> list[str]:
        rows = await self._fetch(
            "SELECT location FROM buckets WHERE location IS NOT NULL ORDER BY id"
        )
        return [row[0] for row in rows]

    async def blob_ids(self) -> set[str]:
        rows = await self._fetch("SELECT id FROM blobs WHERE inline_data IS NULL")
        return {row[0] for row in rows}

    async def load(self, tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]) -> None:
        """Copy whole tables in, in one transaction, into an index that holds nothing yet
        (`bucketd migrate`)."""

        async def write(conn: Conn, released: Released) -> None:
            if await conn.fetchval("SELECT COUNT(*) FROM organizations"):
                raise IndexUnavailable("the target index is not empty; migrate into a new one")
            for table, (columns, rows) in tables.items():
                await conn.copy_records_to_table(table, records=rows, columns=columns)

        await self._write(write)

    async def check_consistency(self) -> list[str]:
        async def read(conn: Conn) -> list[str]:
            results = [
                [tuple(row) for row in await conn.fetch(query)] for query in CONSISTENCY_QUERIES
            ]
            return consistency_problems(*results)

        return await self._read(read)


async def _lock_organization(conn: Conn, org_id: str) -> int:
    """Lock the organization's row for this transaction; its stored bytes."""
    stored = await conn.fetchval(
        "SELECT stored_bytes FROM organizations WHERE id = $1 FOR UPDATE", org_id
    )
    return int(stored or 0)


async def _bucket_for_file_write(conn: Conn, bucket_id: str) -> str:
    """The org id of an active bucket, with the organization's row locked; raises otherwise."""
    org_id = await conn.fetchval("SELECT org_id FROM buckets WHERE id = $1", bucket_id)
    if org_id is None:
        raise BucketNotFound("bucket not found")
    await _lock_organization(conn, org_id)
    status = await conn.fetchval("SELECT status FROM buckets WHERE id = $1", bucket_id)
    if status is None:
        raise BucketNotFound("bucket not found")
    if status != "active":
        raise BucketNotActive(f"the bucket is {status}; files can be written once it is active")
    return str(org_id)


async def _check_quota(conn: Conn, org_id: str, delta: int, max_storage_bytes: int) -> None:
    if delta <= 0:
        return
    used = await conn.fetchval(
        "SELECT o.stored_bytes + (SELECT COALESCE(SUM(size), 0) FROM reservations r "
        "WHERE r.org_id = o.id) FROM organizations o WHERE o.id = $1",
        org_id,
    )
    if used + delta > max_storage_bytes:
        raise QuotaExceeded(
            f"the upload would bring the organization past its {max_storage_bytes}-byte "
            "storage quota"
        )


async def _decref(conn: Conn, blob_id: str, count: int, released: Released) -> None:
    row = await conn.fetchrow(
        "UPDATE blobs SET refcount = refcount - $1 WHERE id = $2 "
        "RETURNING refcount, inline_data IS NULL",
        count,
        blob_id,
    )
    if row is not None and row[0] <= 0:
        await conn.execute("DELETE FROM blobs WHERE id = $1", blob_id)
        released.append((blob_id, bool(row[1])))


async def _put_file_row(conn: Conn, record: FileRecord) -> None:
    """Insert or replace the file row, every column (as SQLite's INSERT OR REPLACE)."""
    await conn.execute(
        "INSERT INTO files (bucket_id, key, blob_id, size, sha256, content_type, uploaded_at, "
        "backend_etag, md5, metadata, checksum) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
        "ON CONFLICT (bucket_id, key) DO UPDATE SET blob_id = EXCLUDED.blob_id, "
        "size = EXCLUDED.size, sha256 = EXCLUDED.sha256, content_type = EXCLUDED.content_type, "
        "uploaded_at = EXCLUDED.uploaded_at, backend_etag = EXCLUDED.backend_etag, "
        "md5 = EXCLUDED.md5, metadata = EXCLUDED.metadata, checksum = EXCLUDED.checksum",
        record.bucket_id,
        record.key,
        record.blob_id,
        record.size,
        record.sha256,
        record.content_type,
        record.uploaded_at,
        record.backend_etag,
        record.md5,
        record.metadata,
        record.checksum,
    )


async def _count_change(conn: Conn, bucket_id: str, org_id: str, files: int, size: int) -> None:
    await conn.execute(
        "UPDATE buckets SET file_count = file_count + $1, size_bytes = size_bytes + $2 "
        "WHERE id = $3",
        files,
        size,
        bucket_id,
    )
    await conn.execute(
        "UPDATE organizations SET file_count = file_count + $1, "
        "stored_bytes = stored_bytes + $2 WHERE id = $3",
        files,
        size,
        org_id,
    )
