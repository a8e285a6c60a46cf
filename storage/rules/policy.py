"""Bucket policies: the part of AWS's policy language self-hosted users write, parsed once
and evaluated in pure functions.

A policy holds statements: `Effect` Allow or Deny, `Principal` `*` (anyone, with or without
credentials) or organizations (`{"AWS": ["<org id>", "arn:aws:iam::<org id>:root"]}`), or
in a Deny `NotPrincipal` (everyone but the organizations it names, requests without
credentials included, as on AWS), `Action` (`s3:GetObject`, `s3:Get*`, `s3:*`), `Resource`
(ARNs of this bucket, `*` and `?` wildcards), and `Condition` with StringEquals,
StringNotEquals, StringLike, StringNotLike, IpAddress and NotIpAddress, each also with
AWS's `IfExists` suffix (the condition holds where the request lacks the key), and Null
(`true`: the request lacks the key; `false`: it has it), on
`aws:SourceIp`, `s3:prefix`, `s3:ExistingObjectTag/<key>`, and the request's own values
(`CONTEXT_KEYS`, `s3:RequestObjectTag/<key>`: what the gateway reads from its headers).
Evaluation is AWS's: an explicit Deny wins, then an Allow, else nothing is granted (the
caller then asks the ACLs). NotPrincipal in an Allow is malformed (AWS refuses it too, and
advises against it); NotAction and NotResource are refused as not implemented, never
ignored.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from storage.errors import MalformedPolicy, NotSupported

MAX_POLICY_BYTES = 20 * 1024
"""S3's limit on a bucket policy's size."""
OPERATORS = frozenset(
    {
        *("StringEquals", "StringNotEquals", "StringLike", "StringNotLike"),
        *("IpAddress", "NotIpAddress", "Null"),
    }
)
NEGATED = frozenset({"StringNotEquals", "StringNotLike", "NotIpAddress"})
CONTEXT_KEYS = (
    "s3:x-amz-acl",
    "s3:x-amz-copy-source",
    *(f"s3:x-amz-grant-{p}" for p in ("read", "write", "read-acp", "write-acp", "full-control")),
    "s3:x-amz-metadata-directive",
    "s3:x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id",
    "s3:x-amz-server-side-encryption-customer-algorithm",
)
"""The condition keys whose values are a request's headers of the same name, as AWS defines
them (present only where the request sends the header)."""
KEYS = ("aws:sourceip", "s3:prefix", *CONTEXT_KEYS)
TAG_KEY = "s3:existingobjecttag/"
REQUEST_TAG_KEY = "s3:requestobjecttag/"
"""The tags a request asks its object to carry (`x-amz-tagging`), key by key."""
IF_EXISTS = "IfExists"
ORG_ARN = re.compile(r"^arn:aws:iam::([^:]+):root$")
Decision = Literal["allow", "deny"] | None
_NAMES = (
    "ListAllMyBuckets",
    "CreateBucket",
    "DeleteBucket",
    "ListBucket",
    "GetBucketLocation",
    "GetBucketVersioning",
    "PutBucketVersioning",
    "ListBucketVersions",
    "GetBucketObjectLockConfiguration",
    "PutBucketObjectLockConfiguration",
    "GetLifecycleConfiguration",
    "PutLifecycleConfiguration",
    "GetBucketTagging",
    "PutBucketTagging",
    "GetEncryptionConfiguration",
    "PutEncryptionConfiguration",
    "GetBucketCORS",
    "PutBucketCORS",
    "GetBucketPolicy",
    "PutBucketPolicy",
    "DeleteBucketPolicy",
    "GetBucketPolicyStatus",
    "GetBucketNotification",
    "PutBucketNotification",
    "GetBucketAcl",
    "PutBucketAcl",
    "GetBucketPublicAccessBlock",
    "PutBucketPublicAccessBlock",
    "GetBucketOwnershipControls",
    "PutBucketOwnershipControls",
    "ListBucketMultipartUploads",
    "ListMultipartUploadParts",
    "AbortMultipartUpload",
    "PutObject",
    "GetObject",
    "GetObjectVersion",
    "GetObjectAttributes",
    "GetObjectVersionAttributes",
    "DeleteObject",
    "DeleteObjectVersion",
    "GetObjectTagging",
    "GetObjectVersionTagging",
    "PutObjectTagging",
    "PutObjectVersionTagging",
    "DeleteObjectTagging",
    "DeleteObjectVersionTagging",
    "GetObjectAcl",
    "GetObjectVersionAcl",
    "PutObjectAcl",
    "PutObjectVersionAcl",
    "GetObjectRetention",
    "PutObjectRetention",
    "GetObjectLegalHold",
    "PutObjectLegalHold",
    "BypassGovernanceRetention",
)
ACTIONS = frozenset("s3:" + name for name in _NAMES)
"""The actions bucketd serves, as AWS names them: a policy naming another (without
wildcards) is malformed, as on AWS. tests/test_access.py holds it to the S3 dispatch table."""
_LOWER_ACTIONS = frozenset(action.lower() for action in ACTIONS)


@dataclass(frozen=True)
class Condition:
    operator: str
    """Without its `IfExists` suffix."""
    key: str
    """Lower-cased (condition keys are case-insensitive); a tag key keeps its case."""
    values: tuple[str, ...]
    if_exists: bool = False
    """Holds where the request lacks the key."""


@dataclass(frozen=True)
class Statement:
    effect: str
    principals: tuple[str, ...]
    """`*`, or organization ids."""
    actions: tuple[str, ...]
    """Lower-cased patterns."""
    resources: tuple[str, ...]
    conditions: tuple[Condition, ...] = ()
    excludes: bool = False
    """A NotPrincipal (a Deny's): the statement is about everyone but `principals`."""

    def names(self, principal: str | None) -> bool:
        """Whether the statement is about `principal` (None: no credentials)."""
        named = "*" in self.principals or principal in self.principals
        return named != self.excludes


@dataclass(frozen=True)
class Policy:
    statements: tuple[Statement, ...]
    uses_object_tags: bool = False
    """Some condition reads the object's tags: deciding needs the object."""

    @property
    def is_public(self) -> bool:
        """AWS's test ("The meaning of public" in the S3 user guide), for what these
        policies can say: an Allow for `*` is public unless an IpAddress condition on
        aws:SourceIp limits it to ranges AWS counts as specific (`_specific_range`).
        NotIpAddress limits nothing (everyone else is in), nor do the other keys."""
        return any(
            s.effect == "Allow"
            and "*" in s.principals
            and not any(
                c.key == "aws:sourceip"
                and c.operator == "IpAddress"
                and all(_specific_range(v) for v in c.values)
                for c in s.conditions
            )
            for s in self.statements
        )


def _specific_range(value: str) -> bool:
    """An aws:SourceIp range no wider than AWS accepts as limiting access: /8 for IPv4,
    /32 for IPv6 (so 0.0.0.0/0 and ::/0 are public). IPv4-mapped IPv6 addresses (how a
    dual-stack listener sees IPv4 clients) count as the IPv4 ranges they hold."""
    network = ipaddress.ip_network(value, strict=False)
    if isinstance(network, ipaddress.IPv4Network):
        return network.prefixlen >= 8
    mapped = ipaddress.IPv6Network("::ffff:0:0/96")
    if network.subnet_of(mapped):
        return network.prefixlen - 96 >= 8
    return network.prefixlen >= 32 and not mapped.subnet_of(network)


@dataclass(frozen=True)
class Request:
    """What a policy is asked about."""

    action: str
    """As AWS names it: `s3:GetObject`."""
    resource: str
    """`arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`."""
    principal: str | None
    """The requester's organization id; None without credentials."""
    source_ip: str = ""
    prefix: str | None = None
    object_tags: dict[str, str] | None = None
    context: Mapping[str, str] = field(default_factory=dict)
    """The request's own condition keys it carries (`CONTEXT_KEYS` and
    `s3:requestobjecttag/<key>`, lower-cased but for a tag's key): the gateway's reading."""


def _strings(value: object, what: str, empty: bool = False) -> tuple[str, ...]:
    """One string or a list of them; `empty`: "" among them (a condition's value may be
    empty, as AWS's own example of listing a bucket's top level, `s3:prefix` "", has it)."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) and (v or empty) for v in values):
        raise MalformedPolicy(f"{what} must be a string or a list of strings")
    return tuple(values)


def _principals(value: object, field_name: str = "Principal") -> tuple[str, ...]:
    if value == "*":
        return ("*",)
    if not isinstance(value, dict) or set(value) != {"AWS"}:
        raise MalformedPolicy(f'{field_name} is "*" or {{"AWS": [...]}}')
    found = []
    for item in _strings(value["AWS"], f"{field_name}.AWS"):
        matched = ORG_ARN.match(item)
        found.append(matched.group(1) if matched else item)
    return tuple(found)


def _resources(value: object, bucket: str) -> tuple[str, ...]:
    resources = _strings(value, "Resource")
    arn = f"arn:aws:s3:::{bucket}"
    for resource in resources:
        if resource != arn and not resource.startswith(arn + "/"):
            raise MalformedPolicy("Policy has invalid resource")
    return resources


def _conditions(value: object) -> tuple[Condition, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise MalformedPolicy("Condition is an object")
    found = []
    for given, block in value.items():
        if_exists = isinstance(given, str) and given.endswith(IF_EXISTS)
        operator = given[: -len(IF_EXISTS)] if if_exists else given
        if operator not in OPERATORS:
            raise NotSupported(f"the condition operator {given}")
        if not isinstance(block, dict):
            raise MalformedPolicy(f"{operator} holds an object of condition keys")
        for key, values in block.items():
            lowered = key.lower()
            for tagged in (TAG_KEY, REQUEST_TAG_KEY):
                if lowered.startswith(tagged) and len(key) > len(tagged):
                    lowered = tagged + key[len(tagged) :]
                    break
            else:
                if lowered not in KEYS:
                    raise NotSupported(f"the condition key {key}")
            strings = _strings(
                values, f"{operator}.{key}", empty=not operator.endswith("IpAddress")
            )
            if operator == "Null" and (
                if_exists or not all(v.lower() in ("true", "false") for v in strings)
            ):
                raise MalformedPolicy("Null takes true or false, and no IfExists")
            if operator.endswith("IpAddress"):
                if lowered != "aws:sourceip":
                    raise MalformedPolicy(f"{operator} applies to aws:SourceIp")
                for network in strings:
                    try:
                        ipaddress.ip_network(network, strict=False)
                    except ValueError:
                        raise MalformedPolicy(
                            f"{network!r} is not an IP address or range"
                        ) from None
            found.append(Condition(operator, lowered, strings, if_exists))
    return tuple(found)


def _statement(raw: object, bucket: str) -> Statement:
    if not isinstance(raw, dict):
        raise MalformedPolicy("a Statement is an object")
    for refused in ("NotAction", "NotResource"):
        if refused in raw:
            raise NotSupported(f"{refused} in a bucket policy")
    unknown = set(raw) - {
        *("Sid", "Effect", "Principal", "NotPrincipal", "Action", "Resource", "Condition")
    }
    if unknown:
        raise MalformedPolicy(f"Unknown field {sorted(unknown)[0]}")
    if raw.get("Effect") not in ("Allow", "Deny"):
        raise MalformedPolicy("Effect is Allow or Deny")
    excludes = "NotPrincipal" in raw
    if excludes:
        if "Principal" in raw:
            raise MalformedPolicy("a Statement has a Principal or a NotPrincipal, not both")
        if raw["Effect"] != "Deny":
            raise MalformedPolicy("NotPrincipal is taken with Deny only")
        if raw["NotPrincipal"] == "*":
            raise MalformedPolicy('NotPrincipal names organizations, not "*"')
    for required in ("NotPrincipal" if excludes else "Principal", "Action", "Resource"):
        if required not in raw:
            raise MalformedPolicy(f"Missing required field {required}")
    actions = _strings(raw["Action"], "Action")
    for action in actions:
        lowered = action.lower()
        if action != "*" and not lowered.startswith("s3:"):
            raise MalformedPolicy(f"Policy has an invalid action: {action}")
        if "*" not in action and "?" not in action and lowered not in _LOWER_ACTIONS:
            raise MalformedPolicy(f"Policy has an invalid action: {action}")
    return Statement(
        effect=raw["Effect"],
        principals=(
            _principals(raw["NotPrincipal"], "NotPrincipal")
            if excludes
            else _principals(raw["Principal"])
        ),
        actions=tuple(a.lower() for a in actions),
        resources=_resources(raw["Resource"], bucket),
        conditions=_conditions(raw.get("Condition")),
        excludes=excludes,
    )


def parse_policy(text: str, bucket: str) -> Policy:
    """The policy of `bucket`, or MalformedPolicy (NotSupported for the parts of the
    language bucketd does not implement)."""
    if len(text.encode("utf-8")) > MAX_POLICY_BYTES:
        raise MalformedPolicy(f"Policies must be at most {MAX_POLICY_BYTES} bytes")
    try:
        document = json.loads(text)
    except ValueError:
        raise MalformedPolicy("This policy contains invalid Json") from None
    if not isinstance(document, dict) or "Statement" not in document:
        raise MalformedPolicy("Missing required field Statement")
    if document.get("Version", "2012-10-17") not in ("2012-10-17", "2008-10-17"):
        raise MalformedPolicy("Version is 2012-10-17 or 2008-10-17")
    raw = document["Statement"]
    raw_statements = raw if isinstance(raw, list) else [raw]
    if not raw_statements:
        raise MalformedPolicy("Missing required field Statement")
    statements = tuple(_statement(s, bucket) for s in raw_statements)
    tags = any(c.key.startswith(TAG_KEY) for s in statements for c in s.conditions)
    return Policy(statements, uses_object_tags=tags)


@lru_cache(maxsize=1024)
def cached_policy(text: str, bucket: str) -> Policy:
    """A stored policy, parsed once per text: a changed policy is a new text, so the cache
    never serves a stale one, whichever gateway changed it."""
    return parse_policy(text, bucket)


def _like(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _condition_holds(condition: Condition, request: Request) -> bool:
    if condition.key == "aws:sourceip":
        actual: str | None = request.source_ip or None
    elif condition.key == "s3:prefix":
        actual = request.prefix
    elif condition.key.startswith(TAG_KEY):
        tag = condition.key[len(TAG_KEY) :]
        actual = None if request.object_tags is None else request.object_tags.get(tag)
    else:
        actual = request.context.get(condition.key)
    if condition.operator == "Null":
        return any((actual is None) == (v.lower() == "true") for v in condition.values)
    if actual is None:
        return condition.if_exists or condition.operator in NEGATED
    if condition.operator.endswith("IpAddress"):
        try:
            address = ipaddress.ip_address(actual)
        except ValueError:
            return condition.operator in NEGATED
        inside = any(address in ipaddress.ip_network(v, strict=False) for v in condition.values)
        return inside != (condition.operator in NEGATED)
    if "Like" in condition.operator:
        matched = any(_like(v, actual) for v in condition.values)
    else:
        matched = actual in condition.values
    return matched != (condition.operator in NEGATED)


def _applies(statement: Statement, request: Request, exact: bool = False) -> bool:
    action = request.action.lower()
    return (
        statement.names(request.principal)
        and any(a == action if exact else _like(a, action) for a in statement.actions)
        and any(_like(r, request.resource) for r in statement.resources)
        and all(_condition_holds(c, request) for c in statement.conditions)
    )


def may_deny(policy: Policy, action: str, principal: str | None, objects: str) -> bool:
    """Whether a Deny could refuse `action` to `principal` on some object under the ARN
    prefix `objects` (`arn:aws:s3:::bucket/`), its conditions not weighed: for a request
    that acts on every object at once and cannot ask key by key."""
    lowered = action.lower()
    return any(
        s.effect == "Deny"
        and s.names(principal)
        and any(_like(a, lowered) for a in s.actions)
        and any(r.startswith(objects) for r in s.resources)
        for s in policy.statements
    )


def evaluate(policy: Policy, request: Request, exact: bool = False) -> Decision:
    """Deny if any statement denies, else allow if any allows, else None. With `exact`, only
    a statement naming the action itself allows it (a Deny matches wildcards all the same)."""
    decision: Decision = None
    for statement in policy.statements:
        if statement.effect == "Deny":
            if _applies(statement, request):
                return "deny"
        elif decision is None and _applies(statement, request, exact):
            decision = "allow"
    return decision


def renamed_policy(text: str, old: str, new: str) -> str:
    """A bucket's policy for the same bucket under another name (a fork of a snapshot): each
    resource naming `old` names `new`. Checked against `new` after, as any policy is."""
    try:
        document = json.loads(text)
    except ValueError:
        raise MalformedPolicy("This policy contains invalid Json") from None
    old_arn, new_arn = f"arn:aws:s3:::{old}", f"arn:aws:s3:::{new}"

    def rename(resource: object) -> object:
        if isinstance(resource, str) and (
            resource == old_arn or resource.startswith(old_arn + "/")
        ):
            return new_arn + resource[len(old_arn) :]
        return resource

    raw = document.get("Statement") if isinstance(document, dict) else None
    for statement in raw if isinstance(raw, list) else [raw]:
        if isinstance(statement, dict) and "Resource" in statement:
            found = statement["Resource"]
            statement["Resource"] = (
                [rename(r) for r in found] if isinstance(found, list) else rename(found)
            )
    renamed = json.dumps(document)
    parse_policy(renamed, new)
    return renamed
