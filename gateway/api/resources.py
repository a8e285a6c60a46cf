"""Storage records as the API's shapes (`bucketd_client/shapes.py`)."""

from __future__ import annotations

import json
import time

from bucketd_client import shapes
from storage.config import PlanLimits
from storage.encryption import SSE_KMS, Envelope
from storage.models import VERSIONING, ApiKey, Bucket, FileRecord, Organization
from storage.rules.cors import decode_rules as decode_cors
from storage.rules.lifecycle_rules import decode_rules
from storage.rules.object_lock import decode_config
from storage.rules.tags import decode_tags

WIRE_VERSIONING = {state: wire for wire, state in VERSIONING.items()}


def object_lock_shape(column: str | None) -> shapes.ObjectLock | None:
    config = decode_config(column)
    if config is None:
        return None
    default = config.default
    if default is None:
        return shapes.ObjectLock()
    return shapes.ObjectLock(
        default_retention=shapes.DefaultRetention(
            mode=default.mode.lower(), days=default.days, years=default.years
        )
    )


def retention_shape(record: FileRecord) -> shapes.Retention | None:
    if record.lock_mode is None or record.lock_until is None:
        return None
    return shapes.Retention(mode=record.lock_mode.lower(), retain_until=record.lock_until)


def encryption_of(record: FileRecord) -> tuple[str | None, str | None]:
    """A file's `encryption` and `kms_key_id`: the envelope's algorithm, and the name of
    the keyring's key for aws:kms (a master key's id is the server's business, and an SSE-C
    envelope names no key)."""
    if record.encryption is None:
        return None, None
    envelope = Envelope.decode(record.encryption)
    named = envelope.key_id if envelope.algorithm == SSE_KMS else None
    return envelope.algorithm, named


def iso(unix: int | None) -> str | None:
    if unix is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


def bucket_shape(bucket: Bucket) -> shapes.Bucket:
    return shapes.Bucket(
        id=bucket.id,
        name=bucket.name,
        region=bucket.region,
        status=bucket.status,
        status_reason=bucket.status_reason,
        created_at=bucket.created_at,
        max_upload_bytes=bucket.max_upload_bytes,
        allowed_content_types=bucket.allowed_content_types,
        file_count=bucket.file_count,
        size_bytes=bucket.size_bytes,
        versioning=WIRE_VERSIONING.get(bucket.versioning or ""),
        object_lock=object_lock_shape(bucket.object_lock),
        lifecycle=None if bucket.lifecycle is None else list(decode_rules(bucket.lifecycle) or ()),
        cors=decode_cors(bucket.cors) or None,
        public=bucket.public,
        cache_control=bucket.cache_control,
        policy=None if bucket.policy is None else json.loads(bucket.policy),
        anonymous_requests_per_minute=bucket.anonymous_rpm,
        encryption=bucket.encryption,
    )


def file_shape(record: FileRecord) -> shapes.File:
    encryption, kms_key_id = encryption_of(record)
    return shapes.File(
        id=record.key,
        key=record.key,
        bucket_id=record.bucket_id,
        size=record.size,
        content_type=record.content_type,
        uploaded_at=record.uploaded_at,
        etag=record.etag,
        version_id=record.version_id,
        retention=retention_shape(record),
        legal_hold=record.legal_hold,
        tags=decode_tags(record.tags),
        encryption=encryption,
        kms_key_id=kms_key_id,
    )


def version_shape(record: FileRecord, latest: bool) -> shapes.FileVersion:
    encryption, kms_key_id = encryption_of(record)
    return shapes.FileVersion(
        id=record.s3_version_id,
        key=record.key,
        version_id=record.s3_version_id,
        is_latest=latest,
        delete_marker=record.delete_marker,
        size=record.size,
        content_type=record.content_type,
        uploaded_at=record.uploaded_at,
        etag=None if record.delete_marker else record.etag,
        retention=retention_shape(record),
        legal_hold=record.legal_hold,
        tags=decode_tags(record.tags),
        encryption=encryption,
        kms_key_id=kms_key_id,
    )


def key_shape(key: ApiKey, secret: str | None = None) -> shapes.Key:
    return shapes.Key(
        id=key.id,
        organization_id=key.org_id,
        name=key.name,
        scopes=key.scopes,
        bucket_id=key.bucket_id,
        created_at=key.created_at,
        expires_at=iso(key.expires_at),
        revoked_at=key.revoked_at,
        last4=key.last4,
        access_key_id=key.access_key_id,
        secret=secret,
    )


def organization_shape(
    org: Organization, limits: PlanLimits, snapshot_bytes: int = 0
) -> shapes.Organization:
    return shapes.Organization(
        id=org.id,
        name=org.name,
        plan=org.plan,
        created_at=org.created_at,
        limits=shapes.Limits(
            requests_per_minute=limits.requests_per_minute,
            max_buckets=limits.max_buckets,
            max_storage_bytes=limits.max_storage_bytes,
        ),
        usage=shapes.Usage(
            buckets=org.bucket_count,
            stored_bytes=org.stored_bytes,
            files=org.file_count,
            snapshot_bytes=snapshot_bytes,
        ),
    )
