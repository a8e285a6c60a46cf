"""Canned ACLs and the public access block, in pure functions.

bucketd keeps S3's canned ACLs, not arbitrary grant lists: on a bucket `private`,
`public-read` (anyone may list it), `public-read-write` (anyone may also write and delete its
objects) and `authenticated-read` (any key of any organization on this server may list it); on
an object also `bucket-owner-read` and `bucket-owner-full-control`, which say nothing more than
`private` here because the bucket's organization owns every object in it. An object's
`public-read` (or `public-read-write`) lets anyone read it, `authenticated-read` any key.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from storage.errors import InvalidInput

BUCKET_ACLS = ("private", "public-read", "public-read-write", "authenticated-read")
OBJECT_ACLS = (*BUCKET_ACLS, "bucket-owner-read", "bucket-owner-full-control")
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTHENTICATED_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
_BUCKET_READS = frozenset(
    {"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"}
)
_BUCKET_WRITES = frozenset({"s3:PutObject", "s3:DeleteObject"})
"""What WRITE on a bucket grants others, as AWS maps it: not s3:DeleteObjectVersion (the
bucket's owner's alone), nor s3:AbortMultipartUpload (the owner's and the initiator's, and
READ would let anyone list the uploads to abort)."""
_OBJECT_READS = frozenset({"s3:GetObject", "s3:GetObjectVersion"})


def check_acl(value: object, on_object: bool) -> str | None:
    """The canned ACL to store (None for `private`, what everything is by default)."""
    allowed = OBJECT_ACLS if on_object else BUCKET_ACLS
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise InvalidInput(f"the canned ACL is one of {', '.join(allowed)}")
    canned = value.strip().lower()
    return (
        None if canned in ("private", "bucket-owner-read", "bucket-owner-full-control") else canned
    )


def grants(acl: str | None) -> list[tuple[str, str]]:
    """(group URI, permission) of every grant beyond the owner's FULL_CONTROL."""
    if acl == "public-read":
        return [(ALL_USERS, "READ")]
    if acl == "public-read-write":
        return [(ALL_USERS, "READ"), (ALL_USERS, "WRITE")]
    if acl == "authenticated-read":
        return [(AUTHENTICATED_USERS, "READ")]
    return []


def from_grants(found: list[tuple[str, str]]) -> str | None:
    """The canned ACL a grant list (beyond the owner's) amounts to; InvalidInput for a list
    that is none of them (bucketd keeps canned ACLs only)."""
    wanted = sorted(found)
    for canned in BUCKET_ACLS:
        if sorted(grants(canned if canned != "private" else None)) == wanted:
            return None if canned == "private" else canned
    raise InvalidInput("bucketd keeps canned ACLs only: these grants are none of them")


PUBLIC = ("public-read", "public-read-write", "authenticated-read")
"""The canned ACLs that open a bucket or object to other organizations (or to anyone)."""


def is_public(acl: str | None) -> bool:
    return acl in PUBLIC


def acl_allows(acl: str | None, action: str, anonymous: bool, on_object: bool) -> bool:
    """Whether a canned ACL grants `action` to a requester of another organization (or none)."""
    if acl is None or (acl == "authenticated-read" and anonymous):
        return False
    if on_object:
        return action in _OBJECT_READS
    return action in _BUCKET_READS or (acl == "public-read-write" and action in _BUCKET_WRITES)


@dataclass(frozen=True)
class PublicAccessBlock:
    """S3's four switches, per bucket."""

    block_public_acls: bool = False
    """Refuse a request that sets a public ACL."""
    ignore_public_acls: bool = False
    """Grant nothing through public ACLs."""
    block_public_policy: bool = False
    """Refuse a public policy (and making the bucket public on /v1)."""
    restrict_public_buckets: bool = False
    """Serve nobody outside the organization through a public policy (or `public`)."""

    def encode(self) -> str | None:
        return json.dumps(asdict(self)) if any(asdict(self).values()) else None

    @classmethod
    def decode(cls, column: str | None) -> PublicAccessBlock:
        return cls(**json.loads(column)) if column else cls()
