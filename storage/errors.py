"""Domain errors raised by the storage engine.

They name what went wrong in storage terms only; `gateway/http/errors.py` maps each class to an
HTTP status and a stable error code in one table.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error the engine raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(StorageError):
    """A name, key, region, limit or other argument is not acceptable."""


class InvalidBucketName(InvalidInput):
    pass


class InvalidRegion(InvalidInput):
    pass


class InvalidKey(InvalidInput):
    """A file key is empty, too long, or holds NUL."""


class InvalidScopes(InvalidInput):
    """A key's scopes name no scope, an unknown one, or one its restriction excludes."""


class InvalidContentType(InvalidInput):
    """A MIME type or an allow-list entry is malformed (in a JSON body)."""


class NotFound(StorageError):
    pass


class OrganizationNotFound(NotFound):
    pass


class BucketNotFound(NotFound):
    pass


class FileNotFound(NotFound):
    pass


class SnapshotNotFound(NotFound):
    """A snapshot id that does not exist or is not visible (another organization's)."""


class KeyNotFound(NotFound):
    """An API key id that does not exist or is not visible."""


class Conflict(StorageError):
    pass


class BucketNameTaken(Conflict):
    pass


class OrganizationExists(Conflict):
    """An organization of that name exists already (names are how people tell them apart)."""


class MalformedPolicy(InvalidInput):
    """A bucket policy S3 would refuse as malformed."""


class AccessDenied(StorageError):
    """The access decision (`access.py`) refuses the request: a policy's Deny, or nothing
    grants it to a requester from outside the bucket's organization."""


class ScopeMissing(AccessDenied):
    """The API key lacks the scope the action needs."""

    def __init__(self, scope: str) -> None:
        super().__init__(f"the API key lacks the {scope} scope")
        self.scope = scope


class OwnerOnly(AccessDenied):
    """An operation only the bucket's organization may use (its policy), asked by another."""


class AccessBlocked(StorageError):
    """The bucket's public access block forbids making it (or an object in it) public."""


class AclsDisabled(StorageError):
    """The bucket's object ownership is BucketOwnerEnforced: no ACL beyond the owner's own
    (`on_bucket`: the bucket's ACL is why the ownership cannot be set, or cannot stay)."""

    def __init__(self, message: str, on_bucket: bool = False) -> None:
        super().__init__(message)
        self.on_bucket = on_bucket


class SharedNameTaken(BucketNameTaken):
    """Another organization's bucket reached without credentials holds the name."""


class BucketProvisioning(Conflict):
    """The bucket is still being provisioned; it cannot be deleted yet."""


class BucketNotActive(Conflict):
    """File writes need an active bucket."""

    @classmethod
    def of(cls, bucket_id: str, status: str, reason: str | None) -> BucketNotActive:
        """The refusal for a bucket in `status`, saying what to do about it."""
        if status == "failed":
            return cls(
                f"the bucket failed to provision ({reason or 'no reason given'}); delete it "
                "and create it again"
            )
        return cls(
            f"the bucket is {status}; its files can be written once it is active "
            f"(GET /v1/buckets/{bucket_id} shows its status)"
        )


class BucketNotEmpty(Conflict):
    pass


class FileExists(Conflict):
    pass


class UnsupportedContentType(StorageError):
    """The upload's MIME type is missing, malformed or outside the bucket's allow-list."""


class TooLarge(StorageError):
    """The upload passes the bucket's size limit."""


class QuotaExceeded(StorageError):
    """The action would pass a limit of the organization's plan."""


class UploadTimeout(StorageError):
    """The upload was still incomplete at its deadline."""


class UploadAborted(StorageError):
    """The content stream broke before its end (the client went away)."""


class RangeNotSatisfiable(StorageError):
    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


class BackendUnavailable(StorageError):
    """The storage backend (disk or S3 cluster) cannot serve the request now."""


class IndexUnavailable(StorageError):
    """The metadata index cannot serve the request now."""


class SecretUnsealable(StorageError):
    """A sealed secret (S3 secret key, webhook signing secret) does not open under this data
    dir's sealing key: another gateway's secrets.key differs."""


class ContentTampered(StorageError):
    """An encrypted content (or its wrapped key) fails its authentication: its stored
    bytes were changed, cut or reordered. Nothing of it is served."""


class EncryptionKeyMissing(StorageError):
    """The master key that wraps a content's key is not configured on this server."""


class KmsKeyNotFound(InvalidInput):
    """An aws:kms write names a key the keyring (`storage.kms_keys`) does not hold."""


class CustomerKeyRequired(StorageError):
    """The content is encrypted under a customer-provided key (SSE-C) and the request
    gave none: only the client holds what opens it."""


class CustomerKeyMismatch(StorageError):
    """The customer-provided key given is not the one the content was encrypted under."""


class UploadKeyMismatch(StorageError):
    """A request on an SSE-C multipart upload gave another customer-provided key than the
    one the upload was created with (S3 answers 400: the parameters did not match)."""


class CustomerKeyNotApplicable(StorageError):
    """A customer-provided key given to read a content not encrypted under one."""


class DataDirBusy(StorageError):
    """Another process holds the data dir (a running server)."""


class PreconditionFailed(StorageError):
    """A conditional write or read whose condition does not hold."""


class PreconditionMissing(PreconditionFailed):
    """A write conditional on the key's current version (If-Match) where there is none, or
    a delete marker: S3 answers it 404 NoSuchKey, the /v1 API 412 like any other."""


class InvalidTag(InvalidInput):
    """A tag set past S3's limits, or a tag with characters S3 refuses."""


class ObjectBusy(Conflict):
    """Another gateway is publishing the same object of the cluster
    (`reservations.reserve`); the write waits its turn, and says so only when the wait is
    too long."""


class WriteSettled(Conflict):
    """A write's reservation is gone at its commit: its lease lapsed and another gateway
    settled it (committed its published object, or released it when it was not there)."""


class ConditionalConflict(Conflict):
    """A conditional write whose condition held when the request began, but not at its
    commit: a concurrent write won (S3's ConditionalRequestConflict)."""


class UploadNotFound(NotFound):
    """A multipart upload id that does not exist (completed, aborted or never made)."""


class InvalidPart(InvalidInput):
    """A multipart completion names a part that was not uploaded, or with another ETag."""


class ChecksumMismatch(InvalidInput):
    """A checksum the client gave does not match the content's."""


class UploadMismatch(InvalidInput):
    """A multipart completion claims a size or checksum type the upload does not have."""


class PartTooSmall(InvalidInput):
    """A part other than the last is smaller than the 5 MiB minimum."""


class InvalidPartOrder(InvalidInput):
    """The parts of a multipart completion are not in ascending order."""


class DeleteMarker(FileNotFound):
    """The key's current version is a delete marker (`version_id`; None: the null one)."""

    def __init__(self, message: str, version_id: str | None, specific: bool = False) -> None:
        super().__init__(message)
        self.version_id = version_id
        self.specific = specific
        """True when a request named this marker's version: S3 answers 405, not 404."""


class NotSupported(StorageError):
    """A feature this deployment does not offer (versioning on the S3 backend)."""


class ObjectLocked(StorageError):
    """The version is under a retention or a legal hold: it cannot be deleted or overwritten,
    nor its retention shortened, until that ends (GOVERNANCE: unless bypassed)."""


class LockNotEnabled(InvalidInput):
    """Retention or legal hold asked of a bucket without object lock."""


class InvalidBucketState(Conflict):
    """The bucket's settings forbid the change (suspending versioning under object lock)."""
