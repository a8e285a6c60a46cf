"""The index in SQLite (the embedded default). All of bucketd's SQLite SQL is here."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

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
from .sqlite_db import Database

Released = list[tuple[str, bool]]


def _decref(conn: sqlite3.Connection, blob_id: str, count: int, released: Released) -> None:
    # Not UPDATE ... RETURNING: SQLite 3.40 returns a wrong `inline_data IS NULL` from it
    # on a WITHOUT ROWID table.
    conn.execute("UPDATE blobs SET refcount = refcount - ? WHERE id = ?", (count, blob_id))
    row = conn.execute(
        "SELECT refcount, inline_data IS NULL FROM blobs WHERE id = ?", (blob_id,)
    ).fetchone()
    if row is not None and row[0] <= 0:
        conn.execute("DELETE FROM blobs WHERE id = ?", (blob_id,))
        released.append((blob_id, bool(row[1])))


def _bucket_for_file_write(conn: sqlite3.Connection, bucket_id: str) -> tuple[str, int]:
    """(org_id, org stored bytes) of an active bucket; raises otherwise."""
    row = conn.execute(
        "SELECT b.status, b.org_id, o.stored_bytes FROM buckets b "
        "JOIN organizations o ON o.id = b.org_id WHERE b.id = ?",
        (bucket_id,),
    ).fetchone()
    if row is None:
        raise BucketNotFound("bucket not found")
    if row[0] != "active":
        raise BucketNotActive(f"the bucket is {row[0]}; files can be written once it is active")
    return row[1], row[2]


def _check_quota(conn: sqlite3.Connection, org_id: str, delta: int, max_storage_bytes: int) -> None:
    """Refuse growth past the quota, counting uploads reserved but not yet committed."""
    if delta <= 0:
        return
    (used,) = conn.execute(
        "SELECT o.stored_bytes + (SELECT COALESCE(SUM(size), 0) FROM reservations r "
        "WHERE r.org_id = o.id) FROM organizations o WHERE o.id = ?",
        (org_id,),
    ).fetchone()
    if used + delta > max_storage_bytes:
        raise QuotaExceeded(
            f"the upload would bring the organization past its {max_storage_bytes}-byte "
            "storage quota"
        )


def _count_change(
    conn: sqlite3.Connection, bucket_id: str, org_id: str, files: int, size: int
) -> None:
    conn.execute(
        "UPDATE buckets SET file_count = file_count + ?, size_bytes = size_bytes + ? WHERE id = ?",
        (files, size, bucket_id),
    )
    conn.execute(
        "UPDATE organizations SET file_count = file_count + ?, stored_bytes = stored_bytes + ? "
        "WHERE id = ?",
        (files, size, org_id),
    )


class SQLiteIndex:
    def __init__(self, db: Database, uploads: UploadSettings, faults: Faults) -> None:
        self._db = db
        self._uploads = uploads
        self._faults = faults

    @classmethod
    async def open(
        cls, path: Path, uploads: UploadSettings, fsync: bool, reaper: Reaper, faults: Faults
    ) -> SQLiteIndex:
        def after_commit(conn: sqlite3.Connection, released: Released) -> None:
            for blob_id, has_file in released:
                if not has_file:
                    continue
                row = conn.execute(
                    "SELECT inline_data IS NULL FROM blobs WHERE id = ?", (blob_id,)
                ).fetchone()
                if row is None or not row[0]:
                    reaper(blob_id)

        return cls(await Database.open(path, fsync, after_commit), uploads, faults)

    async def close(self) -> None:
        await self._db.close()

    def _bucket(self, row: tuple[Any, ...]) -> Bucket:
        return bucket_from_row(row, self._uploads)

    # organizations

    async def count_organizations(self) -> int:
        return await self._db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM organizations").fetchone()[0]
        )

    async def create_organization(self, org: Organization) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute(
                "INSERT INTO organizations (id, name, plan, created_at) VALUES (?, ?, ?, ?)",
                (org.id, org.name, org.plan, org.created_at),
            )

        await self._db.write(write)

    async def get_organization(self, org_id: str) -> Organization | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {ORG_COLUMNS} FROM organizations WHERE id = ?", (org_id,)
            ).fetchone()
        )
        return None if row is None else org_from_row(row)

    # API keys

    async def create_key(
        self, key: ApiKey, secret_hash: bytes, secret_sealed: bytes | None = None
    ) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute(
                "INSERT INTO api_keys (id, org_id, name, secret_hash, last4, scopes, bucket_id, "
                "created_at, expires_at, access_key_id, secret_sealed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
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
                ),
            )

        await self._db.write(write)

    async def find_key(self, secret_hash: bytes) -> tuple[ApiKey, bytes] | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {KEY_COLUMNS}, secret_hash FROM api_keys WHERE secret_hash = ?",
                (secret_hash,),
            ).fetchone()
        )
        return None if row is None else (key_from_row(row[:-1]), row[-1])

    async def find_access_key(self, access_key_id: str) -> tuple[ApiKey, bytes] | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {KEY_COLUMNS}, secret_sealed FROM api_keys WHERE access_key_id = ?",
                (access_key_id,),
            ).fetchone()
        )
        return None if row is None or row[-1] is None else (key_from_row(row[:-1]), row[-1])

    async def get_key(self, org_id: str, key_id: str) -> ApiKey | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {KEY_COLUMNS} FROM api_keys WHERE org_id = ? AND id = ?",
                (org_id, key_id),
            ).fetchone()
        )
        return None if row is None else key_from_row(row)

    async def list_keys(
        self, org_id: str, bucket_id: str | None, after: str | None, limit: int
    ) -> list[ApiKey]:
        sql, args = page_query("api_keys", KEY_COLUMNS, org_id, after, limit, bucket_id=bucket_id)
        rows = self._db.read_now(lambda c: c.execute(sql, args).fetchall())
        return [key_from_row(row) for row in rows]

    async def revoke_key(self, org_id: str, key_id: str, at: str) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute(
                "UPDATE api_keys SET revoked_at = ? "
                "WHERE org_id = ? AND id = ? AND revoked_at IS NULL",
                (at, org_id, key_id),
            )

        await self._db.write(write)

    async def watch_revocations(self, forget: Callable[[str], None]) -> None:
        """One server per SQLite index: it forgets what it revokes itself; a revocation by
        the CLI reaches it when its key cache expires."""

    # buckets

    async def insert_bucket(
        self,
        bucket: Bucket,
        max_buckets: int,
        own_max_upload_bytes: int | None,
        own_allowed_content_types: tuple[str, ...] | None,
    ) -> None:
        types = None if own_allowed_content_types is None else json.dumps(own_allowed_content_types)

        def write(conn: sqlite3.Connection, released: Released) -> None:
            (count,) = conn.execute(
                "SELECT bucket_count FROM organizations WHERE id = ?", (bucket.org_id,)
            ).fetchone()
            if count >= max_buckets:
                raise QuotaExceeded(f"the plan allows at most {max_buckets} buckets")
            try:
                conn.execute(
                    "INSERT INTO buckets (id, org_id, name, region, status, created_at, "
                    "max_upload_bytes, allowed_content_types, location) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        bucket.id,
                        bucket.org_id,
                        bucket.name,
                        bucket.region,
                        bucket.status,
                        bucket.created_at,
                        own_max_upload_bytes,
                        types,
                        bucket.location,
                    ),
                )
            except sqlite3.IntegrityError:
                raise BucketNameTaken(f"a bucket named {bucket.name!r} already exists") from None
            conn.execute(
                "UPDATE organizations SET bucket_count = bucket_count + 1 WHERE id = ?",
                (bucket.org_id,),
            )

        await self._db.write(write)

    async def get_bucket(self, bucket_id: str) -> Bucket | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE id = ?", (bucket_id,)
            ).fetchone()
        )
        return None if row is None else self._bucket(row)

    async def get_bucket_by_name(self, org_id: str, name: str) -> Bucket | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE org_id = ? AND name = ?",
                (org_id, name),
            ).fetchone()
        )
        return None if row is None else self._bucket(row)

    async def list_buckets(
        self, org_id: str, only_id: str | None, after: str | None, limit: int
    ) -> list[Bucket]:
        sql, args = page_query("buckets", BUCKET_COLUMNS, org_id, after, limit, id=only_id)
        rows = self._db.read_now(lambda c: c.execute(sql, args).fetchall())
        return [self._bucket(row) for row in rows]

    async def buckets_with_status(self, status: str) -> list[Bucket]:
        rows = await self._db.read(
            lambda c: c.execute(
                f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE status = ? ORDER BY id", (status,)
            ).fetchall()
        )
        return [self._bucket(row) for row in rows]

    async def update_bucket(self, bucket_id: str, changes: BucketChanges) -> None:
        columns = bucket_change_columns(changes)
        if not columns:
            return
        assignments = ", ".join(f"{column} = ?" for column in columns)

        def write(conn: sqlite3.Connection, released: Released) -> None:
            try:
                cursor = conn.execute(
                    f"UPDATE buckets SET {assignments} WHERE id = ?", [*columns.values(), bucket_id]
                )
            except sqlite3.IntegrityError:
                raise BucketNameTaken(
                    f"a bucket named {changes['name']!r} already exists"
                ) from None
            if cursor.rowcount == 0:
                raise BucketNotFound("bucket not found")

        await self._db.write(write)

    async def claim_provisioning(
        self, owner: str, now: float, until: float, bucket_id: str | None = None
    ) -> Bucket | None:
        def write(conn: sqlite3.Connection, released: Released) -> Bucket | None:
            sql = (
                f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE status = 'provisioning' "
                "AND (claimed_until IS NULL OR claimed_until < ?)"
            )
            args: list[object] = [now]
            if bucket_id is not None:
                sql += " AND id = ?"
                args.append(bucket_id)
            row = conn.execute(sql + " ORDER BY id LIMIT 1", args).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE buckets SET claimed_by = ?, claimed_until = ?, "
                "provision_claims = provision_claims + 1 WHERE id = ?",
                (owner, until, row[0]),
            )
            return self._bucket(row)

        result: Bucket | None = await self._db.write(write)
        return result

    async def release_claims(self) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute(
                "UPDATE buckets SET claimed_by = NULL, claimed_until = NULL "
                "WHERE status = 'provisioning'"
            )

        await self._db.write(write)

    async def set_bucket_status(self, bucket_id: str, status: str, reason: str | None) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute(
                "UPDATE buckets SET status = ?, status_reason = ? WHERE id = ?",
                (status, reason, bucket_id),
            )

        await self._db.write(write)

    async def delete_bucket(self, bucket_id: str, force: bool) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            row = conn.execute(
                "SELECT status, org_id, file_count, size_bytes FROM buckets WHERE id = ?",
                (bucket_id,),
            ).fetchone()
            if row is None:
                raise BucketNotFound("bucket not found")
            status, org_id, file_count, size_bytes = row
            if status == "provisioning":
                raise BucketProvisioning("the bucket is still provisioning; try again later")
            if file_count and not force:
                raise BucketNotEmpty(
                    f"the bucket holds {file_count} files; delete them or pass force=true"
                )
            counts = conn.execute(
                "SELECT blob_id, COUNT(*) FROM files WHERE bucket_id = ? GROUP BY blob_id",
                (bucket_id,),
            ).fetchall()
            for blob_id, count in counts:
                _decref(conn, blob_id, count, released)
            conn.execute("DELETE FROM files WHERE bucket_id = ?", (bucket_id,))
            conn.execute("DELETE FROM buckets WHERE id = ?", (bucket_id,))
            conn.execute(
                "UPDATE organizations SET bucket_count = bucket_count - 1, "
                "file_count = file_count - ?, stored_bytes = stored_bytes - ? WHERE id = ?",
                (file_count, size_bytes, org_id),
            )

        await self._db.write(write)

    # files

    async def get_file(self, bucket_id: str, key: str) -> FileRecord | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {FILE_COLUMNS}, (SELECT location FROM buckets WHERE id = bucket_id) "
                "FROM files WHERE bucket_id = ? AND key = ?",
                (bucket_id, key),
            ).fetchone()
        )
        return None if row is None else file_from_row(row[:-1], row[-1])

    async def stats(self) -> StorageStats:
        def read(conn: sqlite3.Connection) -> StorageStats:
            orgs, buckets, files, stored = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(bucket_count), 0), COALESCE(SUM(file_count), 0), "
                "COALESCE(SUM(stored_bytes), 0) FROM organizations"
            ).fetchone()
            blobs, blob_bytes = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs"
            ).fetchone()
            return StorageStats(orgs, buckets, files, stored, blobs, blob_bytes)

        return await self._db.read(read)

    def observe_writes(self, observe: Callable[[float], None]) -> None:
        self._db.observe = observe

    async def file_size(self, bucket_id: str, key: str) -> int | None:
        row = self._db.read_now(
            lambda c: c.execute(
                "SELECT size FROM files WHERE bucket_id = ? AND key = ?", (bucket_id, key)
            ).fetchone()
        )
        return None if row is None else int(row[0])

    async def read_inline(self, blob_id: str) -> bytes | None:
        row = self._db.read_now(
            lambda c: c.execute("SELECT inline_data FROM blobs WHERE id = ?", (blob_id,)).fetchone()
        )
        return None if row is None else row[0]

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

        def write(conn: sqlite3.Connection, released: Released) -> FileRecord:
            org_id, _ = _bucket_for_file_write(conn, bucket_id)
            old = conn.execute(
                "SELECT blob_id, size, md5, sha256 FROM files WHERE bucket_id = ? AND key = ?",
                (bucket_id, key),
            ).fetchone()
            check_condition(None if old is None else old[2:], condition)
            delta = blob.size - (old[1] if old else 0)
            if reservation is None:
                _check_quota(conn, org_id, delta, max_storage_bytes)
            else:
                conn.execute("DELETE FROM reservations WHERE token = ?", (reservation,))
            conn.execute(
                "INSERT INTO blobs (id, size, refcount, inline_data) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (id) DO UPDATE SET refcount = refcount + 1",
                (blob.blob_id, blob.size, blob.inline),
            )
            if old:
                _decref(conn, old[0], 1, released)
            conn.execute(
                "INSERT OR REPLACE INTO files (bucket_id, key, blob_id, size, sha256, "
                "content_type, uploaded_at, backend_etag, md5, metadata, checksum) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    bucket_id,
                    key,
                    blob.blob_id,
                    blob.size,
                    blob.sha256,
                    content_type,
                    uploaded_at,
                    blob.backend_etag,
                    blob.md5,
                    metadata,
                    checksum,
                ),
            )
            _count_change(conn, bucket_id, org_id, 0 if old else 1, delta)
            self._faults.hit("put.in_commit")
            return record

        result: FileRecord = await self._db.write(write)
        return result

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
        def write(conn: sqlite3.Connection, released: Released) -> None:
            org_id, _ = _bucket_for_file_write(conn, bucket_id)
            old = conn.execute(
                "SELECT size, md5, sha256 FROM files WHERE bucket_id = ? AND key = ?",
                (bucket_id, key),
            ).fetchone()
            check_condition(None if old is None else old[1:], condition)
            _check_quota(conn, org_id, blob.size - (old[0] if old else 0), max_storage_bytes)
            conn.execute(
                "INSERT INTO reservations (token, bucket_id, org_id, key, size, sha256, "
                "content_type, backend_etag, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    token,
                    bucket_id,
                    org_id,
                    key,
                    blob.size,
                    blob.sha256,
                    content_type,
                    blob.backend_etag or "",
                    now,
                ),
            )

        await self._db.write(write)

    async def release_reservation(self, token: str) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute("DELETE FROM reservations WHERE token = ?", (token,))

        await self._db.write(write)

    async def reservations(self, created_before: float) -> list[Reservation]:
        rows = await self._db.read(
            lambda c: c.execute(
                "SELECT r.token, r.bucket_id, r.key, r.size, r.sha256, r.content_type, "
                "r.backend_etag, b.location FROM reservations r "
                "LEFT JOIN buckets b ON b.id = r.bucket_id "
                "WHERE r.created_at < ? ORDER BY r.created_at",
                (created_before,),
            ).fetchall()
        )
        return [Reservation(*row) for row in rows]

    async def list_files(
        self, bucket_id: str, prefix: str, delimiter: str, after: str | None, limit: int
    ) -> Page[FileRecord]:
        def read(conn: sqlite3.Connection) -> Page[FileRecord]:
            return _list_files(conn, bucket_id, prefix, delimiter, after, limit)

        return await self._db.read(read)

    async def update_file(
        self,
        bucket_id: str,
        key: str,
        new_key: str | None,
        content_type: str | None,
        moved_blob: StoredBlob | None = None,
    ) -> FileRecord:
        def write(conn: sqlite3.Connection, released: Released) -> FileRecord:
            _bucket_for_file_write(conn, bucket_id)
            row = conn.execute(
                f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = ? AND key = ?",
                (bucket_id, key),
            ).fetchone()
            if row is None:
                raise FileNotFound("file not found")
            record = file_from_row(row)
            if new_key is not None and new_key != key:
                taken = conn.execute(
                    "SELECT 1 FROM files WHERE bucket_id = ? AND key = ?", (bucket_id, new_key)
                ).fetchone()
                if taken:
                    raise FileExists("a file with that key already exists")
                conn.execute(
                    "UPDATE files SET key = ? WHERE bucket_id = ? AND key = ?",
                    (new_key, bucket_id, key),
                )
                record = replace(record, key=new_key)
            if moved_blob is not None:
                conn.execute(
                    "INSERT INTO blobs (id, size, refcount) VALUES (?, ?, 1)",
                    (moved_blob.blob_id, moved_blob.size),
                )
                conn.execute(
                    "UPDATE files SET blob_id = ?, backend_etag = ? "
                    "WHERE bucket_id = ? AND key = ?",
                    (moved_blob.blob_id, moved_blob.backend_etag, bucket_id, record.key),
                )
                _decref(conn, record.blob_id, 1, released)
                record = replace(
                    record, blob_id=moved_blob.blob_id, backend_etag=moved_blob.backend_etag
                )
            if content_type is not None:
                conn.execute(
                    "UPDATE files SET content_type = ? WHERE bucket_id = ? AND key = ?",
                    (content_type, bucket_id, record.key),
                )
                record = replace(record, content_type=content_type)
            return record

        result: FileRecord = await self._db.write(write)
        return result

    async def delete_file(self, bucket_id: str, key: str) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            org_id, _ = _bucket_for_file_write(conn, bucket_id)
            row = conn.execute(
                "SELECT blob_id, size FROM files WHERE bucket_id = ? AND key = ?",
                (bucket_id, key),
            ).fetchone()
            if row is None:
                raise FileNotFound("file not found")
            conn.execute("DELETE FROM files WHERE bucket_id = ? AND key = ?", (bucket_id, key))
            _decref(conn, row[0], 1, released)
            _count_change(conn, bucket_id, org_id, -1, -row[1])
            self._faults.hit("delete.in_commit")

        await self._db.write(write)

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
        """Point `key` at the blob `source` names (a copy that shares the content)."""

        def write(conn: sqlite3.Connection, released: Released) -> FileRecord:
            current = conn.execute(
                "SELECT blob_id, md5, checksum FROM files WHERE bucket_id = ? AND key = ?",
                (source.bucket_id, source.key),
            ).fetchone()
            if current is None or current[0] != source.blob_id:
                raise FileNotFound("the source file changed or is gone")
            blob = StoredBlob(source.blob_id, source.size, source.sha256, md5=current[1])
            org_id, _ = _bucket_for_file_write(conn, bucket_id)
            old = conn.execute(
                "SELECT blob_id, size, md5, sha256 FROM files WHERE bucket_id = ? AND key = ?",
                (bucket_id, key),
            ).fetchone()
            check_condition(None if old is None else old[2:], condition)
            delta = blob.size - (old[1] if old else 0)
            _check_quota(conn, org_id, delta, max_storage_bytes)
            conn.execute("UPDATE blobs SET refcount = refcount + 1 WHERE id = ?", (blob.blob_id,))
            if old:
                _decref(conn, old[0], 1, released)
            conn.execute(
                "INSERT OR REPLACE INTO files (bucket_id, key, blob_id, size, sha256, "
                "content_type, uploaded_at, md5, metadata, checksum) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    bucket_id,
                    key,
                    blob.blob_id,
                    blob.size,
                    blob.sha256,
                    content_type,
                    uploaded_at,
                    blob.md5,
                    metadata,
                    current[2],
                ),
            )
            _count_change(conn, bucket_id, org_id, 0 if old else 1, delta)
            return FileRecord(
                bucket_id,
                key,
                blob.size,
                content_type,
                uploaded_at,
                blob.sha256,
                blob.blob_id,
                md5=blob.md5,
                metadata=metadata,
                checksum=current[2],
            )

        result: FileRecord = await self._db.write(write)
        return result

    async def set_md5(self, bucket_id: str, key: str, blob_id: str, md5: str) -> None:
        """Record a file's MD5, computed after the fact, if the key still names that blob."""

        def write(conn: sqlite3.Connection, released: Released) -> None:
            conn.execute(
                "UPDATE files SET md5 = ? WHERE bucket_id = ? AND key = ? AND blob_id = ?",
                (md5, bucket_id, key, blob_id),
            )

        await self._db.write(write)

    # multipart uploads

    async def create_upload(self, upload: MultipartUpload) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            _bucket_for_file_write(conn, upload.bucket_id)
            conn.execute(
                f"INSERT INTO multipart_uploads ({UPLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    upload.upload_id,
                    upload.bucket_id,
                    upload.key,
                    upload.content_type,
                    upload.metadata,
                    upload.checksum_algorithm,
                    upload.created_at,
                ),
            )

        await self._db.write(write)

    async def get_upload(self, upload_id: str) -> MultipartUpload | None:
        row = self._db.read_now(
            lambda c: c.execute(
                f"SELECT {UPLOAD_COLUMNS} FROM multipart_uploads WHERE upload_id = ?",
                (upload_id,),
            ).fetchone()
        )
        return None if row is None else MultipartUpload(*row)

    async def list_uploads(
        self, bucket_id: str, prefix: str, after: tuple[str, str] | None, limit: int
    ) -> list[MultipartUpload]:
        """Uploads of a bucket ordered by (key, upload id), after `after`."""
        after_key, after_id = after or ("", "")
        rows = await self._db.read(
            lambda c: c.execute(
                f"SELECT {UPLOAD_COLUMNS} FROM multipart_uploads WHERE bucket_id = ? "
                "AND (key > ? OR (key = ? AND upload_id > ?)) AND substr(key, 1, ?) = ? "
                "ORDER BY key, upload_id LIMIT ?",
                (bucket_id, after_key, after_key, after_id, len(prefix), prefix, limit),
            ).fetchall()
        )
        return [MultipartUpload(*row) for row in rows]

    async def put_part(self, part: Part) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            if (
                conn.execute(
                    "SELECT 1 FROM multipart_uploads WHERE upload_id = ?", (part.upload_id,)
                ).fetchone()
                is None
            ):
                raise UploadNotFound("the multipart upload does not exist")
            conn.execute(
                f"INSERT OR REPLACE INTO multipart_parts ({PART_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    part.upload_id,
                    part.part_number,
                    part.size,
                    part.md5,
                    part.checksum,
                    part.uploaded_at,
                ),
            )

        await self._db.write(write)

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        rows = await self._db.read(
            lambda c: c.execute(
                f"SELECT {PART_COLUMNS} FROM multipart_parts WHERE upload_id = ? "
                "AND part_number > ? ORDER BY part_number LIMIT ?",
                (upload_id, after, limit),
            ).fetchall()
        )
        return [Part(*row) for row in rows]

    async def delete_upload(self, upload_id: str) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            deleted = conn.execute(
                "DELETE FROM multipart_uploads WHERE upload_id = ?", (upload_id,)
            ).rowcount
            if not deleted:
                raise UploadNotFound("the multipart upload does not exist")
            conn.execute("DELETE FROM multipart_parts WHERE upload_id = ?", (upload_id,))

        await self._db.write(write)

    async def upload_ids(self) -> set[str]:
        rows = await self._db.read(
            lambda c: c.execute("SELECT upload_id FROM multipart_uploads").fetchall()
        )
        return {row[0] for row in rows}

    # blobs

    async def reap(self, blob_ids: list[str]) -> None:
        def write(conn: sqlite3.Connection, released: Released) -> None:
            released.extend((blob_id, True) for blob_id in blob_ids)

        await self._db.write(write)

    async def locations(self) -> list[str]:
        rows = await self._db.read(
            lambda c: c.execute(
                "SELECT location FROM buckets WHERE location IS NOT NULL ORDER BY id"
            ).fetchall()
        )
        return [row[0] for row in rows]

    async def blob_ids(self) -> set[str]:
        return await self._db.read(_blob_file_ids)

    async def check_consistency(self) -> list[str]:
        return await self._db.read(_consistency_problems)


def _list_files(
    conn: sqlite3.Connection,
    bucket_id: str,
    prefix: str,
    delimiter: str,
    after: str | None,
    limit: int,
) -> Page[FileRecord]:
    def fetch(wanted: Range) -> list[FileRecord]:
        condition, args = wanted.where()
        rows = conn.execute(
            f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = ? AND {condition} "
            "ORDER BY key LIMIT ?",
            [bucket_id, *args, wanted.need],
        ).fetchall()
        return [file_from_row(row) for row in rows]

    return listing.run(listing.paginate(prefix, delimiter, after, limit), fetch)


def _consistency_problems(conn: sqlite3.Connection) -> list[str]:
    return consistency_problems(*(conn.execute(query).fetchall() for query in CONSISTENCY_QUERIES))


Table = tuple[list[str], list[tuple[Any, ...]]]
"""A table's column names and rows."""


def dump_tables(path: Path, tables: tuple[str, ...]) -> dict[str, Table]:
    """Every row of `tables` of an index file, read-only (`bucketd migrate`)."""
    dumped = {}
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        for table in tables:
            cursor = conn.execute(f"SELECT * FROM {table}")
            columns = [description[0] for description in cursor.description]
            dumped[table] = (columns, cursor.fetchall())
    return dumped


def stored_blob_ids(path: Path) -> set[str]:
    """The blobs an index file (a backup snapshot) points at, read without opening it as a
    live index (no migrations, no writer)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return _blob_file_ids(conn)


def _blob_file_ids(conn: sqlite3.Connection) -> set[str]:
    """Blobs kept as files (not inline in the index)."""
    rows = conn.execute("SELECT id FROM blobs WHERE inline_data IS NULL").fetchall()
    return {row[0] for row in rows}
