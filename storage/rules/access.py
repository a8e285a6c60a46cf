"""The one access decision of both protocols: who (a `Requester`) may do what (an action, as
AWS names it: `s3:GetObject`) to which resource (a bucket, a key, the version named).

Every handler of `/v1` and of the S3 endpoint asks it for every resource it touches: the
bucket and key of its URL, the source of a copy, each key of a batch delete, the version a
request names, the ACL and the lock a write sets, the retention a request bypasses.
`decide` is a pure function (tests compare it with a reference evaluator written from
AWS's documentation); `Access.check` loads what it needs (the version, for its ACL and its
tags) and raises a typed refusal.

The rules, in order:
- A key of the bucket's own organization is judged by its scopes and its bucket restriction;
  the bucket policy can only take away from it (an explicit Deny), never the policy
  operations themselves, so an owner cannot lock itself out.
- Anyone else (a key of another organization, or no credentials) gets exactly what the
  bucket grants: an explicit Deny wins; then an Allow of the policy (set aside by
  RestrictPublicBuckets when the policy is public); then `/v1`'s public flag (s3:GetObject
  only: never an old version); then the bucket's ACL and, for an action on a version,
  that version's own (group grants set aside by IgnorePublicAcls): a grant to the
  requester's organization, or to a group it is in, of a permission that covers the
  action (`acl.py`). A key of another organization also needs the scope the action
  needs, and a bucket-scoped key never reaches another organization's bucket.
- The actions that change who may do what, or how long a version is kept (`EXPLICIT`), are
  granted to outsiders only by a policy statement that names them: never by a wildcard
  (`s3:Put*`), never by a canned ACL; the ACL operations also by a grant of WRITE_ACP
  (or FULL_CONTROL) that names the grantee, as on AWS. The policy operations are the
  owner's alone (405).
- The ACL a write sends for the version it creates (`created`: `x-amz-acl`,
  `x-amz-grant-*`, a POST form's `acl`) is also granted by the bucket ACL's grant of the
  write itself (WRITE), as AWS's ACL model lets the writer set the ACL of what it writes;
  a policy's grant of s3:PutObject does not grant it (s3:PutObjectAcl, as AWS documents
  for policies). It reaches no other version, and no bucket setting.
- A key of another organization refused on a bucket that shares nothing learns nothing:
  the bucket is `hidden`, as one that does not exist. A read of a missing key refused to a
  requester who may list the bucket there is NoSuchKey instead (`lister`), as on AWS.
- ACLs grant nothing while the bucket's object ownership is BucketOwnerEnforced.
- The operator's routes (`/v1/orgs`: every organization, its plan and its keys) are
  decided by `decide_operator`: a key holding `orgs:manage`, which no key restricted to a
  bucket holds; no bucket policy or ACL grants them, and `keys:manage` never reaches
  beyond the key's own organization.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from storage.errors import AccessDenied, BucketNotFound, FileNotFound, OwnerOnly, ScopeMissing
from storage.models import BYPASS_GOVERNANCE, ORGS_MANAGE, Actor, Bucket, FileRecord
from storage.rules.acl import ACL_ACTIONS, PublicAccessBlock, acl_allows
from storage.rules.ownership import acls_enabled
from storage.rules.policy import (
    CONTEXT_KEYS,
    REQUEST_TAG_KEY,
    Request,
    cached_policy,
    evaluate,
    may_deny,
)
from storage.rules.tags import decode_tags

if TYPE_CHECKING:
    from storage.services.files import Files

POLICY_ACTIONS = frozenset({"s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"})
"""The owner's alone: refused to anyone else whatever the policy says, and never taken from
the owner by a Deny."""
EXPLICIT = frozenset(
    {
        "s3:PutBucketAcl",
        "s3:PutBucketPublicAccessBlock",
        "s3:PutBucketOwnershipControls",
        "s3:PutObjectAcl",
        "s3:PutObjectVersionAcl",
        "s3:PutObjectRetention",
        "s3:PutObjectLegalHold",
        "s3:BypassGovernanceRetention",
        "s3:PutBucketObjectLockConfiguration",
        "s3:PutLifecycleConfiguration",
    }
)
"""Granted to outsiders only by a statement naming the action itself (no wildcard)."""
OBJECT_READS = frozenset({"s3:GetObject", "s3:GetObjectVersion"})
LISTINGS = frozenset({"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"})
"""The actions `s3:prefix` is a key of, as AWS has it: on any other, a request's `prefix`
is absent from the decision, whatever the query says."""
_ACL_WRITES = frozenset(
    {"s3:PutObject", "s3:PutObjectAcl", "s3:PutObjectVersionAcl", "s3:PutBucketAcl"}
)
CONTEXT_ACTIONS: dict[str, frozenset[str]] = {
    "s3:x-amz-acl": _ACL_WRITES,
    **{key: _ACL_WRITES for key in CONTEXT_KEYS if key.startswith("s3:x-amz-grant-")},
    "s3:x-amz-copy-source": frozenset({"s3:PutObject"}),
    "s3:x-amz-metadata-directive": frozenset({"s3:PutObject"}),
    "s3:x-amz-server-side-encryption": frozenset({"s3:PutObject"}),
    "s3:x-amz-server-side-encryption-aws-kms-key-id": frozenset({"s3:PutObject"}),
    "s3:x-amz-server-side-encryption-customer-algorithm": frozenset({"s3:PutObject"}),
    REQUEST_TAG_KEY: frozenset(
        {"s3:PutObject", "s3:PutObjectTagging", "s3:PutObjectVersionTagging"}
    ),
}
"""The actions each request condition key is a key of, as AWS's service authorization
reference lists them: on any other action the key is absent from the decision (as
`s3:prefix` off the listings), so a header sent along never satisfies a condition of an
action it does not belong to."""
PUBLIC_FLAG_GRANTS = frozenset({"s3:GetObject"})
"""What `/v1`'s public bucket grants anyone: the current version of each file."""

_READ, _WRITE = "files:read", "files:write"
_BUCKET_READ, _BUCKET_WRITE = "buckets:read", "buckets:write"
SCOPES: dict[str, str] = {
    "s3:ListAllMyBuckets": _BUCKET_READ,
    "s3:CreateBucket": _BUCKET_WRITE,
    "s3:DeleteBucket": _BUCKET_WRITE,
    "s3:ListBucket": _READ,
    "s3:ListBucketVersions": _READ,
    "s3:ListBucketMultipartUploads": _READ,
    "s3:ListMultipartUploadParts": _READ,
    "s3:AbortMultipartUpload": _WRITE,
    "s3:PutObject": _WRITE,
    "s3:GetObject": _READ,
    "s3:GetObjectVersion": _READ,
    "s3:GetObjectAttributes": _READ,
    "s3:GetObjectVersionAttributes": _READ,
    "s3:DeleteObject": _WRITE,
    "s3:DeleteObjectVersion": _WRITE,
    "s3:GetObjectTagging": _READ,
    "s3:GetObjectVersionTagging": _READ,
    "s3:PutObjectTagging": _WRITE,
    "s3:PutObjectVersionTagging": _WRITE,
    "s3:DeleteObjectTagging": _WRITE,
    "s3:DeleteObjectVersionTagging": _WRITE,
    "s3:GetObjectAcl": _READ,
    "s3:GetObjectVersionAcl": _READ,
    "s3:PutObjectAcl": _WRITE,
    "s3:PutObjectVersionAcl": _WRITE,
    "s3:GetObjectRetention": _READ,
    "s3:PutObjectRetention": _WRITE,
    "s3:GetObjectLegalHold": _READ,
    "s3:PutObjectLegalHold": _WRITE,
    "s3:BypassGovernanceRetention": BYPASS_GOVERNANCE,
}
"""The scope a key needs for each action; the bucket's configuration actions (not listed)
need buckets:read (Get*) or buckets:write."""
VERSIONED = {
    "s3:GetObject": "s3:GetObjectVersion",
    "s3:GetObjectAttributes": "s3:GetObjectVersionAttributes",
    "s3:DeleteObject": "s3:DeleteObjectVersion",
    "s3:GetObjectTagging": "s3:GetObjectVersionTagging",
    "s3:PutObjectTagging": "s3:PutObjectVersionTagging",
    "s3:DeleteObjectTagging": "s3:DeleteObjectVersionTagging",
    "s3:GetObjectAcl": "s3:GetObjectVersionAcl",
    "s3:PutObjectAcl": "s3:PutObjectVersionAcl",
}
"""What AWS calls an action on a version a request names (`versionId`)."""


def scope_for(action: str) -> str:
    found = SCOPES.get(action)
    if found is not None:
        return found
    return _BUCKET_READ if action.startswith("s3:Get") else _BUCKET_WRITE


def versioned(action: str, named: bool) -> str:
    """The action's name when the request names a version."""
    return VERSIONED.get(action, action) if named else action


@dataclass(frozen=True)
class Requester:
    """Who asks: an organization's key (its scopes, its bucket restriction), or nobody."""

    org_id: str | None
    """None: a request without credentials."""
    scopes: Collection[str] = ()
    bucket_id: str | None = None
    source_ip: str = ""
    context: Mapping[str, str] = field(default_factory=dict)
    """The condition keys the request itself carries (`policy.Request.context`)."""


@dataclass(frozen=True)
class Resource:
    bucket: Bucket
    key: str | None = None
    record: FileRecord | None = None
    """The version the request reaches, for its ACL and tags (None: none, or not needed)."""
    prefix: str | None = None
    """A listing's prefix (`s3:prefix`)."""

    @property
    def arn(self) -> str:
        return f"arn:aws:s3:::{self.bucket.name}" + ("" if self.key is None else "/" + self.key)


Verdict = Literal["allow", "deny", "hidden", "scope", "owner-only"]
"""`deny`: AccessDenied; `hidden`: as if the bucket did not exist; `scope`: the key lacks
the action's scope; `owner-only`: the policy operations, asked by anyone else (405)."""


def needs_record(who: Requester, action: str, bucket: Bucket) -> bool:
    """Whether deciding `action` on a key needs the version it reaches: its tags for a policy
    that reads them, its ACL for a read or an ACL operation from outside the organization."""
    if bucket.policy is not None and cached_policy(bucket.policy, bucket.name).uses_object_tags:
        return True
    return who.org_id != bucket.org_id and (action in OBJECT_READS or action in ACL_ACTIONS)


def decide(
    who: Requester,
    action: str,
    resource: Resource,
    scope: str | None = None,
    created: bool = False,
) -> Verdict:
    """The decision for `who` doing `action` on `resource`; `scope` overrides the scope the
    action needs (an operation's own, where it declares one); `created`: the resource is
    the version the request itself writes (the ACL a write sends with it)."""
    bucket = resource.bucket
    needed = scope or scope_for(action)
    policy = cached_policy(bucket.policy, bucket.name) if bucket.policy else None
    if who.org_id is not None and who.org_id == bucket.org_id:
        if who.bucket_id not in (None, bucket.id):
            return "hidden"
        if needed not in who.scopes:
            return "scope"
        if action in POLICY_ACTIONS or policy is None:
            return "allow"
        return "deny" if evaluate(policy, _ask(who, action, resource)) == "deny" else "allow"
    if who.bucket_id is not None:
        return "hidden"
    hidden = who.org_id is not None and bucket.shared_name is None
    if action in POLICY_ACTIONS:
        return "hidden" if hidden else "owner-only"
    if not _granted(who, action, resource, created):
        return "hidden" if hidden else "deny"
    if who.org_id is not None and needed not in who.scopes:
        return "scope"
    return "allow"


def decide_operator(who: Requester) -> Verdict:
    """The decision for the operator's routes, whichever organization they reach: only a
    key that holds `orgs:manage` and is restricted to no bucket."""
    if who.org_id is None or who.bucket_id is not None:
        return "deny"
    return "allow" if ORGS_MANAGE in who.scopes else "scope"


def decide_every_object(who: Requester, action: str, bucket: Bucket) -> Verdict:
    """The decision for `action` on every object of the bucket at once (deleting a bucket
    with its files): its organization's alone, and refused where a Deny could refuse it on
    any one key, whatever that Deny's conditions."""
    if who.org_id != bucket.org_id:
        return "hidden" if who.org_id is not None and bucket.shared_name is None else "deny"
    if who.bucket_id not in (None, bucket.id):
        return "hidden"
    if scope_for(action) not in who.scopes:
        return "scope"
    policy = cached_policy(bucket.policy, bucket.name) if bucket.policy else None
    objects = f"arn:aws:s3:::{bucket.name}/"
    return "deny" if policy and may_deny(policy, action, who.org_id, objects) else "allow"


def _ask(who: Requester, action: str, resource: Resource) -> Request:
    record = resource.record
    return Request(
        action=action,
        resource=resource.arn,
        principal=who.org_id,
        source_ip=who.source_ip,
        prefix=resource.prefix if action in LISTINGS else None,
        object_tags=None if record is None else decode_tags(record.tags),
        context={k: v for k, v in who.context.items() if action in _context_actions(k)},
    )


def _context_actions(key: str) -> frozenset[str]:
    tagged = key.startswith(REQUEST_TAG_KEY)
    return CONTEXT_ACTIONS.get(REQUEST_TAG_KEY if tagged else key, frozenset())


def _granted(who: Requester, action: str, resource: Resource, created: bool = False) -> bool:
    """Whether the bucket grants an outsider `action` (no Deny stands in the way)."""
    bucket = resource.bucket
    policy = cached_policy(bucket.policy, bucket.name) if bucket.policy else None
    block = PublicAccessBlock.decode(bucket.public_access_block)
    restricted = block.restrict_public_buckets
    if policy is not None:
        decision = evaluate(policy, _ask(who, action, resource), exact=action in EXPLICIT)
        if decision == "deny":
            return False
        if decision == "allow" and not (restricted and policy.is_public):
            return True
    if action in EXPLICIT and action not in ACL_ACTIONS:
        return False
    if bucket.public and not restricted and action in PUBLIC_FLAG_GRANTS:
        return True
    if not acls_enabled(bucket.object_ownership):  # BucketOwnerEnforced: ACLs grant nothing
        return False
    ignore = block.ignore_public_acls
    if acl_allows(bucket.acl, action, who.org_id, on_object=False, ignore_public=ignore):
        return True
    if created and action == "s3:PutObjectAcl":
        # The writer sets the ACL of the version it writes, by the grant of the write
        # (the write itself is decided on its own, a Deny of it included).
        return acl_allows(bucket.acl, "s3:PutObject", who.org_id, False, ignore)
    record = resource.record
    return record is not None and acl_allows(
        record.acl, action, who.org_id, on_object=True, ignore_public=ignore
    )


def shown(who: Requester, bucket: Bucket, record: FileRecord, named: bool) -> FileRecord:
    """The version as `who` may see it, on both protocols: its tags only to whom may read
    them (s3:GetObjectTagging), its retention (s3:GetObjectRetention) and legal hold
    (s3:GetObjectLegalHold) likewise, as S3's GET, HEAD and listings answer them."""
    if who.org_id == bucket.org_id and bucket.policy is None:
        return record  # the organization's own: its read scope covers them

    def may(action: str) -> bool:
        resource = Resource(bucket, record.key, record)
        return decide(who, versioned(action, named), resource) == "allow"

    hidden = replace(
        record,
        tags=record.tags if record.tags and may("s3:GetObjectTagging") else None,
        legal_hold=record.legal_hold and may("s3:GetObjectLegalHold"),
    )
    if (record.lock_mode or record.lock_until) and not may("s3:GetObjectRetention"):
        hidden = replace(hidden, lock_mode=None, lock_until=None)
    return hidden


def lister(who: Requester, action: str, bucket: Bucket, key: str | None) -> bool:
    """Whether a read of a missing current version is told so (NoSuchKey) rather than
    refused: AWS's rule, when the requester may list the bucket under that key, since the
    listing would show the key's absence anyway."""
    resource = Resource(bucket, None, None, key)
    return action == "s3:GetObject" and decide(who, "s3:ListBucket", resource) == "allow"


def owner_actor(bucket: Bucket) -> Actor:
    """Who the engine acts for on behalf of an outsider: the bucket's organization,
    confined to that bucket."""
    return Actor(org_id=bucket.org_id, bucket_id=bucket.id, decided=bucket)


class Access:
    """`decide`, with the version loaded when the decision needs it, and a refusal raised as
    a typed error."""

    def __init__(self, files: Files) -> None:
        self._files = files

    async def check(
        self,
        who: Requester,
        action: str,
        bucket: Bucket,
        key: str | None = None,
        *,
        named: bool = False,
        version_id: str | None = None,
        prefix: str | None = None,
        scope: str | None = None,
        created: bool = False,
    ) -> Actor:
        """The actor the engine then acts for, or AccessDenied, ScopeMissing, OwnerOnly or
        BucketNotFound (for a bucket the requester must not learn of); `created`: as
        `decide`'s."""
        action = versioned(action, named)
        record, missing = None, None
        if key is not None and needs_record(who, action, bucket):
            try:
                actor = owner_actor(bucket)
                if named:
                    record = await self._files.get_version(actor, bucket.id, key, version_id)
                else:
                    record = await self._files.get(actor, bucket.id, key)
            except FileNotFound as exc:
                missing = exc
        verdict = decide(who, action, Resource(bucket, key, record, prefix), scope, created)
        if missing is not None and action == "s3:GetObject":
            # AWS's rule for a missing key: NoSuchKey to whoever may list it, whether or
            # not it may read the key; AccessDenied to anyone else, a reader included,
            # but on a bucket public on /v1, which serves its files as a web host does.
            if lister(who, action, bucket, key):
                raise missing
            if verdict == "allow" and not bucket.public:
                verdict = "deny"
        if verdict == "allow":
            if who.org_id == bucket.org_id:
                actor = Actor(org_id=bucket.org_id, bucket_id=who.bucket_id, decided=bucket)
            else:
                actor = owner_actor(bucket)
            return actor if record is None else replace(actor, judged=record)
        raise refusal(verdict, scope or scope_for(action), action)

    def check_operator(self, who: Requester) -> None:
        """`decide_operator`, raising the refusal (403)."""
        verdict = decide_operator(who)
        if verdict != "allow":
            raise refusal(verdict, ORGS_MANAGE, ORGS_MANAGE)

    def check_every_object(self, who: Requester, actions: tuple[str, ...], bucket: Bucket) -> None:
        """`decide_every_object` for each action, raising the refusal."""
        for action in actions:
            verdict = decide_every_object(who, action, bucket)
            if verdict != "allow":
                raise refusal(verdict, scope_for(action), action)


def refusal(verdict: Verdict, scope: str, action: str) -> Exception:
    if verdict == "hidden":
        return BucketNotFound("bucket not found")
    if verdict == "scope":
        return ScopeMissing(scope)
    if verdict == "owner-only":
        return OwnerOnly(f"only the bucket's organization may use {action}")
    return AccessDenied("Access Denied")
