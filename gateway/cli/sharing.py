"""The sharing commands of a running server: `bucketd buckets share`, `bucketd buckets
cors`, `bucketd buckets policy` and `bucketd files sign`."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import msgspec

from bucketd_client.shapes import CorsRule

from .remote import client_of, output, resolve_bucket
from .terminal import table

DURATION = re.compile(r"^(\d+)([smhd]?)$")
SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _document(source: str) -> str:
    return sys.stdin.read() if source == "-" else Path(source).read_text()


def buckets_share(args: argparse.Namespace) -> None:
    """Make a bucket public or private, and set the Cache-Control of its public downloads."""
    changes: dict[str, Any] = {}
    if args.public or args.private:
        changes["public"] = bool(args.public)
    if args.cache_control is not None:
        changes["cache_control"] = args.cache_control or None
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        if changes:
            bucket = client.update_bucket(bucket.id, **changes)
        example = client.public_url(bucket.id, "KEY")

    def human() -> None:
        state = "public: anyone may download its files" if bucket.public else "private"
        print(f"{bucket.id}  {bucket.name}  {state}")
        if bucket.public:
            print(
                f"  at {example}" + (f"  ({bucket.cache_control})" if bucket.cache_control else "")
            )

    output(args, bucket, human)


def buckets_cors(args: argparse.Namespace) -> None:
    """Show a bucket's CORS rules, replace them from a JSON file (`-` for stdin), or remove
    them."""
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        if args.clear:
            bucket = client.update_bucket(bucket.id, cors=None)
        elif args.rules:
            try:
                rules = msgspec.json.decode(_document(args.rules), type=list[CorsRule])
            except msgspec.ValidationError as exc:
                raise SystemExit(f"the rules are not a list of CORS rules: {exc}") from None
            bucket = client.update_bucket(bucket.id, cors=rules)
    rules_now = bucket.cors or []
    output(
        args,
        rules_now,
        lambda: table(
            ["ID", "ORIGINS", "METHODS", "HEADERS"],
            [
                [
                    r.id,
                    " ".join(r.allowed_origins),
                    " ".join(r.allowed_methods),
                    " ".join(r.allowed_headers),
                ]
                for r in rules_now
            ],
            sys.stdout,
        ),
    )


def buckets_policy(args: argparse.Namespace) -> None:
    """Show a bucket's policy, replace it from a JSON file (`-` for stdin), or remove it."""
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        if args.clear:
            bucket = client.update_bucket(bucket.id, policy=None)
        elif args.policy:
            try:
                document = json.loads(_document(args.policy))
            except ValueError as exc:
                raise SystemExit(f"the policy is not JSON: {exc}") from None
            bucket = client.update_bucket(bucket.id, policy=document)
    print(
        json.dumps(bucket.policy, indent=2)
        if bucket.policy
        else ("null" if args.json else "no policy")
    )


def _seconds(text: str) -> int:
    found = DURATION.match(text.strip())
    if found is None:
        raise SystemExit("--expires is a number of seconds, or 30m, 12h, 7d")
    return int(found.group(1)) * SECONDS[found.group(2)]


def files_sign(args: argparse.Namespace) -> None:
    """Print a URL of a file that works without a key until it expires."""
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        signed = client.sign_url(
            bucket.id, args.file_key, _seconds(args.expires), upload=args.upload, upsert=args.upsert
        )
    output(args, signed, lambda: print(signed.url))
