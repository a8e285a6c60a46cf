"""S3 object operations: PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects,
CopyObject."""

from __future__ import annotations

import base64
import email.utils
import json
from collections.abc import Mapping
from xml.etree import ElementTree

from starlette.datastructures import Headers
from starlette.responses import Response

from gateway.http.content import content_response, http_date, safe_content_headers
from storage import kms
from storage.encryption import SSE_C, SSE_KMS, Envelope
from storage.errors import FileNotFound, StorageError
from storage.models import Bucket, Condition, DeleteCondition, FileRecord, WriteOptions
from storage.rules.access import shown
from storage.rules.checksums import Checksum
from storage.rules.clock import iso_to_unix
from storage.rules.etags import etag_matches
from storage.rules.ids import is_version_id
from storage.rules.validation import whole_number

from . import xml
from .access import also, requester_of
from .attributes import header_value, written
from .call import S3Call
from .customer_keys import answer_headers, customer_key, stored_checksum, write_key
from .errors import S3Error, from_storage, not_implemented
from .lifecycle import expiration_header
from .locking import bypasses_governance, lock_headers
from .object_parts import byte_range, part_headers, ranged
from .tagging import header_tags
from .touches import declared
from .versions import requested_version, version_headers, written_version

MAX_DELETE_KEYS = 1000
OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


def _meta_header(value: str) -> str:
    """A stored metadata value as S3 returns it: as is when US-ASCII, else RFC 2047
    encoded (=?UTF-8?B?...?=)."""
    if value.isascii():
        return value
    return f"=?UTF-8?B?{base64.b64encode(value.encode()).decode('ascii')}?="


def write_condition(headers: Headers) -> Condition | None:
    """A write's precondition, read as S3 reads it: If-None-Match `*` (no current version)
    or a list of ETags the current version must not have, If-Match an ETag list or `*`."""
    if_none_match = headers.get("if-none-match")
    if_match = headers.get("if-match")
    if if_none_match is None and if_match is None:
        return None
    any_version = if_none_match is not None and if_none_match.strip() == "*"
    return Condition(
        if_none_match_any=any_version,
        if_none_match=None if any_version else if_none_match,
        if_match=if_match,
    )


def checksum_headers(payload_checksum: Checksum | None) -> dict[str, str]:
    if payload_checksum is None:
        return {}
    return {f"x-amz-checksum-{payload_checksum.algorithm.lower()}": payload_checksum.value}


SSE = "x-amz-server-side-encryption"
KMS_KEY_ID = SSE + "-aws-kms-key-id"
BUCKET_KEY = SSE + "-bucket-key-enabled"


def asked_encryption(headers: Mapping[str, str]) -> str | None:
    """The encryption at rest a write asks for (`members.py` takes AES256 and aws:kms): for
    aws:kms, with the key its key id names (`kms.requested`)."""
    value = headers.get(SSE)
    if value == SSE_KMS:
        return kms.requested(headers.get(KMS_KEY_ID))
    if KMS_KEY_ID in headers:  # a key id with AES256, or with no encryption asked: AWS's 400
        raise S3Error(
            "InvalidArgument",
            f"Server Side Encryption with AWS KMS managed key requires HTTP header {SSE} : aws:kms",
        )
    return value.upper() if value else None


def encryption_headers(record: FileRecord) -> dict[str, str]:
    """How a version's content is encrypted at rest, as S3 says on every answer about it
    (SSE-C's headers echo the request's key: `customer_keys.answer_headers`)."""
    if record.encryption is None:
        return {}
    envelope = Envelope.decode(record.encryption)
    if envelope.algorithm == SSE_KMS:
        return {SSE: SSE_KMS, KMS_KEY_ID: envelope.key_id}
    return {} if envelope.algorithm == SSE_C else {SSE: envelope.algorithm}


def bucket_key_header(headers: Mapping[str, str]) -> dict[str, str]:
    """S3 Bucket Keys save calls to a remote KMS, which the keyring never makes: the request's
    setting is accepted and echoed, and changes nothing."""
    value = headers.get(BUCKET_KEY)
    return {} if value is None else {BUCKET_KEY: value.lower()}


async def put_object(call: S3Call) -> Response:
    assert call.key is not None
    headers = call.request.headers
    bucket = await call.target_bucket()
    payload = call.payload()
    given = write_key(headers)
    options = WriteOptions(
        md5=True,
        checksum=payload.checksum_json,
        condition=write_condition(headers),
        encryption=asked_encryption(headers) if given is None else SSE_C,
        customer_key=None if given is None else given.key,
        plain_sha256=payload.content_sha256 if payload.signs_content else None,
    )
    record = await call.engine.files.put(
        call.actor,
        bucket.id,
        call.key,
        await written(call, headers, await header_tags(call)),
        payload.chunks(call.request.stream()),
        payload.content_length,
        call.deadline,
        options,
    )
    answer = {
        "ETag": f'"{record.md5}"',
        **checksum_headers(payload.checksum),
        **written_version(record),
        **encryption_headers(record),
        **bucket_key_header(headers),
        **answer_headers(record, given),
        **expiration_header(bucket, record),
    }
    return Response(b"", 200, answer)


def _since(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


def check_read_conditions(
    headers: Headers, etag: str, modified: float, prefix: str = ""
) -> int | None:
    """412 or 304 by the RFC 9110 rules S3 follows (If-Match before If-Unmodified-Since,
    If-None-Match before If-Modified-Since); None to go on."""
    if_match = headers.get(prefix + "if-match")
    if if_match is not None:
        if not etag_matches(if_match, (etag,), weak=False):
            return 412
    else:
        unmodified = _since(headers.get(prefix + "if-unmodified-since"))
        if unmodified is not None and modified > unmodified:
            return 412
    if_none_match = headers.get(prefix + "if-none-match")
    if if_none_match is not None:
        if etag_matches(if_none_match, (etag,), weak=True):
            return 304
    else:
        since = _since(headers.get(prefix + "if-modified-since"))
        if since is not None and modified <= since:
            return 304
    return None


def object_headers(record: FileRecord, etag: str) -> dict[str, str]:
    safe = safe_content_headers(record.content_type)
    stored = json.loads(record.headers or "{}")
    headers = {
        "ETag": etag,
        "Last-Modified": http_date(record.uploaded_at),
        "Accept-Ranges": "bytes",
        **stored,
        **safe,
        **encryption_headers(record),
    }
    disposition = stored.get("Content-Disposition", "")
    if "Content-Disposition" in safe and disposition.lower().startswith("attachment"):
        headers["Content-Disposition"] = disposition  # an active type stays an attachment
    if record.tags:
        headers["x-amz-tagging-count"] = str(len(json.loads(record.tags)))
    for name, value in json.loads(record.metadata or "{}").items():
        headers[f"x-amz-meta-{name}"] = _meta_header(value)
    return headers


async def get_object(call: S3Call) -> Response:
    assert call.key is not None
    request = call.request
    if SSE in request.headers:
        # Not in AWS's model of GetObject/HeadObject, so not in members.py's tables: AWS
        # answers it 400 (the key is the server's: a reader has nothing to say about it).
        raise S3Error("InvalidArgument", f"the {SSE} header is not supported for this operation")
    bucket = await call.target_bucket()
    named, version_id = requested_version(call)
    given = customer_key(request.headers)
    rereads = call.engine.files.rereads()
    for _ in rereads.attempts():
        if named:
            record = await call.engine.files.get_version(
                call.actor, bucket.id, call.key, version_id
            )
        else:
            record = await call.engine.files.get(call.actor, bucket.id, call.key)
        call.engine.files.sealed.check(record, None if given is None else given.key)
        etag = await call.engine.files.s3_etag(record)
        seen = shown(requester_of(call), bucket, record, named)
        headers = {
            **object_headers(seen, etag),
            **version_headers(bucket, record),
            **lock_headers(seen),
            **answer_headers(record, given),
            **({} if named else expiration_header(bucket, record)),
        }
        outcome = check_read_conditions(request.headers, etag, iso_to_unix(record.uploaded_at))
        if outcome == 412:
            raise S3Error(
                "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold",
                412,
            )
        if outcome == 304:
            return Response(b"", 304, {"ETag": etag, "Last-Modified": headers["Last-Modified"]})
        start, end = byte_range(call, record)
        headers |= part_headers(call, record)
        status = 206 if ranged(call) and record.size > 0 else 200
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{record.size}"
        elif request.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED":
            stored = stored_checksum(record, given)
            if stored is not None:
                headers[f"x-amz-checksum-{stored.algorithm.lower()}"] = stored.value
                headers["x-amz-checksum-type"] = stored.type
        if call.principal is None and OVERRIDES.keys() & call.params.keys():
            raise S3Error(
                "InvalidRequest",
                "Request specific response headers cannot be used for anonymous GET requests.",
            )
        for parameter, header in OVERRIDES.items():
            if parameter in call.params:
                headers[header] = header_value(call.params[parameter], parameter)
        headers["Content-Length"] = str(end - start)
        if request.method == "HEAD":
            return Response(b"", status, headers)
        try:
            body = await call.engine.files.open(
                record, start, end, None if given is None else given.key
            )
        except FileNotFound:
            if await rereads.raced(record):
                continue
            raise
        return await content_response(body, end - start, status, headers)
    raise rereads.exhausted(call.key)


def delete_condition(
    etag: str | None, modified: str | None, size: str | None
) -> DeleteCondition | None:
    """A conditional delete's condition: If-Match (ETag in DeleteObjects),
    x-amz-if-match-last-modified-time (LastModifiedTime), x-amz-if-match-size (Size)."""
    if etag is None and modified is None and size is None:
        return None
    moment = None
    if modified is not None:
        moment = _since(modified)
        if moment is None:
            try:
                moment = iso_to_unix(modified.strip())
            except ValueError:
                raise S3Error("InvalidArgument", "the last-modified time is not a date") from None
    if size is not None and whole_number(size) is None:
        raise S3Error("InvalidArgument", "the size is a whole number of bytes")
    return DeleteCondition(if_match=etag, modified_at=moment, size=whole_number(size))


async def delete_one(
    call: S3Call,
    bucket: Bucket,
    key: str,
    named: bool,
    version_id: str | None,
    condition: DeleteCondition | None = None,
) -> dict[str, str]:
    """Delete a key's current version (a delete marker where versioned) or, named, one
    version for good, each decided on its own (s3:DeleteObject, s3:DeleteObjectVersion);
    S3's answer headers. Deleting what is not there succeeds, unless conditionally
    (`NoSuchKey`, as AWS answers a conditional delete of nothing)."""
    actor = await also(call, "s3:DeleteObject", key, bucket, named, version_id)
    if condition is not None and named:
        raise not_implemented("a conditional delete of a named version")
    try:
        if named:
            bypass = await bypasses_governance(call, key, named, version_id)
            record = await call.engine.files.delete_version(
                actor, bucket.id, key, version_id, bypass
            )
        else:
            record = await call.engine.files.delete(
                actor, bucket.id, key, must_exist=False, condition=condition
            )
    except FileNotFound:
        if condition is not None:
            raise
        return {"x-amz-version-id": version_id or "null"} if named else {}
    headers = version_headers(bucket, record)
    if named:
        headers["x-amz-version-id"] = version_id or "null"
    return headers


async def delete_object(call: S3Call) -> Response:
    assert call.key is not None
    named, version_id = requested_version(call)
    found = call.request.headers
    condition = delete_condition(
        found.get("if-match"),
        found.get("x-amz-if-match-last-modified-time"),
        found.get("x-amz-if-match-size"),
    )
    bucket = await call.target_bucket()
    headers = await delete_one(call, bucket, call.key, named, version_id, condition)
    return Response(b"", 204, headers)


def _present(item: ElementTree.Element, name: str) -> str | None:
    """An element's text, "" when it is there but empty (a condition that holds for
    nothing, never none)."""
    found = item.find(name)
    return None if found is None else (found.text or "")


async def delete_objects(call: S3Call) -> Response:
    declared(call, "keys")
    root = await call.read_xml()
    quiet = (xml.text(root, "Quiet", "false") or "").lower() == "true"
    objects = [
        (
            xml.text(item, "Key") or "",
            xml.text(item, "VersionId"),
            tuple(_present(item, name) for name in ("ETag", "LastModifiedTime", "Size")),
        )
        for item in root.findall("Object")
    ]
    if len(objects) > MAX_DELETE_KEYS:
        raise S3Error("MalformedXML", f"at most {MAX_DELETE_KEYS} keys per request")
    bucket = await call.target_bucket()
    results: list[xml.Node] = []
    for key, version, guard in objects:
        named = version is not None
        try:
            version_id = None if version in (None, "null") else version
            if version is not None and not is_version_id(version):
                raise S3Error("InvalidArgument", "Invalid version id specified")
            condition = delete_condition(*guard)
            headers = await delete_one(call, bucket, key, named, version_id, condition)
        except (StorageError, S3Error) as exc:
            error = exc if isinstance(exc, S3Error) else from_storage(exc)
            results.append(
                (
                    "Error",
                    [
                        ("Key", key),
                        ("VersionId", version),
                        ("Code", error.code),
                        ("Message", error.message),
                    ],
                )
            )
            continue
        if not quiet:
            marker = headers.get("x-amz-delete-marker") == "true"
            results.append(
                (
                    "Deleted",
                    [
                        ("Key", key),
                        ("VersionId", version if named else None),
                        ("DeleteMarker", True if marker else None),
                        (
                            "DeleteMarkerVersionId",
                            headers["x-amz-version-id"] if marker and not named else None,
                        ),
                    ],
                )
            )
    return xml.response("DeleteResult", results)
