"""`bucketd snapshots create|list|restore|fork|delete`, through a running server's API
(`snapshot_args.py` declares them): a bucket's snapshots, or with `--server` the whole
server's. `create` prints the new snapshot's id alone on its last line and `fork` the new
bucket's, so a script can take them."""

from __future__ import annotations

import argparse
import sys

from bucketd_client.snapshot_shapes import Snapshot

from .errors import UsageError
from .remote import client_of, output, resolve_bucket
from .terminal import human_size, table


def _versions(count: int) -> str:
    return f"{count} version{'' if count == 1 else 's'}"


def _described(snapshot: Snapshot) -> str:
    what = (
        f"bucket {snapshot.bucket_name}"
        if snapshot.bucket_id is not None
        else f"the server ({snapshot.buckets} buckets)"
    )
    label = f" {snapshot.name!r}" if snapshot.name else ""
    return (
        f"snapshot{label} of {what}: {_versions(snapshot.file_count)}, "
        f"{human_size(snapshot.size_bytes)}"
    )


def _bucket_or_server(args: argparse.Namespace) -> None:
    if args.server and args.bucket:
        raise UsageError("--server snapshots every bucket: give no bucket with it")


def snapshots_create(args: argparse.Namespace) -> None:
    _bucket_or_server(args)
    if not args.server and not args.bucket:
        raise UsageError("name the bucket to snapshot (or --server for every bucket)")
    with client_of(args) as client:
        if args.server:
            snapshot = client.snapshots.create_server(args.name)
        else:
            bucket = resolve_bucket(client, args.bucket)
            snapshot = client.snapshots.create(bucket.id, args.name)
    output(args, snapshot, lambda: print(f"took {_described(snapshot)}\n{snapshot.id}"))


def snapshots_list(args: argparse.Namespace) -> None:
    _bucket_or_server(args)
    with client_of(args) as client:
        bucket_id = resolve_bucket(client, args.bucket).id if args.bucket else None
        found = list(client.snapshots.iter(bucket_id, server=args.server))
    output(
        args,
        found,
        lambda: table(
            ["ID", "CREATED", "BUCKET", "NAME", "VERSIONS", "SIZE"],
            [
                (
                    s.id,
                    s.created_at,
                    s.bucket_name or f"({s.buckets} buckets)",
                    s.name or "-",
                    s.file_count,
                    human_size(s.size_bytes),
                )
                for s in found
            ],
            sys.stdout,
        ),
    )


def snapshots_restore(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        if args.server:
            snapshot = client.snapshots.restore_server(args.snapshot)
            output(args, snapshot, lambda: print(f"restored {_described(snapshot)}"))
            return
        bucket = client.snapshots.restore(args.snapshot)
    output(
        args,
        bucket,
        lambda: print(
            f"restored bucket {bucket.name} ({bucket.id}) from {args.snapshot}: "
            f"{_versions(bucket.file_count)}, {human_size(bucket.size_bytes)}"
        ),
    )


def snapshots_fork(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = client.snapshots.fork(args.snapshot, args.name, args.region)
    output(
        args,
        bucket,
        lambda: print(
            f"forked {args.snapshot} into bucket {bucket.name} ({bucket.region}): "
            f"{_versions(bucket.file_count)}, sharing their content\n{bucket.id}"
        ),
    )


def snapshots_delete(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        client.snapshots.delete(args.snapshot, server=args.server)
    output(args, {"deleted": args.snapshot}, lambda: print(f"deleted {args.snapshot}"))
