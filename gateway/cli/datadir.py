"""What the commands that open a data dir share: settings from the command line, the lock
that keeps a server off the data dir, an engine for the length of a command."""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from storage.datadir import lock_data_dir, unlock_data_dir
from storage.engine import Engine

from ..settings import Settings, load_settings
from .errors import UsageError

T = TypeVar("T")


def settings_of(args: argparse.Namespace, **flags: Any) -> Settings:
    config = args.config or os.environ.get("BUCKETD_CONFIG")
    return load_settings(
        Path(config) if config else None, os.environ, {"data_dir": args.data_dir, **flags}
    )


def existing(settings: Settings, creates: bool = False) -> None:
    """A command on a data dir refuses one that does not exist rather than make it: run
    from another folder, `bucketd keys list` would otherwise create an empty data dir and
    report that no organization exists. Unless the command `creates` (an organization, in
    a folder named by --data-dir), the data dir must hold an index already, so none is left
    in some unrelated folder."""
    if not settings.data_dir.is_dir():
        raise UsageError(
            f"no data dir at {settings.data_dir.resolve()} (nothing was made there): run this "
            "where the server keeps its data, pass --data-dir, or point the command at a "
            "running server with --url or BUCKETD_URL where it has one"
        )
    index = settings.engine_config().index
    in_file = not (index.postgres or index.in_memory)  # the settings allow nothing else
    if not creates and in_file and not index.sqlite_path(settings.data_dir).exists():
        raise UsageError(
            f"{settings.data_dir.resolve()} holds no bucketd index "
            f"({index.sqlite_path(settings.data_dir).name}): is it the data dir a server made?"
            " Pass --data-dir, or point the command at a running server with --url"
        )


@contextmanager
def locked(settings: Settings) -> Iterator[None]:
    """Hold the data dir (refused while a server runs on it)."""
    existing(settings)
    lock = lock_data_dir(settings.data_dir)
    try:
        yield
    finally:
        unlock_data_dir(lock)


async def with_engine(
    settings: Settings, action: Callable[[Engine], Awaitable[T]], creates: bool = False
) -> T:
    """Run `action` on the existing data dir's engine (`existing`)."""
    existing(settings, creates)
    engine = await Engine.open(settings.engine_config(), collect_garbage=False)
    try:
        return await action(engine)
    finally:
        await engine.close()
