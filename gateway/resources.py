"""The JSON shape of each resource, in camelCase as the specification writes it."""

from __future__ import annotations

import time
from typing import Any

from storage.config import PlanLimits
from storage.models import ApiKey, Bucket, FileRecord, Organization


def iso(unix: int | None) -> str | None:
    if unix is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


def bucket_json(bucket: Bucket) -> dict[str, Any]:
    return {
        "object": "bucket",
        "id": bucket.id,
        "name": bucket.name,
        "region": bucket.region,
        "status": bucket.status,
        "statusReason": bucket.status_reason,
        "createdAt": bucket.created_at,
        "maxUploadBytes": bucket.max_upload_bytes,
        "allowedContentTypes": list(bucket.allowed_content_types),
        "fileCount": bucket.file_count,
        "sizeBytes": bucket.size_bytes,
    }


def file_json(record: FileRecord) -> dict[str, Any]:
    return {
        "object": "file",
        "id": record.key,
        "key": record.key,
        "bucketId": record.bucket_id,
        "size": record.size,
        "contentType": record.content_type,
        "uploadedAt": record.uploaded_at,
        "etag": record.etag,
    }


def key_json(key: ApiKey) -> dict[str, Any]:
    return {
        "object": "key",
        "id": key.id,
        "organizationId": key.org_id,
        "name": key.name,
        "scopes": list(key.scopes),
        "bucketId": key.bucket_id,
        "createdAt": key.created_at,
        "expiresAt": iso(key.expires_at),
        "revokedAt": key.revoked_at,
        "last4": key.last4,
    }


def organization_json(org: Organization, limits: PlanLimits) -> dict[str, Any]:
    return {
        "object": "organization",
        "id": org.id,
        "name": org.name,
        "plan": org.plan,
        "createdAt": org.created_at,
        "limits": {
            "requestsPerMinute": limits.requests_per_minute,
            "maxBuckets": limits.max_buckets,
            "maxStorageBytes": limits.max_storage_bytes,
        },
        "usage": {
            "buckets": org.bucket_count,
            "storedBytes": org.stored_bytes,
            "files": org.file_count,
        },
    }
