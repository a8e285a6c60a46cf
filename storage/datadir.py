"""The data directory's exclusive lock (one serving process per data dir), and its folders
made durable: a name in a folder survives a power cut only once the folder itself is
fsynced (tests/test_power_loss.py cuts the power under bucketd to hold that)."""

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


def fsync_dir(path: Path) -> None:
    """Make the folder's entries (files created, renamed or linked into it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(directory: Path, fsync: bool) -> None:
    """`mkdir -p`; with `fsync`, each folder made is named durably in its parent (the
    parent fsynced after it), so nothing later placed inside can vanish with it at a cut."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        if fsync:
            fsync_dir(path.parent)


def key_file(data_dir: Path, name: str, size: int) -> bytes:
    """The data dir's key file `name` (mode 0600), made of `size` random bytes the first
    time it is needed: written whole to a temporary file, fsynced, linked into place
    (processes starting at once all read the one that won) and its folder fsynced (a key
    lost to a power cut would be made anew, and what was sealed under the old one would
    no longer open)."""
    path = data_dir / name
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    temporary = data_dir / f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(size))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        temporary.unlink()
    fsync_dir(data_dir)
    return path.read_bytes()
