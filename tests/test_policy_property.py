"""Policy evaluation against a small reference evaluator (Hypothesis): random policies of
Allow and Deny statements over principals, action and resource wildcards and address
conditions, asked random requests. The reference says it plainly: a Deny that applies wins,
then an Allow that applies; nothing applying grants nothing."""

from __future__ import annotations

import ipaddress
import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.rules.policy import Request, evaluate, parse_policy

BUCKET = "b"
ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:DeleteObject"]
ACTION_PATTERNS = [*ACTIONS, "s3:Get*", "s3:*", "s3:*Object", "S3:getobject"]
KEYS = ["a", "abc", "a/b", "x?y", "photos/cat.jpg", "[z]"]
RESOURCES = [
    f"arn:aws:s3:::{BUCKET}",
    f"arn:aws:s3:::{BUCKET}/*",
    f"arn:aws:s3:::{BUCKET}/a*",
    f"arn:aws:s3:::{BUCKET}/a?c",
    f"arn:aws:s3:::{BUCKET}/photos/*.jpg",
    f"arn:aws:s3:::{BUCKET}/[z]",
]
ORGS = ["org1", "org2", "org3"]
NETWORKS = ["10.0.0.0/8", "127.0.0.1/32", "192.168.1.0/24"]
ADDRESSES = ["10.1.2.3", "127.0.0.1", "192.168.1.9", "8.8.8.8"]


def _reference_match(pattern: str, value: str, fold: bool = False) -> bool:
    """`*` any run, `?` one character, everything else literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.I | re.S if fold else re.S) is not None


statement = st.fixed_dictionaries(
    {
        "Effect": st.sampled_from(["Allow", "Deny"]),
        "Principal": st.one_of(
            st.just("*"),
            st.builds(lambda orgs: {"AWS": orgs}, st.lists(st.sampled_from(ORGS), min_size=1)),
            st.builds(lambda org: {"AWS": f"arn:aws:iam::{org}:root"}, st.sampled_from(ORGS)),
        ),
        "Action": st.lists(st.sampled_from(ACTION_PATTERNS), min_size=1, max_size=3),
        "Resource": st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=3),
    },
    optional={
        "Condition": st.builds(
            lambda op, nets: {op: {"aws:SourceIp": nets}},
            st.sampled_from(["IpAddress", "NotIpAddress"]),
            st.lists(st.sampled_from(NETWORKS), min_size=1, max_size=2),
        )
    },
)


def _principals(raw: object) -> set[str]:
    if raw == "*":
        return {"*"}
    assert isinstance(raw, dict)
    values = raw["AWS"] if isinstance(raw["AWS"], list) else [raw["AWS"]]
    return {v.split("::")[1].split(":")[0] if v.startswith("arn:") else v for v in values}


def reference(statements: list[dict], request: Request) -> str | None:
    def applies(s: dict) -> bool:
        principals = _principals(s["Principal"])
        if "*" not in principals and request.principal not in principals:
            return False
        if not any(_reference_match(a, request.action, fold=True) for a in s["Action"]):
            return False
        if not any(_reference_match(r, request.resource) for r in s["Resource"]):
            return False
        for operator, block in s.get("Condition", {}).items():
            inside = any(
                ipaddress.ip_address(request.source_ip) in ipaddress.ip_network(n)
                for n in block["aws:SourceIp"]
            )
            if inside != (operator == "IpAddress"):
                return False
        return True

    effects = {s["Effect"] for s in statements if applies(s)}
    return "deny" if "Deny" in effects else "allow" if "Allow" in effects else None


requests = st.builds(
    lambda action, key, principal, address: Request(
        action=action,
        resource=f"arn:aws:s3:::{BUCKET}" + ("" if key is None else "/" + key),
        principal=principal,
        source_ip=address,
    ),
    st.sampled_from(ACTIONS),
    st.one_of(st.none(), st.sampled_from(KEYS)),
    st.one_of(st.none(), st.sampled_from(ORGS)),
    st.sampled_from(ADDRESSES),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(statement, min_size=1, max_size=4), st.lists(requests, min_size=1, max_size=5))
def test_evaluation_agrees_with_the_reference(statements: list[dict], asked: list[Request]) -> None:
    policy = parse_policy(json.dumps({"Version": "2012-10-17", "Statement": statements}), BUCKET)
    for request in asked:
        assert evaluate(policy, request) == reference(statements, request)


@settings(max_examples=100, deadline=None)
@given(st.lists(statement, min_size=1, max_size=4), requests)
def test_anonymous_gets_nothing_no_statement_for_everyone_grants(
    statements: list[dict], request: Request
) -> None:
    named = [s for s in statements if s["Principal"] != "*"]
    if not named:
        return
    policy = parse_policy(json.dumps({"Statement": named}), BUCKET)
    anonymous = Request(request.action, request.resource, None, request.source_ip)
    assert evaluate(policy, anonymous) is None


# Request condition keys (s3:x-amz-acl standing for all of them), the IfExists operators
# and NotPrincipal in a Deny, against the same plain reading of AWS's rules.

STRING_OPERATORS = ["StringEquals", "StringNotEquals", "StringLike", "StringNotLike"]
ACL_PATTERNS = ["private", "public-read", "public-*", "*", ""]

keyed_statement = st.builds(
    lambda effect, principal, excluded, actions, operator, if_exists, values: {
        "Effect": effect,
        **(
            {"NotPrincipal": {"AWS": excluded}}
            if effect == "Deny" and principal is None
            else {"Principal": principal or "*"}
        ),
        "Action": actions,
        "Resource": f"arn:aws:s3:::{BUCKET}/*",
        "Condition": {operator + ("IfExists" if if_exists else ""): {"s3:x-amz-acl": values}},
    },
    st.sampled_from(["Allow", "Deny"]),
    st.one_of(st.none(), st.just("*"), st.builds(lambda o: {"AWS": o}, st.sampled_from(ORGS))),
    st.lists(st.sampled_from(ORGS), min_size=1, max_size=2),
    st.lists(st.sampled_from(ACTION_PATTERNS), min_size=1, max_size=2),
    st.sampled_from(STRING_OPERATORS),
    st.booleans(),
    st.lists(st.sampled_from(ACL_PATTERNS), min_size=1, max_size=2),
)


def keyed_reference(statements: list[dict], request: Request) -> str | None:
    def holds(operator: str, values: list[str]) -> bool:
        if_exists = operator.endswith("IfExists")
        operator = operator.removesuffix("IfExists")
        negated = "Not" in operator
        actual = request.context.get("s3:x-amz-acl")
        if actual is None:
            return if_exists or negated
        if "Like" in operator:
            matched = any(_reference_match(v, actual) for v in values)
        else:
            matched = actual in values
        return matched != negated

    def applies(s: dict) -> bool:
        if "NotPrincipal" in s:
            if request.principal in _principals(s["NotPrincipal"]):
                return False
        elif not _principals(s["Principal"]) & {"*", request.principal}:
            return False
        if not any(_reference_match(a, request.action, fold=True) for a in s["Action"]):
            return False
        if not _reference_match(s["Resource"], request.resource):
            return False
        return all(holds(op, block["s3:x-amz-acl"]) for op, block in s["Condition"].items())

    effects = {s["Effect"] for s in statements if applies(s)}
    return "deny" if "Deny" in effects else "allow" if "Allow" in effects else None


keyed_requests = st.builds(
    lambda action, key, principal, acl: Request(
        action=action,
        resource=f"arn:aws:s3:::{BUCKET}/{key}",
        principal=principal,
        context={} if acl is None else {"s3:x-amz-acl": acl},
    ),
    st.sampled_from(ACTIONS),
    st.sampled_from(KEYS),
    st.one_of(st.none(), st.sampled_from(ORGS)),
    st.one_of(st.none(), st.sampled_from(["private", "public-read", "public-read-write"])),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(keyed_statement, min_size=1, max_size=4),
    st.lists(keyed_requests, min_size=1, max_size=5),
)
def test_request_keys_if_exists_and_not_principal_agree_with_the_reference(
    statements: list[dict], asked: list[Request]
) -> None:
    policy = parse_policy(json.dumps({"Version": "2012-10-17", "Statement": statements}), BUCKET)
    for request in asked:
        assert evaluate(policy, request) == keyed_reference(statements, request)
