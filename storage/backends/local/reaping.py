"""How a running server and `bucketd backup` (another process) agree on deleted blobs.

A backup holds an exclusive lock on `backup.lock` in the data dir for as long as it runs.
While it is held, the server moves blobs it would delete into `reaped/` instead of unlinking
them, so a blob named by the backup's snapshot is still there to copy even if a write made
it unreferenced a moment later. The backup empties `reaped/` before it lets go; a backup that
was killed leaves it for the next one, or for the clean-up at start-up.

The order makes it sound: the server checks the lock only after the commit that dropped the
last reference, and the backup takes its snapshot only after it holds the lock; so either
the snapshot already misses the reference, or the blob goes to `reaped/`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BACKUP_LOCK = "backup.lock"
REAPED_DIR = "reaped"


def backup_running(data_dir: Path) -> bool:
    try:
        fd = os.open(data_dir / BACKUP_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def set_aside(data_dir: Path, blob: Path) -> None:
    """Move a blob out of `blobs/` into `reaped/` (a rename on the same file system)."""
    reaped = data_dir / REAPED_DIR
    reaped.mkdir(exist_ok=True)
    try:
        os.replace(blob, reaped / blob.name)
    except FileNotFoundError:
        pass


def empty_reaped(data_dir: Path) -> int:
    reaped = data_dir / REAPED_DIR
    if not reaped.exists():
        return 0
    count = sum(1 for _ in reaped.iterdir())
    shutil.rmtree(reaped, ignore_errors=True)
    return count


@contextmanager
def holding_backup_lock(data_dir: Path) -> Iterator[None]:
    fd = os.open(data_dir / BACKUP_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            empty_reaped(data_dir)
    finally:
        os.close(fd)
