"""The sharing commands of a running server: `bucketd buckets share`, `bucketd buckets
cors`, `bucketd buckets policy` and `bucketd files sign`."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from bucketd_client.shapes import CorsRule

from .remote import change_setting, client_of, output, resolve_bucket, rules_of
from .terminal import table

DURATION = re.compile(r"^(\d+)([smhd]?)$")
SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _rate(text: str) -> int | None:
    if text.strip().lower() == "default":
        return None
    if not text.strip().isdigit():
        raise SystemExit("--anonymous-rpm is a whole number (0: no limit) or 'default'")
    return int(text)


def buckets_share(args: argparse.Namespace) -> None:
    """Make a bucket public or private, set the Cache-Control of its public downloads and
    the rate of requests without a key."""
    changes: dict[str, Any] = {}
    if args.public or args.private:
        changes["public"] = bool(args.public)
    if args.cache_control is not None:
        changes["cache_control"] = args.cache_control or None
    if args.anonymous_rpm is not None:
        changes["anonymous_requests_per_minute"] = _rate(args.anonymous_rpm)
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
        rate = bucket.anonymous_requests_per_minute
        if rate is not None:
            limit = "no limit" if rate == 0 else f"{rate} a minute per client address"
            print(f"  requests without a key: {limit}")

    output(args, bucket, human)


def buckets_cors(args: argparse.Namespace) -> None:
    """Show a bucket's CORS rules, replace them from a JSON file (`-` for stdin), or remove
    them."""
    bucket = change_setting(args, "cors", rules_of(CorsRule, "CORS rules"))
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

    def decode(text: str) -> object:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SystemExit(f"the policy is not JSON: {exc}") from None

    bucket = change_setting(args, "policy", decode)
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
