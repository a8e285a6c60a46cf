"""A typed Python client for bucketd's /v1 API, synchronous (`Client`) and asynchronous
(`AsyncClient`), over httpx. See docs/client.md.

Importing the package loads nothing heavy: each name is imported from its module on first
use, so the server can use `bucketd_client.shapes` without loading httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .bodies import CorruptDownload, Progress
    from .calls import UNSET, Retry
    from .client import Client
    from .errors import (
        BadRequest,
        BucketdError,
        BucketFailed,
        BucketNameTaken,
        BucketNotActive,
        BucketNotEmpty,
        BucketNotFound,
        ConditionalConflict,
        Conflict,
        ConnectionFailed,
        FileExists,
        FileLocked,
        FileNotFound,
        Forbidden,
        KeyNotFound,
        NotFound,
        PreconditionFailed,
        QuotaExceeded,
        RangeNotSatisfiable,
        RateLimited,
        ServerError,
        SnapshotNotFound,
        TooLarge,
        Unauthorized,
        Unavailable,
        UnsupportedMediaType,
        UploadTimeout,
    )
    from .models import Bucket, File, FileVersion, Key, Limits, Organization, Page, Usage
    from .shapes import DefaultRetentionRule, LifecycleRule, ObjectLockRule, RetentionRule
    from .snapshot_shapes import Snapshot

_MODULES = {
    "AsyncClient": "aio",
    "CorruptDownload": "bodies",
    "Progress": "bodies",
    "UNSET": "calls",
    "Retry": "calls",
    "Client": "client",
    "BadRequest": "errors",
    "BucketdError": "errors",
    "BucketFailed": "errors",
    "BucketNameTaken": "errors",
    "BucketNotActive": "errors",
    "BucketNotEmpty": "errors",
    "BucketNotFound": "errors",
    "Conflict": "errors",
    "ConditionalConflict": "errors",
    "ConnectionFailed": "errors",
    "FileLocked": "errors",
    "PreconditionFailed": "errors",
    "FileExists": "errors",
    "FileNotFound": "errors",
    "Forbidden": "errors",
    "KeyNotFound": "errors",
    "NotFound": "errors",
    "QuotaExceeded": "errors",
    "RangeNotSatisfiable": "errors",
    "RateLimited": "errors",
    "ServerError": "errors",
    "SnapshotNotFound": "errors",
    "TooLarge": "errors",
    "Unauthorized": "errors",
    "Unavailable": "errors",
    "UnsupportedMediaType": "errors",
    "UploadTimeout": "errors",
    "Bucket": "models",
    "File": "models",
    "FileVersion": "models",
    "Key": "models",
    "Limits": "models",
    "Organization": "models",
    "Page": "models",
    "Usage": "models",
    "DefaultRetentionRule": "shapes",
    "LifecycleRule": "shapes",
    "ObjectLockRule": "shapes",
    "RetentionRule": "shapes",
    "Snapshot": "snapshot_shapes",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "UNSET",
    "AsyncClient",
    "BadRequest",
    "Bucket",
    "BucketFailed",
    "BucketNameTaken",
    "BucketNotActive",
    "BucketNotEmpty",
    "BucketNotFound",
    "BucketdError",
    "Client",
    "ConditionalConflict",
    "Conflict",
    "ConnectionFailed",
    "CorruptDownload",
    "DefaultRetentionRule",
    "File",
    "FileExists",
    "FileLocked",
    "FileNotFound",
    "FileVersion",
    "Forbidden",
    "Key",
    "KeyNotFound",
    "LifecycleRule",
    "Limits",
    "NotFound",
    "ObjectLockRule",
    "Organization",
    "Page",
    "PreconditionFailed",
    "Progress",
    "QuotaExceeded",
    "RangeNotSatisfiable",
    "RateLimited",
    "RetentionRule",
    "Retry",
    "ServerError",
    "Snapshot",
    "SnapshotNotFound",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "UploadTimeout",
    "Usage",
]
