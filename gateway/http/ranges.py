"""The Range request header (RFC 9110), single byte ranges only."""

from __future__ import annotations

import re

from storage.errors import RangeNotSatisfiable

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def well_formed(header: str) -> bool:
    """A single `bytes=` range (S3 ignores other Range headers and answers the whole)."""
    match = _RANGE.fullmatch(header.strip())
    return match is not None and match.groups() != ("", "")


def parse_range(header: str, size: int) -> tuple[int, int]:
    """[start, end) of a `Range: bytes=...` header against a file of `size` bytes.

    Malformed, multi-part and unsatisfiable ranges raise RangeNotSatisfiable (416), so
    a client never gets a silent full body when it asked for part of one.
    """
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        raise RangeNotSatisfiable("the Range header must be a single 'bytes=start-end' range", size)
    first, last = match.groups()
    if first == "" and last == "":
        raise RangeNotSatisfiable("the Range header names no bytes", size)
    if len(first) > 19 or len(last) > 19:
        raise RangeNotSatisfiable("the range is out of bounds", size)
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable("the range selects no bytes of the file", size)
        return max(0, size - suffix), size
    start = int(first)
    end = size - 1 if last == "" else min(int(last), size - 1)
    if last != "" and int(last) < start:
        raise RangeNotSatisfiable("the range ends before it starts", size)
    if start >= size:
        raise RangeNotSatisfiable(f"the range starts past the end of the file ({size} bytes)", size)
    return start, end + 1
