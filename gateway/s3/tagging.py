"""S3 tagging: Get/Put/DeleteBucketTagging, Get/Put/DeleteObjectTagging (per version), and
the `x-amz-tagging` headers of writes (the tag rules are `storage/rules/tags.py`)."""

from __future__ import annotations

from urllib.parse import parse_qsl
from xml.etree import ElementTree

from starlette.responses import Response

from storage.models import Bucket, FileRecord
from storage.rules.tags import MAX_OBJECT_TAGS, check_tags, decode_tags, encode_tags

from . import xml
from .access import also, body_context
from .call import S3Call
from .errors import S3Error
from .touches import one
from .versions import requested_record, requested_version


async def get_bucket_tagging(call: S3Call) -> Response:
    tags = decode_tags((await call.target_bucket()).tags)
    if not tags:
        raise S3Error("NoSuchTagSet", "The TagSet does not exist", 404)
    tag_set: list[xml.Node] = [
        ("Tag", [("Key", key), ("Value", value)]) for key, value in sorted(tags.items())
    ]
    return xml.response("Tagging", [("TagSet", tag_set)])


async def put_bucket_tagging(call: S3Call) -> Response:
    pairs = tag_set(await call.read_xml())
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"tags": pairs or None})
    return Response(b"", 204)


async def delete_bucket_tagging(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"tags": None})
    return Response(b"", 204)


async def header_tags(call: S3Call) -> str | None:
    """The tags an `x-amz-tagging` header asks for (URL-encoded `k=v&k2=v2`), as stored.
    Tagging a write is s3:PutObjectTagging's, as on AWS."""
    raw = one(call, "tagging")
    if raw is None:
        return None
    tags = encode_tags(check_tags(parse_qsl(raw, keep_blank_values=True), MAX_OBJECT_TAGS))
    if tags:
        await also(call, "s3:PutObjectTagging", call.key)
    return tags


async def copy_tags(call: S3Call, source: FileRecord, named: bool, bucket: Bucket) -> str | None:
    """A copy's tags: the header's (REPLACE, "" for none), or the source's (COPY, None),
    which, as on AWS, the requester must be able to read (s3:GetObjectTagging on the
    source) and to set (s3:PutObjectTagging on the copy)."""
    directive = (one(call, "copy-tags") or "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise S3Error("InvalidArgument", "Unknown tagging directive.")
    if directive == "REPLACE":
        return await header_tags(call) or ""
    if source.tags and decode_tags(source.tags):
        await also(call, "s3:GetObjectTagging", source.key, bucket, named, source.version_id)
        await also(call, "s3:PutObjectTagging", call.key)
    return None


def tag_set(root: ElementTree.Element) -> list[tuple[str, str]]:
    tag_set = root.find("TagSet")
    if tag_set is None:
        raise S3Error("MalformedXML", "Tagging holds a TagSet")
    pairs = []
    for tag in tag_set.findall("Tag"):
        key = xml.text(tag, "Key")
        if key is None:
            raise S3Error("MalformedXML", "a Tag holds a Key")
        pairs.append((key, xml.text(tag, "Value", "") or ""))
    return pairs


async def get_object_tagging(call: S3Call) -> Response:
    record = await requested_record(call)
    tag_set: list[xml.Node] = [
        ("Tag", [("Key", key), ("Value", value)])
        for key, value in sorted(decode_tags(record.tags).items())
    ]
    return xml.response(
        "Tagging",
        [("TagSet", tag_set)],
        headers={"x-amz-version-id": record.s3_version_id} if record.version_id else None,
    )


async def _set_object_tags(call: S3Call, pairs: list[tuple[str, str]] | None) -> dict[str, str]:
    assert call.key is not None
    named, version_id = requested_version(call)
    record, _ = await call.engine.files.set_tags(
        call.actor, await call.bucket_id(), call.key, version_id, pairs, not named
    )
    return {"x-amz-version-id": record.s3_version_id} if record.version_id or named else {}


async def put_object_tagging(call: S3Call) -> Response:
    """Decided again once the body is read, with its tags as `s3:RequestObjectTag/<key>`."""
    pairs = tag_set(await call.read_xml())
    named, version_id = requested_version(call)
    await also(
        call,
        "s3:PutObjectTagging",
        call.key,
        named=named,
        version_id=version_id,
        context=body_context(tags=pairs),
    )
    return Response(b"", 200, await _set_object_tags(call, pairs or None))


async def delete_object_tagging(call: S3Call) -> Response:
    return Response(b"", 204, await _set_object_tags(call, None))
