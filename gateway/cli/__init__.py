"""The `bucketd` command. `parser.py` declares every command, `admin.py` (the data dir),
`files.py` (a running server) and `exchange.py` (export and import) run them, and
`errors.py` turns their failures into exit statuses."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from .errors import exit_status
from .parser import parser

__all__ = ["main", "parser"]


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    module, _, name = args.run.partition(":")
    run = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    try:
        run(args)
    except BaseException as exc:
        found = exit_status(exc)
        if found is None:
            raise
        status, message = found
        if message:
            print(f"bucketd: {message}", file=sys.stderr)
        sys.exit(status)
