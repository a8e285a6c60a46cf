"""The outbox: events written inside the transactions that change files, read back by the
live stream and the webhook worker, pruned after their retention."""

from __future__ import annotations

import time

from storage.rules.events import Event

from ..models import FileRecord
from .counting import Target
from .sql import Notify, Script, read, rows, run, value, write

EVENTS = "bucketd_events"
"""Notified (with the organization's id) as each transaction with events commits."""
COLUMNS = (
    "seq, org_id, bucket_id, bucket_name, region, key, name, size, etag, version_id, at, org_seq"
)


def emit(target: Target, record: FileRecord, name: str) -> Script[None]:
    """Write the event of a change to `record` (inside the transaction making it); the
    caller holds the organization's row (`bucket_for_file_write`), so events of one
    organization take their `seq`, and their number in the organization (`org_seq`, what
    their ids show), in commit order."""
    etag = record.md5 or record.sha256 or None
    yield run("UPDATE organizations SET event_seq = event_seq + 1 WHERE id = ?", target.org_id)
    number = yield value("SELECT event_seq FROM organizations WHERE id = ?", target.org_id)
    yield run(
        "INSERT INTO events (org_id, bucket_id, bucket_name, region, key, name, size, etag, "
        "version_id, at, created, org_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        target.org_id,
        record.bucket_id,
        target.name,
        target.region,
        record.key,
        name,
        0 if record.delete_marker else record.size,
        None if record.delete_marker else etag,
        record.version_id,
        _now_ms(),
        time.time(),
        number,
    )
    yield Notify(EVENTS, target.org_id)


def _now_ms() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


@read
def events_after(org_id: str, bucket_id: str | None, after: int, limit: int) -> Script[list[Event]]:
    """An organization's events (or one bucket's) after `seq`, oldest first."""
    if bucket_id is None:  # along the primary key: a reader is near the newest events
        found = yield rows(
            f"SELECT {COLUMNS} FROM events WHERE seq > ? AND org_id = ? ORDER BY seq LIMIT ?",
            after,
            org_id,
            limit,
        )
    else:
        found = yield rows(
            f"SELECT {COLUMNS} FROM events WHERE bucket_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            bucket_id,
            after,
            limit,
        )
    return [Event(*row) for row in found]


@read
def seq_after_number(org_id: str, number: int) -> Script[int]:
    """The `seq` to read an organization's events after, to resume after its event
    `number`: every event of it numbered higher comes after this `seq`."""
    first = yield value(
        "SELECT MIN(seq) FROM events WHERE org_id = ? AND org_seq > ?", org_id, number
    )
    if first is not None:
        return int(first) - 1
    last = yield value("SELECT COALESCE(MAX(seq), 0) FROM events")
    return int(last)


@read
def last_seq() -> Script[int]:
    found = yield value("SELECT COALESCE(MAX(seq), 0) FROM events")
    return int(found)


@write
def prune_events(before: float, batch: int = 10_000) -> Script[int]:
    """Remove the oldest events written before `before` (up to `batch` of them, walked
    from the oldest, so no index on the time is kept up by every write) that no webhook
    still has to deliver."""
    oldest = yield rows("SELECT seq, created FROM events ORDER BY seq LIMIT ?", batch)
    cutoff = 0
    for seq, created in oldest:
        if created >= before:
            break
        cutoff = seq
    if not cutoff:
        return 0
    removed: int = yield run(
        "DELETE FROM events WHERE seq <= ? AND NOT EXISTS (SELECT 1 FROM deliveries d "
        "WHERE d.seq = events.seq AND d.status = 'pending') AND NOT EXISTS (SELECT 1 FROM "
        "webhooks w WHERE w.bucket_id = events.bucket_id AND w.last_seq < events.seq "
        "AND w.enabled = 1)",
        cutoff,
    )
    return removed
