"""What the commands that talk to a running server share: the client from `--url`/`--key`,
finding a bucket by name or id, and output as text or JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import msgspec

import bucketd_client as bc
from storage.errors import InvalidBucketName
from storage.rules.validation import check_bucket_name

from .errors import Failed, UsageError
from .terminal import as_json

T = TypeVar("T")


NO_KEY = "no API key: pass --key or set BUCKETD_KEY"


def _retrying(status: int | None, wait: float) -> None:
    what = {None: "no answer", 429: "rate limited"}.get(status, f"the server answered {status}")
    seconds = f"{wait:.1f}".removesuffix(".0")
    print(f"bucketd: {what}; retrying in {seconds} s", file=sys.stderr)


RETRY = bc.Retry(notify=_retrying)
"""The client's retries, each said on stderr."""


def client_of(args: argparse.Namespace) -> bc.Client:
    try:
        return bc.Client(args.url, args.key, retry=RETRY)
    except ValueError:  # no key given nor in the environment
        raise UsageError(NO_KEY) from None


def async_client_of(args: argparse.Namespace) -> bc.AsyncClient:
    try:
        return bc.AsyncClient(args.url, args.key, retry=RETRY)
    except ValueError:
        raise UsageError(NO_KEY) from None


def resolve_bucket(client: bc.Client, name_or_id: str) -> bc.Bucket:
    """A bucket by name among the buckets the key can see, or by id: a bucket name never
    holds the capitals and underscore of an id."""
    try:
        name = check_bucket_name(name_or_id)
    except InvalidBucketName:
        return client.get_bucket(name_or_id)
    return client.get_bucket_by_name(name)


def change_setting(
    args: argparse.Namespace, field: str, decode: Callable[[str], object]
) -> bc.Bucket:
    """The bucket after `--clear` of one of its settings, or setting it from `--set` (a
    JSON file, `-` for stdin, read by `decode`), or as it is when neither is given."""
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        change: dict[str, Any] = {}
        if args.clear:
            change[field] = None
        elif args.source:
            text = sys.stdin.read() if args.source == "-" else Path(args.source).read_text()
            change[field] = decode(text)
        return client.update_bucket(bucket.id, **change) if change else bucket


def rules_of(shape: type[T], what: str) -> Callable[[str], list[T]]:
    """A reader of a JSON list of `shape` (exit with a message naming `what` otherwise)."""

    def decode(text: str) -> list[T]:
        try:
            return msgspec.json.decode(text, type=list[shape])  # type: ignore[valid-type]
        except msgspec.ValidationError as exc:
            raise SystemExit(f"the rules are not a list of {what}: {exc}") from None

    return decode


def output(
    args: argparse.Namespace, value: Any, human: Callable[[], None], out: TextIO = sys.stdout
) -> None:
    if args.json:
        print(as_json(value), file=out)
    else:
        human()


def fail_if(failed: list[str]) -> None:
    for line in failed:
        print(f"bucketd: {line}", file=sys.stderr)
    if failed:
        raise Failed
