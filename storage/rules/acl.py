"""ACLs and the public access block, in pure functions.

A bucket or version holds a canned ACL (`private`, `public-read`, `public-read-write`,
`authenticated-read`; on an object also `bucket-owner-read` and `bucket-owner-full-control`,
which say nothing more than `private` here because the bucket's organization owns every
object in it), or a grant list as S3's AccessControlPolicy and `x-amz-grant-*` headers set
it: up to 100 grants, each of a permission (READ, WRITE, READ_ACP, WRITE_ACP, FULL_CONTROL)
to a grantee, which is one of S3's two groups (AllUsers: anyone; AuthenticatedUsers: any key
of any organization on this server) or an organization (its id is its canonical user id).
A grant list is stored as given, in its order, so it reads back exactly; the owner's grants
name no id (`OWNER`), the bucket's organization, whose id is filled in when it is shown.

What each permission grants another organization (or anyone), as AWS maps it:
- on a bucket, READ: listing it (objects, versions, uploads); WRITE: s3:PutObject and
  s3:DeleteObject (not DeleteObjectVersion, nor AbortMultipartUpload); READ_ACP:
  s3:GetBucketAcl; WRITE_ACP: s3:PutBucketAcl;
- on an object, READ: s3:GetObject (and of a named version); READ_ACP: s3:GetObjectAcl;
  WRITE_ACP: s3:PutObjectAcl; WRITE grants nothing on an object;
- FULL_CONTROL: all four.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from storage.errors import InvalidInput

BUCKET_ACLS = ("private", "public-read", "public-read-write", "authenticated-read")
OBJECT_ACLS = (*BUCKET_ACLS, "bucket-owner-read", "bucket-owner-full-control")
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTHENTICATED_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
GROUPS = (ALL_USERS, AUTHENTICATED_USERS)
PERMISSIONS = ("READ", "WRITE", "READ_ACP", "WRITE_ACP", "FULL_CONTROL")
OWNER = ""
"""The grantee of a stored grant to the bucket's own organization."""
MAX_GRANTS = 100
"""S3's limit on the grants of one ACL."""
_BUCKET_READS = frozenset(
    {"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"}
)
_BUCKET_WRITES = frozenset({"s3:PutObject", "s3:DeleteObject"})
"""What WRITE on a bucket grants others, as AWS maps it: not s3:DeleteObjectVersion (the
bucket's owner's alone), nor s3:AbortMultipartUpload (the owner's and the initiator's, and
READ would let anyone list the uploads to abort)."""
_OBJECT_READS = frozenset({"s3:GetObject", "s3:GetObjectVersion"})
_GRANTED: dict[tuple[str, bool], frozenset[str]] = {
    ("READ", False): _BUCKET_READS,
    ("WRITE", False): _BUCKET_WRITES,
    ("READ_ACP", False): frozenset({"s3:GetBucketAcl"}),
    ("WRITE_ACP", False): frozenset({"s3:PutBucketAcl"}),
    ("READ", True): _OBJECT_READS,
    ("WRITE", True): frozenset(),
    ("READ_ACP", True): frozenset({"s3:GetObjectAcl", "s3:GetObjectVersionAcl"}),
    ("WRITE_ACP", True): frozenset({"s3:PutObjectAcl", "s3:PutObjectVersionAcl"}),
}
"""What each permission grants others, on a bucket (False) or an object (True)."""
for _on_object in (False, True):
    _GRANTED["FULL_CONTROL", _on_object] = frozenset().union(
        *(_GRANTED[p, _on_object] for p in PERMISSIONS if p != "FULL_CONTROL")
    )
ACL_ACTIONS = frozenset().union(*(_GRANTED[p, o] for p, o in _GRANTED if p.endswith("_ACP")))
"""The ACL operations, which only a grant of READ_ACP, WRITE_ACP or FULL_CONTROL opens to
others (never a canned ACL)."""


@dataclass(frozen=True)
class Grant:
    grantee: str
    """A group's URI, an organization's id, or `OWNER`."""
    permission: str

    @property
    def is_group(self) -> bool:
        return self.grantee in GROUPS


def encode_grants(found: Sequence[Grant]) -> str:
    """A grant list as the `acl` column holds it (a JSON list, so never a canned name)."""
    return json.dumps([[g.grantee, g.permission] for g in found], separators=(",", ":"))


def _decode(column: str) -> list[Grant]:
    try:
        raw = json.loads(column)
    except ValueError:
        raise InvalidInput("a grant list is JSON") from None
    if not isinstance(raw, list) or len(raw) > MAX_GRANTS:
        raise InvalidInput(f"a grant list holds at most {MAX_GRANTS} grants")
    found = []
    for item in raw:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(part, str) for part in item)
            and item[1] in PERMISSIONS
            and (item[0] in GROUPS or item[0] == OWNER or _is_org_id(item[0]))
        ):
            raise InvalidInput("a grant names a group or an organization, and a permission")
        found.append(Grant(item[0], item[1]))
    return found


def _is_org_id(value: str) -> bool:
    return 0 < len(value) <= 128 and value.isascii() and value.isprintable() and " " not in value


def check_acl(value: object, on_object: bool) -> str | None:
    """The ACL to store: a canned one (None for `private`, what everything is by default),
    or a grant list (`encode_grants`), checked."""
    if isinstance(value, str) and value.startswith("["):
        return encode_grants(_decode(value))
    allowed = OBJECT_ACLS if on_object else BUCKET_ACLS
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise InvalidInput(f"the canned ACL is one of {', '.join(allowed)}")
    canned = value.strip().lower()
    return (
        None if canned in ("private", "bucket-owner-read", "bucket-owner-full-control") else canned
    )


def grant_list(acl: str | None) -> list[Grant]:
    """Every grant of a stored ACL, as S3 lists it: a canned ACL's owner FULL_CONTROL
    first, then its group grants; a grant list as it was set."""
    if acl is not None and acl.startswith("["):
        return _decode(acl)
    listed = [Grant(OWNER, "FULL_CONTROL")]
    if acl in ("public-read", "public-read-write"):
        listed.append(Grant(ALL_USERS, "READ"))
    if acl == "public-read-write":
        listed.append(Grant(ALL_USERS, "WRITE"))
    if acl == "authenticated-read":
        listed.append(Grant(AUTHENTICATED_USERS, "READ"))
    return listed


PUBLIC = ("public-read", "public-read-write", "authenticated-read")
"""The canned ACLs that open a bucket or object to other organizations (or to anyone)."""


def is_public(acl: str | None) -> bool:
    """Whether the ACL grants anything to one of S3's groups (what the public access block
    refuses or sets aside)."""
    if acl is not None and acl.startswith("["):
        return any(g.is_group for g in _decode(acl))
    return acl in PUBLIC


def shares(acl: str | None) -> bool:
    """Whether the ACL grants anything beyond the bucket's organization: a version with
    such an ACL reserves its bucket's name across the server, as other organizations (or
    anyone) name the bucket by its name alone."""
    if acl is not None and acl.startswith("["):
        return any(g.grantee != OWNER for g in _decode(acl))
    return acl in PUBLIC


def acl_allows(
    acl: str | None, action: str, who: str | None, on_object: bool, ignore_public: bool = False
) -> bool:
    """Whether an ACL grants `action` to `who`, an organization other than the bucket's
    (None: a request without credentials); `ignore_public` sets the group grants aside
    (IgnorePublicAcls)."""
    for grant in grant_list(acl):
        if grant.grantee == OWNER:
            continue
        if grant.is_group:
            if ignore_public or (grant.grantee == AUTHENTICATED_USERS and who is None):
                continue
        elif grant.grantee != who:
            continue
        if action in _GRANTED[grant.permission, on_object]:
            return True
    return False


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
