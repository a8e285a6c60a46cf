"""The `bucketd` command. `parser.py` declares every command, `admin.py` (the data dir),
`files.py` (a running server) and `exchange.py` (export and import) run them, and
`errors.py` turns their failures into exit statuses."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from .errors import exit_status
from .parser import parser

__all__ = ["main", "parser"]


def main(argv: Sequence[str] | None = None) -> None:
    command = ""
    try:
        args = parser().parse_args(argv)  # --help and --version write too
        command = args.command
        module, _, name = args.run.partition(":")
        run = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (`bucketd files ls | head`): stop quietly, as Unix tools do,
        # with SIGPIPE's status; stdout goes nowhere so the exit's flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if command in ("serve", "dev"):  # a server that stops says why, on stderr
            with contextlib.suppress(OSError):
                print("bucketd: standard output was closed; stopping", file=sys.stderr)
        sys.exit(128 + 13)
    except BaseException as exc:
        found = exit_status(exc)
        if found is None:
            raise
        status, message = found
        if message:
            print(f"bucketd: {message}", file=sys.stderr)
        sys.exit(status)
