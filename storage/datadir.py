"""The data directory's exclusive lock: one serving process per data dir."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import DataDirBusy

LOCK_NAME = ".lock"


def lock_data_dir(data_dir: Path) -> int:
    """Take the lock and return its descriptor (held until the process ends or closes it)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirBusy(f"another bucketd process is using {data_dir}") from None
    return fd


def unlock_data_dir(fd: int) -> None:
    os.close(fd)
