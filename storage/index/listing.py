"""File listings with S3's prefix and delimiter rules, free of any database.

`paginate` is a generator: it yields the key ranges it needs (`Range`), is sent back the
files in each, and returns the page; the index's listing script turns each range into a
query.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from storage.rules.keyrange import common_prefix, successor

from ..models import FileRecord, Page


@dataclass(frozen=True)
class Range:
    """Up to `need` files of the bucket with keys from `lower` (inclusive or not) to
    `upper` (exclusive; None: no bound), in key order."""

    lower: str
    inclusive: bool
    upper: str | None
    need: int

    def where(self) -> tuple[str, list[object]]:
        """The condition on `key` and its arguments, with `?` placeholders."""
        sql = f"key {'>=' if self.inclusive else '>'} ?"
        args: list[object] = [self.lower]
        if self.upper is not None:
            sql += " AND key < ?"
            args.append(self.upper)
        return sql, args


Listing = Generator[Range, list[FileRecord], Page[FileRecord]]


def paginate(prefix: str, delimiter: str, after: str | None, limit: int) -> Listing:
    """Keyset pagination over keys and, with a delimiter, their common prefixes (S3 rules).

    `after` is the last entry of the previous page; when it is a common prefix every key
    under it is skipped. Each rolled-up prefix costs one more indexed query, never a scan.
    """
    upper = successor(prefix) if prefix else None
    lower, inclusive = prefix, True
    if after is not None and after >= prefix:
        lower, inclusive = after, False
        if delimiter and common_prefix(after, prefix, delimiter) == after:
            skip = successor(after)
            if skip is None:
                return Page(items=[], has_more=False, prefixes=[], last=None)
            lower, inclusive = skip, True
    entries: list[FileRecord | str] = []
    while len(entries) <= limit:
        rows = yield Range(lower, inclusive, upper, limit + 1 - len(entries))
        rolled = False
        for record in rows:
            rolled_up = common_prefix(record.key, prefix, delimiter)
            if rolled_up is None:
                entries.append(record)
                continue
            entries.append(rolled_up)
            skip = successor(rolled_up)
            if skip is not None:
                lower, inclusive, rolled = skip, True, True
            break
        if not rolled:
            break
    has_more = len(entries) > limit
    entries = entries[:limit]
    files = [e for e in entries if isinstance(e, FileRecord)]
    prefixes = [e for e in entries if isinstance(e, str)]
    last = entries[-1] if entries else None
    last_position = last.key if isinstance(last, FileRecord) else last
    return Page(
        items=files, has_more=has_more, prefixes=prefixes, last=last_position if has_more else None
    )
