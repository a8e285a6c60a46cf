"""S3 ETags: what a multipart upload's ETag is, and whether a tag is an MD5."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any


def md5_of(etag: str | None) -> str | None:
    """The S3 ETag body when it is an MD5 (`hex` or `hex-N`), the form S3 clients expect."""
    tag = (etag or "").strip('"')
    return tag if re.fullmatch(r"[0-9a-f]{32}(-[0-9]+)?", tag) else None


def same_tag(one: str | None, other: str | None) -> bool:
    """Whether two ETags are the same tag: a CopyObject may answer one bare (SeaweedFS's
    does) that a HEAD of the same object gives quoted. None is no tag, never the same."""
    return one is not None and other is not None and one.strip('"') == other.strip('"')


def multipart_etag(parts: list[dict[str, Any]]) -> str:
    """The ETag S3 gives a completed upload: MD5 of the parts' MD5s, dash, part count.

    Empty when a part's ETag is not an MD5 (encrypted uploads): then a crash between
    publish and commit cannot be healed, only the reservation dropped.
    """
    digests = []
    for part in sorted(parts, key=lambda p: p["PartNumber"]):
        tag = part["ETag"].strip('"')
        if not re.fullmatch(r"[0-9a-f]{32}", tag):
            return ""
        digests.append(bytes.fromhex(tag))
    return f'"{hashlib.md5(b"".join(digests)).hexdigest()}-{len(digests)}"'


def etag_matches(field: str, etags: Iterable[str | None], weak: bool) -> bool:
    """Whether an If-Match or If-None-Match field holds one of `etags`, compared as RFC 9110
    says, for every conditional header of both APIs: a comma list, `*` for any, quoted or
    bare tags (minio-py sends them bare), `W/` tags matching only in a weak comparison
    (If-None-Match); `etags` as stored, quoted or not."""
    mine = {tag.strip('"') for tag in etags if tag}
    for item in field.split(","):
        item = item.strip()
        if item == "*":
            return True
        tagged_weak = item.startswith("W/")
        if tagged_weak and not weak:
            continue
        if item.removeprefix("W/").strip('"') in mine:
            return True
    return False
