"""Typed exceptions for the API's error envelope: one class per status, narrowed by code."""

from __future__ import annotations

from collections.abc import Mapping


class BucketdError(Exception):
    """An error answer of the API: its status, stable `code` and message."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


class BadRequest(BucketdError):
    """400: the request itself is wrong (body, query, key, cursor)."""


class Unauthorized(BucketdError):
    """401: no key, a malformed one, or one that is unknown, revoked or expired."""


class QuotaExceeded(BucketdError):
    """402: past the plan's bucket count or storage."""


class Forbidden(BucketdError):
    """403: the key lacks a scope, or asked for more than it has."""


class NotFound(BucketdError):
    """404: the route, bucket, file or key does not exist (or is not visible to the key)."""


class BucketNotFound(NotFound):
    pass


class FileNotFound(NotFound):
    pass


class KeyNotFound(NotFound):
    pass


class SnapshotNotFound(NotFound):
    pass


class UploadTimeout(BucketdError):
    """408: the upload was still incomplete at the server's deadline."""


class Conflict(BucketdError):
    """409: the resource's state forbids the call."""


class BucketNameTaken(Conflict):
    pass


class ConditionalConflict(Conflict):
    """A conditional upload lost a race to a concurrent write."""


class FileLocked(Conflict):
    """The version is under retention or a legal hold."""


class PreconditionFailed(BucketdError):
    """412: a conditional upload's If-None-Match or If-Match does not hold."""


class BucketNotEmpty(Conflict):
    pass


class BucketNotActive(Conflict):
    """The bucket is provisioning or failed; `wait_until_active` waits for it."""


class FileExists(Conflict):
    pass


class TooLarge(BucketdError):
    """413: over the bucket's size limit (or a JSON body over 64 KiB)."""


class UnsupportedMediaType(BucketdError):
    """415: the Content-Type is missing, malformed or not allowed by the bucket."""


class RangeNotSatisfiable(BucketdError):
    pass


class RateLimited(BucketdError):
    """429: past the plan's requests per minute; `retry_after` is in seconds."""

    @property
    def retry_after(self) -> float:
        try:
            return max(0.0, float(self.headers.get("retry-after", "1")))
        except ValueError:
            return 1.0


class ServerError(BucketdError):
    """500: the server failed; the request may be retried."""


class Unavailable(BucketdError):
    """503: the disk, the index or the S3 cluster behind the server failed."""


class ConnectionFailed(BucketdError):
    """No answer: the server could not be reached, or the connection broke, after the
    retries (status 0). `url` is the server tried."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(0, "connection_failed", f"cannot reach {url}: {reason}")
        self.url = url

    def __str__(self) -> str:
        return self.message


class BucketFailed(Exception):
    """`wait_until_active` saw the bucket fail to provision."""

    def __init__(self, bucket_id: str, reason: str | None) -> None:
        super().__init__(f"bucket {bucket_id} failed to provision: {reason or 'no reason given'}")
        self.bucket_id = bucket_id
        self.reason = reason


BY_CODE: dict[str, type[BucketdError]] = {
    "bucket_not_found": BucketNotFound,
    "file_not_found": FileNotFound,
    "key_not_found": KeyNotFound,
    "snapshot_not_found": SnapshotNotFound,
    "bucket_name_taken": BucketNameTaken,
    "bucket_not_empty": BucketNotEmpty,
    "bucket_not_active": BucketNotActive,
    "file_exists": FileExists,
    "conditional_request_conflict": ConditionalConflict,
    "file_locked": FileLocked,
}

BY_STATUS: dict[int, type[BucketdError]] = {
    400: BadRequest,
    401: Unauthorized,
    402: QuotaExceeded,
    403: Forbidden,
    404: NotFound,
    408: UploadTimeout,
    409: Conflict,
    412: PreconditionFailed,
    413: TooLarge,
    415: UnsupportedMediaType,
    416: RangeNotSatisfiable,
    429: RateLimited,
    500: ServerError,
    503: Unavailable,
}


def error_for(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> BucketdError:
    """The most specific exception for an error answer."""
    cls = BY_CODE.get(code) or BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else BucketdError
    return cls(status, code, message, headers)
