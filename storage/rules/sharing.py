"""What a bucket shares beyond its organization, checked before it is stored: CORS rules,
public reads, a bucket policy, a canned ACL, the public access block that can forbid the
public ones, and the rate of requests without a key it answers. The rules themselves are
`cors.py`, `policy.py` and `acl.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bucketd_client.contract import MAX_ANONYMOUS_RPM
from storage.errors import AccessBlocked, InvalidBucketState, InvalidInput
from storage.models import Bucket
from storage.rules.acl import PublicAccessBlock, check_acl, is_public
from storage.rules.cors import CorsRule
from storage.rules.cors import check_rules as check_cors
from storage.rules.cors import encode_rules as encode_cors
from storage.rules.policy import parse_policy

if TYPE_CHECKING:
    from storage.index import BucketChanges

MAX_CACHE_CONTROL = 256


@dataclass(frozen=True)
class Sharing:
    """Who else a new bucket answers: CORS rules, public reads and their Cache-Control, a
    canned ACL, the rate of requests without a key."""

    cors: list[CorsRule] | None = None
    public: bool = False
    cache_control: str | None = None
    acl: str = "private"
    """A canned ACL, or a grant list (`acl.encode_grants`)."""
    anonymous_rpm: int | None = None
    """None: the server's."""


def cors_column(rules: object) -> str | None:
    if rules is None:
        return None
    if not isinstance(rules, list) or not all(isinstance(r, CorsRule) for r in rules):
        raise InvalidInput("cors is a list of CORS rules")
    return encode_cors(check_cors(rules))


def cache_control_column(value: object) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_CACHE_CONTROL
        or not value.isascii()
        or not value.isprintable()
    ):
        raise InvalidInput(f"cacheControl is 1 to {MAX_CACHE_CONTROL} printable ASCII characters")
    return value


def anonymous_rpm_column(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ANONYMOUS_RPM:
        raise InvalidInput(
            f"anonymousRequestsPerMinute is a whole number from 0 (no limit) to "
            f"{MAX_ANONYMOUS_RPM:,}, or null for the server's rate"
        )
    return value


def sharing_changes(bucket: Bucket, changes: dict[str, object]) -> BucketChanges:
    """The columns a PATCH of `cors` (CorsRule objects; None: none), `public` (bool),
    `cache_control` (None: none), `policy` (JSON text; None: none), `acl` (an ACL: `acl.py`),
    `public_access_block` (a PublicAccessBlock) and `anonymous_rpm` (None: the server's)
    sets, checked against each other and the block (AccessBlocked when it forbids them)."""
    checked: BucketChanges = {}
    block = PublicAccessBlock.decode(bucket.public_access_block)
    if "public_access_block" in changes:
        given = changes["public_access_block"]
        if not isinstance(given, PublicAccessBlock):
            raise InvalidInput("public_access_block is a PublicAccessBlock")
        block = given
        checked["public_access_block"] = block.encode()
    if "cors" in changes:
        checked["cors"] = cors_column(changes["cors"])
    if "cache_control" in changes:
        checked["cache_control"] = cache_control_column(changes["cache_control"])
    if "anonymous_rpm" in changes:
        checked["anonymous_rpm"] = anonymous_rpm_column(changes["anonymous_rpm"])
    if "public" in changes:
        if not isinstance(changes["public"], bool):
            raise InvalidInput("public is true or false")
        checked["public"] = changes["public"]
        if changes["public"] and block.block_public_policy:
            raise AccessBlocked("the bucket's public access block forbids public reads")
    if "policy" in changes:
        text = changes["policy"]
        if text is not None:
            if not isinstance(text, str):
                raise InvalidInput("a policy is JSON text")
            if parse_policy(text, bucket.name).is_public and block.block_public_policy:
                raise AccessBlocked("the bucket's public access block forbids public policies")
        checked["policy"] = text
    if "acl" in changes:
        acl = check_acl(changes["acl"], on_object=False)
        if is_public(acl) and block.block_public_acls:
            raise AccessBlocked("the bucket's public access block forbids public ACLs")
        checked["acl"] = acl
    renamed = "name" in changes and changes["name"] != bucket.name
    if renamed and changes.get("policy", bucket.policy) is not None:
        raise InvalidBucketState("a bucket with a policy keeps its name: its policy names it")
    return checked
