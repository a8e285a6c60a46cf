"""S3 bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
GetBucketLocation, ListObjects (v1) and ListObjectsV2."""

from __future__ import annotations

import asyncio
import base64
import binascii

from starlette.responses import Response

from storage.errors import (
    BucketNameTaken,
    BucketNotFound,
    BucketProvisioning,
    SharedNameTaken,
)
from storage.models import Bucket, FileRecord
from storage.rules.object_lock import BucketLock
from storage.rules.sharing import Sharing
from storage.rules.validation import default_region, s3_bucket_name_problem, whole_number

from . import xml
from .call import S3Call
from .errors import S3Error
from .grants import bucket_acl

MAX_KEYS = 1000
MAX_BUCKETS_LISTED = 10_000
PROVISIONING_WAIT_SECONDS = 60.0
LEGACY_REGION = "us-east-1"


async def _all_buckets(call: S3Call) -> list[Bucket]:
    found: list[Bucket] = []
    after = None
    while True:
        page = await call.engine.buckets.list(call.actor, after, 1000)
        found += page.items
        if page.last is None:
            return found
        after = page.last


async def list_buckets(call: S3Call) -> Response:
    """The organization's buckets by name, as S3 lists them: `prefix` and `bucket-region`
    filter, `max-buckets` (1 to 10,000) pages with a `continuation-token` (the last name)."""
    org = call.signer.org
    prefix = call.params.get("prefix", "")
    region = call.params.get("bucket-region")
    after = (
        _untoken(call.params["continuation-token"]) if "continuation-token" in call.params else ""
    )
    limit = _max_buckets(call.params.get("max-buckets"))
    found = sorted(
        (b for b in await _all_buckets(call) if b.name.startswith(prefix) and b.name > after),
        key=lambda b: b.name,
    )
    if region is not None:
        found = [b for b in found if b.region == region]
    page = found[:limit]
    entries = [
        (
            "Bucket",
            [
                ("Name", b.name),
                ("CreationDate", xml.timestamp(b.created_at)),
                ("BucketRegion", b.region),
            ],
        )
        for b in page
    ]
    more = len(found) > limit
    return xml.response(
        "ListAllMyBucketsResult",
        [
            ("Owner", [("ID", org.id), ("DisplayName", org.name)]),
            ("Buckets", entries),
            ("ContinuationToken", _token(page[-1].name) if more else None),
            ("Prefix", prefix or None),
        ],
    )


def _max_buckets(raw: str | None) -> int:
    if raw is None:
        return MAX_BUCKETS_LISTED
    number = whole_number(raw, MAX_BUCKETS_LISTED)
    if number is None or number < 1:
        raise S3Error("InvalidArgument", "max-buckets is a whole number from 1 to 10000")
    return number


async def create_bucket(call: S3Call) -> Response:
    """CreateBucket; of a bucket the organization already has, 200 in us-east-1 (S3's
    legacy rule there, which code that "ensures" a bucket relies on; the bucket is left as
    it is), BucketAlreadyOwnedByYou elsewhere."""
    if call.signer.key.bucket_id is not None:
        raise S3Error("AccessDenied", "a bucket-scoped key cannot create buckets", 403)
    region = default_region(call.settings.regions)
    configuration = await call.read_optional_xml()
    if configuration is not None:
        region = xml.text(configuration, "LocationConstraint") or region
    assert call.bucket is not None
    problem = s3_bucket_name_problem(call.bucket)
    if problem is not None:
        raise S3Error("InvalidBucketName", f"The specified bucket is not valid: {problem}.")
    lock = call.request.headers.get("x-amz-bucket-object-lock-enabled", "false").strip().lower()
    if lock not in ("true", "false"):
        raise S3Error("InvalidArgument", "x-amz-bucket-object-lock-enabled is true or false")
    try:
        bucket = await call.engine.buckets.create(
            call.actor,
            call.bucket,
            region,
            object_lock=BucketLock() if lock == "true" else None,
            sharing=Sharing(acl=await bucket_acl(call)),
            object_ownership=call.request.headers.get("x-amz-object-ownership"),
        )
    except BucketNameTaken as exc:
        if isinstance(exc, SharedNameTaken) or region != LEGACY_REGION:
            raise
        try:
            mine = await call.engine.buckets.get_by_name(call.actor, call.bucket)
        except BucketNotFound:
            raise exc from None
        if mine.region != LEGACY_REGION:
            raise
        return Response(b"", 200, {"Location": f"/{mine.name}"})
    deadline = asyncio.get_running_loop().time() + PROVISIONING_WAIT_SECONDS
    while bucket.status == "provisioning":  # S3 answers once the bucket can be used
        if asyncio.get_running_loop().time() > deadline:
            raise S3Error("OperationAborted", "the bucket is still provisioning", 409)
        await asyncio.sleep(0.02)
        bucket = await call.engine.buckets.get(call.actor, bucket.id)
    if bucket.status != "active":
        raise S3Error("ServiceUnavailable", f"the bucket failed: {bucket.status_reason}", 503)
    return Response(b"", 200, {"Location": f"/{bucket.name}"})


async def head_bucket(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    return Response(b"", 200, {"x-amz-bucket-region": bucket.region})


async def delete_bucket(call: S3Call) -> Response:
    try:
        await call.engine.buckets.delete(call.actor, await call.bucket_id())
    except BucketProvisioning as exc:
        raise S3Error("OperationAborted", exc.message, 409) from None
    return Response(b"", 204)


async def get_location(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    region = "" if bucket.region == "us-east-1" else bucket.region
    return Response(xml.render_value("LocationConstraint", region), media_type="application/xml")


def etag_for_listing(record: FileRecord) -> str:
    """The MD5 ETag when known; files uploaded through /v1 show their SHA-256 until an S3
    HEAD or GET has computed their MD5."""
    return f'"{record.md5}"' if record.md5 else record.etag


def max_keys(call: S3Call) -> int:
    raw = call.params.get("max-keys", str(MAX_KEYS))
    number = whole_number(raw)
    if number is None:
        raise S3Error("InvalidArgument", "max-keys must be a non-negative integer")
    return min(number, MAX_KEYS)


def _token(after: str) -> str:
    return base64.urlsafe_b64encode(after.encode("utf-8")).decode("ascii")


def _untoken(token: str) -> str:
    try:
        padded = token.encode("ascii") + b"=" * (-len(token) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None


async def list_objects(call: S3Call) -> Response:
    v2 = call.params.get("list-type") == "2"
    prefix = call.params.get("prefix", "")
    delimiter = call.params.get("delimiter", "")
    encoding = call.params.get("encoding-type")
    out = call.key_encoder()
    owner = call.owner if not v2 or call.params.get("fetch-owner") == "true" else None
    limit = max_keys(call)
    if v2:
        token = call.params.get("continuation-token")
        after = _untoken(token) if token else call.params.get("start-after") or None
    else:
        after = call.params.get("marker") or None
    bucket_id = await call.bucket_id()
    if limit:
        page = await call.engine.files.list(
            call.actor, bucket_id, prefix, delimiter, after, limit, call.listed_as_of()
        )
        files, prefixes, truncated, last = page.items, page.prefixes, page.has_more, page.last
    else:
        files, prefixes, truncated, last = [], [], False, None

    contents = [
        (
            "Contents",
            [
                ("Key", out(f.key)),
                ("LastModified", xml.timestamp(f.uploaded_at)),
                ("ETag", etag_for_listing(f)),
                ("Size", f.size),
                ("Owner", owner),
                ("StorageClass", "STANDARD"),
            ],
        )
        for f in files
    ]
    common = [("CommonPrefixes", [("Prefix", out(p))]) for p in prefixes]
    # ListObjects (v1) writes its Prefix as sent even with encoding-type=url, as S3 does
    # (botocore, which asks for url on every listing, decodes v1's Prefix never).
    head: list[xml.Node] = [
        ("Name", call.bucket),
        ("Prefix", out(prefix) if v2 else prefix),
        ("Delimiter", out(delimiter) if delimiter else None),
        ("MaxKeys", limit),
        ("EncodingType", encoding),
        ("IsTruncated", truncated),
    ]
    if v2:
        head += [
            ("KeyCount", len(files) + len(prefixes)),
            ("ContinuationToken", call.params.get("continuation-token")),
            (
                "StartAfter",
                out(call.params["start-after"]) if "start-after" in call.params else None,
            ),
            ("NextContinuationToken", _token(last) if truncated and last else None),
        ]
    else:
        head += [
            ("Marker", out(call.params.get("marker", ""))),
            ("NextMarker", out(last) if truncated and last and delimiter else None),
        ]
    return xml.response("ListBucketResult", head + contents + common)
