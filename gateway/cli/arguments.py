"""What many commands' arguments share (`parser.py` and `snapshot_args.py` declare them)."""

from __future__ import annotations

import argparse
from typing import Any

ENCRYPTION = "AES256 (SSE-S3), aws:kms (the keyring's default key) or aws:kms/NAME"
"""The values of a bucket's default encryption (`buckets create`, `buckets encryption`)."""


def remote(parser: argparse.ArgumentParser) -> None:
    """The flags of a command that talks to a running server's API."""
    parser.add_argument("--url", help="server URL (default $BUCKETD_URL or http://127.0.0.1:8080)")
    parser.add_argument("--key", help="API key (default $BUCKETD_KEY)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def command(
    group: Any, name: str, run: str, help: str, human: bool = False
) -> argparse.ArgumentParser:
    """A command; `human`: `-h` as `ls -h` has it (sizes as 1.2 MiB), help stays `--help`."""
    parser: argparse.ArgumentParser = group.add_parser(
        name, help=help, conflict_handler="resolve" if human else "error"
    )
    if human:
        parser.add_argument("-h", "--human-readable", action="store_true", help="sizes as 1.2 MiB")
    parser.set_defaults(run=run)
    return parser
