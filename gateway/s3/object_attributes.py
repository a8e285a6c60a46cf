"""GetObjectAttributes (`GET /bucket/key?attributes`): what the aws CLI and the SDKs'
transfer managers ask of an object before a transfer (its ETag, checksum, size, parts,
storage class) in one answer, without its body.

bucketd keeps no part boundaries once a multipart upload completes (its content is one
blob), so `ObjectParts` says how many parts the object was uploaded in, the count its ETag
carries, and lists none; AWS lists them only for objects uploaded with checksums."""

from __future__ import annotations

from starlette.responses import Response

from gateway.http.content import http_date
from storage.rules.checksums import Checksum
from storage.rules.validation import whole_number

from . import xml
from .access import also
from .call import S3Call
from .customer_keys import customer_key
from .errors import S3Error
from .versions import requested_record, requested_version, version_headers

ATTRIBUTES = ("ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize")
MAX_PARTS = 1000


def _asked(raw: str) -> set[str]:
    asked = {name.strip() for name in raw.split(",") if name.strip()}
    if not asked:
        raise S3Error(
            "InvalidArgument",
            f"x-amz-object-attributes names one or more of {', '.join(ATTRIBUTES)}",
        )
    if not asked <= set(ATTRIBUTES):
        raise S3Error("InvalidArgument", "Invalid attribute name specified.")
    return asked


def _number(raw: str | None, name: str, default: int, limit: int) -> int:
    if raw is None:
        return default
    number = whole_number(raw, limit)
    if number is None:
        raise S3Error("InvalidArgument", f"{name} is a whole number from 0 to {limit}")
    return number


def _parts(etag: str) -> int | None:
    """How many parts a multipart object's ETag (`"md5-N"`) says it had; None for another."""
    _, dash, count = etag.strip('"').rpartition("-")
    return int(count) if dash and count.isdigit() else None


async def get_object_attributes(call: S3Call) -> Response:
    """Decided as s3:GetObjectAttributes (its version form for a named version) and, as AWS
    requires both, s3:GetObject on the same version."""
    assert call.key is not None
    headers = call.request.headers
    asked = _asked(headers.get("x-amz-object-attributes", ""))
    max_parts = _number(headers.get("x-amz-max-parts"), "x-amz-max-parts", MAX_PARTS, MAX_PARTS)
    marker = _number(headers.get("x-amz-part-number-marker"), "x-amz-part-number-marker", 0, 10_000)
    named, version_id = requested_version(call)
    await also(call, "s3:GetObject", call.key, named=named, version_id=version_id)
    bucket = await call.target_bucket()
    record = await requested_record(call)
    given = customer_key(headers)
    call.engine.files.sealed.check(record, None if given is None else given.key)
    etag = await call.engine.files.s3_etag(record)
    nodes: list[xml.Node] = []
    if "ETag" in asked:
        nodes.append(("ETag", etag.strip('"')))
    stored = Checksum.from_json(record.checksum)
    if "Checksum" in asked and stored is not None:
        nodes.append(
            (
                "Checksum",
                [(f"Checksum{stored.algorithm}", stored.value), ("ChecksumType", stored.type)],
            )
        )
    parts = _parts(etag)
    if "ObjectParts" in asked and parts is not None:
        nodes.append(
            (
                "ObjectParts",
                [
                    ("PartsCount", parts),
                    ("PartNumberMarker", marker),
                    ("NextPartNumberMarker", marker),
                    ("MaxParts", max_parts),
                    ("IsTruncated", False),
                ],
            )
        )
    if "StorageClass" in asked:
        nodes.append(("StorageClass", "STANDARD"))
    if "ObjectSize" in asked:
        nodes.append(("ObjectSize", record.size))
    answer = {"Last-Modified": http_date(record.uploaded_at), **version_headers(bucket, record)}
    return xml.response("GetObjectAttributesResponse", nodes, headers=answer)
