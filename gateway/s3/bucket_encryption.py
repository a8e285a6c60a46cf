"""S3 bucket default encryption: PutBucketEncryption, GetBucketEncryption and
DeleteBucketEncryption, in AWS's XML shapes. Only SSE-S3 (AES256) is taken: `members.py`
refuses aws:kms with 501 before this reads it. The setting itself is the bucket's
`encryption`, which the engine gives every write into the bucket that asks for none."""

from __future__ import annotations

from starlette.responses import Response

from . import xml
from .call import S3Call
from .errors import S3Error

_DEFAULT = "ApplyServerSideEncryptionByDefault"


async def get_encryption(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    if bucket.encryption is None:
        raise S3Error(
            "ServerSideEncryptionConfigurationNotFoundError",
            "The server side encryption configuration was not found",
            404,
        )
    rule: list[xml.Node] = [
        (_DEFAULT, [("SSEAlgorithm", bucket.encryption)]),
        ("BucketKeyEnabled", "false"),
    ]
    return xml.response("ServerSideEncryptionConfiguration", [("Rule", rule)])


async def put_encryption(call: S3Call) -> Response:
    root = await call.read_xml()
    rules = root.findall("Rule")
    if len(rules) != 1:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed.")
    algorithm = xml.text(rules[0], f"{_DEFAULT}/SSEAlgorithm", "") or ""
    if not algorithm.strip():
        raise S3Error("MalformedXML", "The XML you provided was not well-formed.")
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"encryption": algorithm.strip()})
    return Response(b"", 200)


async def delete_encryption(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"encryption": None})
    return Response(b"", 204)
