"""The envelopes of encrypted contents (`storage/encryption.py`), for a master-key
rotation: listed in order, each rewritten wherever it is, in place. An envelope is
written once per sealed content and copied whole with it, so one text names one content
key: the rows that share it share that key, and are rewrapped together."""

from __future__ import annotations

from .sql import Fault, Script, read, rows, run, write

TABLES = ("files", "versions", "snapshot_versions", "reservations", "multipart_parts")
"""Every table that holds a version's envelope (or an encrypted multipart part's)."""


@read
def envelopes_after(after: str, limit: int) -> Script[list[str]]:
    """Up to `limit` distinct envelopes after `after`, in order."""
    union = " UNION ".join(
        f"SELECT encryption AS e FROM {table} WHERE encryption IS NOT NULL AND encryption > ?"
        for table in TABLES
    )
    found = yield rows(
        f"SELECT e FROM ({union}) AS u ORDER BY e LIMIT ?", *[after] * len(TABLES), limit
    )
    return [row[0] for row in found]


@write
def rewrap(changes: list[tuple[str, str]]) -> Script[int]:
    """Replace each (old, new) envelope in every row that holds it; the rows changed. Each
    rewrite is a compare-and-set: a row changed meanwhile is left as it is."""
    changed = 0
    for old, new in changes:
        for table in TABLES:
            sql = f"UPDATE {table} SET encryption = ? WHERE encryption = ?"
            count: int = yield run(sql, new, old)
            changed += count
    yield Fault("rotate.in_batch")
    return changed
