"""`storage.rules.access.decide` against a reference evaluator written here from AWS's documented
rules (Hypothesis), plus bucketd's own rules on top of them, stated once below.

AWS, as documented:
- Policy evaluation: a request is implicitly denied; an applicable Deny statement wins over
  any Allow (explicit deny); otherwise an applicable Allow grants. A request from another
  account (or from nobody) needs the bucket's own grant: its policy's Allow, or its ACLs.
  A condition key that is absent from the request: the negated operators (StringNotEquals,
  StringNotLike, NotIpAddress) hold, the others do not. Action names are case-insensitive,
  ARNs are not; `*` and `?` are wildcards in both.
- "Mapping of ACL permissions and access policy permissions": bucket READ is s3:ListBucket,
  s3:ListBucketVersions and s3:ListBucketMultipartUploads; bucket WRITE is s3:PutObject and
  s3:DeleteObject (s3:DeleteObjectVersion only when the grantee is the bucket owner, which an
  outsider never is; s3:AbortMultipartUpload is not in the table: AWS leaves it to the bucket
  owner and the upload's initiator); object READ is s3:GetObject and s3:GetObjectVersion.
- Canned ACLs: public-read gives AllUsers READ, public-read-write AllUsers READ and WRITE,
  authenticated-read AuthenticatedUsers READ (a request with credentials). An ACL granting
  anything to AllUsers or AuthenticatedUsers is public.
- Block Public Access: IgnorePublicAcls makes public ACLs grant nothing; RestrictPublicBuckets
  serves a bucket whose policy is public only to its owner's account: every Allow of such a
  policy (including the non-public ones naming other accounts) grants outsiders nothing.
- The policy operations (Get/Put/DeleteBucketPolicy) belong to the bucket owner's account
  (405 to anyone else), and the owner's root can always use them, whatever a Deny says.

bucketd on top (storage/rules/access.py's docstring): the owner is judged by its key's bucket
restriction and scopes, and only a Deny takes from it; outsiders get what the bucket grants
(policy, `/v1`'s public flag for s3:GetObject only, canned ACLs), the access-control actions
of `EXPLICIT` only from an Allow naming them; a bucket that shares nothing hides itself from
other organizations' keys it refuses.

The policy text is generated as JSON, checked with `parse_policy` only for validity, and
evaluated here from the JSON itself.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import re
from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from storage.errors import MalformedPolicy, NotSupported
from storage.models import Bucket, FileRecord
from storage.rules.access import Requester, Resource, decide, scope_for
from storage.rules.acl import PublicAccessBlock
from storage.rules.policy import ACTIONS, parse_policy
from storage.rules.tags import encode_tags
from tests.support.profiles import budget

OWNER, OTHER = "o1", "o2"
BUCKET_ID, BUCKET_NAME = "bkt-1", "b"
ARN = f"arn:aws:s3:::{BUCKET_NAME}"
SCOPES = ("files:read", "files:write", "buckets:read", "buckets:write", "files:bypass-governance")

# --- The reference: AWS's rules, then bucketd's ------------------------------------------

POLICY_OPERATIONS = frozenset({"s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"})
"""The owner's alone (AWS: 405 to another account; the owner's root is never denied them)."""
NAMED_ONLY = frozenset(
    {
        "s3:PutBucketAcl",
        "s3:PutBucketPublicAccessBlock",
        "s3:PutObjectAcl",
        "s3:PutObjectVersionAcl",
        "s3:PutObjectRetention",
        "s3:PutObjectLegalHold",
        "s3:BypassGovernanceRetention",
        "s3:PutBucketObjectLockConfiguration",
        "s3:PutLifecycleConfiguration",
    }
)
"""bucketd (docs/s3.md, "Who may do what"): the actions that change who may do what or how
long a version is kept are granted to outsiders only by an Allow naming them, no wildcard."""
BUCKET_READ = frozenset({"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"})
BUCKET_WRITE = frozenset({"s3:PutObject", "s3:DeleteObject"})
"""AWS's mapping for a grantee that is not the bucket owner (DeleteObjectVersion: owner only)."""
OBJECT_READ = frozenset({"s3:GetObject", "s3:GetObjectVersion"})
PUBLIC_FLAG = frozenset({"s3:GetObject"})
"""`/v1`'s public bucket: the current version of each file, never an older one."""


def wildcard(pattern: str, value: str, fold: bool = False) -> bool:
    """IAM's matching: `*` any run (slashes included), `?` one character, the rest literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.S | (re.I if fold else 0)) is not None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def names_everyone(principal: Any) -> bool:
    return principal == "*" or "*" in as_list(principal["AWS"])


def principal_matches(principal: Any, org: str | None) -> bool:
    """`*` is anyone, credentials or not; an account (id or its root ARN) is only itself."""
    if names_everyone(principal):
        return True
    if org is None:
        return False
    for value in as_list(principal["AWS"]):
        root = re.fullmatch(r"arn:aws:iam::([^:]+):root", value)
        if (root.group(1) if root else value) == org:
            return True
    return False


def condition_holds(operator: str, key: str, values: Any, context: dict[str, Any]) -> bool:
    lowered = key.lower()
    if lowered == "aws:sourceip":
        actual = context["source_ip"] or None
    elif lowered == "s3:prefix":
        actual = context["prefix"]
    else:
        tag = key.split("/", 1)[1]
        actual = None if context["tags"] is None else context["tags"].get(tag)
    negated = operator in ("StringNotEquals", "StringNotLike", "NotIpAddress")
    if actual is None:
        return negated
    wanted = as_list(values)
    if operator.endswith("IpAddress"):
        address = ipaddress.ip_address(actual)
        matched = any(address in ipaddress.ip_network(v, strict=False) for v in wanted)
    elif operator.endswith("Like"):
        matched = any(wildcard(v, actual) for v in wanted)
    else:
        matched = actual in wanted
    return matched != negated


def statement_applies(
    statement: dict[str, Any],
    org: str | None,
    action: str,
    arn: str,
    context: dict[str, Any],
    named: bool = False,
) -> bool:
    """Whether `statement` speaks of this request; `named`: its Action must name `action`
    itself (no wildcard), case aside."""
    if not principal_matches(statement["Principal"], org):
        return False
    patterns = as_list(statement["Action"])
    if named:
        if not any("*" not in p and "?" not in p and p.lower() == action.lower() for p in patterns):
            return False
    elif not any(wildcard(p, action, fold=True) for p in patterns):
        return False
    if not any(wildcard(r, arn) for r in as_list(statement["Resource"])):
        return False
    return all(
        condition_holds(operator, key, values, context)
        for operator, block in statement.get("Condition", {}).items()
        for key, values in block.items()
    )


def policy_is_public(statements: list[dict[str, Any]]) -> bool:
    """AWS's meaning of a public policy, as far as bucketd's language goes: an Allow for
    everyone that is not limited to a set of addresses (aws:SourceIp with IpAddress)."""
    return any(
        s["Effect"] == "Allow"
        and names_everyone(s["Principal"])
        and not any(
            operator == "IpAddress" and any(k.lower() == "aws:sourceip" for k in block)
            for operator, block in s.get("Condition", {}).items()
        )
        for s in statements
    )


def canned_grants(acl: str | None, on_object: bool, anonymous: bool) -> frozenset[str]:
    """The actions a canned ACL grants a requester outside the bucket's organization."""
    permissions: set[str] = set()
    if acl in ("public-read", "public-read-write"):
        permissions.add("READ")
    if acl == "public-read-write":
        permissions.add("WRITE")
    if acl == "authenticated-read" and not anonymous:
        permissions.add("READ")
    granted: set[str] = set()
    if "READ" in permissions:
        granted |= OBJECT_READ if on_object else BUCKET_READ
    if "WRITE" in permissions and not on_object:
        granted |= BUCKET_WRITE
    return frozenset(granted)


def public_acl(acl: str | None) -> bool:
    """Grants anything to AllUsers or AuthenticatedUsers."""
    return acl in ("public-read", "public-read-write", "authenticated-read")


def reference(who: Requester, action: str, resource: Resource, scope: str | None = None) -> str:
    bucket = resource.bucket
    needed = scope or scope_for(action)
    statements = as_list(json.loads(bucket.policy)["Statement"]) if bucket.policy else []
    arn = ARN if resource.key is None else f"{ARN}/{resource.key}"
    record = resource.record
    context = {
        "source_ip": who.source_ip,
        # AWS's condition-key table: s3:prefix is a key of the listing actions only.
        "prefix": resource.prefix if action in LISTING_ACTIONS else None,
        "tags": None if record is None else json.loads(record.tags or "{}"),
    }

    def denied() -> bool:
        return any(
            s["Effect"] == "Deny" and statement_applies(s, who.org_id, action, arn, context)
            for s in statements
        )

    if who.org_id == bucket.org_id:
        if who.bucket_id is not None and who.bucket_id != bucket.id:
            return "hidden"
        if needed not in who.scopes:
            return "scope"
        if action in POLICY_OPERATIONS:
            return "allow"
        return "deny" if denied() else "allow"

    if who.bucket_id is not None:
        return "hidden"
    refused = "hidden" if who.org_id is not None and bucket.shared_name is None else "deny"
    if action in POLICY_OPERATIONS:
        return "hidden" if refused == "hidden" else "owner-only"

    block = json.loads(bucket.public_access_block) if bucket.public_access_block else {}
    restrict = block.get("restrict_public_buckets", False)
    ignore_acls = block.get("ignore_public_acls", False)
    anonymous = who.org_id is None
    if denied():
        granted = False
    else:
        by_policy = not (restrict and policy_is_public(statements)) and any(
            s["Effect"] == "Allow"
            and statement_applies(s, who.org_id, action, arn, context, named=action in NAMED_ONLY)
            for s in statements
        )
        by_flag = bucket.public and not restrict and action in PUBLIC_FLAG

        def by_acl(acl: str | None, on_object: bool) -> bool:
            if ignore_acls and public_acl(acl):
                return False
            return action in canned_grants(acl, on_object, anonymous)

        by_acls = by_acl(bucket.acl, False) or (
            action in OBJECT_READ and record is not None and by_acl(record.acl, True)
        )
        granted = by_policy or (action not in NAMED_ONLY and (by_flag or by_acls))
    if not granted:
        return refused
    if not anonymous and needed not in who.scopes:
        return "scope"
    return "allow"


# --- What is generated ---------------------------------------------------------------------

KEYS = ["a", "abc", "a?c", "docs/readme.md", "photos/cat.jpg", "[z]"]
RESOURCES = [
    ARN,
    f"{ARN}/*",
    f"{ARN}/a*",
    f"{ARN}/a?c",
    f"{ARN}/docs/*",
    f"{ARN}/*.jpg",
    f"{ARN}/[z]",
    f"{ARN}/abc",
]
PREFIXES = ["", "docs/", "a", "[z]", "photos/"]
PREFIX_VALUES = ["docs/", "docs/*", "a*", "[z]", "?", "photos/"]
"""No "": AWS accepts an empty condition value (`"s3:prefix": ["", "home/"]` is its listing-the-
root example) but `parse_policy` refuses it, and this test is about `decide`."""
TAG_KEYS = ["team", "Team", "env"]
TAG_VALUES = ["red", "blue", "r*", "prod", "?lue"]
NETWORKS = ["10.0.0.0/8", "192.168.1.0/24", "127.0.0.1/32", "203.0.113.7", "2001:db8::/32"]
"""Ranges that limit access (none as wide as 0.0.0.0/0): an Allow for everyone narrowed to
them is not public, whatever the width AWS stops counting a range as a limit."""
ADDRESSES = ["10.1.2.3", "192.168.1.9", "127.0.0.1", "203.0.113.7", "8.8.8.8", "2001:db8::5", ""]
ACTION_LIST = sorted(ACTIONS)
INTERESTING = sorted(
    BUCKET_READ
    | BUCKET_WRITE
    | OBJECT_READ
    | NAMED_ONLY
    | POLICY_OPERATIONS
    | {"s3:DeleteObjectVersion", "s3:AbortMultipartUpload", "s3:GetObjectAcl"}
)
ACTION_PATTERNS = [
    "*",
    "s3:*",
    "s3:Get*",
    "s3:Put*",
    "s3:List*",
    "s3:Delete*",
    "s3:*Object",
    "s3:*Acl",
    "s3:PutObject*",
    "s3:GetObject?ersion",
    "s3:*Bucket*",
    "S3:GETOBJECT",
    "s3:putobjectacl",
]

actions = st.sampled_from([INTERESTING] * 3 + [ACTION_LIST]).flatmap(st.sampled_from)
PRINCIPALS = [OWNER, OTHER, "o3", f"arn:aws:iam::{OWNER}:root", f"arn:aws:iam::{OTHER}:root"]
STRING_OPERATORS = ["StringEquals", "StringNotEquals", "StringLike", "StringNotLike"]
IP_CONDITION = (["IpAddress", "NotIpAddress"], ["aws:SourceIp", "aws:sourceip"])
LISTING_ACTIONS = ("s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads")
PREFIX_CONDITION = (STRING_OPERATORS, ["s3:prefix", "S3:Prefix"])
TAG_CONDITION = (STRING_OPERATORS, [f"s3:ExistingObjectTag/{k}" for k in TAG_KEYS])
Conditions = list[tuple[list[str], list[str], list[str]]]
"""(operators, spellings of the key, values) of the conditions a statement may hold."""


@st.composite
def statements(
    draw: st.DrawFn, named: list[str], arns: list[str], conditions: Conditions
) -> dict[str, Any]:
    """A statement whose actions are often those asked (`named`) or wildcards that match
    them, and whose resources are often theirs (`arns`)."""

    def pick(pool: list[Any]) -> Any:
        return draw(st.sampled_from(pool))

    def one_or_many(pool: list[Any], most: int) -> Any:
        """A string, or a list of strings: the policy language takes both."""
        count = draw(st.integers(0, most))
        return pick(pool) if count == 0 else [pick(pool) for _ in range(count)]

    # Wildcards matching an action asked: `s3:*`, `s3:Put*`, `s3:PutObjectA*`, `s3:PutObjectAc?`.
    widened = [a[:n] + "*" for a in named for n in (3, 6, len(a) - 3)] + [
        a[:-1] + "?" for a in named
    ]
    patterns = pick([named, named, widened, ACTION_PATTERNS, INTERESTING, ACTION_LIST])
    statement: dict[str, Any] = {
        "Effect": pick(["Allow", "Deny"]),
        "Principal": pick(["*", {"AWS": "*"}, None, None]) or {"AWS": one_or_many(PRINCIPALS, 3)},
        "Action": one_or_many(patterns, 3),
        "Resource": one_or_many(pick([arns, RESOURCES]), 2),
    }
    if draw(st.booleans()):
        block: dict[str, dict[str, Any]] = {}
        for _ in range(draw(st.integers(1, 2))):
            operators, keys, values = pick(conditions)
            block.setdefault(pick(operators), {})[pick(keys)] = one_or_many(values, 2)
        statement["Condition"] = block
    return statement


blocks = st.builds(
    lambda ignore, restrict, block_acls, block_policy: PublicAccessBlock(
        block_public_acls=block_acls,
        ignore_public_acls=ignore,
        block_public_policy=block_policy,
        restrict_public_buckets=restrict,
    ).encode(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
canned = st.sampled_from([None, "public-read", "public-read-write", "authenticated-read"])


def make_bucket(
    *,
    policy: str | None = None,
    acl: str | None = None,
    public: bool = False,
    block: str | None = None,
    shared: bool = True,
) -> Bucket:
    return Bucket(
        id=BUCKET_ID,
        org_id=OWNER,
        name=BUCKET_NAME,
        region="local",
        status="active",
        status_reason=None,
        created_at="2024-01-01T00:00:00Z",
        max_upload_bytes=1 << 20,
        allowed_content_types=(),
        file_count=0,
        size_bytes=0,
        public=public,
        shared_name=BUCKET_NAME if shared else None,
        policy=policy,
        acl=acl,
        public_access_block=block,
    )


def make_record(key: str, tags: dict[str, str] | None = None, acl: str | None = None) -> FileRecord:
    return FileRecord(
        bucket_id=BUCKET_ID,
        key=key,
        size=3,
        content_type="text/plain",
        uploaded_at="2024-01-01T00:00:00Z",
        sha256="0" * 64,
        blob_id="blob",
        version_id="v1",
        tags=encode_tags(tags),
        acl=acl,
    )


tag_sets = st.dictionaries(
    st.sampled_from(TAG_KEYS), st.sampled_from(["red", "blue", "prod"]), min_size=1
)


SCOPE_SETS = [frozenset(SCOPES)] * 8 + [
    frozenset(c) for n in range(len(SCOPES)) for c in itertools.combinations(SCOPES, n)
]
"""Every scope most often, else any subset."""


@st.composite
def requesters(draw: st.DrawFn, org: str | None) -> Requester:
    address = draw(st.sampled_from(ADDRESSES))
    if org is None:
        return Requester(None, frozenset(), None, address)
    scopes = draw(st.sampled_from(SCOPE_SETS))
    restriction = draw(st.sampled_from([None] * 4 + [BUCKET_ID, "bkt-2"]))
    return Requester(org, scopes, restriction, address)


Asked = list[tuple[str, Resource]]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Bucket, list[Requester], str | None, Asked]:
    """A bucket, who asks (a key of its organization, one of another, nobody), a scope
    override and the requests asked: the policy's actions and resources are often those
    asked, so that its statements often apply."""
    askers = [draw(requesters(OWNER)), draw(requesters(OTHER)), draw(requesters(None))]
    scope = draw(st.one_of(st.none(), st.none(), st.sampled_from(SCOPES)))
    wanted = draw(
        st.lists(
            st.tuples(actions, st.one_of(st.none(), st.sampled_from(KEYS))), min_size=1, max_size=4
        )
    )
    parts = []
    for action, key in wanted:
        record = None
        if key is not None and draw(st.integers(0, 3)):  # three times in four
            record = make_record(key, draw(tag_sets), draw(canned))
        parts.append((action, key, record, draw(st.one_of(st.none(), st.sampled_from(PREFIXES)))))
    # Condition values that hold for what is asked as often as values that do not.
    addresses = [who.source_ip for who in askers if who.source_ip]
    prefixes = [prefix for *_, prefix in parts if prefix]
    tags = [v for _, _, r, _ in parts if r is not None for v in json.loads(r.tags or "{}").values()]
    conditions = [
        (*IP_CONDITION, NETWORKS + addresses),
        (*PREFIX_CONDITION, PREFIX_VALUES + prefixes + [p[0] + "*" for p in prefixes]),
        (*TAG_CONDITION, TAG_VALUES + tags + [v[0] + "*" for v in tags]),
    ]
    named = [action for action, *_ in parts]
    arns = [ARN if key is None else f"{ARN}/{key}" for _, key, *_ in parts]
    policy = None
    if draw(st.integers(0, 2)):  # two times in three
        chosen = draw(st.lists(statements(named, arns, conditions), min_size=1, max_size=3))
        policy = json.dumps({"Version": "2012-10-17", "Statement": chosen})
    bucket = make_bucket(
        policy=policy,
        acl=draw(canned),
        public=draw(st.booleans()),
        block=draw(st.one_of(st.none(), blocks)),
        shared=draw(st.booleans()),
    )
    asked = [
        (action, Resource(bucket, key, record, prefix)) for action, key, record, prefix in parts
    ]
    return bucket, askers, scope, asked


def valid(bucket: Bucket) -> bool:
    if bucket.policy is None:
        return True
    try:
        parse_policy(bucket.policy, bucket.name)
    except (MalformedPolicy, NotSupported):
        return False
    return True


# --- The property ----------------------------------------------------------------------------

EVERY_ACTION_ON_A_KEY = make_bucket(acl="public-read-write")


@settings(max_examples=budget(800))
@given(scenario=scenarios())
@example(
    scenario=(
        EVERY_ACTION_ON_A_KEY,
        [Requester(None, frozenset(), None, "8.8.8.8")],
        None,
        [
            (action, Resource(EVERY_ACTION_ON_A_KEY, "a", make_record("a")))
            for action in ACTION_LIST
        ],
    )
).via("every action, anonymous, on a public-read-write bucket")
def test_decide_agrees_with_the_reference(
    scenario: tuple[Bucket, list[Requester], str | None, Asked],
) -> None:
    bucket, askers, scope, asked = scenario
    assume(valid(bucket))
    for action, resource in asked:
        for who in askers:
            expected = reference(who, action, resource, scope)
            assert decide(who, action, resource, scope) == expected, (
                f"{action} by {who} on {resource.key!r} (record {resource.record}, prefix "
                f"{resource.prefix!r}), bucket acl={bucket.acl} public={bucket.public} "
                f"block={bucket.public_access_block} shared={bucket.shared_name} "
                f"policy={bucket.policy}: the reference says {expected}"
            )


# --- The rules, one by one -------------------------------------------------------------------

READER = frozenset({"files:read", "files:write", "buckets:read", "buckets:write"})
ANONYMOUS = Requester(None, frozenset(), None, "8.8.8.8")
OTHER_KEY = Requester(OTHER, READER, None, "8.8.8.8")
OWNER_KEY = Requester(OWNER, READER, None, "8.8.8.8")


def policy(*statements: dict[str, Any]) -> str:
    text = json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
    parse_policy(text, BUCKET_NAME)
    return text


def both(who: Requester, action: str, resource: Resource) -> tuple[str, str]:
    return decide(who, action, resource), reference(who, action, resource)


def test_a_wildcard_allow_does_not_grant_put_object_acl() -> None:
    for pattern in ("s3:*", "s3:Put*", "s3:PutObject*", "*"):
        bucket = make_bucket(
            policy=policy(
                {"Effect": "Allow", "Principal": "*", "Action": pattern, "Resource": f"{ARN}/*"}
            )
        )
        resource = Resource(bucket, "a", make_record("a"))
        assert both(ANONYMOUS, "s3:PutObjectAcl", resource) == ("deny", "deny")
        assert both(ANONYMOUS, "s3:PutObject", resource) == ("allow", "allow")
        on_bucket = make_bucket(
            policy=policy({"Effect": "Allow", "Principal": "*", "Action": pattern, "Resource": ARN})
        )
        for action in ("s3:PutBucketAcl", "s3:PutLifecycleConfiguration"):
            assert both(OTHER_KEY, action, Resource(on_bucket)) == ("deny", "deny")
        tagging = "deny" if pattern == "s3:PutObject*" else "allow"
        assert both(OTHER_KEY, "s3:PutBucketTagging", Resource(on_bucket)) == (tagging, tagging)
    named = make_bucket(
        policy=policy(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:PutObjectAcl"],
                "Resource": f"{ARN}/*",
            },
            {"Effect": "Deny", "Principal": "*", "Action": "s3:Put*", "Resource": f"{ARN}/b*"},
        )
    )
    assert both(ANONYMOUS, "s3:PutObjectAcl", Resource(named, "a")) == ("allow", "allow")
    # A wildcard Deny still denies what only a named Allow grants.
    assert both(ANONYMOUS, "s3:PutObjectAcl", Resource(named, "bee")) == ("deny", "deny")


def test_the_public_flag_grants_get_object_but_not_get_object_version() -> None:
    resource = Resource(make_bucket(public=True), "a", make_record("a"))
    assert both(ANONYMOUS, "s3:GetObject", resource) == ("allow", "allow")
    assert both(ANONYMOUS, "s3:GetObjectVersion", resource) == ("deny", "deny")
    assert both(ANONYMOUS, "s3:ListBucket", Resource(resource.bucket)) == ("deny", "deny")
    restricted = make_bucket(
        public=True, block=PublicAccessBlock(restrict_public_buckets=True).encode()
    )
    assert both(ANONYMOUS, "s3:GetObject", Resource(restricted, "a")) == ("deny", "deny")


def test_public_read_write_grants_put_and_delete_but_not_delete_object_version() -> None:
    bucket = make_bucket(acl="public-read-write")
    resource = Resource(bucket, "a", make_record("a"))
    for action in ("s3:PutObject", "s3:DeleteObject"):
        assert both(ANONYMOUS, action, resource) == ("allow", "allow")
    # AWS: WRITE allows s3:DeleteObjectVersion only when the grantee is the bucket owner.
    assert both(ANONYMOUS, "s3:DeleteObjectVersion", resource) == ("deny", "deny")
    assert both(OTHER_KEY, "s3:DeleteObjectVersion", resource) == ("deny", "deny")


def test_public_read_write_does_not_grant_abort_multipart_upload() -> None:
    """AWS's mapping gives bucket WRITE s3:PutObject and s3:DeleteObject, nothing more."""
    resource = Resource(make_bucket(acl="public-read-write"), "a")
    assert both(ANONYMOUS, "s3:AbortMultipartUpload", resource) == ("deny", "deny")


def test_restrict_public_buckets_voids_a_public_policy_for_another_org_too() -> None:
    text = policy(
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"{ARN}/*"},
        {
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{OTHER}:root"},
            "Action": "s3:ListBucket",
            "Resource": ARN,
        },
    )
    open_bucket = make_bucket(policy=text)
    assert both(OTHER_KEY, "s3:GetObject", Resource(open_bucket, "a")) == ("allow", "allow")
    assert both(OTHER_KEY, "s3:ListBucket", Resource(open_bucket)) == ("allow", "allow")
    restricted = make_bucket(
        policy=text, block=PublicAccessBlock(restrict_public_buckets=True).encode()
    )
    assert both(ANONYMOUS, "s3:GetObject", Resource(restricted, "a")) == ("deny", "deny")
    assert both(OTHER_KEY, "s3:GetObject", Resource(restricted, "a")) == ("deny", "deny")
    # Even the non-public delegation to the other account is blocked.
    assert both(OTHER_KEY, "s3:ListBucket", Resource(restricted)) == ("deny", "deny")
    # The owner is not concerned.
    assert both(OWNER_KEY, "s3:GetObject", Resource(restricted, "a")) == ("allow", "allow")
    # A policy limited to addresses is not public: its Allows stand.
    narrowed = make_bucket(
        policy=policy(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"{ARN}/*",
                "Condition": {"IpAddress": {"aws:SourceIp": "8.8.8.0/24"}},
            }
        ),
        block=PublicAccessBlock(restrict_public_buckets=True).encode(),
    )
    assert both(OTHER_KEY, "s3:GetObject", Resource(narrowed, "a")) == ("allow", "allow")


def test_a_deny_of_everything_denies_the_owner_get_object_but_not_the_policy() -> None:
    bucket = make_bucket(
        policy=policy(
            {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": [ARN, f"{ARN}/*"]}
        )
    )
    assert both(OWNER_KEY, "s3:GetObject", Resource(bucket, "a")) == ("deny", "deny")
    for action in ("s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"):
        assert both(OWNER_KEY, action, Resource(bucket)) == ("allow", "allow")
        assert both(ANONYMOUS, action, Resource(bucket)) == ("owner-only", "owner-only")


def test_ignore_public_acls_and_authenticated_read() -> None:
    bucket = make_bucket(acl="authenticated-read")
    assert both(OTHER_KEY, "s3:ListBucket", Resource(bucket)) == ("allow", "allow")
    assert both(ANONYMOUS, "s3:ListBucket", Resource(bucket)) == ("deny", "deny")
    record = make_record("a", acl="public-read")
    assert both(ANONYMOUS, "s3:GetObjectVersion", Resource(bucket, "a", record)) == (
        "allow",
        "allow",
    )
    ignored = make_bucket(
        acl="authenticated-read", block=PublicAccessBlock(ignore_public_acls=True).encode()
    )
    assert both(OTHER_KEY, "s3:ListBucket", Resource(ignored)) == ("deny", "deny")
    assert both(ANONYMOUS, "s3:GetObject", Resource(ignored, "a", record)) == ("deny", "deny")


def test_another_orgs_key_learns_nothing_of_a_bucket_that_shares_nothing() -> None:
    bucket = make_bucket(shared=False)
    assert both(OTHER_KEY, "s3:GetObject", Resource(bucket, "a")) == ("hidden", "hidden")
    assert both(OTHER_KEY, "s3:GetBucketPolicy", Resource(bucket)) == ("hidden", "hidden")
    assert both(ANONYMOUS, "s3:GetObject", Resource(bucket, "a")) == ("deny", "deny")
    restricted_key = Requester(OTHER, READER, "bkt-9", "8.8.8.8")
    assert both(restricted_key, "s3:ListBucket", Resource(make_bucket(acl="public-read"))) == (
        "hidden",
        "hidden",
    )


def test_conditions_like_and_absent_keys_as_aws_evaluates_them() -> None:
    listing = make_bucket(
        policy=policy(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:ListBucket",
                "Resource": ARN,
                "Condition": {"StringLike": {"s3:prefix": "docs/*"}},
            }
        )
    )
    for prefix, verdict in (("docs/", "allow"), ("docs/a/b", "allow"), ("photos/", "deny")):
        assert both(ANONYMOUS, "s3:ListBucket", Resource(listing, prefix=prefix)) == (
            verdict,
            verdict,
        )
    # No prefix asked: the key is absent, and StringLike does not hold.
    assert both(ANONYMOUS, "s3:ListBucket", Resource(listing)) == ("deny", "deny")
    guarded = make_bucket(
        policy=policy(
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"{ARN}/*",
                "Condition": {"StringNotLike": {"s3:ExistingObjectTag/team": "r*"}},
            },
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:ListBucket",
                "Resource": ARN,
                "Condition": {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
            },
        )
    )
    red, blue = make_record("a", {"team": "red"}), make_record("a", {"team": "blue"})
    assert both(OWNER_KEY, "s3:GetObject", Resource(guarded, "a", red)) == ("allow", "allow")
    assert both(OWNER_KEY, "s3:GetObject", Resource(guarded, "a", blue)) == ("deny", "deny")
    # An untagged object: the tag is absent, and StringNotLike holds.
    untagged = make_record("a")
    assert both(OWNER_KEY, "s3:GetObject", Resource(guarded, "a", untagged)) == ("deny", "deny")
    inside = Requester(OWNER, READER, None, "10.1.2.3")
    nowhere = Requester(OWNER, READER, None, "")
    assert both(inside, "s3:ListBucket", Resource(guarded)) == ("allow", "allow")
    assert both(OWNER_KEY, "s3:ListBucket", Resource(guarded)) == ("deny", "deny")
    # No source address known: the key is absent, and NotIpAddress holds.
    assert both(nowhere, "s3:ListBucket", Resource(guarded)) == ("deny", "deny")


def test_a_condition_value_may_be_empty() -> None:
    """AWS's own example of listing a bucket's top level conditions s3:prefix on ""."""
    from storage.rules.policy import parse_policy

    text = json.dumps(
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3:ListBucket",
                    "Resource": "arn:aws:s3:::b",
                    "Condition": {"StringEquals": {"s3:prefix": ["", "home/"]}},
                }
            ]
        }
    )
    assert parse_policy(text, "b").statements[0].conditions[0].values == ("", "home/")


def test_a_prefix_sent_with_another_action_satisfies_no_prefix_condition() -> None:
    """A client adding ?prefix= to a bucket's configuration request does not meet a
    policy's s3:prefix condition: the key belongs to the listings alone."""
    statement = {
        "Effect": "Allow",
        "Principal": {"AWS": ["o2"]},
        "Action": "s3:*",
        "Resource": ARN,
        "Condition": {"StringLike": {"s3:prefix": "public/*"}},
    }
    bucket = make_bucket(policy=json.dumps({"Statement": [statement]}))
    them = Requester("o2", frozenset(SCOPES))
    for action in ("s3:PutBucketVersioning", "s3:PutBucketCORS", "s3:DeleteBucket"):
        assert both(them, action, Resource(bucket, prefix="public/x")) == ("deny", "deny")
    assert both(them, "s3:ListBucket", Resource(bucket, prefix="public/x")) == ("allow", "allow")
