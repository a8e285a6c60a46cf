"""Object lock: the rules of retention and legal hold, as S3 states them, in pure functions
the index's transactions call (so each rule holds whatever writes or deletes a version).

A bucket with object lock enabled is versioned for good; it may give every new version a
default retention. A version's retention has a mode and a date: until then the version
cannot be deleted; in COMPLIANCE mode nobody can shorten or remove that, in GOVERNANCE mode
only a request that bypasses governance (a key with the scope `files:bypass-governance`).
A legal hold protects a version until it is lifted, whatever its retention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from bucketd_client.contract import MAX_RETENTION_DAYS
from bucketd_client.contract import WIRE_MODES as WIRE_MODES
from storage.errors import InvalidInput, LockNotEnabled, ObjectLocked
from storage.rules.clock import iso_to_unix

MODES = ("GOVERNANCE", "COMPLIANCE")
DAY = 86_400
YEAR = 365 * DAY
MAX_DAYS = MAX_RETENTION_DAYS


@dataclass(frozen=True, kw_only=True)
class Retention:
    mode: str
    until: str
    """UTC, YYYY-MM-DDTHH:MM:SSZ."""


@dataclass(frozen=True, kw_only=True)
class Lock:
    """What a write asks for its new version (explicit headers), or a version carries."""

    retention: Retention | None = None
    legal_hold: bool = False


class DefaultRetention(msgspec.Struct, frozen=True, omit_defaults=True):
    """A bucket's default retention for new versions: days or years, not both."""

    mode: str
    days: int | None = None
    years: int | None = None

    def until(self, at: float) -> str:
        seconds = (self.days or 0) * DAY + (self.years or 0) * YEAR
        return stamp(at + seconds)


class BucketLock(msgspec.Struct, frozen=True, omit_defaults=True):
    """A bucket's object lock configuration (the `object_lock` column, as JSON)."""

    default: DefaultRetention | None = None


def stamp(at: float) -> str:
    """A retention date as the index stores it, rounded up to the second (never shorter)."""
    return datetime.fromtimestamp(math.ceil(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_date(value: str) -> str:
    """An ISO 8601 date and time with a zone (S3's x-amz-object-lock-retain-until-date,
    RetainUntilDate) as the index stores it."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput("the retain-until date is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        raise InvalidInput("the retain-until date needs a time zone (Z for UTC)")
    return stamp(moment.timestamp())


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidInput("the retention mode is GOVERNANCE or COMPLIANCE")
    return mode


def check_default(mode: str, days: int | None, years: int | None) -> DefaultRetention:
    check_mode(mode)
    if (days is None) == (years is None):
        raise InvalidInput("a default retention has Days or Years, not both")
    count = days if days is not None else years
    assert count is not None
    limit = MAX_DAYS if days is not None else MAX_DAYS // 365
    if not 1 <= count <= limit:
        raise InvalidInput(f"the default retention is 1 to {limit} {'days' if days else 'years'}")
    return DefaultRetention(mode=mode, days=days, years=years)


def encode_config(config: BucketLock) -> str:
    return msgspec.json.encode(config).decode()


def decode_config(column: str | None) -> BucketLock | None:
    return None if column is None else msgspec.json.decode(column, type=BucketLock)


def encode_lock(lock: Lock | None) -> str | None:
    return None if lock is None else msgspec.json.encode(lock).decode()


def decode_lock(column: str | None) -> Lock | None:
    return None if column is None else msgspec.json.decode(column, type=Lock)


def for_new_version(explicit: Lock | None, object_lock: str | None, at: float) -> Lock:
    """The lock a new version gets: the retention the write asked for, else the bucket's
    default retention; the legal hold the write asked for."""
    config = decode_config(object_lock)
    asked = explicit or Lock()
    if config is None:
        if asked.retention is not None or asked.legal_hold:
            raise LockNotEnabled("the bucket does not have object lock enabled")
        return asked
    if asked.retention is not None or config.default is None:
        return asked
    default = Retention(mode=config.default.mode, until=config.default.until(at))
    return Lock(retention=default, legal_hold=asked.legal_hold)


def active(mode: str | None, until: str | None, now: float) -> bool:
    return mode is not None and until is not None and iso_to_unix(until) > now


def why_protected(
    mode: str | None, until: str | None, legal_hold: bool, now: float, bypass: bool
) -> str | None:
    """Why a version may not be deleted now (None: it may)."""
    if legal_hold:
        return "the version is under a legal hold"
    if active(mode, until, now) and (mode == "COMPLIANCE" or not bypass):
        return f"the version is under {mode} retention until {until}"
    return None


def check_retention_change(
    mode: str | None, until: str | None, new: Retention | None, now: float, bypass: bool
) -> None:
    """Raise ObjectLocked when replacing a version's retention by `new` (None: removing it)
    would weaken or alter a retention still running, as S3 refuses it: a running retention
    may be extended in its own mode; anything else to GOVERNANCE (shortening, removing,
    changing its mode, even to COMPLIANCE) needs bypassing governance, and COMPLIANCE never
    changes but to extend."""
    if not active(mode, until, now):
        return
    assert until is not None
    extends = new is not None and new.mode == mode and iso_to_unix(new.until) >= iso_to_unix(until)
    if extends:
        return
    if mode == "COMPLIANCE":
        raise ObjectLocked(
            f"COMPLIANCE retention until {until} can only be extended, in COMPLIANCE mode"
        )
    if not bypass:
        raise ObjectLocked(
            f"GOVERNANCE retention until {until} can only be shortened, removed or given "
            "another mode by bypassing governance (x-amz-bypass-governance-retention, scope "
            "files:bypass-governance)"
        )
