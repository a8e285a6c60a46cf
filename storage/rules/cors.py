"""CORS rules as S3 states them, and what they answer a browser, in pure functions.

A rule allows origins (each with at most one `*` wildcard), methods (GET, PUT, POST,
DELETE, HEAD), request headers (case-insensitive, each with at most one `*`), exposes
response headers, and lets a browser cache a preflight for `max_age_seconds`. The first
rule that allows the origin, the method and every requested header answers; when none
does, the browser gets nothing that lets it through. The S3 endpoint, /v1 file paths
(with the bucket's rules) and the /v1 management API (with the server's) all ask here.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from bucketd_client.contract import MAX_CORS_RULES
from bucketd_client.contract import CorsRule as CorsRule
from storage.errors import InvalidInput

MAX_RULES = MAX_CORS_RULES
MAX_ID = 255
METHODS = ("GET", "PUT", "POST", "DELETE", "HEAD")


def _one_wildcard(values: list[str], what: str) -> None:
    for value in values:
        if value.count("*") > 1:
            raise InvalidInput(f"a CORS rule's {what} {value!r} has more than one '*'")
        if not value or not value.isascii() or any(c in value for c in "\r\n"):
            raise InvalidInput(f"a CORS rule's {what} is a non-empty line of ASCII")


def check_rules(rules: Sequence[CorsRule]) -> list[CorsRule]:
    """The rules, or InvalidInput naming the first problem."""
    if not 1 <= len(rules) <= MAX_RULES:
        raise InvalidInput(f"CORS holds 1 to {MAX_RULES} rules")
    for rule in rules:
        if len(rule.id) > MAX_ID:
            raise InvalidInput(f"a CORS rule's id is at most {MAX_ID} characters")
        if not rule.allowed_origins or not rule.allowed_methods:
            raise InvalidInput("a CORS rule allows at least one origin and one method")
        for method in rule.allowed_methods:
            if method not in METHODS:
                raise InvalidInput(
                    f"Found unsupported HTTP method in CORS config. Unsupported method is {method}"
                )
        _one_wildcard(rule.allowed_origins, "origin")
        _one_wildcard(rule.allowed_headers, "header")
        _one_wildcard(rule.expose_headers, "header")
        if "*" in "".join(rule.expose_headers):
            raise InvalidInput("exposed headers are named, without wildcards")
        if rule.max_age_seconds is not None and rule.max_age_seconds < 0:
            raise InvalidInput("MaxAgeSeconds is not negative")
    return list(rules)


def encode_rules(rules: Sequence[CorsRule]) -> str:
    return msgspec.json.encode(list(rules)).decode()


def decode_rules(column: str | None) -> list[CorsRule]:
    if not column:
        return []
    return msgspec.json.decode(column, type=list[CorsRule])


def _matches(pattern: str, value: str) -> bool:
    head, star, tail = pattern.partition("*")
    if not star:
        return pattern == value
    return len(value) >= len(head) + len(tail) and value.startswith(head) and value.endswith(tail)


def requested_headers(header: str | None) -> list[str]:
    """The names in an Access-Control-Request-Headers header, lower-cased."""
    return [name.strip().lower() for name in (header or "").split(",") if name.strip()]


def match(
    rules: Sequence[CorsRule], origin: str, method: str, headers: Sequence[str] = ()
) -> CorsRule | None:
    """The first rule allowing `origin` to send `method` with `headers` (lower-cased)."""
    for rule in rules:
        if (
            method in rule.allowed_methods
            and any(_matches(pattern, origin) for pattern in rule.allowed_origins)
            and all(
                any(_matches(pattern.lower(), name) for pattern in rule.allowed_headers)
                for name in headers
            )
        ):
            return rule
    return None


def answer(
    rule: CorsRule, origin: str, headers: Sequence[str] = (), preflight: bool = False
) -> dict[str, str]:
    """The response headers that let the browser through. A rule open to every origin
    answers `*` (and allows no credentials); otherwise the origin itself, with credentials."""
    everyone = "*" in rule.allowed_origins
    out = {
        "Access-Control-Allow-Origin": "*" if everyone else origin,
        "Access-Control-Allow-Methods": ", ".join(rule.allowed_methods),
        "Vary": "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    }
    if not everyone:
        out["Access-Control-Allow-Credentials"] = "true"
    if rule.expose_headers:
        out["Access-Control-Expose-Headers"] = ", ".join(rule.expose_headers)
    if rule.max_age_seconds is not None:
        out["Access-Control-Max-Age"] = str(rule.max_age_seconds)
    if preflight and headers:
        out["Access-Control-Allow-Headers"] = ", ".join(headers)
    return out
