"""Transactions on webhooks and their deliveries: configured, handed the events that match
them (`hand_out`), picked when due in order per key (`due`), and settled."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from storage.rules.events import Event

from .accounts import page_query
from .events import COLUMNS
from .sql import Script, one, point, read, rows, run, value, write

WEBHOOK_COLUMNS = (
    "id, org_id, bucket_id, url, events, prefix, suffix, enabled, secret_sealed, created_at, "
    "last_seq"
)


@dataclass(frozen=True)
class Webhook:
    id: str
    org_id: str
    bucket_id: str
    url: str
    events: list[str]
    prefix: str
    suffix: str
    enabled: bool
    secret_sealed: bytes
    created_at: str
    last_seq: int


@dataclass(frozen=True)
class Delivery:
    webhook_id: str
    seq: int
    key: str
    status: str
    """pending, delivered or failed."""
    attempts: int
    next_at: float
    first_at: float
    last_status: int | None
    last_error: str | None
    done_at: float | None
    number: int
    """Its event's number in the organization: what its id shows."""
    name: str | None = None
    """The event's name, while the event is kept."""


DELIVERY_COLUMNS = (
    "d.webhook_id, d.seq, d.key, d.status, d.attempts, d.next_at, d.first_at, "
    "d.last_status, d.last_error, d.done_at, d.number"
)


def _webhook(row: tuple[Any, ...]) -> Webhook:
    values = list(row)
    values[4] = json.loads(values[4])
    values[7] = bool(values[7])
    values[8] = bytes(values[8])
    return Webhook(*values)


@write
def insert_webhook(webhook: Webhook) -> Script[Webhook]:
    """Store a webhook that receives the events written from now on."""
    last = yield value(
        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE bucket_id = ?", webhook.bucket_id
    )
    yield run(
        f"INSERT INTO webhooks ({WEBHOOK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        webhook.id,
        webhook.org_id,
        webhook.bucket_id,
        webhook.url,
        json.dumps(webhook.events),
        webhook.prefix,
        webhook.suffix,
        int(webhook.enabled),
        webhook.secret_sealed,
        webhook.created_at,
        int(last),
    )
    return replace(webhook, last_seq=int(last))


@point
def get_webhook(webhook_id: str) -> Script[Webhook | None]:
    row = yield one(f"SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?", webhook_id)
    return None if row is None else _webhook(row)


@read
def list_webhooks(
    org_id: str, bucket_id: str, after: str | None, limit: int
) -> Script[list[Webhook]]:
    sql, args = page_query("webhooks", WEBHOOK_COLUMNS, org_id, after, limit, bucket_id=bucket_id)
    found = yield rows(sql, *args)
    return [_webhook(row) for row in found]


@write
def update_webhook(webhook_id: str, changes: dict[str, object]) -> Script[None]:
    """Change url, events, prefix, suffix or enabled; re-enabling skips what was written
    while the webhook was off."""
    columns = dict(changes)
    if "events" in columns:
        columns["events"] = json.dumps(columns["events"])
    if "enabled" in columns:
        columns["enabled"] = int(bool(columns["enabled"]))
        if columns["enabled"]:
            bucket_id = yield value("SELECT bucket_id FROM webhooks WHERE id = ?", webhook_id)
            columns["last_seq"] = yield value(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE bucket_id = ?", bucket_id
            )
    if columns:
        assignments = ", ".join(f"{column} = ?" for column in columns)
        yield run(f"UPDATE webhooks SET {assignments} WHERE id = ?", *columns.values(), webhook_id)


@write
def delete_webhook(webhook_id: str) -> Script[None]:
    yield run("DELETE FROM deliveries WHERE webhook_id = ?", webhook_id)
    yield run("DELETE FROM webhooks WHERE id = ?", webhook_id)


@read
def enabled_webhooks() -> Script[list[Webhook]]:
    found = yield rows(f"SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE enabled = 1")
    return [_webhook(row) for row in found]


@read
def next_due() -> Script[float | None]:
    """When the earliest pending delivery comes due (None: none is pending)."""
    found = yield value("SELECT MIN(next_at) FROM deliveries WHERE status = 'pending'")
    return None if found is None else float(found)


@write
def hand_out(webhook: Webhook, now: float, limit: int) -> Script[int]:
    """Give the webhook a delivery for each of its bucket's events after its `last_seq`
    that it wants, and move `last_seq` past them; how many events were looked at. The
    events of a bucket take their seq in commit order, so nothing is passed over."""
    found = yield rows(
        f"SELECT {COLUMNS} FROM events WHERE bucket_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        webhook.bucket_id,
        webhook.last_seq,
        limit,
    )
    events = [Event(*row) for row in found]
    for event in events:
        if event.matches(webhook.events, webhook.prefix, webhook.suffix):
            yield run(
                "INSERT INTO deliveries (webhook_id, seq, key, status, attempts, next_at, "
                "first_at, number) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT DO NOTHING",
                webhook.id,
                event.seq,
                event.key,
                now,
                now,
                event.number,
            )
    if events:
        yield run(
            "UPDATE webhooks SET last_seq = ? WHERE id = ? AND last_seq = ?",
            events[-1].seq,
            webhook.id,
            webhook.last_seq,
        )
    return len(events)


@read
def due(now: float, limit: int) -> Script[list[tuple[Delivery, Event]]]:
    """Pending deliveries due by `now`, each the oldest pending one of its webhook and key
    (a later event of a key waits for the earlier one), with their events."""
    found = yield rows(
        f"SELECT {DELIVERY_COLUMNS}, e.name, {', '.join('e.' + c for c in COLUMNS.split(', '))} "
        "FROM deliveries d JOIN events e ON e.seq = d.seq "
        "WHERE d.status = 'pending' AND d.next_at <= ? AND NOT EXISTS (SELECT 1 FROM "
        "deliveries p WHERE p.webhook_id = d.webhook_id AND p.key = d.key AND "
        "p.status = 'pending' AND p.seq < d.seq) ORDER BY d.seq LIMIT ?",
        now,
        limit,
    )
    return [(Delivery(*row[:12]), Event(*row[12:])) for row in found]


@dataclass(frozen=True)
class Attempt:
    """What became of one delivery attempt."""

    webhook_id: str
    seq: int
    status: str
    """delivered, pending (again, at `next_at`) or failed (parked)."""
    next_at: float
    last_status: int | None
    last_error: str | None


@write
def settle(attempts: list[Attempt], now: float) -> Script[None]:
    """Record a batch of attempts, in one transaction."""
    for attempt in attempts:
        yield run(
            "UPDATE deliveries SET status = ?, attempts = attempts + 1, next_at = ?, "
            "last_status = ?, last_error = ?, done_at = ? WHERE webhook_id = ? AND seq = ? "
            "AND status = 'pending'",
            attempt.status,
            attempt.next_at,
            attempt.last_status,
            attempt.last_error,
            None if attempt.status == "pending" else now,
            attempt.webhook_id,
            attempt.seq,
        )


@read
def deliveries_of(
    webhook_id: str, status: str | None, before: int | None, limit: int
) -> Script[list[Delivery]]:
    """A webhook's deliveries, newest first (`before`: an event number)."""
    where = "d.webhook_id = ?"
    args: list[object] = [webhook_id]
    if status is not None:
        where += " AND d.status = ?"
        args.append(status)
    if before is not None:
        where += " AND d.number < ?"
        args.append(before)
    found = yield rows(
        f"SELECT {DELIVERY_COLUMNS}, e.name FROM deliveries d LEFT JOIN events e "
        f"ON e.seq = d.seq WHERE {where} ORDER BY d.seq DESC LIMIT ?",
        *args,
        limit,
    )
    return [Delivery(*row) for row in found]


@write
def redeliver(webhook_id: str, number: int | None, now: float) -> Script[int]:
    """Make a failed (or delivered) delivery pending again now (`number`, its event's);
    every failed one with `number` None. How many."""
    if number is None:
        changed: int = yield run(
            "UPDATE deliveries SET status = 'pending', next_at = ?, first_at = ?, done_at = NULL "
            "WHERE webhook_id = ? AND status = 'failed' AND EXISTS (SELECT 1 FROM events e "
            "WHERE e.seq = deliveries.seq)",
            now,
            now,
            webhook_id,
        )
        return changed
    changed = yield run(
        "UPDATE deliveries SET status = 'pending', next_at = ?, first_at = ?, done_at = NULL "
        "WHERE webhook_id = ? AND number = ? AND status <> 'pending' AND EXISTS (SELECT 1 FROM "
        "events e WHERE e.seq = deliveries.seq)",
        now,
        now,
        webhook_id,
        number,
    )
    return changed


@write
def prune_deliveries(before: float) -> Script[int]:
    """Forget settled deliveries older than `before` whose events are gone."""
    removed: int = yield run(
        "DELETE FROM deliveries WHERE status <> 'pending' AND done_at < ? AND NOT EXISTS "
        "(SELECT 1 FROM events e WHERE e.seq = deliveries.seq)",
        before,
    )
    return removed
