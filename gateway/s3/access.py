"""Who may do what on the S3 endpoint: the bucket a request names, and whether its
requester may do the operation there, decided once before the handler runs.

A key of the bucket's own organization is judged by its scopes (and its bucket
restriction), as always; the bucket policy can only take away from it (an explicit Deny),
never from the policy operations themselves, so an owner cannot lock itself out. Anyone else
(a key of another organization, or no credentials) gets exactly what the bucket grants: an
explicit Deny wins, then an Allow of the policy, then `public` (/v1's public bucket: reads of
objects), then the bucket's canned ACL and, for object reads, the object's. The public access
block can set the public grants aside. A request with no grant gets `AccessDenied`; a key of
another organization probing a bucket that shares nothing gets `NoSuchBucket`, exactly as for
a bucket that does not exist.
"""

from __future__ import annotations

from storage.acl import PublicAccessBlock, acl_allows, is_public
from storage.errors import BucketNotFound, StorageError
from storage.models import Actor, Bucket, FileRecord
from storage.policy import Decision, Policy, Request, cached_policy, evaluate
from storage.tags import decode_tags

from .call import ACCESS_DENIED, S3Call
from .errors import S3Error
from .operations import S3Operation
from .versions import requested_record

POLICY_ACTIONS = frozenset({"s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"})
"""What an explicit Deny never takes from the bucket's own organization."""
VERSIONED_ACTIONS = {
    "s3:GetObject": "s3:GetObjectVersion",
    "s3:DeleteObject": "s3:DeleteObjectVersion",
    "s3:GetObjectTagging": "s3:GetObjectVersionTagging",
    "s3:PutObjectTagging": "s3:PutObjectVersionTagging",
    "s3:DeleteObjectTagging": "s3:DeleteObjectVersionTagging",
    "s3:GetObjectAcl": "s3:GetObjectVersionAcl",
    "s3:PutObjectAcl": "s3:PutObjectVersionAcl",
}
"""What AWS calls an operation that names a version (`versionId`)."""
OBJECT_READS = frozenset({"s3:GetObject", "s3:GetObjectVersion"})


def denied() -> S3Error:
    return S3Error("AccessDenied", ACCESS_DENIED, 403)


def no_such_bucket() -> S3Error:
    return S3Error("NoSuchBucket", "The specified bucket does not exist", 404)


async def authorize(call: S3Call, operation: S3Operation) -> None:
    """Decide the request, and set `call.actor` (and the bucket it reaches) for the handler."""
    principal = call.principal
    if operation.target == "service" or operation.name == "CreateBucket":
        call.require(operation.scope)
        call.actor, call.owner_org = call.signer.actor, call.signer.org
        return
    bucket = await _resolve(call)
    own = principal is not None and bucket.org_id == principal.key.org_id
    if own:
        assert principal is not None
        call.require(operation.scope)
        call.actor, call.owner_org = principal.actor, principal.org
    else:
        if principal is not None and principal.key.bucket_id is not None:
            raise no_such_bucket()
        call.actor = Actor(org_id=bucket.org_id, bucket_id=bucket.id)
        call.owner_org = await call.engine.orgs.get(bucket.org_id)
    call.cache_bucket(bucket)
    policy = cached_policy(bucket.policy, bucket.name) if bucket.policy else None
    if own and policy is None:
        return  # the common case pays nothing more
    action = _action(call, operation)
    record = None
    if policy is not None and policy.uses_object_tags and operation.target == "object":
        record = await _record(call)
    decision = None if policy is None else evaluate(policy, _ask(call, bucket, action, record))
    if own:
        if decision == "deny" and action not in POLICY_ACTIONS:
            raise denied()
        return
    if not await _granted(call, bucket, policy, decision, action, record):
        raise denied() if principal is None or bucket.shared_name else no_such_bucket()
    if principal is not None:
        call.require(operation.scope)  # only now: a refusal must not tell that it exists


async def _resolve(call: S3Call) -> Bucket:
    """The bucket the request names: the requester's own of that name, else the one a
    request from outside its organization means (`Buckets.shared`)."""
    assert call.bucket is not None
    if call.principal is not None:
        try:
            return await call.engine.buckets.get_by_name(call.principal.actor, call.bucket)
        except BucketNotFound:
            pass
    try:
        bucket = await call.engine.buckets.shared(call.bucket)
    except BucketNotFound:
        raise (denied() if call.principal is None else no_such_bucket()) from None
    if call.principal is not None and bucket.org_id == call.principal.key.org_id:
        raise no_such_bucket()  # its own, outside the key's bucket restriction
    return bucket


def _action(call: S3Call, operation: S3Operation) -> str:
    if "versionId" in call.params:
        return VERSIONED_ACTIONS.get(operation.action, operation.action)
    return operation.action


def _ask(call: S3Call, bucket: Bucket, action: str, record: FileRecord | None) -> Request:
    client = call.request.client
    return Request(
        action=action,
        resource=f"arn:aws:s3:::{bucket.name}" + ("" if call.key is None else "/" + call.key),
        principal=None if call.principal is None else call.principal.key.org_id,
        source_ip=client.host if client else "",
        prefix=call.params.get("prefix") if call.key is None else None,
        object_tags=None if record is None else decode_tags(record.tags),
    )


async def _record(call: S3Call) -> FileRecord | None:
    """The version the request names, for the grants that depend on it (None: none)."""
    try:
        return await requested_record(call)
    except StorageError:
        return None


async def _granted(
    call: S3Call,
    bucket: Bucket,
    policy: Policy | None,
    decision: Decision,
    action: str,
    record: FileRecord | None,
) -> bool:
    """Whether a requester from outside the organization may do `action` (no Deny)."""
    if decision == "deny":
        return False
    block = PublicAccessBlock.decode(bucket.public_access_block)
    restricted = block.restrict_public_buckets
    if decision == "allow" and not (restricted and policy is not None and policy.is_public):
        return True
    if bucket.public and not restricted and action in OBJECT_READS:
        return True
    anonymous = call.principal is None

    def allows(acl: str | None, on_object: bool) -> bool:
        if block.ignore_public_acls and is_public(acl):
            return False
        return acl_allows(acl, action, anonymous, on_object)

    if allows(bucket.acl, on_object=False):
        return True
    if action in OBJECT_READS:
        record = record or await _record(call)
        return record is not None and allows(record.acl, on_object=True)
    return False
