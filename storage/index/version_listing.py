"""Listings of versions (S3's ListObjectVersions), and listings as they were at a past moment
(test mode's stale-listing fault, docs/testing.md): what the index can still tell of it.

A past listing "as of" a moment keeps, for each key, the newest version uploaded by then
(`uploaded_at`, to the second, as S3's LastModified). In a versioned bucket (versioning ever
enabled) that is exact: the versions that replaced or deleted a key since are newer rows,
and the versions they replaced are still rows. What no row holds any more cannot be shown:
a version deleted for good (DeleteObject with a versionId, a lifecycle expiry), a key of an
unversioned bucket deleted since (its row is gone), and the content an unversioned write or
a suspended bucket's "null" version replaced. So a key written since is missing from such a
listing whether it was new or replaced another, and a key deleted since is missing too.
And a version a /v1 rename made keeps its content's `uploaded_at` (its LastModified):
such a listing takes it as uploaded then. docs/testing.md says all of this.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.rules.ids import NULL_VERSION as NULL
from storage.rules.keyrange import common_prefix, successor

from ..models import FileRecord, Page
from .listing import paginate
from .rows import FILE_COLUMNS, file_from_row
from .sql import Script, read, rows
from .versions import VERSION_COLUMNS, _noncurrent, current, get_version

LATER_THAN_ALL = "9999-12-31T23:59:59Z"
"""An `as_of` after every stored `uploaded_at`: a listing of the present."""


@dataclass(frozen=True, kw_only=True)
class VersionPage:
    versions: list[tuple[FileRecord, bool]]
    """(version, is it the current one), by key, newest first within a key."""
    prefixes: list[str]
    truncated: bool
    next_key: str | None
    next_version: str | None


_RANGE = (
    "bucket_id = ? AND uploaded_at <= ? AND key >= ? AND (? = '' OR key < ?) "
    "AND (key > ? OR (key = ? AND "
)
_ENTRIES = (
    f"SELECT * FROM (SELECT {FILE_COLUMNS}, 1 AS latest, COALESCE(order_key, '0') AS position "
    f"FROM files WHERE {_RANGE}(1 < ? OR (1 = ? AND COALESCE(order_key, '0') < ?)))) "
    "ORDER BY key LIMIT ?) AS current_versions "
    f"UNION ALL SELECT * FROM (SELECT {VERSION_COLUMNS}, 0 AS latest, order_key AS position "
    f"FROM versions WHERE {_RANGE}(0 < ? OR (0 = ? AND order_key < ?)))) "
    "ORDER BY key, order_key DESC LIMIT ?) AS older_versions "
    "ORDER BY key, latest DESC, position DESC LIMIT ?"
)
"""The next versions after a position: each table's own next rows first (each arm walks its
index from the position and stops at the limit), then merged; a page costs the same
wherever it starts."""
START: tuple[str, int, str] = ("", 2, "")
"""A position before every version."""
Position = tuple[str, int, str]
"""(key, 1 for the current version, order key): versions come by key, current first, then
newest first."""


@read
def list_versions(
    bucket_id: str,
    prefix: str,
    delimiter: str,
    key_marker: str,
    version_marker: str,
    limit: int,
    exact: bool = False,
    as_of: str | None = None,
) -> Script[VersionPage]:
    """Every version under `prefix` (of the key `prefix` alone, when `exact`) after the
    markers (S3's ListObjectVersions), with keys holding `delimiter` after the prefix rolled
    up into common prefixes; `limit` counts versions and prefixes together. `as_of` (a
    stored timestamp): the versions uploaded by then, the newest of each key its latest."""
    upper = successor(prefix) or "" if prefix else ""
    if exact:  # keys hold no NUL: the key itself is the only one below key + "\x01"
        upper = prefix + "\x01"
    lower = prefix
    marker: Position = START
    if key_marker and key_marker >= prefix:
        lower = key_marker
        marker = (key_marker, -1, "")  # past every version of the marker's key
        if delimiter and common_prefix(key_marker, prefix, delimiter) == key_marker:
            lower, marker = successor(key_marker) or key_marker, START
        elif version_marker:
            marked = yield from get_version(
                bucket_id, key_marker, None if version_marker == NULL else version_marker
            )
            if marked is not None:
                latest = yield from current(bucket_id, key_marker)
                is_latest = latest is not None and latest.version_id == marked.version_id
                marker = (key_marker, int(is_latest), marked.order_key or "0")
    entries: list[tuple[FileRecord, bool] | str] = []
    seen = marker[0]
    """The key of the version listed last: in a past listing, a key's first version listed
    is its latest (a version marker continues within its key, past its latest)."""
    while len(entries) <= limit:
        need = limit + 1 - len(entries)
        marker_key, marker_latest, marker_order = marker
        arm = (
            *(bucket_id, as_of or LATER_THAN_ALL, lower, upper, upper, marker_key, marker_key),
            *(marker_latest, marker_latest, marker_order, need),
        )
        batch = yield rows(_ENTRIES, *arm, *arm, need)
        skipped_to: str | None = None
        for row in batch:
            record = file_from_row(row[:-2]) if row[-2] else _noncurrent(row[:-2])
            position: Position = (record.key, int(row[-2]), str(row[-1]))
            group = common_prefix(record.key, prefix, delimiter)
            if group is not None:
                entries.append(group)
                skipped_to = successor(group) or ""
                break
            newest = bool(row[-2]) if as_of is None else record.key != seen
            entries.append((record, newest))
            marker, seen = position, record.key
            if len(entries) > limit:
                break
        if skipped_to is not None:
            if not skipped_to:
                break
            lower, marker, seen = skipped_to, START, ""
            continue
        if len(batch) < need:
            break
    truncated = len(entries) > limit
    entries = entries[:limit]
    next_key = next_version = None
    if truncated and entries:
        last = entries[-1]
        if isinstance(last, str):
            next_key = last
        else:
            next_key, next_version = last[0].key, last[0].s3_version_id
    return VersionPage(
        versions=[e for e in entries if not isinstance(e, str)],
        prefixes=[e for e in entries if isinstance(e, str)],
        truncated=truncated,
        next_key=next_key,
        next_version=next_version,
    )


_PAST_FILES = (
    f"SELECT {FILE_COLUMNS}, latest FROM (SELECT candidates.*, ROW_NUMBER() OVER "
    "(PARTITION BY key ORDER BY latest DESC, position DESC) AS newness FROM ("
    f"SELECT {FILE_COLUMNS}, 1 AS latest, COALESCE(order_key, '0') AS position FROM files "
    "WHERE bucket_id = ? AND uploaded_at <= ? AND {range} "
    f"UNION ALL SELECT {VERSION_COLUMNS}, 0 AS latest, order_key AS position FROM versions "
    "WHERE bucket_id = ? AND uploaded_at <= ? AND {range}) AS candidates) AS ranked "
    "WHERE newness = 1 AND delete_marker = 0 ORDER BY key LIMIT ?"
)
"""Each key's newest version uploaded by a moment, unless it is a delete marker. Unlike the
present listing's, a query reads every version in its key range (the window ranks them):
a cost for test mode's stale listings alone."""


@read
def list_files_as_of(
    bucket_id: str, prefix: str, delimiter: str, after: str | None, limit: int, as_of: str
) -> Script[Page[FileRecord]]:
    """`files.list_files` as it would have answered at `as_of` (a stored timestamp), as far
    as the rows still tell (the module's docstring)."""
    listing = paginate(prefix, delimiter, after, limit)
    try:
        wanted = next(listing)
        while True:
            condition, args = wanted.where()
            found = yield rows(
                _PAST_FILES.replace("{range}", condition),
                *(bucket_id, as_of, *args),
                *(bucket_id, as_of, *args),
                wanted.need,
            )
            records = [
                file_from_row(row[:-1]) if row[-1] else _noncurrent(row[:-1]) for row in found
            ]
            wanted = listing.send(records)
    except StopIteration as done:
        page: Page[FileRecord] = done.value
        return page
