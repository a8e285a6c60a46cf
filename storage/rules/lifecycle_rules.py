"""Lifecycle rules: what they say, which are valid, and what they decide for one version or
upload, in pure functions (the worker in `lifecycle.py` applies the decisions).

The rules follow S3's lifecycle configuration: a filter (key prefix, object size and
tags) and actions: expire current versions after some days or on a
date, remove delete markers left alone (ExpiredObjectDeleteMarker), expire noncurrent
versions some days after they stopped being current while keeping the newest N, and abort
multipart uploads some days after they began. A "day" is `lifecycle.day_seconds` long
(86,400 by default), counted from the moment in question, not rounded to midnight as S3
does. One storage class, so there are no transitions.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import msgspec

from bucketd_client.contract import LifecycleRule
from storage.errors import InvalidInput
from storage.rules.tags import MAX_OBJECT_TAGS, check_tags

MAX_RULES = 1000
MAX_ID = 255
MAX_DAYS = 36_500


Rule = LifecycleRule


def _days(value: int | None, name: str, low: int = 1) -> None:
    if value is not None and not low <= value <= MAX_DAYS:
        raise InvalidInput(f"{name} is {low} to {MAX_DAYS}")


EPOCH_YEAR = 1970
"""The earliest year of an expiration date: `%Y` writes earlier ones without their zeros
(`1-01-01`), which no reader parses back."""


def midnight(value: str) -> str:
    """An expiration date as stored (YYYY-MM-DDT00:00:00Z), or InvalidInput."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput("the expiration date is not an ISO 8601 date") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:
        raise InvalidInput("the expiration date is outside the calendar") from None
    if (moment.hour, moment.minute, moment.second, moment.microsecond) != (0, 0, 0, 0):
        raise InvalidInput("the expiration date must be at midnight UTC")
    if moment.year < EPOCH_YEAR:
        raise InvalidInput(f"the expiration date must be in {EPOCH_YEAR} or later")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def check_rule(rule: Rule, number: int) -> Rule:
    """The rule with its id (`rule-N` when none) and date normalised, or InvalidInput."""
    name = rule.id or f"rule-{number}"
    if len(name) > MAX_ID:
        raise InvalidInput(f"a rule id is at most {MAX_ID} characters")
    for bound in (rule.size_greater_than, rule.size_less_than):
        if bound is not None and bound < 0:
            raise InvalidInput("object size bounds are not negative")
    if (
        rule.size_greater_than is not None
        and rule.size_less_than is not None
        and rule.size_greater_than >= rule.size_less_than
    ):
        raise InvalidInput("sizeGreaterThan must be less than sizeLessThan")
    _days(rule.expiration_days, "expirationDays")
    _days(rule.noncurrent_days, "noncurrentDays")
    _days(rule.abort_incomplete_multipart_upload_days, "abortIncompleteMultipartUploadDays")
    if rule.newer_noncurrent_versions is not None:
        if rule.noncurrent_days is None:
            raise InvalidInput("newerNoncurrentVersions needs noncurrentDays")
        if not 1 <= rule.newer_noncurrent_versions <= 100:
            raise InvalidInput("newerNoncurrentVersions is 1 to 100")
    if rule.expiration_days is not None and rule.expiration_date is not None:
        raise InvalidInput("an expiration has days or a date, not both")
    if rule.expired_object_delete_marker and (
        rule.expiration_days is not None or rule.expiration_date is not None
    ):
        raise InvalidInput("expiredObjectDeleteMarker cannot go with expiration days or a date")
    has_size = rule.size_greater_than is not None or rule.size_less_than is not None
    if rule.abort_incomplete_multipart_upload_days is not None and (has_size or rule.tags):
        raise InvalidInput("an abort of incomplete uploads cannot filter on size or tags")
    if rule.expired_object_delete_marker and rule.tags:
        raise InvalidInput("expiredObjectDeleteMarker cannot filter on tags")
    check_tags(list(rule.tags.items()), MAX_OBJECT_TAGS)
    if not (
        rule.expiration_days is not None
        or rule.expiration_date is not None
        or rule.expired_object_delete_marker
        or rule.noncurrent_days is not None
        or rule.abort_incomplete_multipart_upload_days is not None
    ):
        raise InvalidInput(f"rule {name!r} has no action")
    date = None if rule.expiration_date is None else midnight(rule.expiration_date)
    return msgspec.structs.replace(rule, id=name, expiration_date=date)


def check_rules(rules: object) -> tuple[Rule, ...]:
    if not isinstance(rules, (list, tuple)) or not all(isinstance(r, Rule) for r in rules):
        raise InvalidInput("lifecycle is a list of rules")
    if not 1 <= len(rules) <= MAX_RULES:
        raise InvalidInput(f"a lifecycle configuration has 1 to {MAX_RULES} rules")
    checked = tuple(check_rule(rule, n) for n, rule in enumerate(rules, 1))
    ids = [rule.id for rule in checked]
    if len(set(ids)) != len(ids):
        raise InvalidInput("rule ids must be unique")
    return checked


def encode_rules(rules: tuple[Rule, ...] | None) -> str | None:
    return None if rules is None else msgspec.json.encode(rules).decode()


def decode_rules(column: str | None) -> tuple[Rule, ...] | None:
    return None if column is None else msgspec.json.decode(column, type=tuple[Rule, ...])


def matches(rule: Rule, key: str, size: int | None, tags: dict[str, str] | None = None) -> bool:
    """Whether the rule's filter takes this key (and size and tags; None: a delete marker
    or an upload, which size bounds and tags do not concern)."""
    if not rule.enabled or not key.startswith(rule.prefix):
        return False
    if rule.tags and (tags is None or any(tags.get(k) != v for k, v in rule.tags.items())):
        return False
    if size is None:
        return rule.size_greater_than is None and rule.size_less_than is None
    if rule.size_greater_than is not None and size <= rule.size_greater_than:
        return False
    return rule.size_less_than is None or size < rule.size_less_than


def _past(since: float, days: int | None, now: float, day: float) -> bool:
    return days is not None and now >= since + days * day


def expires_current(
    rules: tuple[Rule, ...],
    key: str,
    size: int,
    uploaded: float,
    now: float,
    day: float,
    tags: dict[str, str] | None = None,
) -> bool:
    for rule in rules:
        if not matches(rule, key, size, tags or {}):
            continue
        if _past(uploaded, rule.expiration_days, now, day):
            return True
        if rule.expiration_date is not None and now >= _unix(rule.expiration_date):
            return True
    return False


def removes_lone_marker(rules: tuple[Rule, ...], key: str) -> bool:
    return any(r.expired_object_delete_marker and matches(r, key, None) for r in rules)


def expires_noncurrent(
    rules: tuple[Rule, ...],
    key: str,
    size: int | None,
    noncurrent_since: float,
    newer_noncurrent: int,
    now: float,
    day: float,
    tags: dict[str, str] | None = None,
) -> bool:
    """Whether a noncurrent version (or delete marker, size and tags None) goes:
    `newer_noncurrent` noncurrent versions of its key are newer than it."""
    for rule in rules:
        if not matches(rule, key, size, tags) or rule.noncurrent_days is None:
            continue
        if newer_noncurrent < (rule.newer_noncurrent_versions or 0):
            continue
        if _past(noncurrent_since, rule.noncurrent_days, now, day):
            return True
    return False


def aborts_upload(
    rules: tuple[Rule, ...], key: str, created: float, now: float, day: float
) -> bool:
    return any(
        matches(rule, key, None)
        and _past(created, rule.abort_incomplete_multipart_upload_days, now, day)
        for rule in rules
    )


AWS_DAY = 86_400


def expiry(
    rules: tuple[Rule, ...], key: str, size: int, tags: dict[str, str], uploaded: float
) -> tuple[float, str] | None:
    """When a current version expires by the rules, and by which rule, as S3's
    x-amz-expiration header says it: a Days rule at the upload plus that many days rounded
    up to the next midnight UTC, a Date rule on its date; the earliest of the rules that
    take the version (None: none does). The worker counts `lifecycle.day_seconds` from the
    upload itself, not rounded: with the default day it expires the version at most a day
    before the moment said here, as S3 may (it promises no exact time)."""
    found: tuple[float, str] | None = None
    for rule in rules:
        if not matches(rule, key, size, tags):
            continue
        if rule.expiration_days is not None:
            moment = float(math.ceil((uploaded + rule.expiration_days * AWS_DAY) / AWS_DAY))
            moment *= AWS_DAY
        elif rule.expiration_date is not None:
            moment = _unix(rule.expiration_date)
        else:
            continue
        if found is None or moment < found[0]:
            found = (moment, rule.id)
    return found


def _unix(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
