"""`limit` and opaque cursors.

A cursor is base64url of a small versioned JSON object naming the list it belongs to and the
last item of the previous page. Bucket and key lists also accept (and hand out) a plain id,
as the specification's example does. A cursor of another list is a 400, never a silent reset.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import msgspec

from gateway.http.errors import bad_request
from storage.rules import ids
from storage.rules.validation import whole_number

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
CURSOR_VERSION = 1
MAX_CURSOR_LENGTH = 4096


def parse_limit(query: Mapping[str, str]) -> int:
    raw = query.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    number = whole_number(raw, MAX_LIMIT)
    if number is None or number < 1:
        raise bad_request(f"limit must be an integer from 1 to {MAX_LIMIT}", "invalid_limit")
    return number


def encode_cursor(fields: Mapping[str, Any]) -> str:
    raw = msgspec.json.encode({"v": CURSOR_VERSION, **fields})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, list_name: str) -> dict[str, Any]:
    invalid = bad_request("the cursor is not a cursor of this list", "invalid_cursor")
    if len(cursor) > MAX_CURSOR_LENGTH or not cursor.isascii():
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        fields = msgspec.json.decode(raw)
    except (binascii.Error, ValueError):
        raise invalid from None
    if (
        not isinstance(fields, dict)
        or fields.get("v") != CURSOR_VERSION
        or fields.get("list") != list_name
        or not isinstance(fields.get("after"), str)
    ):
        raise invalid
    return fields


def id_cursor(query: Mapping[str, str], list_name: str, prefix: str) -> str | None:
    """The id after which a bucket or key list resumes."""
    cursor = query.get("cursor")
    if cursor is None or cursor == "":
        return None
    if ids.is_id(cursor, prefix):
        return cursor
    after: str = decode_cursor(cursor, list_name)["after"]
    if not ids.is_id(after, prefix):
        raise bad_request("the cursor is not a cursor of this list", "invalid_cursor")
    return after
