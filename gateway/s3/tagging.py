"""S3 bucket tagging: Get/Put/DeleteBucketTagging (the tag rules are `storage/tags.py`)."""

from __future__ import annotations

from starlette.responses import Response

from storage.tags import decode_tags

from . import xml
from .call import S3Call
from .errors import S3Error


async def get_bucket_tagging(call: S3Call) -> Response:
    tags = decode_tags((await call.target_bucket()).tags)
    if not tags:
        raise S3Error("NoSuchTagSet", "The TagSet does not exist", 404)
    tag_set: list[xml.Node] = [
        ("Tag", [("Key", key), ("Value", value)]) for key, value in sorted(tags.items())
    ]
    return xml.response("Tagging", [("TagSet", tag_set)])


async def put_bucket_tagging(call: S3Call) -> Response:
    root = await call.read_xml()
    tag_set = root.find("TagSet")
    if tag_set is None:
        raise S3Error("MalformedXML", "Tagging holds a TagSet")
    pairs = []
    for tag in tag_set.findall("Tag"):
        key = xml.text(tag, "Key")
        if key is None:
            raise S3Error("MalformedXML", "a Tag holds a Key")
        pairs.append((key, xml.text(tag, "Value", "") or ""))
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.principal.actor, bucket.id, {"tags": pairs or None})
    return Response(b"", 204)


async def delete_bucket_tagging(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.principal.actor, bucket.id, {"tags": None})
    return Response(b"", 204)
