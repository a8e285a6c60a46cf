"""The version commands of a running server: `bucketd buckets versioning`, `bucketd files
versions` and `bucketd files restore`."""

from __future__ import annotations

import argparse
import sys

from .remote import client_of, output, resolve_bucket
from .terminal import human_size, table


def buckets_versioning(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        bucket = client.update_bucket(bucket.id, versioning=args.state)
    output(
        args, bucket, lambda: print(f"{bucket.id}  {bucket.name}  versioning {bucket.versioning}")
    )


def files_versions(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        versions = list(
            client.iter_versions(bucket.id, prefix=args.prefix or "", key=args.file_key)
        )
    rows: list[list[object]] = [
        [
            v.uploaded_at,
            "marker" if v.delete_marker else human_size(v.size),
            "*" if v.is_latest else "",
            v.version_id,
            v.key,
        ]
        for v in versions
    ]
    output(
        args,
        versions,
        lambda: table(["UPLOADED", "SIZE", "LATEST", "VERSION", "KEY"], rows, sys.stdout),
    )


def files_restore(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        file = client.restore_version(bucket.id, args.file_key, args.version_id)
    output(
        args,
        file,
        lambda: print(f"restored {file.key} from {args.version_id} as {file.version_id}"),
    )
