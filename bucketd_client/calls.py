"""What both clients send and how they read the answer, with no I/O of its own.

Each API operation is a `Call`: method, path, query, JSON body, whether it may be retried,
and the function that turns a successful answer into a model. `Client` and `AsyncClient`
only differ in how they send a call.
"""

from __future__ import annotations

import email.utils
import functools
import mimetypes
import os
import random
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

import httpx
import msgspec

from . import shapes
from .errors import BucketNotFound, ConnectionFailed, error_for
from .models import Bucket, File, FileVersion, Key, Organization, Page, decode

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8080"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
CHUNK = 1024 * 1024


Unset = shapes.UnsetType
"""The type of a PATCH field's default, `UNSET`: leave it as it is (None resets it to the
server's default)."""
UNSET = shapes.UNSET


@dataclass(frozen=True)
class Retry:
    """Retries of 429 (after its Retry-After), 5xx and connection failures.

    Calls that are not idempotent (creating a bucket or a key, PATCH) are retried only
    when `non_idempotent` is set: a lost answer to a create could otherwise create twice.
    """

    attempts: int = 3
    backoff: float = 0.25
    max_backoff: float = 8.0
    non_idempotent: bool = False
    notify: Callable[[int | None, float], None] | None = None
    """Called before each wait with the status answered (None: no answer) and the seconds
    to wait (the CLI says "rate limited; retrying in N s")."""

    def allows(self, attempt: int, idempotent: bool) -> bool:
        return attempt < self.attempts and (idempotent or self.non_idempotent)

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before retry number `attempt + 1`."""
        if response is not None and "retry-after" in response.headers:
            try:
                return min(self.max_backoff, max(0.0, float(response.headers["retry-after"])))
            except ValueError:
                pass
        wait: float = min(self.max_backoff, self.backoff * 2**attempt)
        return wait * random.uniform(0.5, 1.0)


DEFAULT_RETRY = Retry()


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, str] = field(default_factory=dict)
    body: shapes.Request | None = None
    """The JSON body, encoded from its shape."""
    idempotent: bool = True

    @property
    def json(self) -> Any:
        """The body as JSON values (fields left UNSET are not sent)."""
        return None if self.body is None else msgspec.to_builtins(self.body)


def retryable(response: httpx.Response) -> bool:
    return response.status_code in RETRY_STATUSES


def raise_for_error(response: httpx.Response) -> None:
    """The typed exception of an error answer (any status >= 400)."""
    if response.status_code < 400:
        return
    code, message = "http_error", response.reason_phrase
    try:
        error = response.json().get("error") or {}
        code, message = error.get("code", code), error.get("message", message)
    except (ValueError, AttributeError):
        pass
    raise error_for(response.status_code, code, message, response.headers)


def data(response: httpx.Response) -> Any:
    return response.json()["data"]


def nothing(response: httpx.Response) -> None:
    return None


def key_path(key: str) -> str:
    """A file key as a path: every byte but `/` percent-encoded, and dot segments encoded so
    no client or proxy folds `a/../b` into `b`."""
    segments = []
    for segment in key.split("/"):
        encoded = quote(segment, safe="")
        segments.append(encoded.replace(".", "%2E") if segment in (".", "..") else encoded)
    return "/".join(segments)


def bucket_path(bucket_id: str) -> str:
    return f"/v1/buckets/{quote(bucket_id, safe='')}"


def file_path(bucket_id: str, key: str) -> str:
    return f"{bucket_path(bucket_id)}/files/{key_path(key)}"


def guess_type(key: str) -> str:
    return mimetypes.guess_type(key, strict=False)[0] or "application/octet-stream"


def page_params(limit: int | None, cursor: str | None, **extra: str | None) -> dict[str, str]:
    params = {name: value for name, value in extra.items() if value}
    if limit is not None:
        params["limit"] = str(limit)
    if cursor:
        params["cursor"] = cursor
    return params


def file_from_headers(bucket_id: str, key: str, response: httpx.Response) -> File:
    """A file's metadata from the headers of its GET or HEAD."""
    size = int(response.headers.get("content-length", "0"))
    if "content-range" in response.headers:
        size = int(response.headers["content-range"].rpartition("/")[2])
    modified = response.headers.get("last-modified")
    uploaded = ""
    if modified:
        moment = email.utils.parsedate_to_datetime(modified).astimezone(UTC)
        uploaded = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return File(
        id=key,
        key=key,
        bucket_id=bucket_id,
        size=size,
        content_type=response.headers.get("content-type", ""),
        uploaded_at=uploaded,
        etag=response.headers.get("etag", ""),
        version_id=response.headers.get("x-version-id"),
    )


def range_header(start: int | None, end: int | None) -> dict[str, str]:
    """`Range` for bytes [start, end) (end exclusive, as Python slices); {} for all."""
    if start is None and end is None:
        return {}
    first = 0 if start is None else start
    last = "" if end is None else str(end - 1)
    return {"Range": f"bytes={first}-{last}"}


# The calls


def list_buckets(limit: int | None, cursor: str | None) -> Call[Page[Bucket]]:
    return Call(
        "GET",
        "/v1/buckets",
        lambda r: Page.from_json(r.json(), Bucket),
        page_params(limit, cursor),
    )


def create_bucket(body: shapes.CreateBucket) -> Call[Bucket]:
    return Call(
        "POST", "/v1/buckets", lambda r: decode(data(r), Bucket), body=body, idempotent=False
    )


def get_bucket(bucket_id: str) -> Call[Bucket]:
    return Call("GET", bucket_path(bucket_id), lambda r: decode(data(r), Bucket))


def update_bucket(bucket_id: str, body: shapes.UpdateBucket) -> Call[None]:
    return Call("PATCH", bucket_path(bucket_id), nothing, body=body, idempotent=False)


def delete_bucket(bucket_id: str, force: bool) -> Call[None]:
    params = {"force": "true"} if force else {}
    return Call("DELETE", bucket_path(bucket_id), nothing, params)


def list_files(
    bucket_id: str, prefix: str, delimiter: str, limit: int | None, cursor: str | None
) -> Call[Page[File]]:
    return Call(
        "GET",
        f"{bucket_path(bucket_id)}/files",
        lambda r: Page.from_json(r.json(), File),
        page_params(limit, cursor, prefix=prefix, delimiter=delimiter),
    )


def upload_headers(
    key: str,
    content_type: str | None,
    length: int | None,
    if_none_match: bool = False,
    if_match: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The headers of an upload: its type (guessed from the key unless given), its length
    when known, its condition (`if_none_match`: only if no file is at the key; `if_match`:
    only over the file with that ETag) and its tags."""
    headers = {"Content-Type": content_type or guess_type(key)}
    if length is not None:
        headers["Content-Length"] = str(length)
    if if_none_match:
        headers["If-None-Match"] = "*"
    if if_match is not None:
        headers["If-Match"] = if_match
    if tags:
        headers["Tagging"] = urlencode(tags)
    return headers


def version_params(version_id: str | None) -> dict[str, str]:
    """`versionId` when a version is named (`"null"`: the null version)."""
    return {} if version_id is None else {"versionId": version_id}


def file_metadata(bucket_id: str, key: str, version_id: str | None = None) -> Call[File]:
    return Call(
        "GET",
        file_path(bucket_id, key),
        lambda r: decode(data(r), File),
        {"metadata": "true", **version_params(version_id)},
    )


def update_file(
    bucket_id: str,
    key: str,
    new_key: str | None,
    content_type: str | None,
    tags: Mapping[str, str] | None = None,
) -> Call[str]:
    body = shapes.UpdateFile(
        key=new_key, content_type=content_type, tags=None if tags is None else dict(tags)
    )
    return Call(
        "PATCH",
        file_path(bucket_id, key),
        lambda r: str(data(r)["id"]),
        body=body,
        idempotent=False,
    )


def sign_file(
    bucket_id: str, key: str, expires_in: int, upload: bool, upsert: bool
) -> Call[shapes.SignedUrl]:
    body = shapes.SignFile(expires_in=expires_in, upload=upload, upsert=upsert)
    return Call(
        "POST",
        f"{bucket_path(bucket_id)}/sign/{key_path(key)}",
        lambda r: decode(data(r), shapes.SignedUrl),
        body=body,
    )


def public_url(base_url: str, bucket_id: str, key: str) -> str:
    """Where anyone downloads a file of a public bucket, without a key."""
    return base_url.rstrip("/") + file_path(bucket_id, key)


def delete_file(
    bucket_id: str, key: str, version_id: str | None = None, bypass_governance: bool = False
) -> Call[None]:
    params = version_params(version_id)
    if bypass_governance:
        params["bypassGovernance"] = "true"
    return Call("DELETE", file_path(bucket_id, key), nothing, params)


def list_versions(
    bucket_id: str, prefix: str, key: str | None, limit: int | None, cursor: str | None
) -> Call[Page[FileVersion]]:
    params = page_params(limit, cursor, prefix=prefix)
    if key is not None:
        params["key"] = key
    return Call(
        "GET",
        f"{bucket_path(bucket_id)}/versions",
        lambda r: Page.from_json(r.json(), FileVersion),
        params,
    )


def restore_version(bucket_id: str, key: str, version_id: str) -> Call[File]:
    return Call(
        "POST",
        f"{bucket_path(bucket_id)}/versions/{quote(version_id, safe='')}/restore",
        lambda r: decode(data(r), File),
        body=shapes.RestoreVersion(key=key),
        idempotent=False,
    )


def protect_version(
    bucket_id: str,
    key: str,
    version_id: str,
    retention: shapes.RetentionRule | Unset | None,
    legal_hold: bool | Unset,
    bypass_governance: bool,
) -> Call[FileVersion]:
    body = shapes.ProtectVersion(
        key=key, retention=retention, legal_hold=legal_hold, bypass_governance=bypass_governance
    )
    return Call(
        "PATCH",
        f"{bucket_path(bucket_id)}/versions/{quote(version_id, safe='')}",
        lambda r: decode(data(r), FileVersion),
        body=body,
    )


def create_key(
    name: str,
    scopes: list[str],
    bucket_id: str | None,
    expires_at: datetime | str | None,
    s3: bool = False,
) -> Call[Key]:
    if isinstance(expires_at, datetime):
        expires_at = expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = shapes.CreateKey(
        name=name, scopes=list(scopes), bucket_id=bucket_id, expires_at=expires_at, s3=s3
    )
    return Call("POST", "/v1/keys", lambda r: decode(data(r), Key), body=body, idempotent=False)


def list_keys(limit: int | None, cursor: str | None) -> Call[Page[Key]]:
    return Call(
        "GET",
        "/v1/keys",
        lambda r: Page.from_json(r.json(), Key),
        page_params(limit, cursor),
    )


def get_key(key_id: str) -> Call[Key]:
    return Call("GET", f"/v1/keys/{quote(key_id, safe='')}", lambda r: decode(data(r), Key))


def revoke_key(key_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/keys/{quote(key_id, safe='')}", nothing)


def get_organization() -> Call[Organization]:
    return Call("GET", "/v1/organization", lambda r: decode(data(r), Organization))


class Attempts:
    """The retry decisions of one call: after each answer (or transport failure), how long
    to wait before sending again, or None to stop there."""

    def __init__(self, retry: Retry | None, idempotent: bool) -> None:
        self._retry = retry
        self._idempotent = idempotent
        self._count = 0

    def delay(self, response: httpx.Response | None) -> float | None:
        if response is not None and not retryable(response):
            return None
        if self._retry is None or not self._retry.allows(self._count, self._idempotent):
            return None
        wait = self._retry.delay(self._count, response)
        self._count += 1
        if self._retry.notify is not None:
            self._retry.notify(None if response is None else response.status_code, wait)
        return wait


def unreachable(exc: httpx.TransportError) -> ConnectionFailed:
    """The client's error for a request that got no answer."""
    try:
        url = str(exc.request.url.copy_with(path="/", query=None, fragment=None))
    except RuntimeError:  # an error raised before the request was made
        url = "the server"
    return ConnectionFailed(url, str(exc) or type(exc).__name__)


def bucket_named(buckets: Iterable[Bucket], name: str) -> Bucket:
    for bucket in buckets:
        if bucket.name == name:
            return bucket
    raise BucketNotFound(404, "bucket_not_found", f"no bucket named {name!r}")


def tls_context(environ: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context a client verifies its server with, as httpx would build it
    (SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's CA bundle), built once per process for
    each of those settings: httpx reads the bundle into a new context for every client it
    makes, 20 ms of CPU each, which a program making a client per command or per request
    pays every time. A context is shared safely by any number of clients and threads. The
    file's identity and mtime are in the key, so a CA bundle renewed or replaced (a CA
    removed) is read again by the next client, as httpx would, not trusted until exit."""
    if cert_file := environ.get("SSL_CERT_FILE"):
        try:
            stat = os.stat(cert_file)
        except OSError:  # ssl.create_default_context refuses it below, as httpx would
            return _tls_context(cert_file, None, None)
        version = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        return _tls_context(os.path.abspath(cert_file), None, version)
    return _tls_context(None, environ.get("SSL_CERT_DIR") or None, None)


@functools.lru_cache(maxsize=16)
def _tls_context(cert_file: str | None, cert_dir: str | None, version: object) -> ssl.SSLContext:
    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    return httpx.create_ssl_context(trust_env=False)


def credentials(url: str | None, key: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The server URL and API key: arguments first, then BUCKETD_URL and BUCKETD_KEY."""
    url = url or environ.get("BUCKETD_URL") or DEFAULT_URL
    key = key or environ.get("BUCKETD_KEY")
    if not key:
        raise ValueError("no API key: pass one or set BUCKETD_KEY")
    return url.rstrip("/"), key
