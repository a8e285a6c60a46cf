"""S3 multipart uploads: Create, UploadPart, UploadPartCopy, Complete, Abort, ListParts,
ListMultipartUploads."""

from __future__ import annotations

import re
from collections.abc import Mapping

from starlette.responses import Response

from storage import encryption, kms
from storage.models import CompletedPart, CompletionClaim, MultipartUpload, Part
from storage.rules import checksums
from storage.rules.validation import whole_number

from . import xml
from .attributes import written
from .call import S3Call
from .copies import copy_source, source_version
from .customer_keys import (
    SOURCE,
    CustomerKey,
    answer_headers,
    customer_key,
    stored_checksum,
    write_key,
)
from .errors import S3Error
from .objects import (
    KMS_KEY_ID,
    SSE,
    asked_encryption,
    bucket_key_header,
    checksum_headers,
    encryption_headers,
    write_condition,
)
from .tagging import header_tags
from .versions import written_version

MAX_LISTED = 1000


def _upload(call: S3Call) -> tuple[str, str]:
    """(key, upload id): an upload is reached through its own key only."""
    assert call.key is not None
    return call.key, call.params["uploadId"]


def _upload_encryption(
    upload: MultipartUpload | Part, given: CustomerKey | None, default_kms: str = ""
) -> dict[str, str]:
    """S3's answer about an encrypted upload, on its create and on each of its parts (a
    part's `encryption` is its envelope; an upload's, what it asks, the keyring's default
    key for aws:kms without a key id; SSE-C's echo the request's key, checked by then)."""
    if given is not None:
        return given.headers()
    if upload.encryption is None:
        return {}
    if isinstance(upload, Part):
        envelope = encryption.Envelope.decode(upload.encryption)
        if envelope.algorithm == encryption.SSE_KMS:
            return {SSE: encryption.SSE_KMS, KMS_KEY_ID: envelope.key_id}
    elif kms.is_kms(upload.encryption):
        name = kms.key_name(upload.encryption) or default_kms
        return {SSE: encryption.SSE_KMS, KMS_KEY_ID: name}
    return {SSE: encryption.SSE_S3}


def _key(given: CustomerKey | None) -> bytes | None:
    return None if given is None else given.key


def _part_number(call: S3Call) -> int:
    number = whole_number(call.params.get("partNumber", ""))
    if number is None:
        raise S3Error(
            "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive"
        )
    return number


async def create(call: S3Call) -> Response:
    assert call.key is not None
    headers = call.request.headers
    algorithm = headers.get("x-amz-checksum-algorithm")
    kind = headers.get("x-amz-checksum-type")
    if kind and not algorithm:
        raise S3Error("InvalidRequest", "x-amz-checksum-type needs x-amz-checksum-algorithm")
    given = write_key(headers)
    upload = await call.engine.multipart.create(
        call.actor,
        await call.bucket_id(),
        call.key,
        await written(call, headers, await header_tags(call)),
        algorithm.upper() if algorithm else None,
        kind.upper() if kind else None,
        asked_encryption(headers),
        _key(given),
    )
    extra = {"x-amz-checksum-algorithm": algorithm.upper()} if algorithm else {}
    extra |= _upload_encryption(upload, given, call.engine.files.sealed.keyring.default)
    extra |= bucket_key_header(headers)
    return xml.response(
        "InitiateMultipartUploadResult",
        [("Bucket", call.bucket), ("Key", call.key), ("UploadId", upload.upload_id)],
        headers=extra,
    )


async def upload_part(call: S3Call) -> Response:
    given = customer_key(call.request.headers)
    payload = call.payload()
    part = await call.engine.multipart.upload_part(
        call.actor,
        await call.bucket_id(),
        *_upload(call),
        _part_number(call),
        payload.chunks(call.request.stream()),
        payload.content_length,
        call.deadline,
        payload.checksum_json,
        _key(given),
    )
    answer = {"ETag": f'"{part.md5}"', **checksum_headers(payload.checksum)}
    return Response(b"", 200, answer | _upload_encryption(part, given))


async def upload_part_copy(call: S3Call) -> Response:
    source, named, _ = await copy_source(call)
    source_key = customer_key(call.request.headers, SOURCE)
    given = customer_key(call.request.headers)
    call.engine.files.sealed.check(source, _key(source_key))
    start, end = 0, source.size
    copy_range = call.request.headers.get("x-amz-copy-source-range")
    if copy_range is not None:
        start, end = _copy_range(copy_range, source.size)
    part = await call.engine.multipart.copy_part(
        call.actor,
        await call.bucket_id(),
        *_upload(call),
        _part_number(call),
        source,
        start,
        end,
        _key(source_key),
        _key(given),
    )
    return xml.response(
        "CopyPartResult",
        [("LastModified", xml.timestamp(part.uploaded_at)), ("ETag", f'"{part.md5}"')],
        headers=source_version(source, named) | _upload_encryption(part, given),
    )


COPY_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def _copy_range(value: str, size: int) -> tuple[int, int]:
    """[start, end) of `x-amz-copy-source-range`, as S3 takes it: exactly bytes=first-last
    (else InvalidArgument), inside the source (else InvalidRange, 416)."""
    found = COPY_RANGE.fullmatch(value.strip())
    if found is None or int(found.group(1)) > int(found.group(2)):
        raise S3Error(
            "InvalidArgument",
            "The x-amz-copy-source-range value must be of the form bytes=first-last where "
            "first and last are the zero-based offsets of the first and last bytes to copy",
        )
    first, last = int(found.group(1)), int(found.group(2))
    if last >= size:
        raise S3Error(
            "InvalidRange",
            f"The requested range is not satisfiable: the source object has {size} bytes",
            416,
            {"Content-Range": f"bytes */{size}"},
        )
    return first, last + 1


async def complete(call: S3Call) -> Response:
    sse_c = customer_key(call.request.headers)
    root = await call.read_xml(checksum_headers=False)  # they are the object's: `_claim`
    requested = []
    for part in root.findall("Part"):
        number = whole_number(xml.text(part, "PartNumber", ""), 10_000, strip=True)
        if number is None:
            raise S3Error("MalformedXML", "a Part lacks its PartNumber (1 to 10000)")
        claims = [(a, xml.text(part, f"Checksum{a}")) for a in checksums.ALGORITHMS]
        given = [(algorithm, value.strip()) for algorithm, value in claims if value]
        if len(given) > 1:
            raise S3Error("InvalidRequest", f"part {number} names more than one checksum")
        etag = xml.text(part, "ETag", "") or ""
        requested.append(CompletedPart(number, etag, given[0] if given else None))
    record = await call.engine.multipart.complete(
        call.actor,
        await call.bucket_id(),
        *_upload(call),
        requested,
        write_condition(call.request.headers),
        _claim(call.request.headers),
        _key(sse_c),
    )
    fields: list[xml.Node] = [
        ("Location", f"/{call.bucket}/{call.key}"),
        ("Bucket", call.bucket),
        ("Key", call.key),
        ("ETag", f'"{record.md5}"'),
    ]
    stored = stored_checksum(record, sse_c)
    if stored is not None:
        fields += [(f"Checksum{stored.algorithm}", stored.value), ("ChecksumType", stored.type)]
    headers = written_version(record) | encryption_headers(record) | answer_headers(record, sse_c)
    return xml.response("CompleteMultipartUploadResult", fields, headers=headers)


def _claim(headers: Mapping[str, str]) -> CompletionClaim:
    """What a completion's headers say the whole object is (x-amz-checksum-<algorithm>,
    x-amz-checksum-type, x-amz-mp-object-size)."""
    given = [
        (algorithm, value.strip())
        for algorithm in checksums.ALGORITHMS
        if (value := headers.get(f"x-amz-checksum-{algorithm.lower()}"))
    ]
    if len(given) > 1:
        raise S3Error("InvalidRequest", "a completion names one checksum of the object")
    size = headers.get("x-amz-mp-object-size")
    if size is not None and whole_number(size) is None:
        raise S3Error("InvalidArgument", "x-amz-mp-object-size is a whole number of bytes")
    return CompletionClaim(
        checksum=given[0] if given else None,
        checksum_type=headers.get("x-amz-checksum-type"),
        size=whole_number(size),
    )


async def abort(call: S3Call) -> Response:
    await call.engine.multipart.abort(call.actor, await call.bucket_id(), *_upload(call))
    return Response(b"", 204)


def _bounded(call: S3Call, name: str) -> int:
    raw = call.params.get(name, str(MAX_LISTED))
    number = whole_number(raw)
    if number is None:
        raise S3Error("InvalidArgument", f"{name} must be an integer")
    return max(1, min(number, MAX_LISTED))


async def list_parts(call: S3Call) -> Response:
    marker = call.params.get("part-number-marker", "0")
    after = whole_number(marker)
    if after is None:
        raise S3Error("InvalidArgument", "part-number-marker must be an integer")
    limit = _bounded(call, "max-parts")
    given = customer_key(call.request.headers)
    upload, parts = await call.engine.multipart.list_parts(
        call.actor, await call.bucket_id(), *_upload(call), after, limit + 1, _key(given)
    )
    truncated = len(parts) > limit
    parts = parts[:limit]
    entries: list[xml.Node] = [
        (
            "Part",
            [
                ("PartNumber", p.part_number),
                ("LastModified", xml.timestamp(p.uploaded_at)),
                ("ETag", f'"{p.md5}"'),
                ("Size", p.size),
            ],
        )
        for p in parts
    ]
    return xml.response(
        "ListPartsResult",
        [
            ("Bucket", call.bucket),
            ("Key", call.key_encoder()(upload.key)),
            ("UploadId", upload.upload_id),
            ("Initiator", call.owner),
            ("Owner", call.owner),
            ("PartNumberMarker", after),
            ("NextPartNumberMarker", parts[-1].part_number if truncated else None),
            ("MaxParts", limit),
            ("IsTruncated", truncated),
            ("StorageClass", "STANDARD"),
            *entries,
        ],
    )


async def list_uploads(call: S3Call) -> Response:
    out = call.key_encoder()
    prefix = call.params.get("prefix", "")
    key_marker = call.params.get("key-marker", "")
    id_marker = call.params.get("upload-id-marker", "")
    limit = _bounded(call, "max-uploads")
    after = (key_marker, id_marker or "\uffff") if key_marker else None
    uploads = await call.engine.multipart.list_uploads(
        call.actor, await call.bucket_id(), prefix, after, limit + 1
    )
    truncated = len(uploads) > limit
    uploads = uploads[:limit]
    entries: list[xml.Node] = [
        (
            "Upload",
            [
                ("Key", out(u.key)),
                ("UploadId", u.upload_id),
                ("Initiator", call.owner),
                ("Owner", call.owner),
                ("Initiated", xml.timestamp(u.created_at)),
                ("StorageClass", "STANDARD"),
            ],
        )
        for u in uploads
    ]
    return xml.response(
        "ListMultipartUploadsResult",
        [
            ("Bucket", call.bucket),
            ("KeyMarker", out(key_marker)),
            ("UploadIdMarker", id_marker),
            ("NextKeyMarker", out(uploads[-1].key) if truncated else None),
            ("NextUploadIdMarker", uploads[-1].upload_id if truncated else None),
            ("Prefix", out(prefix)),
            ("EncodingType", call.params.get("encoding-type")),
            ("MaxUploads", limit),
            ("IsTruncated", truncated),
            *entries,
        ],
    )
