"""The event commands of a running server: `bucketd events tail` (like `mc watch`) and
`bucketd webhooks list|create|delete|disable|enable|deliveries|redeliver`."""

from __future__ import annotations

import argparse
import json
import sys
from urllib.parse import unquote_plus

from .remote import client_of, output, resolve_bucket
from .terminal import table


def events_tail(args: argparse.Namespace) -> None:
    """Print each event of a bucket as it happens, until interrupted."""
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        types = args.types.split(",") if args.types else None
        try:
            for event_id, record in client.webhooks.stream(bucket.id, types, args.prefix):
                obj = record["s3"]["object"]
                if args.json:
                    print(json.dumps(record), flush=True)
                else:
                    key = unquote_plus(obj["key"])
                    print(
                        f"{record['eventTime']}  {record['eventName']:<40} {key}  "
                        f"{obj.get('size', 0)}  {event_id}",
                        flush=True,
                    )
        except KeyboardInterrupt:
            pass


def webhooks_list(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        hooks = list(client.webhooks.of_bucket(bucket.id))
    output(
        args,
        hooks,
        lambda: table(
            ["ID", "URL", "EVENTS", "FILTER", "ENABLED"],
            [
                [h.id, h.url, ",".join(h.events), f"{h.prefix}*{h.suffix}", str(h.enabled)]
                for h in hooks
            ],
            sys.stdout,
        ),
    )


def webhooks_create(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        hook = client.webhooks.create(
            bucket.id,
            args.target,
            args.events.split(",") if args.events else None,
            args.prefix,
            args.suffix,
        )
    output(
        args,
        hook,
        lambda: print(f"{hook.id}  {hook.arn}\nsigning secret (shown once): {hook.secret}"),
    )


def webhooks_delete(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        client.webhooks.delete(bucket.id, args.webhook)
    output(args, {"deleted": args.webhook}, lambda: print(f"deleted {args.webhook}"))


def webhooks_disable(args: argparse.Namespace) -> None:
    _set_enabled(args, False)


def webhooks_enable(args: argparse.Namespace) -> None:
    _set_enabled(args, True)


def _set_enabled(args: argparse.Namespace, enabled: bool) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        client.webhooks.set_enabled(bucket.id, args.webhook, enabled)
    said = "enabled" if enabled else "disabled"
    output(args, {"id": args.webhook, "enabled": enabled}, lambda: print(f"{args.webhook} {said}"))


def webhooks_deliveries(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        found = list(client.webhooks.deliveries(bucket.id, args.webhook, args.status))
    output(
        args,
        found,
        lambda: table(
            ["EVENT", "NAME", "KEY", "STATUS", "ATTEMPTS", "LAST"],
            [
                [
                    d.id,
                    d.event_name or "",
                    d.key,
                    d.status,
                    str(d.attempts),
                    str(d.last_status or d.last_error or ""),
                ]
                for d in found
            ],
            sys.stdout,
        ),
    )


def webhooks_redeliver(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        count = client.webhooks.redeliver(bucket.id, args.webhook, args.event)
    output(args, {"count": count}, lambda: print(f"{count} deliveries pending again"))
