"""Errors as responses: every failure, whatever raised it, leaves in the envelope.

Storage raises domain errors (`storage/errors.py`); the gateway raises `ApiError` for what
only HTTP knows (authentication, scopes, rate limits, malformed requests). The table below
is the one place where a class becomes a status code and a stable snake_case code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.envelope import failure
from storage import errors as se

logger = logging.getLogger("bucketd.gateway")


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def bad_request(message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, code, message)


STORAGE_ERRORS: dict[type[se.StorageError], tuple[int, str]] = {
    se.InvalidBucketName: (400, "invalid_bucket_name"),
    se.InvalidRegion: (400, "invalid_region"),
    se.InvalidKey: (400, "invalid_key"),
    se.InvalidContentType: (400, "invalid_content_type"),
    se.InvalidScopes: (400, "invalid_scopes"),
    se.LockNotEnabled: (400, "object_lock_not_enabled"),
    se.InvalidTag: (400, "invalid_tag"),
    se.MalformedPolicy: (400, "invalid_policy"),
    se.InvalidInput: (400, "invalid_request"),
    se.OrganizationNotFound: (404, "organization_not_found"),
    se.BucketNotFound: (404, "bucket_not_found"),
    se.FileNotFound: (404, "file_not_found"),
    se.KeyNotFound: (404, "key_not_found"),
    se.SnapshotNotFound: (404, "snapshot_not_found"),
    se.NotFound: (404, "not_found"),
    se.BucketNameTaken: (409, "bucket_name_taken"),
    se.OrganizationExists: (409, "organization_exists"),
    se.BucketProvisioning: (409, "bucket_provisioning"),
    se.BucketNotActive: (409, "bucket_not_active"),
    se.BucketNotEmpty: (409, "bucket_not_empty"),
    se.FileExists: (409, "file_exists"),
    se.ObjectLocked: (409, "file_locked"),
    se.AccessBlocked: (403, "public_access_blocked"),
    se.AclsDisabled: (400, "acls_disabled"),
    se.ScopeMissing: (403, "insufficient_scope"),
    se.AccessDenied: (403, "access_denied"),
    se.ConditionalConflict: (409, "conditional_request_conflict"),
    se.PreconditionFailed: (412, "precondition_failed"),
    se.InvalidBucketState: (409, "invalid_bucket_state"),
    se.Conflict: (409, "conflict"),
    se.QuotaExceeded: (402, "quota_exceeded"),
    se.UploadTimeout: (408, "upload_timeout"),
    se.TooLarge: (413, "file_too_large"),
    se.UnsupportedContentType: (415, "unsupported_media_type"),
    se.RangeNotSatisfiable: (416, "range_not_satisfiable"),
    se.UploadAborted: (400, "upload_incomplete"),
    se.NotSupported: (501, "not_supported"),
    se.EncryptionKeyMissing: (500, "encryption_key_missing"),
    se.CustomerKeyRequired: (409, "customer_key_required"),
    se.CustomerKeyMismatch: (403, "customer_key_mismatch"),
    se.UploadKeyMismatch: (400, "upload_key_mismatch"),
    se.CustomerKeyNotApplicable: (400, "customer_key_not_applicable"),
    se.ContentTampered: (500, "content_corrupt"),
    se.BackendUnavailable: (503, "storage_unavailable"),
    se.IndexUnavailable: (503, "index_unavailable"),
    se.StorageError: (500, "internal_error"),
}

HTTP_CODES = {
    400: "invalid_request",
    404: "route_not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


def status_and_code(exc: se.StorageError) -> tuple[int, str]:
    for cls in type(exc).__mro__:
        if cls in STORAGE_ERRORS:
            return STORAGE_ERRORS[cls]
    return 500, "internal_error"


def _extra_headers(exc: se.StorageError, status: int) -> dict[str, str]:
    if isinstance(exc, se.BucketNotActive) or status == 503:
        return {"Retry-After": "1"}
    if isinstance(exc, se.RangeNotSatisfiable):
        return {"Content-Range": f"bytes */{exc.size}"}
    return {}


def storage_failure(exc: se.StorageError) -> Response:
    status, code = status_and_code(exc)
    if status >= 500:
        logger.error("storage failure: %s", exc)
    return failure(status, code, exc.message, _extra_headers(exc, status))


async def storage_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, se.StorageError)
    return storage_failure(exc)


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return failure(exc.status, exc.code, exc.message, exc.headers)


async def http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route for {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    else:
        message = exc.detail
    code = HTTP_CODES.get(exc.status_code, "http_error")
    return failure(exc.status_code, code, message, exc.headers)


async def client_disconnect(request: Request, exc: Exception) -> Response:
    return failure(400, "upload_incomplete", "the client closed the connection mid-body")


HANDLERS = {
    se.StorageError: storage_error,
    ApiError: api_error,
    HTTPException: http_exception,
    ClientDisconnect: client_disconnect,
}


class ErrorMiddleware:
    """Outermost: an unexpected exception becomes a 500 in the envelope, never a traceback.

    The traceback goes to the log. Unlike Starlette's ServerErrorMiddleware it does not
    re-raise once the 500 is sent, because Uvicorn then drops the connection under the
    client's feet; when the response had already started it re-raises, so Uvicorn closes
    the connection of a body that cannot be finished.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            logger.exception(  # the request id, not the path: file names never reach a log
                "unexpected error on %s (request %s)",
                scope.get("method"),
                scope.get("state", {}).get("request_id"),
            )
            if started:
                raise
            headers = scope.get("state", {}).get("ratelimit_headers")
            response = failure(
                500, "internal_error", "internal error; the request may be retried", headers
            )
            await response(scope, receive, send)
