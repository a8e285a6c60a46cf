"""S3 errors: one table from storage errors to S3 codes and statuses, and the XML answer."""

from __future__ import annotations

from starlette.responses import Response

from storage import errors as se

from . import xml


class S3Error(Exception):
    def __init__(
        self, code: str, message: str, status: int = 400, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.headers = headers or {}


def not_implemented(what: str) -> S3Error:
    return S3Error("NotImplemented", f"{what} is not implemented by bucketd", 501)


STORAGE_ERRORS: dict[type[se.StorageError], tuple[int, str]] = {
    se.InvalidBucketName: (400, "InvalidBucketName"),
    se.InvalidRegion: (400, "InvalidLocationConstraint"),
    se.InvalidKey: (400, "KeyTooLongError"),
    se.InvalidPart: (400, "InvalidPart"),
    se.ChecksumMismatch: (400, "BadDigest"),
    se.UploadMismatch: (400, "InvalidRequest"),
    se.InvalidPartOrder: (400, "InvalidPartOrder"),
    se.PartTooSmall: (400, "EntityTooSmall"),
    se.LockNotEnabled: (400, "InvalidRequest"),
    se.InvalidTag: (400, "InvalidTag"),
    se.MalformedPolicy: (400, "MalformedPolicy"),
    se.InvalidInput: (400, "InvalidArgument"),
    se.BucketNotFound: (404, "NoSuchBucket"),
    se.FileNotFound: (404, "NoSuchKey"),
    se.UploadNotFound: (404, "NoSuchUpload"),
    se.NotFound: (404, "NoSuchKey"),
    se.SharedNameTaken: (409, "BucketAlreadyExists"),
    se.BucketNameTaken: (409, "BucketAlreadyOwnedByYou"),
    se.BucketNotEmpty: (409, "BucketNotEmpty"),
    se.BucketProvisioning: (409, "OperationAborted"),
    se.BucketNotActive: (409, "OperationAborted"),
    se.FileExists: (409, "OperationAborted"),
    se.ObjectLocked: (403, "AccessDenied"),
    se.AccessBlocked: (403, "AccessDenied"),
    se.AclsDisabled: (400, "AccessControlListNotSupported"),
    se.OwnerOnly: (405, "MethodNotAllowed"),
    se.AccessDenied: (403, "AccessDenied"),
    se.ConditionalConflict: (409, "ConditionalRequestConflict"),
    se.InvalidBucketState: (409, "InvalidBucketState"),
    se.Conflict: (409, "OperationAborted"),
    se.PreconditionMissing: (404, "NoSuchKey"),
    se.PreconditionFailed: (412, "PreconditionFailed"),
    se.TooLarge: (400, "EntityTooLarge"),
    se.QuotaExceeded: (403, "QuotaExceeded"),
    se.UploadTimeout: (400, "RequestTimeout"),
    se.UploadAborted: (400, "IncompleteBody"),
    se.UnsupportedContentType: (400, "InvalidArgument"),
    se.RangeNotSatisfiable: (416, "InvalidRange"),
    se.NotSupported: (501, "NotImplemented"),
    se.EncryptionKeyMissing: (500, "InternalError"),
    se.KmsKeyNotFound: (400, "KMS.NotFoundException"),
    se.CustomerKeyRequired: (400, "InvalidRequest"),
    se.CustomerKeyMismatch: (403, "AccessDenied"),
    se.UploadKeyMismatch: (400, "InvalidRequest"),
    se.CustomerKeyNotApplicable: (400, "InvalidRequest"),
    se.ContentTampered: (500, "InternalError"),
    se.BackendUnavailable: (503, "ServiceUnavailable"),
    se.IndexUnavailable: (503, "ServiceUnavailable"),
}


def from_storage(exc: se.StorageError) -> S3Error:
    if isinstance(exc, se.DeleteMarker):
        headers = {"x-amz-delete-marker": "true", "x-amz-version-id": exc.version_id or "null"}
        if exc.specific:
            return S3Error(
                "MethodNotAllowed",
                "The specified method is not allowed against this resource.",
                405,
                headers,
            )
        return S3Error("NoSuchKey", "The specified key does not exist.", 404, headers)
    for cls in type(exc).__mro__:
        if cls in STORAGE_ERRORS:
            status, code = STORAGE_ERRORS[cls]
            if code == "KeyTooLongError" and "long" not in exc.message:
                code = "InvalidArgument"
            if isinstance(exc, se.AclsDisabled) and exc.on_bucket:
                code = "InvalidBucketAclWithObjectOwnership"
            headers = {"Retry-After": "1"} if status == 503 else {}
            if isinstance(exc, se.FileNotFound):
                # "Not a delete marker", as Ceph's gateway says it and its suite expects; AWS
                # leaves the header out when false, which a client reads the same way.
                headers["x-amz-delete-marker"] = "false"
            return S3Error(code, exc.message, status, headers)
    return S3Error("InternalError", "We encountered an internal error. Please try again.", 500)


def error_response(error: S3Error, resource: str, request_id: str, head: bool = False) -> Response:
    headers = dict(error.headers)
    if head:  # HEAD answers carry no body; the code travels in a header, as S3's do
        headers["x-amz-error-code"] = error.code
        return Response(b"", error.status, headers)
    body = xml.render(
        "Error",
        [
            ("Code", error.code),
            ("Message", error.message),
            ("Resource", resource),
            ("RequestId", request_id),
        ],
        namespace=False,
    )
    return Response(body, error.status, headers, media_type="application/xml")
