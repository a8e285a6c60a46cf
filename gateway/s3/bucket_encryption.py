"""S3 bucket default encryption: PutBucketEncryption, GetBucketEncryption and
DeleteBucketEncryption, in AWS's XML shapes: SSE-S3 (AES256) or SSE-KMS (aws:kms, with
the keyring's key KMSMasterKeyID names, else its default). The setting itself is the bucket's
`encryption`, which the engine gives every write into the bucket that asks for none."""

from __future__ import annotations

from starlette.responses import Response

from storage import kms
from storage.encryption import SSE_KMS

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
    default: list[xml.Node] = [("SSEAlgorithm", bucket.encryption)]
    if kms.is_kms(bucket.encryption):
        name = kms.key_name(bucket.encryption)
        default = [("SSEAlgorithm", SSE_KMS), *([("KMSMasterKeyID", name)] if name else [])]
    rule: list[xml.Node] = [
        (_DEFAULT, default),
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
    value = algorithm.strip()
    if value == SSE_KMS:
        value = kms.requested(xml.text(rules[0], f"{_DEFAULT}/KMSMasterKeyID", "") or None)
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"encryption": value})
    return Response(b"", 200)


async def delete_encryption(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"encryption": None})
    return Response(b"", 204)
