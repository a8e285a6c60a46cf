"""S3 lifecycle configuration: Get/Put/DeleteBucketLifecycle(Configuration), S3's XML to
and from `storage/lifecycle_rules.Rule` (the rules and the worker are the engine's)."""

from __future__ import annotations

import email.utils
import re
from urllib.parse import quote
from xml.etree import ElementTree

from starlette.responses import Response

from storage.errors import StorageError
from storage.models import Bucket, FileRecord
from storage.rules.clock import iso_to_unix
from storage.rules.lifecycle_rules import Rule, decode_rules, expiry, midnight
from storage.rules.tags import decode_tags
from storage.rules.validation import whole_number

from . import xml
from .call import S3Call
from .errors import S3Error


def _malformed(message: str) -> S3Error:
    return S3Error("MalformedXML", message)


def _number(element: ElementTree.Element | None, tag: str) -> int | None:
    if element is None:
        return None
    raw = xml.text(element, tag)
    if raw is None:
        return None
    number = whole_number(raw, strip=True)
    if number is None:
        raise _malformed(f"{tag} must be a whole number")
    return number


DATE = re.compile(r"\d{4}-\d\d-\d\d(T\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)?)?", re.ASCII)
"""An ISO 8601 date, or date and time, as S3 reads a rule's Date (midnight UTC is judged
after, with the rule)."""


def _dates(root: ElementTree.Element) -> None:
    """Judge every Expiration and Transition Date before anything is refused: S3 answers a
    malformed date MalformedXML and one not at midnight InvalidArgument, and a client
    learns of a bad date before it learns transitions are not taken (501)."""
    for rule in root.findall("Rule"):
        for action in ("Expiration", "Transition"):
            for element in rule.findall(action):
                raw = xml.text(element, "Date")
                if raw is not None:
                    if not DATE.fullmatch(raw.strip()):
                        raise _malformed(f"{action}'s Date is not an ISO 8601 date: {raw!r}")
                    try:
                        midnight(raw)
                    except StorageError as exc:
                        raise S3Error("InvalidArgument", exc.message) from None


Filter = tuple[str, int | None, int | None, dict[str, str], bool]


def _filter(rule: ElementTree.Element) -> Filter:
    """Prefix, size bounds and tags of a rule's Filter (or its legacy Prefix), and whether
    it was the legacy Prefix."""
    found = rule.find("Filter")
    legacy = xml.text(rule, "Prefix")
    if found is None:
        return legacy or "", None, None, {}, rule.find("Prefix") is not None
    if legacy is not None:
        raise _malformed("a rule has a Filter or a Prefix, not both")
    scope = found.find("And")
    if scope is not None and len(found) > 1:
        raise _malformed("a Filter with And holds nothing else")
    scope = found if scope is None else scope
    if scope is found and len(found) > 1:
        raise _malformed("a Filter holds one condition; combine several with And")
    tags: dict[str, str] = {}
    for tag in scope.findall("Tag"):
        key = xml.text(tag, "Key")
        if key is None or key in tags:
            raise S3Error("InvalidTag", "a Tag holds a Key, each Key once")
        tags[key] = xml.text(tag, "Value", "") or ""
    return (
        xml.text(scope, "Prefix") or "",
        _number(scope, "ObjectSizeGreaterThan"),
        _number(scope, "ObjectSizeLessThan"),
        tags,
        False,
    )


def _rule(element: ElementTree.Element) -> Rule:
    status = xml.text(element, "Status")
    if status not in ("Enabled", "Disabled"):
        raise _malformed("a rule's Status is Enabled or Disabled")
    expiration = element.find("Expiration")
    noncurrent = element.find("NoncurrentVersionExpiration")
    abort = element.find("AbortIncompleteMultipartUpload")
    marker = None if expiration is None else xml.text(expiration, "ExpiredObjectDeleteMarker")
    if marker not in (None, "true", "false"):
        raise _malformed("ExpiredObjectDeleteMarker is true or false")
    if noncurrent is not None and xml.text(noncurrent, "NoncurrentDays") is None:
        raise _malformed("NoncurrentVersionExpiration needs NoncurrentDays")
    prefix, greater, less, tags, legacy = _filter(element)
    return Rule(
        id=xml.text(element, "ID") or "",
        enabled=status == "Enabled",
        expiration_days=_number(expiration, "Days"),
        expiration_date=None if expiration is None else xml.text(expiration, "Date"),
        expired_object_delete_marker=marker == "true",
        noncurrent_days=_number(noncurrent, "NoncurrentDays"),
        newer_noncurrent_versions=_number(noncurrent, "NewerNoncurrentVersions"),
        abort_incomplete_multipart_upload_days=_number(abort, "DaysAfterInitiation"),
        prefix=prefix,
        size_greater_than=greater,
        size_less_than=less,
        tags=tags,
        legacy_prefix=legacy,
    )


async def put_configuration(call: S3Call) -> Response:
    root = await call.read_xml(first=_dates)
    rules = [_rule(element) for element in root.findall("Rule")]
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"lifecycle": rules})
    return Response(b"", 200)


def _render(rule: Rule) -> list[xml.Node]:
    conditions: list[xml.Node] = [
        ("Prefix", rule.prefix or None),
        *(("Tag", [("Key", k), ("Value", v)]) for k, v in sorted(rule.tags.items())),
        ("ObjectSizeGreaterThan", rule.size_greater_than),
        ("ObjectSizeLessThan", rule.size_less_than),
    ]
    given = [node for node in conditions if node[1] is not None]
    if not given:
        condition: list[xml.Node] = [("Prefix", "")]
    elif len(given) == 1:
        condition = given
    else:
        condition = [("And", given)]
    expiration: list[xml.Node] = [
        ("Days", rule.expiration_days),
        ("Date", None if rule.expiration_date is None else xml.timestamp(rule.expiration_date)),
        ("ExpiredObjectDeleteMarker", True if rule.expired_object_delete_marker else None),
    ]
    noncurrent: list[xml.Node] = [
        ("NoncurrentDays", rule.noncurrent_days),
        ("NewerNoncurrentVersions", rule.newer_noncurrent_versions),
    ]
    abort = rule.abort_incomplete_multipart_upload_days
    scope: xml.Node = ("Prefix", rule.prefix) if rule.legacy_prefix else ("Filter", condition)
    return [
        ("ID", rule.id),
        scope,
        ("Status", "Enabled" if rule.enabled else "Disabled"),
        ("Expiration", expiration if any(v is not None for _, v in expiration) else None),
        ("NoncurrentVersionExpiration", noncurrent if rule.noncurrent_days else None),
        (
            "AbortIncompleteMultipartUpload",
            None if abort is None else [("DaysAfterInitiation", abort)],
        ),
    ]


async def get_configuration(call: S3Call) -> Response:
    rules = decode_rules((await call.target_bucket()).lifecycle)
    if not rules:
        raise S3Error(
            "NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist", 404
        )
    return xml.response("LifecycleConfiguration", [("Rule", _render(rule)) for rule in rules])


async def delete_configuration(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"lifecycle": None})
    return Response(b"", 204)


def expiration_header(bucket: Bucket, record: FileRecord) -> dict[str, str]:
    """S3's x-amz-expiration for a current version a rule will expire (on PutObject,
    GetObject, HeadObject): when, as an HTTP date, and by which rule, its id URL-encoded."""
    rules = decode_rules(bucket.lifecycle)
    if not rules or record.delete_marker:
        return {}
    found = expiry(
        rules, record.key, record.size, decode_tags(record.tags), iso_to_unix(record.uploaded_at)
    )
    if found is None:
        return {}
    moment, rule_id = found
    when = email.utils.formatdate(moment, usegmt=True)
    return {"x-amz-expiration": f'expiry-date="{when}", rule-id="{quote(rule_id, safe="")}"'}
