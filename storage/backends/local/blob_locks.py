"""The `flock` rules of blob files (`blobs.py`), across the processes that share a data
dir: a write holds the file it placed or found with a shared lock until its commit; a reap
claims a file with an exclusive one, asks the index, and only then unlinks. Nothing here
waits for a lock: the callers hold the store's own lock, which a reaper may need."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from storage.backends.local.reaping import backup_running, set_aside


class BlobClaim:
    """Blob files under an exclusive flock, so no write can place a reference to them."""

    def __init__(self, data_dir: Path, locked: dict[str, tuple[Path, int]]) -> None:
        self._data_dir = data_dir
        self._locked = locked
        self.blob_ids = list(locked)

    def reap(self, blob_ids: list[str]) -> None:
        for blob_id in blob_ids:
            path = self._locked[blob_id][0]
            if backup_running(self._data_dir):
                set_aside(self._data_dir, path)
            else:
                unlink_quietly(path)

    def __enter__(self) -> BlobClaim:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for _path, fd in self._locked.values():
            close_quietly(fd)
        self._locked.clear()


def open_locked(path: Path, exclusive: bool = False) -> int | None:
    """A descriptor of the file at `path` with a shared (or exclusive) flock on it; None when
    there is no file (or the one opened was unlinked by a reaper before the lock was had);
    -1 when the lock is not free at once. Never waits: the callers hold the store's lock."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            return fd
    except BlockingIOError:
        os.close(fd)
        return -1
    except FileNotFoundError:
        pass
    os.close(fd)
    return None


def close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
