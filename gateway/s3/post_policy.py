"""S3 POST policies (browser form uploads), in pure functions: the document's expiration
and conditions against the form's fields.

Conditions are `{"field": "value"}` or `["eq", "$field", "value"]` (exact),
`["starts-with", "$field", "prefix"]` (`""` allows anything) and
`["content-length-range", min, max]` (the file's size). Every field of the form but
`x-amz-signature`, `file`, `policy` and those starting `x-ignore-` must be covered by a
condition, and every condition must hold; field names are compared case-insensitively.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime

from .errors import S3Error
from .sigv4 import MAX_PRESIGNED_SECONDS

EXPIRATION = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)", re.ASCII)
"""An ISO 8601 date and time with its zone, as S3 requires it (2026-11-26T12:00:00.000Z);
not any string Python's `fromisoformat` reads (a space for the T, no zone, a date alone)."""
EXEMPT = frozenset({"x-amz-signature", "file", "policy", "signature", "awsaccesskeyid"})


def _invalid(message: str) -> S3Error:
    return S3Error("InvalidPolicyDocument", f"Invalid Policy: {message}")


def _violated(message: str) -> S3Error:
    return S3Error("AccessDenied", f"Invalid according to Policy: {message}", 403)


def decode(policy: str) -> dict[str, object]:
    try:
        document = json.loads(base64.b64decode(policy, validate=True))
    except (binascii.Error, ValueError):
        raise _invalid("Invalid JSON.") from None
    if not isinstance(document, dict):
        raise _invalid("Invalid JSON.")
    return document


def _expiration(document: dict[str, object], now: datetime, wall: datetime) -> None:
    raw = document.get("expiration")
    if not isinstance(raw, str):
        raise _invalid("Policy missing expiration.")
    try:
        if not EXPIRATION.fullmatch(raw):
            raise ValueError(raw)
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid(f"Invalid 'expiration' value: '{raw}'.") from None
    if moment <= now:
        raise _violated("Policy expired.")
    if (moment - wall).total_seconds() > MAX_PRESIGNED_SECONDS:
        raise _violated(
            f"Policy expiration must be within {MAX_PRESIGNED_SECONDS} seconds (7 days), as "
            "a presigned URL's is."
        )


def check(
    document: dict[str, object],
    fields: dict[str, str],
    bucket: str,
    now: datetime,
    wall: datetime | None = None,
) -> tuple[int, int] | None:
    """Whether the form's `fields` (names lower-cased) satisfy the policy `document`; the
    file's size range when it sets one. AccessDenied (or InvalidPolicyDocument) otherwise.
    The expiration is judged by `now` (the server's clock, which test mode moves), its
    7-day reach by `wall` (the system's time, by default `now`): the client wrote it by
    its own, real clock."""
    _expiration(document, now, now if wall is None else wall)
    conditions = document.get("conditions")
    if not isinstance(conditions, list):
        raise _invalid("Policy missing conditions.")
    values = {**fields, "bucket": bucket}
    covered = set()
    size = None
    for condition in conditions:
        if isinstance(condition, dict) and len(condition) == 1:
            ((name, expected),) = condition.items()
            operator, field = "eq", str(name).lower()
        elif isinstance(condition, list) and len(condition) == 3:
            operator, first, expected = condition
            operator = str(operator).lower()
            if operator == "content-length-range":
                if not (
                    isinstance(first, int) and isinstance(expected, int) and 0 <= first <= expected
                ):
                    raise _invalid("Invalid content-length-range.")
                size = (first, expected)
                continue
            if operator not in ("eq", "starts-with") or not str(first).startswith("$"):
                raise _invalid(f"Invalid condition {json.dumps(condition)}.")
            field = str(first)[1:].lower()
        else:
            raise _invalid(f"Invalid condition {json.dumps(condition)}.")
        if not isinstance(expected, str):
            raise _invalid(f"Invalid condition {json.dumps(condition)}.")
        covered.add(field)
        actual = values.get(field)
        if actual is None and operator == "starts-with" and expected == "":
            actual = ""  # "anything", an absent field included, as S3 reads it
        holds = actual is not None and (
            actual == expected if operator == "eq" else actual.startswith(expected)
        )
        if not holds:
            raise _violated(f"Policy Condition failed: {json.dumps(condition)}")
    extra = [
        name
        for name in fields
        if name not in covered and name not in EXEMPT and not name.startswith("x-ignore-")
    ]
    if extra:
        raise _violated(f"Extra input fields: {', '.join(sorted(extra))}")
    return size
