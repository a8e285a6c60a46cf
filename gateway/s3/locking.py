"""S3 object lock: Get/PutObjectLockConfiguration, Get/PutObjectRetention,
Get/PutObjectLegalHold, the lock headers of writes and reads, and bypassing governance.
The rules themselves are `storage/rules/object_lock.py`'s."""

from __future__ import annotations

from collections.abc import Mapping
from xml.etree import ElementTree

from starlette.responses import Response

from storage.errors import StorageError
from storage.models import FileRecord
from storage.rules.object_lock import (
    MODES,
    DefaultRetention,
    Lock,
    Retention,
    check_default,
    check_mode,
    decode_config,
    parse_date,
)
from storage.rules.validation import whole_number

from . import xml
from .access import also
from .call import S3Call
from .errors import S3Error
from .touches import HOLD, MODE, UNTIL, one, read
from .versions import requested_record, requested_version


def _retention(mode: str | None, until: str | None, code: str = "InvalidArgument") -> Retention:
    """A retention from headers (a bad one is `InvalidArgument`, as AWS answers) or from a
    PutObjectRetention body (`code` MalformedXML, as AWS answers a body off its schema)."""
    if mode is None or until is None:
        raise S3Error(code, "a retention needs both a mode and a retain-until date")
    try:
        return Retention(mode=check_mode(mode), until=parse_date(until))
    except StorageError as exc:
        raise S3Error(code, exc.message) from None


def _hold(status: str | None, code: str = "InvalidArgument") -> bool:
    """A legal hold from a header or (`code` MalformedXML) a PutObjectLegalHold body."""
    if status not in ("ON", "OFF"):
        raise S3Error("MalformedXML" if status is None else code, "legal hold is ON or OFF")
    return status == "ON"


async def write_lock(call: S3Call, source: Mapping[str, str] | None = None) -> Lock | None:
    """The retention and legal hold a PutObject, CopyObject, CreateMultipartUpload (or a
    POST form's fields, `source`) asks for its new version (None: the bucket's default).
    Setting either is its own action (s3:PutObjectRetention, s3:PutObjectLegalHold)."""
    found = read(call, "lock", source)
    mode, until, hold = found.get(MODE), found.get(UNTIL), found.get(HOLD)
    if mode is None and until is None and hold is None:
        return None
    retention = None if mode is None and until is None else _retention(mode, until)
    lock = Lock(retention=retention, legal_hold=hold is not None and _hold(hold))
    if lock.retention is not None:
        await also(call, "s3:PutObjectRetention", call.key)
    if lock.legal_hold:
        await also(call, "s3:PutObjectLegalHold", call.key)
    return lock


def lock_headers(record: FileRecord) -> dict[str, str]:
    """The lock headers of a GetObject or HeadObject answer."""
    headers = {}
    if record.lock_mode and record.lock_until:
        headers[MODE] = record.lock_mode
        headers[UNTIL] = xml.timestamp(record.lock_until)
    if record.legal_hold:
        headers[HOLD] = "ON"
    return headers


async def bypasses_governance(
    call: S3Call, key: str | None, named: bool, version_id: str | None
) -> bool:
    """Whether the request asks to bypass GOVERNANCE retention of `key`'s version (and may:
    s3:BypassGovernanceRetention, which a key holds with files:bypass-governance)."""
    if (one(call, "bypass") or "").strip().lower() != "true":
        return False
    await also(call, "s3:BypassGovernanceRetention", key, named=named, version_id=version_id)
    return True


async def get_configuration(call: S3Call) -> Response:
    config = decode_config((await call.target_bucket()).object_lock)
    if config is None:
        raise S3Error(
            "ObjectLockConfigurationNotFoundError",
            "Object Lock configuration does not exist for this bucket",
            404,
        )
    rule: list[xml.Node] = []
    if config.default is not None:
        retention: list[xml.Node] = [
            ("Mode", config.default.mode),
            ("Days", config.default.days),
            ("Years", config.default.years),
        ]
        rule = [("Rule", [("DefaultRetention", retention)])]
    return xml.response("ObjectLockConfiguration", [("ObjectLockEnabled", "Enabled"), *rule])


def _number(element: ElementTree.Element, tag: str) -> int | None:
    """An integer, signed: a negative period is out of range (InvalidRetentionPeriod), not
    off the schema."""
    raw = xml.text(element, tag)
    if raw is None:
        return None
    text = raw.strip()
    number = whole_number(text.removeprefix("-"))
    if number is None:
        raise S3Error("MalformedXML", f"{tag} must be a whole number")
    return -number if text.startswith("-") else number


def _default(found: ElementTree.Element) -> DefaultRetention:
    """A DefaultRetention as AWS judges it: an unknown Mode (they are upper case), or Days
    and Years both or neither, is MalformedXML; a period out of range InvalidRetentionPeriod."""
    mode, days, years = xml.text(found, "Mode"), _number(found, "Days"), _number(found, "Years")
    if mode not in MODES:
        raise S3Error("MalformedXML", "the default retention's Mode is GOVERNANCE or COMPLIANCE")
    if (days is None) == (years is None):
        raise S3Error("MalformedXML", "a default retention has Days or Years, not both")
    try:
        return check_default(mode, days, years)
    except StorageError as exc:
        raise S3Error("InvalidRetentionPeriod", exc.message) from None


async def put_configuration(call: S3Call) -> Response:
    root = await call.read_xml()
    if xml.text(root, "ObjectLockEnabled") != "Enabled":
        raise S3Error("MalformedXML", "ObjectLockEnabled must be Enabled")
    found = root.find("Rule/DefaultRetention")
    default = None if found is None else _default(found)
    bucket = await call.target_bucket()
    await call.engine.buckets.set_object_lock(call.actor, bucket.id, default)
    return Response(b"", 200)


def _require_lock(object_lock: str | None) -> None:
    if object_lock is None:
        raise S3Error("InvalidRequest", "Bucket is missing Object Lock Configuration")


async def get_retention(call: S3Call) -> Response:
    _require_lock((await call.target_bucket()).object_lock)
    record = await requested_record(call)
    if not (record.lock_mode and record.lock_until):
        raise S3Error(
            "NoSuchObjectLockConfiguration",
            "The specified object does not have a ObjectLock configuration",
            404,
        )
    return xml.response(
        "Retention",
        [("Mode", record.lock_mode), ("RetainUntilDate", xml.timestamp(record.lock_until))],
    )


async def put_retention(call: S3Call) -> Response:
    assert call.key is not None
    root = await call.read_xml()
    mode, until = xml.text(root, "Mode"), xml.text(root, "RetainUntilDate")
    retention = None if mode is None and until is None else _retention(mode, until, "MalformedXML")
    record = await requested_record(call)
    await call.engine.files.protect(
        call.actor,
        record.bucket_id,
        call.key,
        record.version_id,
        retention=retention,
        bypass_governance=await bypasses_governance(call, call.key, *requested_version(call)),
    )
    return Response(b"", 200)


async def get_legal_hold(call: S3Call) -> Response:
    _require_lock((await call.target_bucket()).object_lock)
    record = await requested_record(call)
    return xml.response("LegalHold", [("Status", "ON" if record.legal_hold else "OFF")])


async def put_legal_hold(call: S3Call) -> Response:
    assert call.key is not None
    hold = _hold(xml.text(await call.read_xml(), "Status"), "MalformedXML")
    record = await requested_record(call)
    await call.engine.files.protect(
        call.actor, record.bucket_id, call.key, record.version_id, legal_hold=hold
    )
    return Response(b"", 200)
