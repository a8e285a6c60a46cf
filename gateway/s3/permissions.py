"""S3's permission settings: bucket policies (Get/Put/DeleteBucketPolicy,
GetBucketPolicyStatus), ACLs (Get/PutBucketAcl, Get/PutObjectAcl, `x-amz-acl` and
`x-amz-grant-*` on writes; read and shown in `grants.py`) and the public access block
(Get/Put/DeletePublicAccessBlock). What they grant is decided in `access.py`; the rules are
`storage/rules/policy.py` and `storage/rules/acl.py`."""

from __future__ import annotations

from collections.abc import Mapping
from xml.etree import ElementTree

from starlette.responses import Response

from storage.errors import AccessBlocked
from storage.models import Bucket
from storage.rules.acl import PublicAccessBlock, check_acl, is_public, shares
from storage.rules.ownership import acls_enabled, check_acls_enabled, check_write_acl
from storage.rules.policy import cached_policy

from . import grants, xml
from .access import also, body_context
from .call import S3Call
from .errors import S3Error
from .touches import read
from .versions import requested_record, requested_version

BLOCK_FIELDS = (
    ("BlockPublicAcls", "block_public_acls"),
    ("IgnorePublicAcls", "ignore_public_acls"),
    ("BlockPublicPolicy", "block_public_policy"),
    ("RestrictPublicBuckets", "restrict_public_buckets"),
)


async def get_policy(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    if bucket.policy is None:
        raise S3Error("NoSuchBucketPolicy", "The bucket policy does not exist", 404)
    return Response(bucket.policy, 200, media_type="application/json")


async def put_policy(call: S3Call) -> Response:
    body = await call.read_body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise S3Error("MalformedPolicy", "the policy is not UTF-8") from None
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"policy": text})
    return Response(b"", 204)


async def delete_policy(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"policy": None})
    return Response(b"", 204)


async def get_policy_status(call: S3Call) -> Response:
    """Whether the bucket is public, as AWS's "meaning of public" has it: a public policy,
    `/v1`'s public flag, or a bucket ACL granting anything to AllUsers or
    AuthenticatedUsers, unless IgnorePublicAcls sets those grants aside (they then grant
    nothing) or ACLs are disabled (BucketOwnerEnforced)."""
    bucket = await call.target_bucket()
    block = PublicAccessBlock.decode(bucket.public_access_block)
    by_acl = (
        is_public(bucket.acl)
        and not block.ignore_public_acls
        and acls_enabled(bucket.object_ownership)
    )
    public = (
        bucket.public
        or by_acl
        or (bucket.policy is not None and cached_policy(bucket.policy, bucket.name).is_public)
    )
    return xml.response("PolicyStatus", [("IsPublic", public)])


async def _requested_acl(call: S3Call, on_object: bool) -> str | None:
    """The ACL a PutBucketAcl or PutObjectAcl asks for: `x-amz-acl`, the `x-amz-grant-*`
    headers, or an AccessControlPolicy body (with a header, a body is InvalidRequest)."""
    check_acls_enabled((await call.target_bucket()).object_ownership)
    owner = call.owner[0][1]
    found = await grants.from_headers(call, read(call, "own-acl"), owner)
    if found is not None:
        if (await call.read_body()).strip():
            raise S3Error("UnexpectedContent", "This request does not support content")
        return check_acl(found, on_object)
    return await grants.from_body(call, await call.read_xml(), owner)


def _check_block(bucket: Bucket, acl: str | None) -> None:
    if is_public(acl) and PublicAccessBlock.decode(bucket.public_access_block).block_public_acls:
        raise AccessBlocked("the bucket's public access block forbids public ACLs")


async def get_bucket_acl(call: S3Call) -> Response:
    return await grants.acl_response(call, (await call.target_bucket()).acl)


async def put_bucket_acl(call: S3Call) -> Response:
    acl = await _requested_acl(call, on_object=False)
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"acl": acl or "private"})
    return Response(b"", 200)


async def get_object_acl(call: S3Call) -> Response:
    record = await requested_record(call)
    headers = {"x-amz-version-id": record.s3_version_id} if record.version_id else None
    return await grants.acl_response(call, record.acl, headers)


async def put_object_acl(call: S3Call) -> Response:
    assert call.key is not None
    acl = await _requested_acl(call, on_object=True)
    bucket = await call.target_bucket()
    _check_block(bucket, acl)
    named, version_id = requested_version(call)
    record, _ = await call.engine.files.set_acl(
        call.actor, bucket.id, call.key, version_id, acl or "private", not named
    )
    return Response(
        b"", 200, {"x-amz-version-id": record.s3_version_id} if record.version_id else {}
    )


async def write_acl(call: S3Call, source: Mapping[str, str] | None = None) -> str | None:
    """The ACL an `x-amz-acl` header or `x-amz-grant-*` headers (or a POST form's `acl`
    field, in `source`) ask of a new object (None: private). One that grants anyone beyond
    the bucket's organization anything is s3:PutObjectAcl's to give, on the version this
    write creates (which the bucket ACL's WRITE grant also gives: `decide`'s `created`);
    `bucket-owner-full-control`, which cross-account uploaders send, grants nothing here.
    A form's `acl` is the condition key (`s3:x-amz-acl`) its header would be."""
    bucket = await call.target_bucket()
    raw = await grants.from_headers(call, read(call, "acl", source), bucket.org_id)
    if raw is None:
        return None
    check_write_acl(bucket.object_ownership, raw)
    acl = check_acl(raw, on_object=True)
    _check_block(bucket, acl)
    if shares(acl):
        context = None if source is None else body_context(source)
        await also(call, "s3:PutObjectAcl", call.key, context=context, created=True)
    return acl


async def get_access_block(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    if bucket.public_access_block is None:
        raise S3Error(
            "NoSuchPublicAccessBlockConfiguration",
            "The public access block configuration was not found",
            404,
        )
    block = PublicAccessBlock.decode(bucket.public_access_block)
    return xml.response(
        "PublicAccessBlockConfiguration",
        [(tag, getattr(block, name)) for tag, name in BLOCK_FIELDS],
    )


def _flag(root: ElementTree.Element, tag: str) -> bool:
    value = (xml.text(root, tag) or "false").strip().lower()
    if value not in ("true", "false"):
        raise S3Error("MalformedXML", f"{tag} is true or false")
    return value == "true"


async def put_access_block(call: S3Call) -> Response:
    root = await call.read_xml()
    block = PublicAccessBlock(**{name: _flag(root, tag) for tag, name in BLOCK_FIELDS})
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"public_access_block": block})
    return Response(b"", 200)


async def delete_access_block(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(
        call.actor, bucket.id, {"public_access_block": PublicAccessBlock()}
    )
    return Response(b"", 204)
