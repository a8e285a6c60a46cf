"""S3's object ownership, as far as bucketd can honour it: the bucket's organization owns
every object in it, whoever writes it, so `BucketOwnerEnforced` (ACLs disabled: only
`bucket-owner-full-control`, which grants nothing more, is taken on a write) and
`BucketOwnerPreferred` (ACLs apply) are what they say; `ObjectWriter` (the writer owns what
it writes) is refused, since no object here can belong to another organization."""

from __future__ import annotations

from storage.errors import AclsDisabled, InvalidInput, NotSupported

ENFORCED = "BucketOwnerEnforced"
PREFERRED = "BucketOwnerPreferred"
WRITER = "ObjectWriter"
OWNER_ACL = "bucket-owner-full-control"
"""The one ACL a write may carry into a bucket whose ACLs are disabled, as on AWS."""


def check_ownership(value: object) -> str | None:
    """A bucket's object ownership as stored (None: none set)."""
    if value is None or value in (ENFORCED, PREFERRED):
        return value
    if value == WRITER:
        raise NotSupported(
            "ObjectWriter ownership: the bucket's organization owns every object in it"
        )
    raise InvalidInput("object ownership is BucketOwnerEnforced or BucketOwnerPreferred")


def acls_enabled(ownership: str | None) -> bool:
    return ownership != ENFORCED


def check_acls_enabled(ownership: str | None) -> None:
    """Refuse setting an ACL (PutBucketAcl, PutObjectAcl) on a bucket whose ACLs are off."""
    if not acls_enabled(ownership):
        raise AclsDisabled("The bucket does not allow ACLs")


def check_write_acl(ownership: str | None, acl: str | None) -> None:
    """Refuse an ACL a write asks for (None: none asked) in a bucket whose ACLs are off."""
    if acl not in (None, OWNER_ACL):
        check_acls_enabled(ownership)


def check_bucket_acl(ownership: str | None, acl: str | None) -> None:
    """Refuse ACLs off on a bucket whose own ACL grants anything (AWS's
    InvalidBucketAclWithObjectOwnership), whichever of the two is being set."""
    if not acls_enabled(ownership) and acl not in (None, "private"):
        raise AclsDisabled(
            "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting",
            on_bucket=True,
        )
