"""The S3 endpoint's side of the one access decision (`storage/rules/access.py`): which bucket a
name means to the requester, who the requester is, and the decision for the operation's own
resource (`authorize`, before the handler runs) and for every second resource a handler
reaches (`also`: a copy's source, each key of a batch, the ACL, lock, tags or bypass a
request asks for).

A request with no grant gets `AccessDenied`; a key of another organization probing a
bucket that shares nothing gets `NoSuchBucket`, exactly as for a bucket that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote

from gateway.api.access import requester
from storage.errors import AccessDenied, BucketNotFound
from storage.models import Actor, Bucket
from storage.rules.access import Requester, owner_actor
from storage.rules.policy import CONTEXT_KEYS, REQUEST_TAG_KEY

from .call import S3Call
from .errors import S3Error, not_implemented
from .touches import ACL, OWNER, TAGGING, VERSION_ID
from .versions import requested_version

if TYPE_CHECKING:
    from .operation import S3Operation


def denied() -> S3Error:
    return S3Error("AccessDenied", "Access Denied", 403)


def no_such_bucket() -> S3Error:
    return S3Error("NoSuchBucket", "The specified bucket does not exist", 404)


def requester_of(call: S3Call) -> Requester:
    who = requester(call.request, None if call.principal is None else call.principal.key)
    return replace(who, context=request_context(call.request.headers))


_AS_READ: dict[str, Callable[[str], str]] = {
    "s3:x-amz-acl": str.lower,
    "s3:x-amz-metadata-directive": str.upper,
    "s3:x-amz-server-side-encryption": lambda value: value if value == "aws:kms" else value.upper(),
}
"""The keys whose header a handler takes in any case, as it takes them (`check_acl`,
`copy_object`, `asked_encryption`): a policy judges the value the request is served with,
so a Deny of `public-read` also refuses `PUBLIC-READ`."""


def request_context(headers: Mapping[str, str]) -> dict[str, str]:
    """The policy condition keys a request carries in its headers: `s3:x-amz-acl` and the
    others of `CONTEXT_KEYS` as sent, or as read where `_AS_READ` says
    (`s3:x-amz-copy-source` as `bucket/key`, decoded, its `versionId` aside, as AWS's
    examples match it), and `s3:RequestObjectTag/<key>` for each tag of `x-amz-tagging`."""
    found = {}
    for key in CONTEXT_KEYS:
        value = headers.get(key[len("s3:") :])
        if value is not None:
            found[key] = _AS_READ.get(key, str)(value.strip())
    source = found.get("s3:x-amz-copy-source")
    if source is not None:
        found["s3:x-amz-copy-source"] = unquote(source.split("?", 1)[0]).lstrip("/")
    tagging = headers.get(TAGGING)
    if tagging:
        for tag, value in parse_qsl(tagging, keep_blank_values=True):
            found[REQUEST_TAG_KEY + tag] = value
    return found


def body_context(
    fields: Mapping[str, str] | None = None, tags: Sequence[tuple[str, str]] = ()
) -> dict[str, str]:
    """The condition keys a body or a form carries: a POST's `acl` and `x-amz-*` fields
    (read as the headers they stand for), and the tags of a PutObjectTagging body or a
    POST's `tagging` field (`s3:RequestObjectTag/<key>`), as AWS reads them."""
    found = {}
    if fields is not None:
        named = {k: v for k, v in fields.items() if k.startswith("x-amz-") and k != TAGGING}
        if "acl" in fields:
            named[ACL] = fields["acl"]
        found = request_context(named)
    found.update({REQUEST_TAG_KEY + tag: value for tag, value in tags})
    return found


async def authorize(call: S3Call, operation: S3Operation) -> None:
    """Decide the request's own resource, and set `call.actor` (and the bucket it reaches)
    for the handler. DeleteObjects is decided key by key (`also`): here only whether the
    requester may know the bucket."""
    call.operation, call.touches = operation.name, operation.touches
    principal = call.principal
    if operation.target == "service" or operation.name == "CreateBucket":
        call.require(operation.scope)
        call.actor, call.owner_org = call.signer.actor, call.signer.org
        return
    if VERSION_ID in call.params and "version" not in operation.touches:
        raise not_implemented(f"versionId on {operation.name}")
    bucket = await resolve(call, call.bucket)
    expect_owner(bucket, call.request.headers.get(OWNER))
    call.cache_bucket(bucket)
    who = requester_of(call)
    named, version_id = requested_version(call) if "version" in operation.touches else (False, None)
    try:
        call.actor = await call.engine.access.check(
            who,
            operation.action,
            bucket,
            call.key,
            named=named,
            version_id=version_id,
            prefix=call.params.get("prefix") if call.key is None else None,
            scope=operation.scope,
        )
    except AccessDenied as exc:
        if operation.per_key and type(exc) is AccessDenied:
            call.actor = owner_actor(bucket)
        else:
            raise
    if principal is not None and principal.key.org_id == bucket.org_id:
        call.owner_org = principal.org
    else:
        call.owner_org = await call.engine.orgs.get(bucket.org_id)


async def also(
    call: S3Call,
    action: str,
    key: str | None,
    bucket: Bucket | None = None,
    named: bool = False,
    version_id: str | None = None,
    context: Mapping[str, str] | None = None,
    created: bool = False,
) -> Actor:
    """The decision for a second resource the handler touches (of the request's own bucket
    unless `bucket` is given); the actor to reach it as. `context`: condition keys the
    request carries outside its headers (`body_context`), beside theirs; `created`: the
    resource is the version this request writes (`decide`)."""
    target = bucket or await call.target_bucket()
    who = requester_of(call)
    if context:
        who = replace(who, context={**who.context, **context})
    return await call.engine.access.check(
        who,
        action,
        target,
        key,
        named=named,
        version_id=version_id,
        created=created,
    )


def expect_owner(bucket: Bucket, expected: str | None) -> None:
    """AccessDenied unless the bucket is the expected organization's (when one is named)."""
    if expected is not None and expected.strip() != bucket.org_id:
        raise denied()


async def resolve(call: S3Call, name: str | None) -> Bucket:
    """The bucket `name` means to the requester: its own of that name, else the one a
    request from outside its organization means (`Buckets.shared`)."""
    assert name is not None
    if call.principal is not None:
        try:
            return await call.engine.buckets.get_by_name(call.principal.actor, name)
        except BucketNotFound:
            pass
    try:
        bucket = await call.engine.buckets.shared(name)
    except BucketNotFound:
        raise (denied() if call.principal is None else no_such_bucket()) from None
    if call.principal is not None and bucket.org_id == call.principal.key.org_id:
        raise no_such_bucket()  # its own, outside the key's bucket restriction
    return bucket
