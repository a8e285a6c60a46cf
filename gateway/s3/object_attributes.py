"""S3 GetObjectAttributes: what HeadObject says of a version and more (its parts, with
their sizes and checksums), without its content or its metadata. The aws CLI and the SDKs'
transfer managers read checksums and parts with it."""

from __future__ import annotations

from starlette.responses import Response

from gateway.http.content import http_date
from storage.rules.checksums import Checksum
from storage.rules.part_layout import PartLayout
from storage.rules.validation import whole_number

from . import xml
from .access import also
from .call import S3Call
from .customer_keys import customer_key
from .errors import S3Error
from .touches import declared
from .versions import requested_record, requested_version, version_headers

ATTRIBUTES = ("ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize")
MAX_PARTS = 1000


def _asked(call: S3Call) -> set[str]:
    """The attributes `x-amz-object-attributes` names (comma-separated, each at least
    once: botocore sends one header with a list)."""
    raw = ",".join(call.request.headers.getlist("x-amz-object-attributes"))
    asked = {name.strip() for name in raw.split(",") if name.strip()}
    if not asked:
        raise S3Error("InvalidArgument", "x-amz-object-attributes names at least one attribute")
    if asked - set(ATTRIBUTES):
        raise S3Error("InvalidArgument", "Invalid attribute name specified.")
    return asked


def _number(call: S3Call, header: str, default: int) -> int:
    raw = call.request.headers.get(header)
    if raw is None:
        return default
    number = whole_number(raw.strip())
    if number is None:
        raise S3Error("InvalidArgument", f"{header} must be a whole number")
    return number


def _parts(call: S3Call, layout: PartLayout, algorithm: str | None) -> list[xml.Node]:
    """ObjectParts: a page of the parts after `x-amz-part-number-marker`, at most
    `x-amz-max-parts` (1000, as ListParts, when not given)."""
    after = _number(call, "x-amz-part-number-marker", 0)
    limit = max(0, min(_number(call, "x-amz-max-parts", MAX_PARTS), MAX_PARTS))
    page = layout.page(after, limit)
    truncated = bool(page) and page[-1][0] < layout.count
    nodes: list[xml.Node] = [
        ("PartsCount", layout.count),
        ("PartNumberMarker", after),
        ("NextPartNumberMarker", page[-1][0] if truncated else None),
        ("MaxParts", limit),
        ("IsTruncated", truncated),
    ]
    for number, size, checksum in page:
        part: list[xml.Node] = [("PartNumber", number), ("Size", size)]
        if checksum is not None and algorithm is not None:
            part.append((f"Checksum{algorithm}", checksum))
        nodes.append(("Part", part))
    return nodes


async def get_object_attributes(call: S3Call) -> Response:
    """Decided as `s3:GetObjectAttributes` (its `Version` form for a named version) by the
    dispatch table, and here as `s3:GetObject` too, as AWS needs both. An SSE-C object's
    attributes need its key, as its content does."""
    assert call.key is not None
    asked = _asked(call)
    bucket = await call.target_bucket()
    named, version_id = requested_version(call)
    declared(call, "content")
    await also(call, "s3:GetObject", call.key, bucket, named, version_id)
    record = await requested_record(call)
    given = customer_key(call.request.headers)
    call.engine.files.sealed.check(record, None if given is None else given.key)
    stored = Checksum.from_json(record.checksum)
    layout = PartLayout.decode(record.parts)
    fields: list[xml.Node] = []
    if "ETag" in asked:
        fields.append(("ETag", (await call.engine.files.s3_etag(record)).strip('"')))
    if "Checksum" in asked and stored is not None:
        checksum = [(f"Checksum{stored.algorithm}", stored.value), ("ChecksumType", stored.type)]
        fields.append(("Checksum", checksum))
    if "ObjectParts" in asked and layout is not None:
        algorithm = None if stored is None else stored.algorithm
        fields.append(("ObjectParts", _parts(call, layout, algorithm)))
    if "StorageClass" in asked:
        fields.append(("StorageClass", "STANDARD"))
    if "ObjectSize" in asked:
        fields.append(("ObjectSize", record.size))
    headers = {"Last-Modified": http_date(record.uploaded_at), **version_headers(bucket, record)}
    return xml.response("GetObjectAttributesResponse", fields, headers=headers)
