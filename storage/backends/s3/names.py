"""Where the S3 backend keeps each version's content in the cluster.

A file's content is the object under its own key, so the cluster stays browsable, with two
exceptions, both recorded in the index (`FileRecord.object_key`), which is the truth:

- The named versions of a versioned bucket live apart, under
  `.bucketd-versions/<version id>/<name>` (`<name>` as below), so a new version never
  replaces an older one's object. The null version (unversioned or suspended writes)
  stays under the key.
- A key the cluster cannot store as it is gets a reversible encoding, under
  `.bucketd-keys/`. A file-system-backed cluster (SeaweedFS; `portable_keys`) drops empty
  segments and edge slashes, refuses `.` and `..` segments and caps a segment at 255 bytes;
  every cluster would confuse a key under bucketd's own `.bucketd-` prefixes with its
  objects. The encoding, segment by segment: `%` becomes `%25`; an empty segment `%00` (a
  key holds no NUL); a `.` or `..` segment `%2E` or `%2E%2E`; a leading `.` of the first
  segment `%2E`; a segment longer than 254 bytes is cut into pieces, each but the last
  ending in a bare `%` that means "the next piece continues this segment". The result
  decodes back (`key_of`). A name over the cluster's 1,024 bytes (a long key, or a long
  key under a version prefix) ends in `.bucketd-keys/#<sha256 of the key>` instead:
  unique, and only the index maps it back.
"""

from __future__ import annotations

import hashlib
from urllib.parse import unquote

from storage.models import FileRecord
from storage.rules.validation import MAX_PORTABLE_SEGMENT, portable_key_problem

VERSIONS_PREFIX = ".bucketd-versions/"
RESTORED_PREFIX = ".bucketd-restored/"
"""Where a restore or a fork of a snapshot puts the copies of its contents, each under a
name of its own (`snapshots.py`): never a name a live version's object has."""
KEYS_PREFIX = ".bucketd-keys/"
STAGING_PREFIX = ".bucketd-staging/"
"""Where a server-side copy whose ETag is known only once copied first copies its source,
under its write's token (`commits.py`), so that its reservation can name the ETag the copy
onto the key will have; removed once the copy is committed or settled."""
RESERVED = ".bucketd-"
MAX_NAME = 1024
"""Bytes of an object name that AWS S3 (and so every cluster bucketd targets) accepts."""
HASHED = "#"
PIECE = MAX_PORTABLE_SEGMENT - 1
"""Bytes of a cut segment's piece, leaving room for the continuation mark."""


def object_name(key: str, version: str | None, portable: bool) -> str:
    """The cluster's name for `key` (for a named `version`, its own object): the key
    itself where the cluster stores it faithfully."""
    plain = not key.startswith(RESERVED) and not (portable and portable_key_problem(key))
    inner = key if plain else KEYS_PREFIX + encode(key)
    name = inner if version is None else f"{VERSIONS_PREFIX}{version}/{inner}"
    if len(name.encode("utf-8")) <= MAX_NAME:
        return name
    inner = KEYS_PREFIX + HASHED + hashlib.sha256(key.encode("utf-8")).hexdigest()
    return inner if version is None else f"{VERSIONS_PREFIX}{version}/{inner}"


def encode(key: str) -> str:
    """A name with no empty, `.` or `..` segment, no segment over 255 bytes, and no leading
    `.bucketd-`, that `decode` turns back into `key`."""
    pieces = []
    for at, segment in enumerate(key.split("/")):
        if segment == "":
            pieces.append("%00")
            continue
        escaped = [c if c != "%" else "%25" for c in segment]
        if segment in (".", ".."):
            escaped = ["%2E"] * len(segment)
        elif at == 0 and segment.startswith("."):
            escaped[0] = "%2E"
        pieces.extend(_cut(escaped))
    return "/".join(pieces)


def _cut(escaped: list[str]) -> list[str]:
    """A segment's escaped characters in pieces of at most `PIECE` bytes, marked."""
    pieces, piece, size = [], "", 0
    for char in escaped:
        width = len(char.encode("utf-8"))
        if size + width > PIECE:
            pieces.append(piece + "%")
            piece, size = "", 0
        piece += char
        size += width
    if piece in (".", ".."):  # a cut can leave dots alone at the end: a forbidden segment
        piece = "%2E" * len(piece)
    pieces.append(piece)
    return pieces


def decode(encoded: str) -> str:
    segments, current = [], ""
    for piece in encoded.split("/"):
        if piece.endswith("%"):
            current += unquote(piece[:-1])
            continue
        current += "" if piece == "%00" else unquote(piece)
        segments.append(current)
        current = ""
    return "/".join(segments)


def key_of(name: str) -> str | None:
    """The key an object name holds (a version's name included); None for a hashed name,
    which only the index maps back."""
    if name.startswith(VERSIONS_PREFIX):
        name = name[len(VERSIONS_PREFIX) :].split("/", 1)[1]
    if not name.startswith(KEYS_PREFIX):
        return name
    rest = name[len(KEYS_PREFIX) :]
    return None if rest.startswith(HASHED) else decode(rest)


def version_of(object_key: str | None) -> str:
    """The version id a name made by `object_name` holds ("" for any other name)."""
    if object_key is None or not object_key.startswith(VERSIONS_PREFIX):
        return ""
    return object_key[len(VERSIONS_PREFIX) :].split("/", 1)[0]


def staging(token: str) -> str:
    return STAGING_PREFIX + token


def stored_under(record: FileRecord) -> str:
    return record.object_key or record.key
