"""AWS Signature Version 2 (HMAC-SHA1), which boto3 still uses for presigned S3 URLs unless
told `signature_version="s3v4"`: accepting it keeps "change the endpoint, nothing else"
true. Header (`Authorization: AWS id:signature`) and query (`AWSAccessKeyId`, `Signature`,
`Expires`) forms."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from urllib.parse import unquote

from storage.rules.validation import whole_number

from .sigv4 import MAX_PRESIGNED_SECONDS, MAX_SKEW_SECONDS, SignatureError, signed_bytes

SUBRESOURCES = {
    "accelerate", "acl", "cors", "defaultObjectAcl", "location", "logging", "partNumber",
    "policy", "requestPayment", "torrent", "versioning", "versionId", "versions", "website",
    "uploads", "uploadId", "response-content-type", "response-content-language",
    "response-expires", "response-cache-control", "response-content-disposition",
    "response-content-encoding", "delete", "lifecycle", "tagging", "restore", "storageClass",
    "notification", "replication", "analytics", "metrics", "inventory", "select",
    "select-type", "object-lock",
}  # fmt: skip
OPERATION_FLAGS = frozenset(
    {
        "attributes", "encryption", "legal-hold", "ownershipControls", "policyStatus",
        "publicAccessBlock", "renameObject", "retention",
    }
)  # fmt: skip
"""The query flags that name an operation here (`operations.SUBRESOURCES`) beyond the list
botocore's SigV2 signer signs: a presigned URL signs them too (`FULL`), so that whoever
holds a URL for one operation cannot add `&legal-hold` and make it another; a header
signature is taken with or without them, as botocore signs these newer operations."""
FULL = frozenset(SUBRESOURCES | OPERATION_FLAGS)


def canonical_resource(
    raw_path: str,
    raw_query: str,
    host_bucket: str | None = None,
    names: Collection[str] = FULL,
) -> str:
    """The path as sent (with the bucket first when the Host named it: virtual-host style),
    then the sub-resources among `names`, sorted, their values percent-decoded."""
    path = f"/{host_bucket}{raw_path or '/'}" if host_bucket else raw_path
    pairs = []
    for item in raw_query.split("&") if raw_query else []:
        name, sep, value = item.partition("=")
        if name in names:
            pairs.append(f"{name}={unquote(value)}" if sep else name)
    return path + ("?" + "&".join(sorted(pairs, key=lambda p: p.split("=")[0])) if pairs else "")


def bucket_slash(raw_path: str) -> str | None:
    """The other path a path-style request to a bucket alone may have been signed with:
    botocore signs `/bucket/` where it sends `/bucket`; other clients sign what they send."""
    if raw_path.count("/") == 1 and len(raw_path) > 1:
        return raw_path + "/"
    return None


def string_to_sign(
    method: str,
    headers: Iterable[tuple[str, str]],
    date_or_expires: str,
    raw_path: str,
    raw_query: str,
    host_bucket: str | None = None,
    names: Collection[str] = FULL,
) -> str:
    """Method, Content-MD5, Content-Type, the date (empty when x-amz-date gives it), the
    x-amz- headers (lower-cased, sorted, repeated ones joined by commas), the resource
    (its sub-resources among `names`)."""
    standard = {"content-md5": "", "content-type": ""}
    custom: dict[str, list[str]] = {}
    for name, value in headers:
        lower = name.lower()
        if lower in standard:
            standard[lower] = value.strip()
        elif lower.startswith("x-amz-"):
            custom.setdefault(lower, []).append(value.strip())
    amz = "".join(f"{name}:{','.join(custom[name])}\n" for name in sorted(custom))
    resource = canonical_resource(raw_path, raw_query, host_bucket, names)
    return (
        f"{method}\n{standard['content-md5']}\n{standard['content-type']}\n"
        f"{date_or_expires}\n{amz}{resource}"
    )


def sign(secret: str, text: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), signed_bytes(text), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def check_expiry(expires: str, now: float, wall: float | None = None) -> None:
    """A presigned URL's `Expires` against `now` (the server's clock, which test mode
    moves); its 7-day reach against `wall` (the system's time, by default `now`): the
    client signed it with its own, real clock, as SigV4's skew check assumes."""
    wall = now if wall is None else wall
    if whole_number(expires) is None:
        raise SignatureError("AccessDenied", "Expires must be a number of seconds since 1970")
    if now > int(expires):
        raise SignatureError("AccessDenied", "Request has expired")
    if int(expires) - wall > MAX_PRESIGNED_SECONDS:
        raise SignatureError(
            "AccessDenied", f"Expires must be within {MAX_PRESIGNED_SECONDS} seconds (7 days)"
        )


def check_date(date: str | None, now: float) -> str:
    """The request's date (`Date`, or `x-amz-date` for clients that cannot set `Date`), an
    HTTP date or ISO 8601's basic form, within 15 minutes of `now` (the system's time)."""
    if date is None:
        raise SignatureError(
            "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
        )
    try:
        moment = email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        try:
            moment = datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise SignatureError(
                "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
            ) from None
    if moment < 0:  # AWS: a date before 1970 is no date at all, not a skewed one
        raise SignatureError(
            "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
        )
    if abs(now - moment) > MAX_SKEW_SECONDS:
        raise SignatureError(
            "RequestTimeTooSkewed",
            "The difference between the request time and the server's time is too large.",
        )
    return date
