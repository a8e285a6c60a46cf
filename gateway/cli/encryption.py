"""Encryption at rest on the command line: `bucketd buckets encryption` shows or sets a
bucket's default encryption, and `encrypted` is how a listing names a file's."""

from __future__ import annotations

import argparse

from bucketd_client import Bucket, File

from .remote import client_of, output, resolve_bucket

OFF = "none"
"""What `bucketd buckets encryption BUCKET none` says, and what it is shown as."""


def encrypted(file: File) -> str:
    """A file's encryption in the words the bucket's default takes: AES256, SSE-C, or
    aws:kms/<key name> (the key that wraps it); `-` for none."""
    if file.encryption is None:
        return "-"
    if file.kms_key_id is not None:
        return f"{file.encryption}/{file.kms_key_id}"
    return file.encryption


def _described(bucket: Bucket) -> str:
    value = bucket.encryption
    if value is None:
        return "no default encryption"
    if value == "aws:kms":
        return "default encryption aws:kms (the keyring's default key)"
    return f"default encryption {value}"


def buckets_encryption(args: argparse.Namespace) -> None:
    """Show a bucket's default encryption, or set it (`none` removes it)."""
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        if args.value is not None:
            value = None if args.value.lower() == OFF else args.value
            bucket = client.update_bucket(bucket.id, encryption=value)
    output(args, bucket, lambda: print(f"{bucket.id}  {bucket.name}  {_described(bucket)}"))
